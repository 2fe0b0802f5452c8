#!/usr/bin/env bash
# gpuheal-agent's probes and configuration end to end (no Kubernetes): probes
# from flags, the config file and $GPUHEAL_PROBE (flags replace the lower
# layers); results shipped to `gpuheal ingest-serve` as probe_result signals
# (passed, failed with output, timed out); a GPU probe that fails marks that
# GPU unhealthy in /metrics; bad --probe values and an unusable --kubeconfig
# stop the agent at start with a clear message; without Kubernetes the agent
# says once that publishing is off; --help documents every option that
# docs/agent.md lists, and the reverse.
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done; }
[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT GPUHEAL_PROBE GPUHEAL_CONFIG GPUHEAL_KUBECONFIG

# ---- --help and docs/agent.md list the same options
help_opts=$("$agent" --help | sed -n 's/^  --\([a-z0-9-]*\) .*/\1/p' | sort -u)
doc_opts=$(sed -n 's/^| `--\([a-z0-9-]*\)[ `].*/\1/p' "$GH_SOURCE_DIR/docs/agent.md" | sort -u)
missing=$(comm -13 <(echo "$help_opts") <(echo "$doc_opts") | tr '\n' ' ')
undoc=$(comm -23 <(echo "$help_opts") <(echo "$doc_opts") | grep -v '^config$' | tr '\n' ' ')
[ -z "$missing" ] && [ -z "$undoc" ] && ok "--help and docs/agent.md document the same $(echo "$help_opts" | wc -l) options" \
  || bad "not in --help: $missing; not in docs/agent.md: $undoc"

# ---- configuration errors stop the agent with exit 2 and say why
base=(--node n1 --kmsg off --nvml-lib off --dcgm off --ib-sysfs-root off --telemetry-socket off
      --spool-dir "$tmp/spool0" --listen off)
refuse() { # WHAT EXPECTED-IN-MESSAGE ARGS...
  local what=$1 want=$2; shift 2
  local out rc
  out=$("$agent" "${base[@]}" "$@" 2>&1 </dev/null); rc=$?
  [ $rc = 2 ] && grep -qF -- "$want" <<<"$out" && ok "refused: $what ($out)" || bad "$what: rc=$rc out=$out"
}
refuse "--probe without =" "expected NAME=COMMAND" --probe "nocommand"
refuse "--probe bad name" "a name is letters" --probe "a b=/bin/true"
refuse "--probe bad timeout" 'bad "timeout=abc"' --probe "x=/bin/true,timeout=abc"
refuse "--probe gpu out of range" 'bad "gpu=64"' --probe "x=/bin/true,gpu=64"
refuse "--probe no command" "no command" --probe "x=,every=1s"
refuse "--probe option twice" "every given twice" --probe "x=/bin/true,every=1s,every=2s"
refuse "two probes of one name" 'two probes named "x"' --probe "x=/bin/true" --probe "x=/bin/false"
refuse "unknown option" 'unknown option "--ib-root"' --ib-root off
out=$("$agent" "${base[@]}" --kubeconfig "$tmp/absent.kubeconfig" 2>&1 </dev/null); rc=$?
[ $rc != 0 ] && grep -q 'msg="cannot use --kubeconfig"' <<<"$out" \
  && ok "an unusable --kubeconfig stops the agent (rc=$rc)" || bad "--kubeconfig absent: rc=$rc $out"

# ---- a running agent: probes from all three layers, shipped
echo "probe-token" > "$tmp/token"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out.jsonl" \
  --port-file "$tmp/port" 2> "$tmp/recv.log" &
pids+=($!)
wait_for 20 test -s "$tmp/port" || { bad "receiver did not start"; exit 1; }
printf 'gpus 2\n' > "$tmp/nvml.conf"
export GH_NVML_FAKE_CONFIG="$tmp/nvml.conf"
cat > "$tmp/agent.conf" <<EOF
# replaced by the flags' probes
probe = from_file=/bin/true,every=1s
nic-root = off
EOF

run_agent() { # LOG extra...
  local log=$1; shift
  "$agent" --config "$tmp/agent.conf" --node gpu-probe --kmsg off --nvml-lib "$fake" --dcgm off \
    --telemetry-socket off --controller "http://127.0.0.1:$(cat "$tmp/port")" \
    --token-file "$tmp/token" --spool-dir "$tmp/spool" --batch-linger 20ms \
    --listen 127.0.0.1:0 "$@" 2> "$log" &
  apid=$!
  pids+=($apid)
  wait_for 30 grep -q 'msg="http listening"' "$log" || { bad "agent did not start: $(tail -n 5 "$log")"; exit 1; }
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$log")
}
metrics() { curl -s "http://127.0.0.1:$aport/metrics"; }

# the config file's probe alone
run_agent "$tmp/agent0.log"
wait_for 10 grep -q '"check":"from_file","passed":true' "$tmp/out.jsonl" \
  && ok "a probe from the config file runs and ships" || bad "no from_file result"
kill -TERM $apid; wait $apid 2>/dev/null
grep -q 'msg="Kubernetes publishing disabled: no --kubeconfig and KUBERNETES_SERVICE_HOST is not set' "$tmp/agent0.log" \
  && ok "without Kubernetes: one clear 'publishing disabled' line" || bad "no 'publishing disabled' line"

# environment probes (one per line) replace the file's; flags replace both
GPUHEAL_PROBE=$'env_a=/bin/true,every=1s\nenv_b=/bin/true,every=1s' run_agent "$tmp/agent1.log"
m() { metrics | grep -o '^gpuheal_agent_probe_runs_total{check="[a-z_]*"}' | sed 's/.*check="\(.*\)"}/\1/' | sort | tr '\n' ' '; }
[ "$(m)" = "env_a env_b " ] && ok "\$GPUHEAL_PROBE (two lines) replaces the file's probes" || bad "env probes: $(m)"
kill -TERM $apid; wait $apid 2>/dev/null

KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=1 GPUHEAL_PROBE='env_a=/bin/true' \
run_agent "$tmp/agent2.log" \
  --probe "good=/bin/echo all good,every=1s" \
  --probe "bad=echo 'checksum mismatch on SM 7' >&2; exit 3,every=1s,gpu=1" \
  --probe "slow=sleep 5.4321,every=1s,timeout=300ms" \
  --probe "never=/bin/true"
[ "$(m)" = "bad good never slow " ] && ok "flag probes replace the environment's" || bad "flag probes: $(m)"
grep -q 'msg="Kubernetes publishing disabled: in-cluster configuration failed"' "$tmp/agent2.log" \
  && ok "KUBERNETES_SERVICE_HOST without a service account: publishing disabled, agent runs" \
  || bad "no in-cluster failure line: $(grep -i kube "$tmp/agent2.log")"
grep -q 'msg="probe has no every=.*probe=never' "$tmp/agent2.log" && ok "a probe without every= is warned about" \
  || bad "no warning for the on-demand-only probe"
got() { grep -c "\"check\":\"$1\",\"passed\":$2" "$tmp/out.jsonl"; }
got_min() { [ "$(got "$1" "$2")" -ge "$3" ]; }
wait_for 20 got_min good true 2 && ok "passing probe shipped $(got good true) times" || bad "good: $(got good true)"
wait_for 20 got_min bad false 2 && ok "failing probe shipped $(got bad false) times" || bad "bad: $(got bad false)"
wait_for 20 got_min slow false 1 && ok "timed-out probe shipped as failed" || bad "slow: $(got slow false)"
line=$(grep -m1 '"check":"bad"' "$tmp/out.jsonl")
grep -q '"source":"probe","kind":"probe_result"' <<<"$line" && grep -q '"gpu":1' <<<"$line" \
  && grep -q '"detail":"exit 3: checksum mismatch on SM 7' <<<"$line" && grep -q '"node":"gpu-probe"' <<<"$line" \
  && ok "probe_result signal: source, kind, gpu, node, detail with exit code and output" || bad "line: $line"
grep -q '"check":"slow".*"detail":"timed out after 0.3 s' "$tmp/out.jsonl" && ok "timeout detail" \
  || bad "timeout detail: $(grep -m1 '"check":"slow"' "$tmp/out.jsonl")"
[ "$(got never true)$(got never false)" = 00 ] && ok "the on-demand-only probe never ran" || bad "never ran"
mt=$(metrics)
grep -q '^gpuheal_gpu_state{gpu="1",.*state="unhealthy"} 1$' <<<"$mt" && grep -q '^gpuheal_gpu_state{gpu="0",.*state="healthy"} 1$' <<<"$mt" \
  && ok "/metrics: the failing GPU 1 probe made GPU 1 unhealthy, GPU 0 healthy" \
  || bad "/metrics gpu_state: $(grep '^gpuheal_gpu_state' <<<"$mt" | grep ' 1$')"
grep -q '^gpuheal_agent_probe_passed{check="good"} 1$' <<<"$mt" && grep -q '^gpuheal_agent_probe_passed{check="bad"} 0$' <<<"$mt" \
  && grep -q '^gpuheal_agent_kube_publishing 0$' <<<"$mt" && grep -q '^gpuheal_agent_source_up{source="probe"} 1$' <<<"$mt" \
  && ok "/metrics: probe results, probe source up, Kubernetes publishing 0" || bad "/metrics: $(grep -E 'probe_passed|kube_publishing' <<<"$mt")"
if command -v promtool >/dev/null; then
  promtool check metrics <<<"$mt" >/dev/null 2>&1 && ok "promtool check metrics" || bad "promtool: $(promtool check metrics <<<"$mt" 2>&1 | head -3)"
fi
t0=$SECONDS
kill -TERM $apid; wait $apid; rc=$?
[ $rc = 0 ] && [ $((SECONDS - t0)) -le 5 ] && ok "SIGTERM with a probe running: exit 0 in $((SECONDS - t0)) s" \
  || bad "stop: rc=$rc after $((SECONDS - t0)) s"
# Polled (a loaded machine may take a moment to reap it), never slept for.
probe_gone() { ! pgrep -f "sleep 5.4321" >/dev/null 2>&1; }
wait_for 10 probe_gone && ok "no probe process left behind" || bad "a probe's process outlived the agent"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
