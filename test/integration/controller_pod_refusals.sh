#!/usr/bin/env bash
# controller_pod_refusals.sh - a Ready node that fails every GPU pod (issue
# 25 section 4), on the local control plane (test/kube), from the pods' own
# status as the kubelet writes it (pods/status), through the controller's
# Pod informer:
#   1. one job's pods refused at admission on g2, again and again
#      (UnexpectedAdmissionError, "requested number of devices unavailable"):
#      g2 is not cordoned, no Incident names it;
#   2. on g3, the pods of three different jobs: two refused at admission
#      ("nvml: GPU is lost"), one whose container the runtime cannot create
#      (Pending, waiting in CreateContainerError, nvidia-container-cli's
#      words): g3 cordoned and tainted gpuheal.io/unhealthy through the
#      policy's rule node-rejects-pods, its Incident's evidence the three
#      pods (names, jobs, reasons, messages), no job restarted; g1 (where
#      the same jobs' pods run) untouched; `gpuheal explain` shows the pods
#      and the rule from the audit store. g3's decision is the barrier for 1;
#   3. a device plugin rollout: on 12 more nodes (r01..r12) pods of two jobs
#      each refused with the same words within seconds ("error reading from
#      server: EOF"): one shared-cause Incident (scope fleet, affectedNodes
#      count 12, no node blamed, nothing taken out), none of the 12 cordoned
#      or tainted or given an Incident of its own; the barrier: three jobs'
#      pods refused on g4 past the engine's hold, decided as g4's own.
# The nodes are fake (no kubelet: the script writes the pods' status, as
# the kubelet would, and renews the nodes' Leases so that they stay Ready).
# Waits poll with deadlines (the machine may be loaded).
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-refuse-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-refuse.XXXXXX)
CTL_PID=""
HB_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "refuse-$$")
CTL_READY=event=nodes_listed
WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$HB_PID" ] && kill "$HB_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in g1 g2 g3 g4 $(rnodes); do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh g1 g2 g3 g4 $(rnodes)
  delete_incidents
  delete_incidents '{.spec.affectedNodes}' "\"$NS-"
  rm_tmp
}
RN=12
rnodes() { for i in $(seq -w 1 "$RN"); do echo "r$i"; done; }
trap cleanup EXIT
die_here() { bad "$*"; echo "--- controller log (tail)"; tail -30 "$CTL_LOG"; exit 1; }

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
for n in g1 g2 g3 g4 $(rnodes); do mknode $n || { echo "FAIL: node $n"; exit 1; }; done
# the nodes' heartbeats only: the pods' status is this script's to write
( while kill -0 $$ 2>/dev/null; do heartbeat_leases g1 g2 g3 g4 $(rnodes); sleep 10; done ) &
HB_PID=$!

start_controller "sqlite:$TMP/audit.db" || die_here "controller start"

# gpu_pod NAME NODE JOB: a pod of JOB (label job-name) asking for a GPU,
# bound to $NS-NODE
gpu_pod() {
  "$K" -n "$NS" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {job-name: $3}}
spec:
  nodeName: $NS-$2
  restartPolicy: Never
  tolerations: [{operator: Exists}]
  containers:
  - name: train
    image: trainer:latest
    resources: {limits: {nvidia.com/gpu: "1"}}
EOF
}
# refuse POD MSG: the kubelet's admission refused it (phase Failed)
refuse() {
  "$K" -n "$NS" patch pod "$1" --subresource=status --type=merge -p \
    '{"status":{"phase":"Failed","reason":"UnexpectedAdmissionError","message":"'"$2"'","startTime":"'"$(date -u +%FT%TZ)"'"}}' >/dev/null
}
# cannot_create POD MSG: the runtime cannot create its container (Pending)
cannot_create() {
  "$K" -n "$NS" patch pod "$1" --subresource=status --type=merge -p \
    '{"status":{"phase":"Pending","containerStatuses":[{"name":"train","ready":false,"restartCount":0,"image":"trainer:latest","imageID":"","state":{"waiting":{"reason":"CreateContainerError","message":"'"$2"'"}}}]}}' >/dev/null
}
running() {
  "$K" -n "$NS" patch pod "$1" --subresource=status --type=merge -p \
    '{"status":{"phase":"Running","startTime":"'"$(date -u +%FT%TZ)"'"}}' >/dev/null
}
UNAVAIL="Pod Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"
LOST="Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = Unknown desc = Unable to retrieve list of available devices: error creating nvml.Device 5: nvml: GPU is lost, which is unexpected"
CLI="failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: driver rpc error: timed out: unknown"

