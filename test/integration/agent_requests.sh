#!/usr/bin/env bash
# gpuheal-agent carrying out the controller's requests on the real control
# plane (test/kube): a kwok fake node, the agent with the fault-injection
# NVML, its results shipped to `gpuheal ingest-serve`. Requests are written
# with kubectl exactly as gh_act_request_node_op writes them (annotation
# gpuheal.io/request-<action> = {"id","action","incident","time"[,"gpu"]},
# status.lastAction {action,time,incident,result: Pending}).
#  - reset_gpu of GPU 3: the command runs once with the request in its
#    environment (an incident with shell syntax stays a plain string), the
#    results ship as probe_result signals, GPUNodeHealth gets Request-reset_gpu
#    True, Validated True (fresh lastTransitionTime), lastAction.result
#    Succeeded, and the agent's GPUHealthy condition survives;
#  - run_diagnostics with a failing validation command: Validated False;
#  - a restart reruns nothing;
#  - reboot_node: the command runs, the request waits (RebootPending); a
#    restart on the same boot id does not run it again; a restart with a new
#    boot id records it Succeeded and validates;
#  - a request without a configured command: NotConfigured, Validated False;
#  - the agent killed -9 while a command runs: Interrupted at the next start,
#    not run again; killed while validating: validated at the next start;
#    the state file lost: the conditions say what was done;
#  - unchanged health is not rewritten on every probe pass;
#  - the node is never cordoned or tainted by the agent.
set -uo pipefail
agent="$GH_BIN/gpuheal-agent"
gh="$GH_BIN/gpuheal"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
[ -x "$agent" ] && [ -x "$gh" ] || { echo "skip: no gpuheal-agent/gpuheal"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
[ -n "${GH_KUBE_ENV:-}" ] && [ -r "$GH_KUBE_ENV" ] || { echo "skip: no GH_KUBE_ENV"; exit 0; }
. "$GH_KUBE_ENV"
export KUBECONFIG
OK_MARK="ok   -" FAIL_MARK="FAIL -" WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
node="gh-agent-req-$$-$RANDOM"
apid="" rpid=""
cleanup() {
  [ -n "$apid" ] && kill -9 "$apid" 2>/dev/null
  [ -n "$rpid" ] && kill "$rpid" 2>/dev/null
  wait 2>/dev/null
  delete_fake_node
  rm_agent_tmp
}
trap cleanup EXIT
DIE_TAIL=40

# ---- the fake node
fake_node 4 || die "cannot create node $node"
k wait --for=condition=Ready "node/$node" --timeout=60s >/dev/null || die "node $node not Ready"
ok "kwok fake node $node Ready"

# ---- the receiver
echo "req-token" > "$tmp/token"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out.jsonl" \
  --port-file "$tmp/port" 2> "$tmp/recv.log" &
rpid=$!
# Polled conditions are functions: wait_for re-runs them. (An argument like
# <<<"$(gcond ...)" or "$(grep -c ...)" is expanded once, when wait_for is
# called, so the wait re-tested a stale value: "state file lost: 3 of 3
# recognised" failed that way under load.)
cond_msg_starts() { grep -q "^$2" <<<"$(gcond "$1" message)"; }
cond_msg_has() { grep -qF "$2" <<<"$(gcond "$1" message)"; }
log_count_is() { [ "$(grep -c "$2" "$alog")" = "$1" ]; }
wait_for 20 test -s "$tmp/port" || die "receiver did not start"

# ---- the commands: each appends its environment to a marker file
for c in reset reboot diag; do
  cat > "$tmp/$c.sh" <<EOF
#!/bin/sh
printf '%s|%s|%s|%s|%s|%s|%s\n' "\$1" "\$GPUHEAL_ACTION" "\$GPUHEAL_REQUEST_ID" "\$GPUHEAL_GPU" "\$GPUHEAL_INCIDENT" "\$GPUHEAL_NODE" "\$GPUHEAL_PCI" >> "$tmp/$c.marker"
while [ -e "$tmp/$c.slow" ]; do sleep 0.2; done  # held until the test lets go
echo "$c done on \$GPUHEAL_NODE"
EOF
done
cat > "$tmp/validate.sh" <<EOF
#!/bin/sh
echo "\$GPUHEAL_ACTION" >> "$tmp/validate.marker"
while [ -e "$tmp/validate.slow" ]; do sleep 0.2; done
if [ -e "$tmp/validate-fails" ]; then echo "gemm checksum mismatch on GPU \$GPUHEAL_GPU"; exit 4; fi
echo "all GPUs pass gemm"
EOF
chmod +x "$tmp"/*.sh
echo "boot-one" > "$tmp/boot1"
echo "boot-two" > "$tmp/boot2"
printf 'gpus 4\n' > "$tmp/nvml.conf"
export GH_NVML_FAKE_CONFIG="$tmp/nvml.conf"

n=0
start_agent() { # BOOTFILE extra flags...
  local boot=$1; shift
  n=$((n + 1))
  alog="$tmp/agent$n.log"
  "$agent" --node "$node" --kubeconfig "$KUBECONFIG" --kmsg off --nvml-lib "$fake" \
    --poll-interval 500ms --dcgm off --ib-sysfs-root off --telemetry-socket off \
    --controller "http://127.0.0.1:$(cat "$tmp/port")" --token-file "$tmp/token" \
    --batch-linger 20ms --spool-dir "$tmp/spool" --listen 127.0.0.1:0 --log-level info \
    --health-interval 1s --boot-id-file "$boot" --validate-cmd "$tmp/validate.sh" \
    --request-timeout 20s "$@" 2> "$alog" &
  apid=$!
  wait_for 30 grep -q 'msg="http listening"' "$alog" || die "agent $n did not start"
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$alog" | tail -n 1)
  wait_for 30 grep -q 'msg="watching GPUNodeHealth for requests"' "$alog" \
    || die "agent $n: not watching for requests"
}
all_cmds=(--reset-gpu-cmd "$tmp/reset.sh one" --reboot-cmd "$tmp/reboot.sh" --diagnostics-cmd "$tmp/diag.sh")
stop_agent() {
  kill -TERM "$apid"
  wait "$apid"
  local rc=$?
  apid=""
  return $rc
}
ts() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# the controller's request (node_ops.c gh_act_request_node_op)
request() { # ACTION INCIDENT [GPU]
  local id="$2/$1" t; t=$(ts)
  local v
  v=$(jq -cn --arg id "$id" --arg a "$1" --arg i "$2" --arg t "$t" '{id:$id,action:$a,incident:$i,time:$t}')
  [ -n "${3:-}" ] && v=$(jq -c --argjson g "$3" '. + {gpu:$g}' <<<"$v")
  [ -n "${4:-}" ] && v=$(jq -c --arg p "$4" '. + {pci:$p}' <<<"$v")
  k annotate gpunodehealths.gpuheal.io "$node" --overwrite "gpuheal.io/request-$1=$v" >/dev/null \
    || bad "cannot annotate the $1 request"
  k patch gpunodehealths.gpuheal.io "$node" --subresource=status --type=merge \
    -p "$(jq -cn --arg a "$1" --arg i "$2" --arg t "$t" '{status:{lastAction:{action:$a,time:$t,incident:$i,result:"Pending"}}}')" \
    >/dev/null || bad "cannot set lastAction"
}
command -v jq >/dev/null || { echo "skip: no jq"; exit 0; }

# ---- run 1: reset_gpu
start_agent "$tmp/boot1" "${all_cmds[@]}" --probe "node_ok=/bin/true,every=1s"
wait_for 30 gnh '{.metadata.name}' || die "no GPUNodeHealth created by the agent"
wait_for 30 is 4 gnh '{.status.gpuCount}' || die "GPUNodeHealth without 4 GPUs"
inc1='inc-1;touch '"$tmp"'/pwned;$(touch '"$tmp"'/pwned2)'
t_req=$(date -u +%s)
request reset_gpu "$inc1" 3
wait_for 40 is True gcond Request-reset_gpu status \
  || die "Request-reset_gpu not True: $(gcond Request-reset_gpu message)"
ok "Request-reset_gpu True: $(gcond Request-reset_gpu message)"
check "reset command ran once" test "$(lines "$tmp/reset.marker")" = 1
check "reset command: argv and environment" test "$(cat "$tmp/reset.marker")" = \
  "one|reset_gpu|$inc1/reset_gpu|3|$inc1|$node|"
check "no shell ran the incident text" test ! -e "$tmp/pwned" -a ! -e "$tmp/pwned2"
check "reason Succeeded, message names the request" \
  grep -qF "Succeeded request $inc1/reset_gpu: exit 0: reset done on $node" <<<"$(gcond Request-reset_gpu reason) $(gcond Request-reset_gpu message)"
wait_for 20 is True gcond Validated status || bad "Validated not True: $(gcond Validated message)"
check "Validated reason ValidationPassed, message names the probe" \
  grep -qF "ValidationPassed validation probe $tmp/validate.sh passed after reset_gpu" <<<"$(gcond Validated reason) $(gcond Validated message)"
vt=$(gcond Validated lastTransitionTime)
check "Validated lastTransitionTime ($vt) not before the request" test "$(date -u -d "$vt" +%s)" -ge "$t_req"
wait_for 20 is Succeeded gnh '{.status.lastAction.result}' \
  && ok "lastAction.result Succeeded" || bad "lastAction: $(gnh '{.status.lastAction}')"
check "the agent's GPUHealthy condition is still there" test -n "$(gcond GPUHealthy status)"
shipped() { grep -q "$1" "$tmp/out.jsonl"; }
wait_for 20 shipped '"check":"request_reset_gpu","passed":true' \
  && ok "probe_result request_reset_gpu shipped" || bad "no request_reset_gpu in $(tail -n 3 "$tmp/out.jsonl")"
wait_for 20 shipped '"gpu":3,.*"check":"validate","passed":true' \
  && ok "probe_result validate (GPU 3) shipped" || bad "no validate result shipped: $(grep validate "$tmp/out.jsonl")"

# ---- health dedupe: a probe passing every second, nothing else changing
sleep 2
w1=$(metric 'gpuheal_agent_health_publish_writes_total{object="gpunodehealth"}')
r1=$(metric 'gpuheal_agent_probe_runs_total{check="node_ok"}')
sleep 5
w2=$(metric 'gpuheal_agent_health_publish_writes_total{object="gpunodehealth"}')
r2=$(metric 'gpuheal_agent_probe_runs_total{check="node_ok"}')
[ $((r2 - r1)) -ge 3 ] && [ "$w2" = "$w1" ] \
  && ok "unchanged health not rewritten: $((r2 - r1)) probe passes, GPUNodeHealth writes $w1 -> $w2" \
  || bad "dedupe: probe runs $r1 -> $r2, GPUNodeHealth writes $w1 -> $w2"

# ---- run_diagnostics with a failing validation
touch "$tmp/validate-fails"
request run_diagnostics inc-2
wait_for 40 is True gcond Request-run_diagnostics status \
  || bad "Request-run_diagnostics: $(gcond Request-run_diagnostics status) $(gcond Request-run_diagnostics message)"
wait_for 20 is False gcond Validated status && ok "failing validation: Validated False" \
  || bad "Validated after a failing validation: $(gcond Validated status) $(gcond Validated message)"
check "Validated reason ValidationFailed with the probe's output" \
  grep -q "^ValidationFailed .*exit 4: gemm checksum mismatch on GPU" <<<"$(gcond Validated reason) $(gcond Validated message)"
check "Request-reset_gpu kept" test "$(gcond Request-reset_gpu status)" = True
check "diagnostics ran once (node-level: GPUHEAL_GPU empty)" test "$(cat "$tmp/diag.marker")" = \
  "|run_diagnostics|inc-2/run_diagnostics||inc-2|$node|"
wait_for 20 shipped '"check":"validate","passed":false' && ok "failed validation shipped" \
  || bad "no failed validate result shipped"
stop_agent && ok "run 1: SIGTERM, exit 0" || bad "run 1: exit status $?"

# ---- run 2: a restart reruns nothing
start_agent "$tmp/boot1" "${all_cmds[@]}"
sleep 3
check "restart: reset not rerun" test "$(lines "$tmp/reset.marker")" = 1
check "restart: diagnostics not rerun" test "$(lines "$tmp/diag.marker")" = 1
check "restart: validation not rerun" test "$(lines "$tmp/validate.marker")" = 2
check "restart: no 'request received' logged" test "$(grep -c 'msg="request received"' "$alog")" = 0

# ---- reboot_node
rm -f "$tmp/validate-fails"
request reboot_node inc-3
wait_for 40 is RebootPending gcond Request-reboot_node reason \
  || die "no RebootPending: $(gcond Request-reboot_node status) $(gcond Request-reboot_node message)"
ok "reboot command ran, request waits: $(gcond Request-reboot_node message)"
check "Request-reboot_node status Unknown" test "$(gcond Request-reboot_node status)" = Unknown
check "reboot command ran once" test "$(lines "$tmp/reboot.marker")" = 1
# another request while the reboot is awaited runs, and the reboot stays awaited
request reset_gpu inc-4 0
wait_for 30 cond_msg_starts Request-reset_gpu "request inc-4/reset_gpu: exit 0" \
  && ok "a reset_gpu while the reboot is awaited runs" || bad "reset during the reboot wait: $(gcond Request-reset_gpu message)"
check "still RebootPending" test "$(gcond Request-reboot_node reason)" = RebootPending
stop_agent && ok "run 2: SIGTERM, exit 0" || bad "run 2: exit status $?"
start_agent "$tmp/boot1" "${all_cmds[@]}"   # no reboot happened
# Polled, not slept for: the line says the agent has looked at the request,
# after which "not run again" means something.
wait_for 30 grep -q 'msg="reboot requested but the boot id is unchanged' "$alog" && ok "same boot id: said so" \
  || bad "no 'boot id is unchanged' line"
check "same boot id: reboot not run again" test "$(lines "$tmp/reboot.marker")" = 1
check "same boot id: still RebootPending" test "$(gcond Request-reboot_node reason)" = RebootPending
stop_agent
start_agent "$tmp/boot2" "${all_cmds[@]}"   # "after the reboot"
wait_for 30 is True gcond Request-reboot_node status \
  || bad "after reboot: $(gcond Request-reboot_node status) $(gcond Request-reboot_node message)"
check "after reboot: message names the boot ids" \
  grep -qF "request inc-3/reboot_node: node rebooted (boot id boot-one -> boot-two)" <<<"$(gcond Request-reboot_node message)"
wait_for 20 is True gcond Validated status && ok "after reboot: Validated True" \
  || bad "after reboot: Validated $(gcond Validated status) $(gcond Validated message)"
check "after reboot: validation message names reboot_node" grep -q "after reboot_node" <<<"$(gcond Validated message)"
check "after reboot: reboot command not rerun" test "$(lines "$tmp/reboot.marker")" = 1
wait_for 20 is Succeeded gnh '{.status.lastAction.result}' \
  && ok "after reboot: lastAction.result Succeeded" || bad "lastAction: $(gnh '{.status.lastAction}')"
wait_for 20 shipped '"check":"request_reboot_node","passed":true' \
  && ok "probe_result request_reboot_node shipped" || bad "no request_reboot_node shipped"
stop_agent && ok "run 4: SIGTERM, exit 0" || bad "run 4: exit status $?"

# ---- no command configured
start_agent "$tmp/boot2" --reset-gpu-cmd "$tmp/reset.sh"
request run_diagnostics inc-5
wait_for 30 is NotConfigured gcond Request-run_diagnostics reason \
  && ok "no --diagnostics-cmd: NotConfigured ($(gcond Request-run_diagnostics message))" \
  || bad "no command: $(gcond Request-run_diagnostics reason) $(gcond Request-run_diagnostics message)"
wait_for 20 is ActionFailed gcond Validated reason && ok "no command: Validated False, ActionFailed" \
  || bad "no command: Validated $(gcond Validated status) $(gcond Validated reason)"
check "no command: lastAction.result Failed" test "$(gnh '{.status.lastAction.result}')" = Failed
stop_agent && ok "run 5: SIGTERM, exit 0" || bad "run 5: exit status $?"

# ---- killed -9 while a command runs: recorded Interrupted, not run again
touch "$tmp/reset.slow"
start_agent "$tmp/boot2" "${all_cmds[@]}"
request reset_gpu inc-6 1
wait_for 30 is 3 lines "$tmp/reset.marker" || die "slow reset did not start"
kill -9 "$apid"; wait "$apid" 2>/dev/null; apid=""
rm -f "$tmp/reset.slow"
start_agent "$tmp/boot2" "${all_cmds[@]}"
wait_for 30 is Interrupted gcond Request-reset_gpu reason \
  && ok "killed mid-command: Interrupted ($(gcond Request-reset_gpu message))" \
  || bad "after kill -9: $(gcond Request-reset_gpu reason) $(gcond Request-reset_gpu message)"
check "killed mid-command: not run again" test "$(lines "$tmp/reset.marker")" = 3
check "killed mid-command: Validated False, ActionFailed" test "$(gcond Validated reason)" = ActionFailed
stop_agent && ok "run 6: SIGTERM, exit 0" || bad "run 6: exit status $?"

# ---- killed -9 while validating: the validation runs at the next start
touch "$tmp/validate.slow"
start_agent "$tmp/boot2" "${all_cmds[@]}"
v0=$(lines "$tmp/validate.marker")
request run_diagnostics inc-8
wait_for 30 is $((v0 + 1)) lines "$tmp/validate.marker" || die "slow validation did not start"
kill -9 "$apid"; wait "$apid" 2>/dev/null; apid=""
rm -f "$tmp/validate.slow"
start_agent "$tmp/boot2" "${all_cmds[@]}"
wait_for 30 cond_msg_has Validated "after run_diagnostics (request inc-8/run_diagnostics)" \
  && ok "killed while validating: validated at the next start ($(gcond Validated status))" \
  || bad "validation owed: $(gcond Validated status) $(gcond Validated message)"
check "validation owed: logged" grep -q 'msg="validation owed from before the restart"' "$alog"
check "validation owed: diagnostics not rerun" test "$(lines "$tmp/diag.marker")" = 2
check "validation owed: Validated True" test "$(gcond Validated status)" = True
stop_agent && ok "run 7b: SIGTERM, exit 0" || bad "run 7b: exit status $?"

# ---- the state file lost: the conditions name what was done
rm -f "$tmp/spool/requests.state"
start_agent "$tmp/boot2" "${all_cmds[@]}"
wait_for 20 log_count_is 3 'msg="request already reported on GPUNodeHealth' \
  && ok "state file lost: the 3 requests on the object are taken as done" \
  || bad "state file lost: $(grep -c 'already reported' "$alog") of 3 recognised"
check "state file lost: nothing rerun" test \
  "$(lines "$tmp/reset.marker") $(lines "$tmp/reboot.marker") $(lines "$tmp/diag.marker")" = "3 1 2"
check "state file lost: written again" test -s "$tmp/spool/requests.state"
stop_agent && ok "run 7: SIGTERM, exit 0" || bad "run 7: exit status $?"

# ---- a GPU the controller knows only by its bus id (a kernel-log XID):
# GPUHEAL_PCI names it, GPUHEAL_GPU is empty; a bus id that is not one
# (shell text) makes the request invalid, never run
start_agent "$tmp/boot2" "${all_cmds[@]}"
request reset_gpu inc-pci "" 0000:3b:00.0
wait_for 40 is 4 lines "$tmp/reset.marker" || bad "reset by bus id did not run"
check "reset by bus id: GPUHEAL_PCI=0000:3b:00.0, GPUHEAL_GPU empty" test "$(tail -n 1 "$tmp/reset.marker")" = \
  "one|reset_gpu|inc-pci/reset_gpu||inc-pci|$node|0000:3b:00.0"
request reset_gpu inc-badpci "" '3b:00;touch /tmp/x'
wait_for 20 grep -q 'request annotation ignored: not a valid request' "$alog" \
  && ok "a request whose bus id is not one is ignored (logged)" || bad "bad bus id not refused"
check "bad bus id: nothing run" test "$(lines "$tmp/reset.marker")" = 4
stop_agent && ok "run 8: SIGTERM, exit 0" || bad "run 8: exit status $?"

# never cordoned or tainted by the agent
check "node not cordoned, only the test's taint" test \
  "$(k get node "$node" -o 'jsonpath={.spec.unschedulable}|{range .spec.taints[*]}{.key};{end}')" = "|gpuheal.io/test-only;"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
