#!/usr/bin/env bash
# agent_controller_e2e.sh - the agent and the real gpuheal-controller on the
# local control plane (test/kube), through the validation gate: an XID 79 the
# agent ships (--inject) -> the controller isolates the node (cordon + taint)
# and requests reboot_node on its GPUNodeHealth -> the agent runs its reboot
# command once and waits -> the agent starts again with a new boot id,
# records the reboot and validates (Validated=True) -> the controller
# returns the node to service (uncordon, untaint). Nothing is done twice.
set -uo pipefail
agent="$GH_BIN/gpuheal-agent"
ctl="$GH_BIN/gpuheal-controller"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
[ -x "$agent" ] && [ -x "$ctl" ] && [ -x "$GH_BIN/gpuheal" ] || { echo "skip: binaries missing"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
[ -n "${GH_KUBE_ENV:-}" ] && [ -r "$GH_KUBE_ENV" ] || { echo "skip: no GH_KUBE_ENV"; exit 0; }
. "$GH_KUBE_ENV"
export KUBECONFIG
OK_MARK="ok   -" FAIL_MARK="FAIL -" WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
ns="agent-e2e-$$-$RANDOM"
node="$ns-n1"
apid="" cpid=""
cleanup() {
  [ -n "$apid" ] && kill -9 "$apid" 2>/dev/null
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null
  wait 2>/dev/null
  delete_fake_node
  k get incidents -o name 2>/dev/null | while read -r i; do
    [ "$(k get "$i" -o jsonpath='{.spec.node}' 2>/dev/null)" = "$node" ] && k delete "$i" --wait=false >/dev/null 2>&1
  done
  k delete ns "$ns" --wait=false >/dev/null 2>&1
  rm_agent_tmp
}
trap cleanup EXIT
DIE_CTL_LOG="$tmp/ctl.log"

k create ns "$ns" >/dev/null || die "namespace"
fake_node 4 "$ns" || die "cannot create node $node"
k wait --for=condition=Ready "node/$node" --timeout=60s >/dev/null || die "node $node not Ready"

# ---- the controller
echo "e2e-token-$RANDOM" > "$tmp/token"
"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$tmp/policy.yaml"
"$ctl" --kubeconfig "$KUBECONFIG" --listen 127.0.0.1:0 --token-file "$tmp/token" \
  --db "sqlite:$tmp/audit.db" --watch-namespace "$ns" --node-selector "gpuheal.io/pool=$ns" \
  --lease-namespace "$ns" --lease-duration 4s --renew-deadline 3s --retry-period 1s \
  --reorder-window 200ms --policy "$tmp/policy.yaml" --node-cooldown 0s --max-unavailable 1 \
  --identity "agent-e2e-$$" > "$tmp/ctl.out" 2> "$tmp/ctl.log" &
cpid=$!
wait_for 20 grep -qE "^listening on port [0-9]+$" "$tmp/ctl.out" || die "controller did not start"
port=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$tmp/ctl.out" | tail -n 1)
wait_for 20 grep -q "event=leading" "$tmp/ctl.log" || die "controller not leading"
ok "controller leading on port $port"

# ---- the agent
cat > "$tmp/reboot.sh" <<EOF
#!/bin/sh
echo "\$GPUHEAL_REQUEST_ID" >> "$tmp/reboot.marker"
echo "rebooting \$GPUHEAL_NODE"
EOF
cat > "$tmp/validate.sh" <<EOF
#!/bin/sh
echo "\$GPUHEAL_ACTION" >> "$tmp/validate.marker"
echo "4 GPUs pass"
EOF
chmod +x "$tmp"/*.sh
echo "boot-before" > "$tmp/boot1"
echo "boot-after" > "$tmp/boot2"
printf 'gpus 4\n' > "$tmp/nvml.conf"
export GH_NVML_FAKE_CONFIG="$tmp/nvml.conf"
printf '{"ts":"%s","node":"%s","gpu":2,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."}\n' \
  "$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)" "$node" > "$tmp/xid.jsonl"
n=0
start_agent() { # BOOTFILE extra...
  local boot=$1; shift
  n=$((n + 1))
  alog="$tmp/agent$n.log"
  "$agent" --node "$node" --kubeconfig "$KUBECONFIG" --kmsg off --nvml-lib "$fake" \
    --poll-interval 500ms --dcgm off --ib-sysfs-root off --telemetry-socket off \
    --controller "http://127.0.0.1:$port" --token-file "$tmp/token" --batch-linger 20ms \
    --spool-dir "$tmp/spool" --listen 127.0.0.1:0 --health-interval 1s \
    --boot-id-file "$boot" --reboot-cmd "$tmp/reboot.sh" --validate-cmd "$tmp/validate.sh" \
    "$@" 2> "$alog" &
  apid=$!
  wait_for 30 grep -q 'msg="watching GPUNodeHealth for requests"' "$alog" || die "agent $n did not start"
}
stop_agent() { kill -TERM "$apid"; wait "$apid"; local rc=$?; apid=""; return $rc; }
cordoned() { [ "$(k get node "$node" -o jsonpath='{.spec.unschedulable}')" = true ]; }
tainted() { k get node "$node" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect}{" "}{end}' | grep -q "gpuheal.io/unhealthy:NoSchedule"; }
uncordoned() { ! cordoned; }
untainted() { ! tainted; }

start_agent "$tmp/boot1" --inject "$tmp/xid.jsonl"
wait_for 30 cordoned || die "the controller did not cordon $node after the shipped XID 79"
ok "XID 79 shipped by the agent: controller cordoned $node"
check "tainted gpuheal.io/unhealthy:NoSchedule" wait_for 10 tainted
wait_for 30 is RebootPending gcond Request-reboot_node reason \
  || die "no reboot request carried out: $(k get gpunodehealths.gpuheal.io "$node" -o jsonpath='{.metadata.annotations}')"
ok "agent ran the controller's reboot_node request: $(gcond Request-reboot_node message)"
check "reboot command ran once" test "$(lines "$tmp/reboot.marker")" = 1
sleep 2
check "still cordoned while the reboot is pending" cordoned
stop_agent && ok "agent stopped (SIGTERM, exit 0)" || bad "agent exit status $?"

# "after the reboot": a new boot id, no --inject
start_agent "$tmp/boot2"
wait_for 30 is True gcond Validated status || die "not validated: $(gcond Validated message)"
ok "after the reboot: Validated=True ($(gcond Validated message))"
check "Request-reboot_node True" test "$(gcond Request-reboot_node status)" = True
wait_for 30 uncordoned && ok "controller uncordoned $node after Validated=True" || bad "still cordoned"
wait_for 15 untainted && ok "controller removed its taint" \
  || bad "still tainted: $(k get node "$node" -o jsonpath='{.spec.taints}')"
check "the test's own taint stays" grep -q gpuheal.io/test-only <<<"$(k get node "$node" -o jsonpath='{.spec.taints}')"
check "reboot command not rerun" test "$(lines "$tmp/reboot.marker")" = 1
check "validation ran once" test "$(lines "$tmp/validate.marker")" = 1
grep -q "event=validation_passed node=$node" "$tmp/ctl.log" && ok "controller logged validation_passed" \
  || bad "no validation_passed in the controller log"
check "lastAction.result Succeeded" test "$(k get gpunodehealths.gpuheal.io "$node" -o jsonpath='{.status.lastAction.result}')" = Succeeded
stop_agent && ok "agent stopped (SIGTERM, exit 0)" || bad "agent exit status $?"
kill "$cpid"; wait "$cpid"; rc=$?; cpid=""
[ $rc = 0 ] && ok "controller stopped (exit 0)" || bad "controller exit status $rc"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
