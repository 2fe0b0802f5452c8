#!/usr/bin/env bash
# gpuheal-agent's spool under pressure (issue 15 items 8 and 9):
# - a telemetry flood (66,200 step lines, --spool-max-bytes 4Mi, receiver
#   down) does not push out the XID 79 written before it: telemetry stops at
#   its share, is counted, and the XID arrives once the receiver is up;
# - a full spool disk (a 1 MiB tmpfs of our own, filled up; root only,
#   skipped otherwise) with a backlog: what is on disk still ships, its acks
#   free the space, the XID written while the disk was full is held in memory
#   and arrives; the error log stays quiet (rate-limited) meanwhile.
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
tmp=$(mktemp -d)
mnt=""
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
die() { bad "$*"; echo "--- agent log"; tail -n 20 "$alog"; exit 1; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done; }

[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
echo "full-token-$$" > "$tmp/token"
out="$tmp/received.jsonl"
: > "$out"

rport=""
start_receiver() {
  rm -f "$tmp/rport"
  "$gh" ingest-serve --listen "127.0.0.1:${rport:-0}" --token-file "$tmp/token" --out "$out" \
    --port-file "$tmp/rport" 2>> "$tmp/recv.log" &
  recv_pid=$!
  pids+=("$recv_pid")
  wait_for 20 test -s "$tmp/rport" || { bad "receiver did not start"; exit 1; }
  rport=$(cat "$tmp/rport")
}
stop_receiver() { kill -TERM "$recv_pid"; wait "$recv_pid" 2>/dev/null; }

agent_n=0
start_agent() { # SPOOL_DIR MAX_BYTES INJECT_FILE
  agent_n=$((agent_n + 1))
  alog="$tmp/agent$agent_n.log"
  "$agent" --node gpu-full --kmsg off --nvml-lib off --dcgm off --nic-root off \
    --telemetry-socket off --controller "http://127.0.0.1:$rport" --token-file "$tmp/token" \
    --spool-dir "$1" --spool-max-bytes "$2" --inject "$3" --inject-follow on \
    --batch-records 200 --batch-linger 20ms --listen 127.0.0.1:0 --log-level info \
    2> "$alog" &
  agent_pid=$!
  pids+=("$agent_pid")
  wait_for 30 grep -q 'msg="http listening"' "$alog" || die "agent $agent_n did not start"
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$alog" | tail -n 1)
}
metric() { curl -s "http://127.0.0.1:$aport/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
metric_at_least() { local v; v=$(metric "$1"); [ -n "$v" ] && [ "${v%.*}" -ge "$2" ]; }
received() { grep -c "$1" "$out" 2>/dev/null || true; }
has() { [ "$(received "$1")" -ge 1 ]; }

xid_line() { # MARK
  printf '{"ts":"2026-11-29T07:00:00.000000Z","node":"gpu-full","gpu":3,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid 79 %s, GPU has fallen off the bus."}\n' "$1"
}
steps() { # N
  awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++)
    printf "{\"ts\":\"2026-11-29T07:00:01.%06dZ\",\"node\":\"gpu-full\",\"source\":\"telemetry\",\"kind\":\"step\",\"job\":\"ml/llm\",\"rank\":%d,\"step\":%d,\"step_ms\":1432.5}\n", i % 1000000, i % 64, i }'
}

# A free port for the receiver, then leave it down.
start_receiver
stop_receiver

# ---- item 9: a telemetry flood does not evict the XID before it ----
{ xid_line flood-mark; steps 66200; } > "$tmp/flood.jsonl"
start_agent "$tmp/spool1" 4Mi "$tmp/flood.jsonl"
wait_for 120 metric_at_least gpuheal_agent_signals_total'{source="telemetry",kind="step"}' 66200 \
  || die "item 9: not all 66200 step lines taken: $(metric 'gpuheal_agent_signals_total{source="telemetry",kind="step"}')"
dropped=$(metric gpuheal_agent_spool_telemetry_dropped_total)
lost=$(metric gpuheal_agent_spool_lost_total)
tbytes=$(metric gpuheal_agent_spool_telemetry_bytes)
tmax=$(metric gpuheal_agent_spool_telemetry_max_bytes)
[ "${dropped:-0}" -gt 0 ] && [ "$lost" = 0 ] \
  && ok "item 9: 66200 step lines into a 4Mi spool, receiver down: $dropped telemetry dropped (counted), 0 lost" \
  || bad "item 9: dropped=$dropped lost=$lost"
