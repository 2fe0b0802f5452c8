#!/usr/bin/env bash
# controller_deferred_reset.sh - a reset that waits for a safe moment
# (issue 14, impact.deferred), on the local control plane (test/kube): a
# pending row remap (failure: false) on GPU 5 of the node of a running
# Job's pod harms nothing, so the engine records it with reset_gpu (and
# drain_node) deferred. Checked as a person reads it:
#  1. the Incident: spec.actions none, spec.impact.deferred lists reset_gpu,
#     status.actions has reset_gpu "Waiting" with the reason, the pod is not
#     evicted, the node not cordoned, no reset requested of the agent;
#     `gpuheal explain` says reset_gpu is waiting for a safe moment;
#  2. the Job's pod completes (phase Succeeded through the Pod informer:
#     pod_succeeded): a follow-up Incident runs reset_gpu of GPU 5, and the
#     request reaches the agent path (GPUNodeHealth annotation
#     gpuheal.io/request-reset_gpu naming the follow-up and GPU 5,
#     status.lastAction Pending); the node is still not cordoned (a drain of
#     a node nothing harmed stays recorded).
# No agent runs: the request is what the controller hands to one.
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
command -v jq >/dev/null || { echo "skip: no jq"; exit 0; }
K="$GH_KUBE_BIN/kubectl"
NS="ctl-defer-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-defer.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "defer-$$" --request-timeout 600s)
CTL_READY=event=policy_rules
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  "$K" -n kube-node-lease delete lease "$NS-g1" --wait=false >/dev/null 2>&1
  delete_gnh g1
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "defer-token-$RANDOM" > "$TMP/token"
mknode g1 || { echo "FAIL: node g1"; exit 1; }
start_kubelet_heartbeat g1
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
mkjob j1 1
wait_for 30 bound j1 1 || { bad "job j1 bound"; exit 1; }
kubelet
X=$(node_of j1 0)
POD=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=j1 -o jsonpath='{.items[0].metadata.name}')
running() { [ "$("$K" -n "$NS" get pod "$POD" -o jsonpath='{.status.phase}')" = Running ]; }
wait_for 30 running || { bad "pod $POD Running"; exit 1; }
echo "job j1 on $X ($POD)"

DB="sqlite:$TMP/audit.db"
start_controller "$DB" || exit 1
explain() { "$GH_BIN/gpuheal" explain "node/$X" --db "$DB" 2>/dev/null; }
incidents() { # the Incidents about X, oldest first: name
  "$K" get incidents -l "gpuheal.io/node=$X" -o json 2>/dev/null |
    jq -r '.items | sort_by(.spec.decidedTime, .metadata.creationTimestamp) | .[].metadata.name'
}
n_incidents() { incidents | grep -c .; }
inc_json() { "$K" get incident "$1" -o json 2>/dev/null; }
remap() {
  echo '{"ts":"'"$(now)"'","node":"'"$X"'","gpu":5,"source":"nvml","kind":"row_remap","pending":true,"failure":false,"correctable":0,"uncorrectable":1,"id":"remap-'"$RANDOM"'"}' | inject
}
gnh_req() { "$K" get gpunodehealths.gpuheal.io "$X" -o json 2>/dev/null | jq -r '.metadata.annotations["gpuheal.io/request-reset_gpu"] // ""'; }

# ---- 1. recorded, waiting
remap
check "an Incident about $X" wait_for 30 is 1 n_incidents
I1=$(incidents | head -n 1)
inc_json "$I1" > "$TMP/i1.json"
check "1: spec.actions is none" is '["none"]' jq -c '.spec.actions' "$TMP/i1.json"
check "1: spec.impact.deferred lists reset_gpu" jq -e '.spec.impact.deferred | index("reset_gpu")' "$TMP/i1.json"
check "1: spec.impact.job none" is none jq -r '.spec.impact.job' "$TMP/i1.json"
waiting_status() {
  inc_json "$I1" | jq -e '[.status.actions[]? | select(.action == "reset_gpu" and .result == "Waiting")] | length == 1' >/dev/null
}
check "1: status.actions: reset_gpu Waiting" wait_for 20 waiting_status
check "1: the Waiting action says why" sh -c "'$K' get incident '$I1' -o json | jq -r '.status.actions[] | select(.action == \"reset_gpu\") | .message' | grep -q 'safe moment'"
explain > "$TMP/explain1.txt"
check "1: explain: reset_gpu waiting for a safe moment" grep -q "reset_gpu node/$X GPU 5: waiting for a safe moment" "$TMP/explain1.txt"
check "1: $POD not evicted" running
check "1: $X not cordoned" uncordoned "$X"
check "1: no reset requested of the agent" is "" gnh_req
# more of the same evidence: still one record
remap
sleep 2
check "1: one Incident after the same evidence again" is 1 n_incidents

# ---- 2. the pod completes: the safe moment
"$K" -n "$NS" patch pod "$POD" --subresource=status --type=merge \
  -p '{"status":{"phase":"Succeeded","containerStatuses":[{"name":"train","ready":false,"restartCount":0,"image":"trainer:latest","imageID":"","state":{"terminated":{"exitCode":0,"reason":"Completed","finishedAt":"'"$(date -u +%FT%TZ)"'"}}}]}}' \
  >/dev/null || bad "pod $POD Succeeded"
check "2: a follow-up Incident about $X" wait_for 30 is 2 n_incidents
I2=$(incidents | tail -n 1)
inc_json "$I2" > "$TMP/i2.json"
check "2: the follow-up runs reset_gpu" jq -e '.spec.actions | index("reset_gpu")' "$TMP/i2.json"
check "2: the follow-up's GPU is 5" is 5 jq -r '.spec.gpu' "$TMP/i2.json"
check "2: the follow-up drains nothing" jq -e '(.spec.actions | index("drain_node")) == null and (.spec.actions | index("isolate_node")) == null' "$TMP/i2.json"
check "2: the follow-up says it is the safe moment" jq -e '.spec.reason | test("safe moment")' "$TMP/i2.json"
req_ok() { gnh_req | jq -e --arg i "$I2" '.action == "reset_gpu" and .incident == $i and .gpu == 5' >/dev/null; }
check "2: reset_gpu of GPU 5 requested on GPUNodeHealth $X" wait_for 30 req_ok
last_action() { "$K" get gpunodehealths.gpuheal.io "$X" -o jsonpath='{.status.lastAction.action}/{.status.lastAction.result}/{.status.lastAction.incident}'; }
check "2: GPUNodeHealth lastAction reset_gpu Pending" is "reset_gpu/Pending/$I2" last_action
requested() { inc_json "$I2" | jq -e '[.status.actions[]? | select(.action == "reset_gpu" and .result == "Running")] | length == 1' >/dev/null; }
check "2: the follow-up's reset_gpu is Running (requested)" wait_for 20 requested
check "2: $X still not cordoned" uncordoned "$X"
explain > "$TMP/explain2.txt"
check "2: explain: reset_gpu requested" grep -q "reset_gpu node/$X: requested" "$TMP/explain2.txt"
check "controller stops cleanly on SIGTERM" stop_controller

echo "controller_deferred_reset: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