# the jobs run on g1
for j in sweep eval ft; do gpu_pod "$j-g1" g1 "$j" && running "$j-g1" || bad "pod $j-g1"; done

# ---- 1. one job's pods refused on g2, four times ---------------------------
for i in 1 2 3 4; do
  gpu_pod "solo-$i" g2 solo && refuse "solo-$i" "$UNAVAIL" || bad "refuse solo-$i"
done

# ---- 2. three jobs' pods refused on g3 ---------------------------------------
gpu_pod sweep-7 g3 sweep && refuse sweep-7 "$LOST" || bad "refuse sweep-7"
gpu_pod eval-3 g3 eval && refuse eval-3 "$LOST" || bad "refuse eval-3"
gpu_pod ft-worker-1 g3 ft && cannot_create ft-worker-1 "$CLI" || bad "cannot create ft-worker-1"

check "$NS-g3 cordoned" wait_for 120 cordoned "$NS-g3"
check "$NS-g3 tainted gpuheal.io/unhealthy:NoSchedule" wait_for 30 tainted "$NS-g3"
ids() { "$K" get incidents -l "gpuheal.io/node=$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null; }
check "one Incident names $NS-g3" wait_for 30 is 1 sh -c "'$K' get incidents -l gpuheal.io/node=$NS-g3 -o name | grep -c ."
ID=$(ids "$NS-g3" | head -1)
[ -n "$ID" ] || die_here "no Incident for $NS-g3"
echo "  incident: $ID"
field() { "$K" get incident "$ID" -o "jsonpath={$1}"; }
check "its rule is node-rejects-pods ($(field .spec.rule))" is node-rejects-pods field .spec.rule
check "its class is unknown" is unknown field .spec.class
check "it isolates the node" sh -c "'$K' get incident '$ID' -o jsonpath='{.spec.actions}' | grep -q isolate_node"
check "it restarts no job" sh -c "! '$K' get incident '$ID' -o jsonpath='{.spec.actions}' | grep -qE 'restart_from_checkpoint|retry_in_place'"
check "it names no job" is "" field .spec.job
"$K" get incident "$ID" -o jsonpath='{range .spec.evidence[*]}{.pod} {.job} {.reason}{"\n"}{end}' > "$TMP/evidence.txt"
sed 's/^/  evidence: /' "$TMP/evidence.txt"
check "evidence: sweep-7 refused at admission" grep -qx "sweep-7 $NS/sweep UnexpectedAdmissionError" "$TMP/evidence.txt"
check "evidence: eval-3 refused at admission" grep -qx "eval-3 $NS/eval UnexpectedAdmissionError" "$TMP/evidence.txt"
check "evidence: ft-worker-1's container not created" grep -qx "ft-worker-1 $NS/ft CreateContainerError" "$TMP/evidence.txt"
check "evidence: the kubelet's and the runtime's words" sh -c \
  "'$K' get incident '$ID' -o jsonpath='{.spec.evidence[*].msg}' | grep -q 'nvml: GPU is lost' &&
   '$K' get incident '$ID' -o jsonpath='{.spec.evidence[*].msg}' | grep -q 'driver rpc error: timed out'"
field .spec.reason > "$TMP/reason.txt"
echo "  reason: $(cat "$TMP/reason.txt")"
check "its reason: 3 pods of 3 different jobs" grep -q "refused 3 pods of 3 different jobs" "$TMP/reason.txt"
check "its reason names a pod" grep -q "sweep-7 ($NS/sweep)" "$TMP/reason.txt"

# ---- the barrier passed: what must not have happened -------------------------
check "$NS-g2 (one job's pods) not cordoned" uncordoned "$NS-g2"
check "$NS-g2 not tainted" untainted "$NS-g2"
check "no Incident names $NS-g2" is 0 sh -c "'$K' get incidents -l gpuheal.io/node=$NS-g2 -o name | grep -c ."
check "$NS-g1 (the jobs' running pods) untouched" uncordoned "$NS-g1"
job_incidents() { "$K" get incidents -o jsonpath='{range .items[*]}{.spec.job}{"\n"}{end}' | grep -c "^$NS/"; }
check "no Incident blames one of the jobs" is 0 job_incidents

# ---- the audit trail ----------------------------------------------------------
"$GH_BIN/gpuheal" explain "incident/$ID" --db "sqlite:$TMP/audit.db" > "$TMP/explain.txt" 2>&1
sed 's/^/  /' "$TMP/explain.txt" | head -30
check "gpuheal explain: the rule" grep -q "node-rejects-pods" "$TMP/explain.txt"
check "gpuheal explain: the refused pods" sh -c "grep -q 'eval-3' '$TMP/explain.txt' && grep -q 'ft-worker-1' '$TMP/explain.txt'"

# ---- 3. a device plugin rollout: the same refusal on 12 nodes ----------------
EOF_MSG="Allocate failed due to rpc error: code = Unavailable desc = error reading from server: EOF, which is unexpected"
{
  echo "apiVersion: v1"; echo "kind: List"; echo "items:"
  for n in $(rnodes); do
    for p in "embed-$n-a embed" "embed-$n-b embed" "nb-$n notebook"; do
      set -- $p
      echo "- {apiVersion: v1, kind: Pod, metadata: {name: $1, labels: {job-name: $2}}, spec: {nodeName: $NS-$n, restartPolicy: Never, tolerations: [{operator: Exists}], containers: [{name: main, image: 'embed:latest', resources: {limits: {nvidia.com/gpu: '1'}}}]}}"
    done
  done
} > "$TMP/rollout.yaml"
"$K" -n "$NS" create -f "$TMP/rollout.yaml" >/dev/null || bad "rollout pods"
T2=$(date -u +%s)
# as a rollout reaches the nodes together: each node's first pod, then the
# second, then the third (a node's own finding waits for the others anyway:
# docs/engine.md)
for p in embed-%s-a embed-%s-b nb-%s; do
  for n in $(rnodes); do
    # shellcheck disable=SC2059
    pod=$(printf "$p" "$n")
    refuse "$pod" "$EOF_MSG" || bad "refuse $pod"
  done
done
shared_ids() {
  "$K" get incidents -o jsonpath='{range .items[*]}{.metadata.name} {.spec.affectedNodes}{"\n"}{end}' |
    awk -v p="\"$NS-r" 'index($0, p) { print $1 }'
}
shared_count() { shared_ids | grep -c .; }
# the engine decides a shared cause's record once no new node began to show
# it for a minute (docs/engine.md, "Shared causes")
check "one shared-cause Incident for the rollout" wait_for 240 is 1 shared_count
SID=$(shared_ids | head -1)
if [ -n "$SID" ]; then
  sfield() { "$K" get incident "$SID" -o "jsonpath={$1}"; }
  echo "  shared-cause incident: $SID ($(sfield .spec.scope), $(sfield .spec.affectedNodesCount) nodes)"
  check "its scope is fleet" is fleet sfield .spec.scope
  check "affectedNodesCount $RN" is "$RN" sfield .spec.affectedNodesCount
  check "no node blamed" is "" sfield .spec.node
  check "it takes no node out" sh -c "! '$K' get incident '$SID' -o jsonpath='{.spec.actions}' |
    grep -qE 'isolate_node|drain_node|reset_gpu|reboot_node|replace_node'"
fi
# the barrier: three jobs' pods refused on g4 (other words), past the hold
until_s=$((T2 + 20))
wait_for 60 sh -c "[ \$(date -u +%s) -gt $until_s ]"
for p in "bar-a sweep" "bar-b eval" "bar-c ft"; do
  set -- $p
  gpu_pod "$1" g4 "$2" && refuse "$1" "$LOST" || bad "refuse $1"
done
check "$NS-g4 cordoned (the barrier decided)" wait_for 120 cordoned "$NS-g4"
r_out() { for n in $(rnodes); do cordoned "$NS-$n" && echo "$n"; tainted "$NS-$n" && echo "$n"; done | grep -c .; }
check "none of the $RN rollout nodes cordoned or tainted" is 0 r_out
r_own() { for n in $(rnodes); do ids "$NS-$n"; done | grep -c .; }
check "none of them has an Incident of its own" is 0 r_own

check "controller stops cleanly (sanitizers: no leak)" stop_controller
echo "controller_pod_refusals: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