[ "${tbytes%.*}" -le "${tmax%.*}" ] && ok "item 9: telemetry holds $tbytes of its $tmax-byte share" \
  || bad "item 9: telemetry $tbytes over its share $tmax"
grep -q 'telemetry dropped' "$alog" && ok "item 9: the agent says telemetry was dropped" \
  || bad "item 9: no log line about dropped telemetry"
start_receiver
wait_for 120 has flood-mark && ok "item 9: the XID 79 written before the flood arrived" \
  || bad "item 9: the XID 79 before the flood never arrived (evicted)"
kill -TERM "$agent_pid"; wait "$agent_pid" 2>/dev/null
stop_receiver

# ---- item 8: a full spool disk ----
mnt="$tmp/mnt"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null; then
  mnt=""
  echo "skip - item 8: cannot mount a tmpfs (needs root)"
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ]; exit
fi
# A backlog of ~450 KB (hardware: never dropped as telemetry) while the
# receiver is down, in a 768Ki spool of 96 KiB segments.
awk 'BEGIN { for (i = 1; i <= 1500; i++)
  printf "{\"ts\":\"2026-11-29T07:00:02.%06dZ\",\"node\":\"gpu-full\",\"gpu\":%d,\"source\":\"nvml\",\"kind\":\"thermal\",\"celsius\":%d,\"throttled\":false,\"msg\":\"backlog %d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n", i, i % 8, 40 + i % 50, i }' \
  > "$tmp/full.jsonl"
start_agent "$mnt/spool" 768Ki "$tmp/full.jsonl"
wait_for 60 metric_at_least gpuheal_agent_spool_pending 1500 || die "item 8: backlog not spooled: $(metric gpuheal_agent_spool_pending)"
# Fill the disk (past the last page of the active segment), then the fault.
dd if=/dev/zero of="$mnt/filler" bs=4k 2>/dev/null
full_at=$SECONDS
# ~9 KB of hardware lines first: more than the page the active segment may
# still have room in.
awk 'BEGIN { for (i = 1; i <= 30; i++)
  printf "{\"ts\":\"2026-11-29T07:00:03.%06dZ\",\"node\":\"gpu-full\",\"gpu\":1,\"source\":\"nvml\",\"kind\":\"thermal\",\"celsius\":60,\"throttled\":false,\"msg\":\"padding %d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n", i, i }' \
  >> "$tmp/full.jsonl"
xid_line full-mark >> "$tmp/full.jsonl"
wait_for 30 metric_at_least gpuheal_agent_spool_held 1 || die "item 8: the XID is not held: held=$(metric gpuheal_agent_spool_held) errors=$(metric gpuheal_agent_spool_write_errors_total)"
ok "item 8: disk full: the XID is held in memory ($(metric gpuheal_agent_spool_held) held, $(metric gpuheal_agent_spool_write_errors_total) write errors counted)"
steps 50 >> "$tmp/full.jsonl"
wait_for 30 metric_at_least gpuheal_agent_spool_telemetry_dropped_total 50 \
  && ok "item 8: telemetry dropped while the disk is full (counted)" \
  || bad "item 8: telemetry dropped: $(metric gpuheal_agent_spool_telemetry_dropped_total)"
# The agent retried its writes all along: at most one line per kind (write,
# fsync, read, refused) per 10 s, not one per retry.
errs=$(grep -c 'spool write failed\|spool fsync failed\|spool read failed\|signal not spooled' "$alog")
allowed=$(( 4 * ((SECONDS - full_at) / 10 + 1) ))
retries=$(metric gpuheal_agent_spool_write_errors_total)
[ "$errs" -le "$allowed" ] && ok "item 8: $errs error lines for $retries failed writes (rate-limited)" \
  || bad "item 8: $errs error lines for $retries failed writes in $((SECONDS - full_at)) s"
start_receiver
wait_for 120 has full-mark && ok "item 8: the XID written while the disk was full arrived" \
  || bad "item 8: the XID written while the disk was full never arrived"
back=$(received 'backlog ')
pad=$(received 'padding ')
[ "$pad" -ge 30 ] && ok "item 8: the lines held with it arrived too ($pad of 30)" || bad "item 8: held lines: $pad of 30"
[ "$back" -ge 1500 ] && ok "item 8: the backlog on disk shipped ($back of 1500)" || bad "item 8: backlog: $back of 1500"
lost=$(metric gpuheal_agent_spool_lost_total)
[ "$lost" = 0 ] && ok "item 8: nothing lost" || bad "item 8: $lost lost"
kill -TERM "$agent_pid"; wait "$agent_pid" 2>/dev/null
stop_receiver
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
