#!/usr/bin/env bash
# gpuheal-agent shipping end to end: the agent (fake NVML with 8 GPUs, an
# inject file, the telemetry socket) ships to `gpuheal ingest-serve`
# through its disk spool. The agent is killed with -9 while the receiver is
# down, and again in the middle of shipping; the receiver is killed with -9
# in the middle of shipping and brought back. Every signal must arrive, and
# exactly once (duplicates dropped by id at the receiver).
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
die() { bad "$*"; echo "--- agent logs"; tail -n 20 "$tmp"/agent*.log; echo "--- receiver logs"; tail -n 5 "$tmp"/recv*.log; exit 1; }

[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }

echo "agent-token-$$" > "$tmp/token"
printf 'gpus 8\n* temp 50\n3 ecc.dbe.volatile 2 at=3\n5 xid 79 at=4\n' > "$tmp/nvml.conf"
export GH_NVML_FAKE_CONFIG="$tmp/nvml.conf"
out="$tmp/received.jsonl"

# wait_for SECONDS CMD...: polls every 0.1 s until CMD succeeds.
wait_for() {
  local until=$((SECONDS + $1)); shift
  until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done
}
count_ids() { grep -c "\"id\":\"$1" "$out" 2>/dev/null || true; }
has_at_least() { [ "$(count_ids "$1")" -ge "$2" ]; }

rport=""
recv_n=0
start_receiver() {
  recv_n=$((recv_n + 1))
  rm -f "$tmp/rport"
  "$gh" ingest-serve --listen "127.0.0.1:${rport:-0}" --token-file "$tmp/token" --out "$out" \
    --port-file "$tmp/rport" 2> "$tmp/recv$recv_n.log" &
  recv_pid=$!
  pids+=("$recv_pid")
  wait_for 20 test -s "$tmp/rport" || die "receiver $recv_n did not start"
  rport=$(cat "$tmp/rport")
}

agent_n=0
start_agent() { # [--inject FILE]
  agent_n=$((agent_n + 1))
  alog="$tmp/agent$agent_n.log"
  "$agent" --node gpu-e2e --kmsg off --nvml-lib "$fake" --poll-interval 1s --dcgm off \
    --nic-root off --telemetry-socket "$tmp/telemetry.sock" \
    --controller "http://127.0.0.1:$rport" --token-file "$tmp/token" \
    --spool-dir "$tmp/spool" --spool-max-bytes 64Mi --batch-records 40 --batch-linger 20ms \
    --listen 127.0.0.1:0 --log-level info "$@" 2> "$alog" &
  agent_pid=$!
  pids+=("$agent_pid")
  wait_for 30 grep -q 'msg="http listening"' "$alog" || die "agent $agent_n did not start"
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$alog" | tail -n 1)
}
metric() { curl -s "http://127.0.0.1:$aport/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
pending_at_least() { local v; v=$(metric gpuheal_agent_spool_pending); [ -n "$v" ] && [ "${v%.*}" -ge "$1" ]; }
pending_zero() { local v; v=$(metric gpuheal_agent_spool_pending); [ "$v" = "0" ]; }

# Inject files: every line carries its own id (as a real emitter would), so
# re-reading a file after a restart is idempotent at the receiver.
gen() { # PREFIX N -> lines of mixed kinds
  awk -v p="$1" -v n="$2" 'BEGIN {
    for (i = 1; i <= n; i++) {
      if (i % 3 == 0)
        printf "{\"ts\":\"2026-11-29T07:00:%02d.%06dZ\",\"node\":\"gpu-e2e\",\"gpu\":%d,\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid 79 #%d\",\"id\":\"e2e/%s/%d\"}\n", i % 60, i, i % 8, i, p, i;
      else if (i % 3 == 1)
        printf "{\"ts\":\"2026-11-29T07:00:%02d.%06dZ\",\"source\":\"telemetry\",\"kind\":\"step\",\"job\":\"ml/llm\",\"rank\":%d,\"step\":%d,\"step_ms\":1432.5,\"id\":\"e2e/%s/%d\"}\n", i % 60, i, i % 64, i, p, i;
      else
        printf "{\"ts\":\"2026-11-29T07:00:%02d.%06dZ\",\"node\":\"gpu-e2e\",\"gpu\":%d,\"source\":\"nvml\",\"kind\":\"thermal\",\"celsius\":%d,\"throttled\":false,\"id\":\"e2e/%s/%d\"}\n", i % 60, i, i % 8, 40 + i % 50, p, i;
    }}'
}
N1=3000
N2=20000
gen a $N1 > "$tmp/in1.jsonl"
gen b $N2 > "$tmp/in2.jsonl"

