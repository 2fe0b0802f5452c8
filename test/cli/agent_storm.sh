#!/usr/bin/env bash
# gpuheal-agent under an XID storm: 50,000 kernel-log records of XID 79 on
# 4 GPUs (a /dev/kmsg stand-in file) become a handful of shipped signals -
# per GPU the first sample and one "[coalesced N]" summary per window - with
# every record counted; a restart does not re-ship what was shipped (the
# kernel-log position is persisted after the spool's fsync).
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done; }

echo "storm-token" > "$tmp/token"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out.jsonl" \
  --port-file "$tmp/port" 2> "$tmp/recv.log" &
pids+=($!)
wait_for 20 test -s "$tmp/port" || { bad "receiver did not start"; exit 1; }

N=50000
awk -v n=$N 'BEGIN { for (i = 1; i <= n; i++)
  printf "3,%d,%d,-;NVRM: Xid (PCI:0000:%02x:00): 79, pid=1234, GPU has fallen off the bus.\n", i, 5000000 + i, 24 + (i % 4) * 16 }' \
  > "$tmp/kmsg"

run_agent() {
  "$agent" --node gpu-storm --kmsg "$tmp/kmsg" --nvml-lib off --dcgm off --nic-root off \
    --telemetry-socket off --controller "http://127.0.0.1:$(cat "$tmp/port")" \
    --token-file "$tmp/token" --spool-dir "$tmp/spool" --spool-sync-interval 50ms \
    --boot-id-file "$tmp/boot_id" --listen 127.0.0.1:0 2> "$tmp/agent$1.log" &
  apid=$!
  pids+=($apid)
  wait_for 30 grep -q 'msg="http listening"' "$tmp/agent$1.log" || { bad "agent did not start"; exit 1; }
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$tmp/agent$1.log")
}
metric() { curl -s "http://127.0.0.1:$aport/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
all_read() { [ "$(metric gpuheal_agent_kmsg_records_total)" = "$N" ]; }
drained() { [ "$(metric gpuheal_agent_spool_pending)" = 0 ] && [ "$(metric gpuheal_agent_coalesce_keys)" = 0 ]; }

echo "6c3f0a54-0000-4000-8000-00000000b007" > "$tmp/boot_id"
t_start=$(date +%s%N)
run_agent 1
wait_for 60 all_read || bad "not all $N records read: $(metric gpuheal_agent_kmsg_records_total)"
t_read=$(date +%s%N)
wait_for 30 drained || bad "summaries not shipped"
# acknowledged is not yet written by the receiver: wait for its file to hold them all
in_file() { local f s n
  f=$(grep -c '"kind":"xid"' "$tmp/out.jsonl"); s=$(grep -c 'coalesced [0-9]*\]' "$tmp/out.jsonl")
  n=$(grep -o 'coalesced [0-9]*\]' "$tmp/out.jsonl" | awk '{s += $2} END {print s + 0}')
  [ $((f - s + n)) = $N ]; }
wait_for 30 in_file
coalesced=$(metric gpuheal_agent_coalesced_total)
shipped=$(grep -c '"kind":"xid"' "$tmp/out.jsonl")
summaries=$(grep -c 'coalesced [0-9]*\]' "$tmp/out.jsonl")
sum_n=$(grep -o 'coalesced [0-9]*\]' "$tmp/out.jsonl" | awk '{s += $2} END {print s + 0}')
# Per GPU key at most 2 signals (first + summary) per 1 s window, and the
# reading took at most $secs seconds from the agent's start: the bound follows
# from the elapsed time, so a loaded machine (slower reading, more windows)
# cannot fail it while a coalescer that lets samples through still does.
secs=$(( (t_read - t_start) / 1000000000 + 1 ))
max=$(( 4 * 2 * (secs + 1) ))
[ "$shipped" -le "$max" ] && [ "$shipped" -ge 8 ] && ok "$N XID records shipped as $shipped signals ($summaries summaries, at most $max for ${secs}s of reading)" \
  || bad "$shipped signals shipped for $N records (at most $max for ${secs}s of reading)"
[ "$coalesced" = "$sum_n" ] && [ $((shipped - summaries + sum_n)) = $N ] \
  && ok "every record accounted for: $((shipped - summaries)) firsts + $sum_n in summaries = $N" \
  || bad "accounting: coalesced=$coalesced in summaries=$sum_n firsts=$((shipped - summaries))"
sleep 0.5 # one more fsync, then the position is committed
kill -TERM $apid; wait $apid 2>/dev/null
before=$(wc -l < "$tmp/out.jsonl")
run_agent 2
wait_for 30 all_read || bad "restart: records not re-read"
sleep 1.5
skipped=$(metric gpuheal_agent_kmsg_skipped_total)
[ "$(wc -l < "$tmp/out.jsonl")" = "$before" ] && ok "restart: nothing re-shipped ($skipped signals skipped by the saved position)" \
  || bad "restart re-shipped $(( $(wc -l < "$tmp/out.jsonl") - before )) signals"
kill -TERM $apid; wait $apid 2>/dev/null
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
