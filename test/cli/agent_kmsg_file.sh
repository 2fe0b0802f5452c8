#!/usr/bin/env bash
# gpuheal-agent --kmsg-mode file across kill -9 (issue 15 item 10): the
# position in the followed log is persisted (inode, offset, hash), so the
# XIDs written while the agent is down arrive after its restart - also when
# the log was rotated (kern.log -> kern.log.1) or copytruncated meanwhile
# (the lines before the truncate read from logrotate's copy);
# a truncate followed by a longer write while it runs loses no line.
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
die() { bad "$*"; echo "--- agent log"; tail -n 20 "$alog"; exit 1; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done; }

[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
echo "kmsgfile-token" > "$tmp/token"
out="$tmp/out.jsonl"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$out" \
  --port-file "$tmp/port" 2> "$tmp/recv.log" &
pids+=($!)
wait_for 20 test -s "$tmp/port" || { bad "receiver did not start"; exit 1; }

log="$tmp/kern.log"
agent_n=0
start_agent() {
  agent_n=$((agent_n + 1))
  alog="$tmp/agent$agent_n.log"
  "$agent" --node gpu-kf --kmsg "$log" --kmsg-mode file --nvml-lib off --dcgm off \
    --nic-root off --telemetry-socket off --controller "http://127.0.0.1:$(cat "$tmp/port")" \
    --token-file "$tmp/token" --spool-dir "$tmp/spool" --spool-sync-interval 50ms \
    --batch-linger 20ms --listen 127.0.0.1:0 2> "$alog" &
  apid=$!
  pids+=($apid)
  wait_for 30 grep -q 'msg="http listening"' "$alog" || die "agent $agent_n did not start"
}
# xid N CODE: one kernel-log line of XID CODE on its own GPU (no coalescing).
xid() { printf '2026-11-29T07:00:%02d.000000+00:00 gpu-kf kernel: NVRM: Xid (PCI:0000:%02x:00): %d, pid=1234, name=python, mark-%s\n' "$1" $((16 + $1)) "$2" "$3"; }
arrived() { grep -q "mark-$1" "$out"; }
all_arrived() { local m; for m in "$@"; do arrived "$m" || return 1; done; }
# The saved position has reached the end of the log (what was read is committed).
persisted_to_end() { local o; o=$(sed -n 's/^offset //p' "$tmp/spool/kmsg.state"); [ "$o" = "$(stat -c %s "$log")" ]; }

xid 1 13 a0 > "$log"
start_agent
xid 2 31 a1 >> "$log"
wait_for 30 arrived a1 || die "the first XID never arrived"
wait_for 30 persisted_to_end || die "the position was never persisted: $(cat "$tmp/spool/kmsg.state" 2>&1)"
kill -9 "$apid"; wait "$apid" 2>/dev/null
# Three XIDs while the agent is down.
{ xid 3 43 b1; xid 4 48 b2; xid 5 79 b3; } >> "$log"
start_agent
wait_for 60 all_arrived b1 b2 b3 && ok "3 XIDs written during a kill -9 arrived after the restart" \
  || bad "written during a kill -9: $(grep -c 'mark-b' "$out") of 3 arrived"
[ "$(grep -c 'mark-a0' "$out")" = 0 ] && ok "the content before the agent first started was not read" \
  || bad "the old content was shipped"

# Rotation while down.
wait_for 30 persisted_to_end || die "not persisted after restart 1"
kill -9 "$apid"; wait "$apid" 2>/dev/null
xid 6 62 c1 >> "$log"
mv "$log" "$log.1"
{ xid 7 63 c2; xid 8 64 c3; } > "$log"
start_agent
wait_for 60 all_arrived c1 c2 c3 && ok "rotated while down: the rest of kern.log.1 and the new kern.log arrived" \
  || bad "rotated while down: $(grep -c 'mark-c' "$out") of 3 arrived"

# copytruncate while down, the new content longer than the old position.
wait_for 30 persisted_to_end || die "not persisted after restart 2"
kill -9 "$apid"; wait "$apid" 2>/dev/null
{ xid 9 74 d1; xid 10 92 d2; xid 11 94 d3; xid 12 95 d4; } > "$log.tmp"; cat "$log.tmp" > "$log"
start_agent
wait_for 60 all_arrived d1 d2 d3 d4 && ok "copytruncated while down: every line of the new content arrived" \
  || bad "copytruncated while down: $(grep -c 'mark-d' "$out") of 4 arrived"

# Issue 24 item 6: a line written while down, then logrotate's copytruncate
# (copy kern.log to kern.log.1, truncate kern.log in place), then new lines:
# the line is read from the copy, the new lines from the truncated file.
wait_for 30 persisted_to_end || die "not persisted after restart 3"
kill -9 "$apid"; wait "$apid" 2>/dev/null
xid 18 31 f1 >> "$log"
cp "$log" "$log.1" && : > "$log"
xid 19 43 f2 >> "$log"
start_agent
wait_for 60 all_arrived f1 f2 && ok "copytruncate (copy kept) while down: the line before it and the one after arrived" \
  || bad "copytruncate (copy kept) while down: $(grep -c 'mark-f' "$out") of 2 arrived (before it: $(grep -c mark-f1 "$out"))"

# A truncate followed by a longer write while the agent runs.
wait_for 30 persisted_to_end || die "not persisted after restart 4"
{ xid 13 109 e1; xid 14 119 e2; xid 15 120 e3; xid 16 121 e4; xid 17 122 e5; } > "$log.tmp"; cat "$log.tmp" > "$log"
wait_for 60 all_arrived e1 e2 e3 e4 e5 && ok "truncate + longer write while running: its first line arrived" \
  || bad "truncate + longer write: $(grep -c 'mark-e' "$out") of 5 arrived (first line: $(grep -c mark-e1 "$out"))"
kill -TERM "$apid"; wait "$apid" 2>/dev/null
# Every kill -9 above came after the position was persisted to the end, so
# nothing was read twice either.
dups=$(grep -o 'mark-[a-f][0-9]' "$out" | sort | uniq -d | tr '\n' ' ')
[ -z "$dups" ] && ok "each of the $(grep -c mark- "$out") lines arrived once" || bad "arrived twice: $dups"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