# A free port for the receiver, then leave it down.
start_receiver
kill -TERM "$recv_pid"; wait "$recv_pid" 2>/dev/null

# Phase 1: receiver down; the agent spools everything, then is killed -9.
start_agent --inject "$tmp/in1.jsonl"
wait_for 60 pending_at_least $N1 || die "phase 1: the spool never held $N1 signals"
wait_for 10 grep -q 'shipping to the controller failing' "$alog" \
  && ok "phase 1: receiver down, agent says so once and keeps $(metric gpuheal_agent_spool_pending) signals in its spool" \
  || bad "phase 1: no 'failing' log line"
gpus=$(curl -s "http://127.0.0.1:$aport/metrics" | grep -c '^gpuheal_gpu_temperature_celsius{')
[ "$gpus" = 8 ] && ok "metrics: temperature of 8 GPUs from the NVML snapshot" || bad "metrics: $gpus GPU temperatures"
[ "$(curl -s "http://127.0.0.1:$aport/healthz")" = ok ] && ok "/healthz" || bad "/healthz"
kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null

# Phase 2: a new agent without the inject file: what arrives can only come
# from the spool. It fails while the receiver is down, then delivers.
start_agent
sleep 1
start_receiver
wait_for 90 has_at_least e2e/a/ $N1 || die "phase 2: only $(count_ids e2e/a/) of $N1 arrived from the spool"
ok "phase 2: all $N1 signals spooled before kill -9 delivered from the spool after restart"
wait_for 30 pending_zero || bad "phase 2: spool not drained"
kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null

# Phase 3: kill -9 the agent in the middle of shipping $N2 signals.
start_agent --inject "$tmp/in2.jsonl"
wait_for 90 has_at_least e2e/b/ 3000 || die "phase 3: shipping did not start"
kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null
at_kill=$(count_ids e2e/b/)
[ "$at_kill" -lt $N2 ] && ok "phase 3: agent killed -9 mid-stream ($at_kill of $N2 delivered)" \
  || echo "note - phase 3: all $N2 were delivered before the kill landed"

# Phase 4: restart (spool replay + the inject file re-read: duplicates), and
# kill -9 the receiver mid-stream, then bring it back.
start_agent --inject "$tmp/in2.jsonl"
target=$(( at_kill + (N2 - at_kill) / 3 ))
if wait_for 90 has_at_least e2e/b/ "$target"; then
  at_rkill=$(count_ids e2e/b/)
  kill -9 "$recv_pid"; wait "$recv_pid" 2>/dev/null
  [ "$at_rkill" -lt $N2 ] && ok "phase 4: receiver killed -9 mid-stream ($at_rkill of $N2 delivered)" \
    || echo "note - phase 4: all delivered before the receiver was killed"
  sleep 1.5
  start_receiver
fi
wait_for 120 has_at_least e2e/b/ $N2 || die "phase 4: only $(count_ids e2e/b/) of $N2 arrived"
wait_for 30 pending_zero || bad "phase 4: spool not drained"
sleep 1.5 # an NVML signal or two may still be in flight
kill -TERM "$agent_pid"; wait "$agent_pid" 2>/dev/null
kill -TERM "$recv_pid"; wait "$recv_pid" 2>/dev/null

# Exactly once: no id twice, every injected id present.
total=$(wc -l < "$out")
unique=$(grep -o '"id":"[^"]*"' "$out" | sort -u | wc -l)
a=$(grep -o '"id":"e2e/a/[0-9]*"' "$out" | sort -u | wc -l)
b=$(grep -o '"id":"e2e/b/[0-9]*"' "$out" | sort -u | wc -l)
nv=$(grep -c '"source":"nvml","kind":"\(ecc\|xid\)"' "$out" || true)
[ "$total" = "$unique" ] && ok "exactly once: $total lines received, $unique distinct ids" \
  || bad "duplicates: $total lines, $unique distinct ids"
[ "$a" = $N1 ] && [ "$b" = $N2 ] && ok "none lost: $a/$N1 + $b/$N2 injected signals" \
  || bad "lost: $a/$N1 + $b/$N2"
[ "$nv" -ge 1 ] && ok "NVML fault signals shipped with agent ids: $nv" || bad "no NVML fault signal arrived"
inj=$(grep -c '"id":"e2e/.*"injected":true' "$out" || true)
[ "$inj" = $((N1 + N2)) ] && ok "every injected signal marked injected" || bad "$inj of $((N1 + N2)) marked injected"
grep -h 'ingest-serve stopped' "$tmp"/recv*.log | sed 's/^.*msg=/  receiver: /'
echo "# sent $((N1 + N2)) injected (+$((total - N1 - N2)) NVML), received $total, distinct $unique;" \
     "agent killed -9 twice, receiver killed -9 once"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
