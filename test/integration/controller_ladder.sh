#!/usr/bin/env bash
# controller_ladder.sh - the recovery ladder's rungs and fallbacks on the
# local control plane (test/kube), issue 25 §2-3:
#  1. a restart for a fault that excludes no node (XID 94, a contained
#     memory error: restart the application), the Job's pods without a
#     RestartAllContainers rule -> full recreate, the action saying why not
#     in place; the replacement does not avoid the node (none excluded);
#  2. the rule present, no GPUNodeHealth on the pods' node (no agent) ->
#     full recreate, "no gpuheal agent on node";
#  3. the rule present, a GPUNodeHealth but nobody restarts the pods (no
#     reporter) -> the controller's restart annotations on the
#     GPUNodeHealth, then after --in-place-timeout full recreate, "failed:
#     ... not restarted in place in time", the annotations removed;
#  4. in place: this script plays the agent, reporter and kubelet (a pod
#     named by a restart.gpuheal.io/<uid> annotation gets its container's
#     restartCount raised): the Job keeps its UID and pods, the resume
#     ConfigMap is written, the action says "mode in_place", gpuheal
#     explain says the way back;
#  5. replace only what is lost, and the job's budget: an XID 79 (isolate +
#     restart) on the node of index 1 of an Indexed Job with backoffLimit 0
#     and the podFailurePolicy rule that ignores DisruptionTarget: the pod
#     on the excluded node is marked DisruptionTarget (reason
#     DeletionByGpuheal) and deleted, the other restarted in place; the Job
#     controller recreates index 1 elsewhere and the Job does not fail (its
#     backoffLimit 0 would have failed it for one counted pod failure);
#  6. an application fault (a pod's Python exception): retry_in_place
#     restarts the job's running pods in place too.
# No kubelet runs: the script plays it (bound pods Running; a deleted pod
# Failed, then removed, as a kubelet stopping it would leave it).
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV, GH_SOURCE_DIR (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-ladder-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-ladder.XXXXXX)
CTL_PID=""
KUBELET_PID=""
AGENT_PID=""
CTL_FLAGS=(--lease-namespace "$NS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --max-unavailable 10 --max-actions-per-hour 0 --identity "ladder-$$" --in-place-timeout 15s)
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  kill "$KUBELET_PID" "$AGENT_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  delete_gnh g1 g2 g3 g4
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
# a kubelet that runs pods with RestartAllContainers rules declares it
# (status.declaredFeatures); the scheduler places such pods only there
for n in g1 g2 g3 g4; do
  mknode $n && "$K" patch node "$NS-$n" --subresource=status --type=merge \
    -p '{"status":{"declaredFeatures":["RestartAllContainersOnContainerExits"]}}' >/dev/null ||
    { echo "FAIL: node $n"; exit 1; }
done

# the kubelet's part: bound pods Running; a pod being deleted first Failed
# (keeping its conditions, as the kubelet's status does), then removed
ladder_kubelet() {
  "$K" -n "$NS" get pods -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
    while read -r p ph del; do
      if [ -n "$del" ]; then
        [ "$ph" = Failed ] || "$K" -n "$NS" patch pod "$p" --subresource=status --type=merge \
          -p '{"status":{"phase":"Failed"}}' >/dev/null 2>&1
        "$K" -n "$NS" delete pod "$p" --grace-period=0 --force >/dev/null 2>&1
      elif [ "$ph" = Pending ]; then
        "$K" -n "$NS" patch pod "$p" --subresource=status --type=merge \
          -p '{"status":{"phase":"Running","startTime":"'"$(date -u +%FT%TZ)"'","containerStatuses":[{"name":"train","ready":true,"restartCount":0,"image":"trainer:latest","imageID":"","state":{"running":{"startedAt":"'"$(date -u +%FT%TZ)"'"}}}]}}' >/dev/null 2>&1
      fi
    done
  return 0
}
( i=0; while kill -0 $$ 2>/dev/null; do
    [ $((i % 10)) -eq 0 ] && heartbeat_leases g1 g2 g3 g4
    ladder_kubelet; sleep 1; i=$((i + 1))
  done ) &
KUBELET_PID=$!

# the agent's, the reporter's and the kubelet's part of an in-place restart
# (on when $TMP/agent exists): every restart annotation on a GPUNodeHealth
# of the pool raises its pod's restartCount once
play_agent() {
  [ -f "$TMP/agent" ] || return 0
  local n uid pod rc
  for n in g1 g2 g3 g4; do
    "$K" get gpunodehealths.gpuheal.io "$NS-$n" -o json 2>/dev/null |
      jq -r '.metadata.annotations // {} | to_entries[] | select(.key | startswith("restart.gpuheal.io/")) | "\(.key | ltrimstr("restart.gpuheal.io/")) \(.value | fromjson | .pod)"' |
      while read -r uid pod; do
        grep -qx "$uid" "$TMP/restarted" 2>/dev/null && continue
        echo "$uid" >> "$TMP/restarted"
        rc=$("$K" -n "$NS" get pod "${pod#*/}" -o jsonpath='{.status.containerStatuses[0].restartCount}')
        "$K" -n "$NS" patch pod "${pod#*/}" --subresource=status --type=merge -p '{"status":{"containerStatuses":[{"name":"train","ready":true,"restartCount":'"$((${rc:-0} + 1))"',"image":"trainer:latest","imageID":"","state":{"running":{"startedAt":"'"$(date -u +%FT%TZ)"'"}}}]}}' >/dev/null
      done
  done
  return 0
}
( while kill -0 $$ 2>/dev/null; do play_agent; sleep 0.5; done ) &
AGENT_PID=$!

ladjob() { # name with-rule(0/1) [budget: podFailurePolicy, backoffLimit 0]
  local rule="" pfp="" bl=100
  [ "$2" = 1 ] && rule='
        restartPolicy: Never
        restartPolicyRules:
        - action: RestartAllContainers
          exitCodes: {operator: In, values: [88]}'
  [ "${3:-}" = budget ] && bl=0 && pfp='
  podFailurePolicy:
    rules:
    - action: Ignore
      onPodConditions:
      - type: DisruptionTarget'
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null
apiVersion: batch/v1
kind: Job
metadata: {name: $1, annotations: {gpuheal.io/checkpoint-prefix: "s3://ckpt/$1/"}}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  backoffLimit: $bl$pfp
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {gpuheal.io/pool: "$NS"}
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      containers:
      - name: train
        image: trainer:latest$rule
        resources: {limits: {nvidia.com/gpu: "8"}}
EOF
}
uid_of() { "$K" -n "$NS" get job "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
dump() { "$K" -n "$NS" get jobs,pods -o wide 2>&1 | sed 's/^/# /'; "$K" get nodes -l "gpuheal.io/pool=$NS" -o wide 2>&1 | sed 's/^/# /'; }
running() { # job count
  [ "$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}' | grep -c .)" -ge "$2" ]
}
replaced() { # job old-uid
  local u; u=$(uid_of "$1"); [ -n "$u" ] && [ "$u" != "$2" ]
}
checkpoint() { # job step
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS/$1"'","step":'"$2"',"path":"s3://ckpt/'"$1"'/step-'"$2"'","state":"saved"}'
}
xid94() { # node pci-bus
  echo '{"ts":"'"$(now)"'","node":"'"$1"'","source":"kmsg","kind":"xid","code":94,"msg":"NVRM: Xid (PCI:0000:'"$2"':00): 94, pid=4242, Contained memory error.","id":"xid94-'"$1"'-'"$RANDOM"'"}'
}
restart_detail() { # job: the restart action's result and detail, from the audit store
  "$GH_BIN/gpuheal" explain "job/$NS/$1" --db "$DB" 2>/dev/null | grep 'restart_from_checkpoint'
}
gnh_restart_anns() { "$K" get gpunodehealths.gpuheal.io "$NS-$1" -o json 2>/dev/null | jq -r '.metadata.annotations // {} | keys[] | select(startswith("restart.gpuheal.io/"))'; }
mkgnh() { # node suffix: a GPUNodeHealth, as an agent publishes it
  "$K" get gpunodehealths.gpuheal.io "$NS-$1" >/dev/null 2>&1 || "$K" create -f - >/dev/null <<EOF
apiVersion: gpuheal.io/v1alpha1
kind: GPUNodeHealth
metadata: {name: $NS-$1}
spec: {nodeName: $NS-$1}
EOF
}
avoided() { "$K" -n "$NS" get job "$1" -o json | jq -r '[.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]?.matchFields[]? | select(.key == "metadata.name") | .values[]] | join(",")'; }

nopods() { [ -z "$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" -o name 2>/dev/null)" ]; }
drop_job() { # the nodes are few: a case's job goes before the next
  "$K" -n "$NS" delete job "$1" --wait=false >/dev/null 2>&1
  wait_for 60 nopods "$1" || bad "job $1's pods not gone"
}

# XID 94 restarts the job and nothing else, every time (the default rule
# escalates a third one on a node within a day to its isolation)
"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' |
  sed 's/^rules:$/rules:\n  - name: xid94-ladder\n    match: {kind: xid, codes: [94]}\n    actions: [restart_from_checkpoint]\n/' > "$TMP/policy.yaml"
grep -q 'name: xid94-ladder' "$TMP/policy.yaml" || { echo "FAIL: policy"; exit 1; }
DB="sqlite:$TMP/audit.db"
start_controller "$DB" || exit 1

bus=40
fault94() { # job: an XID 94 on the node of its index 0, after a checkpoint
  local node; node=$(node_of "$1" 0)
  bus=$((bus + 1))
  { checkpoint "$1" 100; } | inject
  sleep 1
  xid94 "$node" "$bus" | inject
}

for n in g1 g2 g3 g4; do mkgnh $n; done
touch "$TMP/agent"
# ---- 6 (first). an application fault: retry in place ------------------------
# (first: the agent's part is played from here on; a later application
# fault on a node whose open incident restarted another job is folded into
# that incident by the engine)
ladjob app 1
check "6: job app Running" wait_for 60 running app 2 || dump
U6=$(uid_of app)
P6=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=app,batch.kubernetes.io/job-completion-index=0 -o jsonpath='{.items[0].metadata.name}')
pod_error "$P6" "Traceback (most recent call last): ValueError: bad batch"
retry_detail() { "$GH_BIN/gpuheal" explain "job/$NS/app" --db "$DB" 2>/dev/null | grep 'retry_in_place job'; }
check "6: retry_in_place restarted the running pods in place" wait_for 60 bash -c \
  "$(declare -f retry_detail); GH_BIN='$GH_BIN' NS='$NS' DB='$DB' retry_detail | grep -q 'succeeded.*mode in_place: 2 pods of $NS/app restarted in place'"
check "6: the same Job" is "$U6" uid_of app
"$GH_BIN/gpuheal" explain "job/$NS/app" --db "$DB" 2>&1 | sed 's/^/# /'
grep -E "app|pod_failed" "$CTL_LOG" | tail -5 | cut -c1-250 | sed 's/^/# /'
"$K" -n "$NS" get pod "$P6" -o jsonpath='{.status}' | cut -c1-400 | sed 's/^/# /'
drop_job app

rm -f "$TMP/agent"

# ---- 1. no restart rule: full recreate ------------------------------------
ladjob norule 0
check "1: job norule Running" wait_for 60 running norule 2
U1=$(uid_of norule)
N1=$(node_of norule 0)
fault94 norule
check "1: no RestartAllContainers rule -> the Job recreated" wait_for 60 replaced norule "$U1"
check "1: the action says full_recreate, in place not available: no rule" wait_for 20 bash -c \
  "$(declare -f restart_detail); GH_BIN='$GH_BIN' NS='$NS' DB='$DB' restart_detail norule | grep -q 'mode full_recreate (in_place not available: pod .*no container has a restartPolicyRules entry with action RestartAllContainers'"
check "1: the replacement avoids no node (none excluded; the fault was on $N1)" is "" avoided norule
check "1: explain says the way back and why not faster" bash -c \
  "'$GH_BIN/gpuheal' explain 'job/$NS/norule' --db '$DB' | grep -q 'Way back: full recreate.*not a faster rung: in_place not available'"

drop_job norule

# ---- 2. the rule, no agent (no GPUNodeHealth) -------------------------------
ladjob noagent 1
check "2: job noagent Running" wait_for 60 running noagent 2 || dump
U2=$(uid_of noagent)
for n in g1 g2 g3 g4; do "$K" delete gpunodehealths.gpuheal.io "$NS-$n" >/dev/null 2>&1; done
fault94 noagent
check "2: no agent on the node -> the Job recreated" wait_for 60 replaced noagent "$U2"
check "2: the action says no gpuheal agent on the node" wait_for 20 bash -c \
  "$(declare -f restart_detail); GH_BIN='$GH_BIN' NS='$NS' DB='$DB' restart_detail noagent | grep -q 'in_place not available: no gpuheal agent on node'"

drop_job noagent

# ---- 3. the rule and an agent's GPUNodeHealth, nobody restarts: timeout ----
ladjob silent 1
check "3: job silent Running" wait_for 60 running silent 2 || dump
U3=$(uid_of silent)
for n in g1 g2 g3 g4; do mkgnh $n; done
fault94 silent
any_restart_ann() { local n; for n in g1 g2 g3 g4; do [ -n "$(gnh_restart_anns $n)" ] && return 0; done; return 1; }
check "3: the restart request on a GPUNodeHealth (restart.gpuheal.io/<pod UID>)" \
  wait_for 30 any_restart_ann
check "3: not restarted within --in-place-timeout -> the Job recreated" wait_for 60 replaced silent "$U3"
check "3: the action says in place failed: not restarted in time" wait_for 20 bash -c \
  "$(declare -f restart_detail); GH_BIN='$GH_BIN' NS='$NS' DB='$DB' restart_detail silent | grep -q 'in_place failed: 2 pods not restarted in place in time'"
restart_detail silent | sed 's/^/# /' 
no_restart_ann() { ! any_restart_ann; }
check "3: the restart annotations removed" no_restart_ann

drop_job silent

# ---- 4. in place --------------------------------------------------------------
touch "$TMP/agent"
ladjob fast 1
check "4: job fast Running" wait_for 60 running fast 2 || dump
U4=$(uid_of fast)
P4=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=fast -o jsonpath='{.items[*].metadata.uid}')
fault94 fast
restarts_fast() { "$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=fast -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{"\n"}{end}' | grep -cx 1; }
check "4: both pods' containers restarted in place" wait_for 60 is 2 restarts_fast
check "4: the action says mode in_place" wait_for 20 bash -c \
  "$(declare -f restart_detail); GH_BIN='$GH_BIN' NS='$NS' DB='$DB' restart_detail fast | grep -q 'succeeded.*mode in_place: 2 pods of $NS/fast restarted in place'"
check "4: the same Job (UID kept)" is "$U4" uid_of fast
check "4: the same pods" is "$P4" "$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=fast -o jsonpath='{.items[*].metadata.uid}'
check "4: the resume ConfigMap names step 100 and its path" is "100 s3://ckpt/fast/step-100" \
  "$K" -n "$NS" get configmap fast-gpuheal-resume -o jsonpath='{.data.step} {.data.path}'
"$GH_BIN/gpuheal" explain "job/$NS/fast" --db "$DB" 2>&1 | grep -E 'chose|restart_from' | sed 's/^/# /'
check "4: explain: the way back was in place" bash -c \
  "'$GH_BIN/gpuheal' explain 'job/$NS/fast' --db '$DB' | grep -q 'Way back: in place'"
for n in g1 g2 g3 g4; do
  check "4: no restart annotation left on $NS-$n" is "" gnh_restart_anns $n
done

drop_job fast

# ---- 5. replace only what is lost; the job's budget ---------------------------
ladjob budget 1 budget
check "5: job budget Running" wait_for 60 running budget 2 || dump
U5=$(uid_of budget)
B=$(node_of budget 1)
A=$(node_of budget 0)
OLD1=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=budget,batch.kubernetes.io/job-completion-index=1 -o jsonpath='{.items[0].metadata.name}')
{ checkpoint budget 200; } | inject
sleep 1
xid79 "$B" 3 | inject
check "5: $B isolated" wait_for 30 cordoned "$B"
index1_moved() {
  local n; n=$(node_of budget 1); [ -n "$n" ] && [ "$n" != "$B" ] &&
    running budget 2
}
check "5: index 1 recreated by the Job controller on another node" wait_for 60 index1_moved
check "5: the same Job (UID kept: not recreated whole)" is "$U5" uid_of budget
check "5: index 0 on $A restarted in place" wait_for 30 is 1 "$K" -n "$NS" get pods \
  -l batch.kubernetes.io/job-name=budget,batch.kubernetes.io/job-completion-index=0 -o jsonpath='{.items[0].status.containerStatuses[0].restartCount}'
check "5: the action says mode replace_lost, DisruptionTarget" wait_for 20 bash -c \
  "$(declare -f restart_detail); GH_BIN='$GH_BIN' NS='$NS' DB='$DB' restart_detail budget | grep -q 'mode replace_lost: 1 pod restarted in place .*1 pod of the excluded node deleted.*DisruptionTarget DeletionByGpuheal'"
sleep 3
check "5: the Job did not fail (backoffLimit 0; the deleted pod was not counted)" is "" \
  "$K" -n "$NS" get job budget -o jsonpath='{.status.conditions[?(@.type=="Failed")].status}'
check "5: the Job counts no failed pod" is "" "$K" -n "$NS" get job budget -o jsonpath='{.status.failed}'
check "5: $OLD1 gone" bash -c "! '$K' -n '$NS' get pod '$OLD1' >/dev/null 2>&1"

check "controller exits cleanly" stop_controller
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
