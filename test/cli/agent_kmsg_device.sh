#!/usr/bin/env bash
# gpuheal-agent in device mode (a regular file of /dev/kmsg records stands
# in for the device) across kill -9: once the spool is fsync'd the highest
# kernel record seq shipped is persisted in SPOOL_DIR/kmsg.state, so a
# restarted agent reads the whole ring again without re-shipping what was
# shipped, and ships the records that came after.
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
echo "kmsgdev-token" > "$tmp/token"
out="$tmp/out.jsonl"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$out" \
  --port-file "$tmp/port" 2> "$tmp/recv.log" &
pids+=($!)
wait_for 20 test -s "$tmp/port" || { bad "receiver did not start"; exit 1; }

dev="$tmp/kmsg"
agent_n=0
start_agent() {
  agent_n=$((agent_n + 1))
  alog="$tmp/agent$agent_n.log"
  "$agent" --node gpu-kd --kmsg "$dev" --nvml-lib off --dcgm off \
    --nic-root off --telemetry-socket off --controller "http://127.0.0.1:$(cat "$tmp/port")" \
    --token-file "$tmp/token" --spool-dir "$tmp/spool" --spool-sync-interval 50ms \
    --batch-linger 20ms --listen 127.0.0.1:0 2> "$alog" &
  apid=$!
  pids+=($apid)
  wait_for 30 grep -q 'msg="http listening"' "$alog" || die "agent $agent_n did not start"
}
# rec SEQ BUS CODE MARK: one /dev/kmsg record, an XID on its own GPU (no coalescing).
rec() { printf '3,%d,%d,-;NVRM: Xid (PCI:0000:%02x:00): %d, pid=1234, name=python, mark-%s\n' "$1" $(($1 * 1000)) "$2" "$3" "$4"; }
noise() { printf '6,%d,%d,-;nvidia-modeset: Loading NVIDIA driver\n' "$1" $(($1 * 1000)); }
count() { grep -c "mark-$1" "$out" 2>/dev/null || true; }
arrived() { [ "$(count "$1")" -ge 1 ]; }
state_seq() { sed -n 's/^seq //p' "$tmp/spool/kmsg.state"; }
persisted() { [ "$(state_seq)" = "$1" ]; }

{ noise 1; rec 2 16 13 a1; noise 3; rec 4 17 31 a2; noise 5; } > "$dev"
start_agent
wait_for 30 arrived a2 || die "the XIDs never arrived"
# the highest record seq shipped (4), not the last record read (5)
wait_for 30 persisted 4 && ok "the highest shipped record seq (4) was persisted" \
  || die "kmsg.state: $(cat "$tmp/spool/kmsg.state" 2>&1)"
grep -q '"id":"gpu-kd/[^/"]*/4"' "$out" && ok "a record's id is <node>/<boot_id>/<seq>" \
  || bad "ids: $(grep -o '"id":"[^"]*"' "$out" | head -3)"
kill -9 "$apid"; wait "$apid" 2>/dev/null
{ rec 6 18 43 b1; noise 7; rec 8 19 48 b2; } >> "$dev"
start_agent
wait_for 60 arrived b2 && arrived b1 && ok "records after the kill -9 arrived after the restart" \
  || bad "after the restart: b1 $(count b1), b2 $(count b2)"
wait_for 30 persisted 8 && ok "the new highest seq (8) was persisted" \
  || bad "kmsg.state after the restart: $(cat "$tmp/spool/kmsg.state" 2>&1)"
[ "$(count a1)" = 1 ] && [ "$(count a2)" = 1 ] && ok "what was shipped before the kill -9 was not shipped again" \
  || bad "re-shipped: a1 $(count a1), a2 $(count a2)"
kill "$apid"; wait "$apid" 2>/dev/null

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
