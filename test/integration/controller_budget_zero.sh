#!/usr/bin/env bash
# controller_budget_zero.sh - a node budget of 0 means zero nodes, on the
# local control plane (test/kube) with the real gpuheal-controller (issue
# 15 #3: both read as "no cap" and 7 of 8 faulted nodes were cordoned):
# with --max-unavailable 0 an XID 79 is recorded, the isolation refused by
# the budget and the node left in service; with --max-unavailable 10 and a
# RecoveryPolicy budgets.maxUnavailableNodes: 0 the same; the CRD refuses
# "150%" with a message. RecoveryPolicy objects are cluster-scoped and read
# by every controller: CMakeLists.txt runs this test alone (RUN_SERIAL).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-b0-$$-$RANDOM"
RP="budget0-$NS"
NODES="n1 n2 n3"
TMP=$(mktemp -d /tmp/gh-ctl-b0.XXXXXX)
CTL_PID=""
HB_PID=""
CTL_READY=event=policy_rules
CTL_FLAGS=(--no-leader-election --storm-nodes 0 --max-actions-per-hour 0 --identity "b0-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$HB_PID" ] && kill "$HB_PID" 2>/dev/null
  "$K" delete recoverypolicy "$RP" --wait=false >/dev/null 2>&1
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh $NODES
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

explain_has() { local o; o=$("$GH_BIN/gpuheal" explain "$1" --db "$DB" 2>/dev/null) && grep -qF -- "$2" <<< "$o"; }
rp_accepted() { [ "$("$K" get recoverypolicy "$1" -o jsonpath='{.status.conditions[?(@.type=="Accepted")].status}' 2>/dev/null)" = True ]; }
rp() { # maxUnavailableNodes (YAML)
  cat <<EOF2 | "$K" apply -f - 2>&1 >/dev/null
apiVersion: gpuheal.io/v1alpha1
kind: RecoveryPolicy
metadata: {name: $RP}
spec:
  priority: 10
  budgets: {maxUnavailableNodes: $1}
  rules:
  - name: b0-xid79
    match: {class: gpu_hardware, kinds: [xid], codes: [79]}
    actions: [{action: isolate_node}]
EOF2
}

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
for n in $NODES; do mknode "$n" || { echo "FAIL: node $n"; exit 1; }; done
heartbeat_leases $NODES
( while kill -0 $$ 2>/dev/null; do sleep 10; heartbeat_leases $NODES; done ) &
HB_PID=$!

# 1. --max-unavailable 0: recorded, refused by the budget, left in service
DB="sqlite:$TMP/audit1.db"
start_controller "$DB" --max-unavailable 0 || exit 1
xid79 "$NS-n1" 0 | inject || bad "inject n1"
check "--max-unavailable 0: the isolation refused by the budget" \
  wait_for 30 explain_has "node/$NS-n1" "budget (0 of 0 nodes"
check "--max-unavailable 0: n1 not cordoned" uncordoned "$NS-n1"
check "--max-unavailable 0: n1 not tainted" untainted "$NS-n1"
check "controller stops cleanly" stop_controller

# 2. a RecoveryPolicy budget of 0 tightens --max-unavailable 10
out=$(rp 0) || bad "create $RP: $out"
DB="sqlite:$TMP/audit2.db"
CTL_READY="event=policy_accepted name=$RP"
start_controller "$DB" --max-unavailable 10 || exit 1
check "$RP accepted" wait_for 20 rp_accepted "$RP"
check "log: max_isolated=0 in force" wait_for 10 grep -q "event=guards .*max_isolated=0 " "$CTL_LOG"
xid79 "$NS-n2" 0 | inject || bad "inject n2"
check "maxUnavailableNodes: 0: the isolation refused by the budget" \
  wait_for 30 explain_has "node/$NS-n2" "budget (0 of 0 nodes"
check "maxUnavailableNodes: 0: n2 not cordoned" uncordoned "$NS-n2"
check "controller stops cleanly" stop_controller

# 3. out of range: the API server refuses "150%" with the CRD's message
out=$(rp '"150%"')
check "\"150%\" refused by the CRD: $out" grep -q 'a percentage from "0%" to "100%"' <<< "$out"

echo "controller_budget_zero: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
