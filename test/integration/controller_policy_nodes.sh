#!/usr/bin/env bash
# controller_policy_nodes.sh - RecoveryPolicy spec.nodeSelector on the
# local control plane (test/kube) with the real gpuheal-controller: two
# objects answer XID 79, rack-a (priority 1000, nodeSelector
# gpuheal.io/rack=a: isolate) and rack-b (priority 900, gpuheal.io/rack=b:
# run_diagnostics). A fault on a rack-a node isolates it; on a rack-b node
# the lower-priority rack-b rule decides (diagnostics, no cordon); on a
# node neither selects it is recorded with no action and `gpuheal explain`
# says why; a node labelled rack=a while the controller runs is governed
# by rack-a (labels read live from the Node informer).
# RecoveryPolicy objects are cluster-scoped and read by every controller:
# CMakeLists.txt runs this test alone (RUN_SERIAL).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-pn-$$-$RANDOM"
RPA="rack-a-$NS"
RPB="rack-b-$NS"
NODES="n1 n2 n3 n4"
TMP=$(mktemp -d /tmp/gh-ctl-pn.XXXXXX)
CTL_PID=""
HB_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --storm-nodes 0 --identity "pn-$$")
CTL_READY="event=policy_accepted name=$RPB"
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$HB_PID" ] && kill "$HB_PID" 2>/dev/null
  "$K" delete recoverypolicy "$RPA" "$RPB" --wait=false >/dev/null 2>&1
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh $NODES
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

inject() { "$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$TMP/token" - >/dev/null; }
xid79() { # node
  echo '{"ts":"'"$(now)"'","node":"'"$1"'","gpu":0,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.","id":"xid-'"$1"'-'"$RANDOM"'"}' | inject
}
explain() { "$GH_BIN/gpuheal" explain "$1" --db "$DB" 2>/dev/null; }
explain_has() { local o; o=$(explain "$1") && grep -qF -- "$2" <<< "$o"; }
diag_requested() { local o; o=$("$K" get gpunodehealth "$1" -o jsonpath='{.metadata.annotations}' 2>/dev/null) && grep -q request-run_diagnostics <<< "$o"; }
rp_accepted() { [ "$("$K" get recoverypolicy "$1" -o jsonpath='{.status.conditions[?(@.type=="Accepted")].status}' 2>/dev/null)" = True ]; }
heartbeat() { heartbeat_leases $NODES; }
rp() { # name priority rack rule action
  cat <<EOF2 | "$K" apply -f - >/dev/null
apiVersion: gpuheal.io/v1alpha1
kind: RecoveryPolicy
metadata: {name: $1}
spec:
  priority: $2
  nodeSelector: {gpuheal.io/rack: "$3"}
  rules:
  - name: $4
    match: {class: gpu_hardware, kinds: [xid], codes: [79]}
    actions: [{action: $5}]
EOF2
}

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
for n in $NODES; do mknode "$n" || { echo "FAIL: node $n"; exit 1; }; done
"$K" label node "$NS-n1" gpuheal.io/rack=a >/dev/null && "$K" label node "$NS-n2" gpuheal.io/rack=b >/dev/null ||
  { echo "FAIL: labels"; exit 1; }
heartbeat
( while kill -0 $$ 2>/dev/null; do sleep 10; heartbeat; done ) &
HB_PID=$!

rp "$RPA" 1000 a rack-a-xid79 isolate_node || bad "create $RPA"
rp "$RPB" 900 b rack-b-xid79 run_diagnostics || bad "create $RPB"
DB="sqlite:$TMP/audit.db"
start_controller "$DB" || exit 1
check "$RPA accepted" wait_for 20 rp_accepted "$RPA"
check "$RPB accepted" wait_for 20 rp_accepted "$RPB"

# rack a: rack-a's rule isolates
xid79 "$NS-n1"
check "n1 (rack=a): cordoned" wait_for 20 cordoned "$NS-n1"
check "n1: rule rack-a-xid79 chose" wait_for 10 explain_has "node/$NS-n1" "rule rack-a-xid79 chose"

# rack b: rack-a does not govern it; rack-b's (lower priority) rule decides
xid79 "$NS-n2"
check "n2 (rack=b): rule rack-b-xid79 chose" wait_for 20 explain_has "node/$NS-n2" "rule rack-b-xid79 chose"
check "n2: diagnostics requested" wait_for 20 diag_requested "$NS-n2"
check "n2: not cordoned" uncordoned "$NS-n2"

# no rack: no object governs it; recorded, nothing done, explain says why
xid79 "$NS-n3"
why="Not acted: RecoveryPolicy $RPA governs only nodes with the labels gpuheal.io/rack=a, and node $NS-n3 does not have them"
check "n3 (no rack): explain says no policy governs it" wait_for 20 explain_has "node/$NS-n3" "$why"
check "n3: log incident_not_governed" grep -q "event=incident_not_governed .*node=$NS-n3 rule=rack-a-xid79" "$CTL_LOG"
sleep 2
check "n3: not cordoned" uncordoned "$NS-n3"
check "n3: no diagnostics" sh -c "! '$K' get gpunodehealth '$NS-n3' -o jsonpath='{.metadata.annotations}' 2>/dev/null | grep -q request-run_diagnostics"
check "n3: no action recorded" sh -c "! '$GH_BIN/gpuheal' explain 'node/$NS-n3' --db '$DB' 2>/dev/null | grep -qE '(isolate_node|run_diagnostics) .*: (succeeded|requested)'"

# labelled while the controller runs: governed by rack-a at once
"$K" label node "$NS-n4" gpuheal.io/rack=a >/dev/null || bad "label n4"
sleep 1
xid79 "$NS-n4"
check "n4 (labelled rack=a later): cordoned" wait_for 20 cordoned "$NS-n4"
check "controller stops cleanly" stop_controller

echo "controller_policy_nodes: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
