#!/usr/bin/env bash
# controller_jobs.sh - restart_from_checkpoint of the job kinds beyond
# batch/v1 Jobs, on the local control plane (test/kube): an XID 79 on a node
# of a JobSet's pod -> the JobSet deleted and created again with node
# affinity away from that node in every replicatedJob's pod template and
# the resume ConfigMap; the same for a PyTorchJob (kubeflow.org/v1: Master
# and Worker templates) when its CRD could be fetched (test/kube/fetch-crds).
# Each with a kill -9 of the controller right after the restart, before it
# is recorded: the next start finds it done (noop), restarts nothing twice.
# Also: the controller's Job/JobSet/PyTorchJob informers start from
# discovery (the PyTorchJob CRD is installed while a controller runs: its
# informer starts then, not before), and the incident names the JobSet,
# not its child Job, whose pods carry no JobSet label: the job topology
# comes from the owners (pod -> Job -> JobSet, through the Job informer).
#
# No JobSet controller or training operator runs: this script plays them
# (child Jobs / pods with the labels and ownerReferences they set) and the
# kubelet (bound pods become Running). JobSet's CRD is upstream's
# (test/kube/fetch-crds), the stand-in in test/kube/crds only without go.
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV, GH_SOURCE_DIR (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
SRC=${GH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
K="$GH_KUBE_BIN/kubectl"
NS="ctl-jobs-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-jobs.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--lease-namespace "$NS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --max-unavailable 10 --identity "jobs-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  delete_gnh g1 g2 g3 g4
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

# ---- the CRDs (cluster-wide; left installed, as deploy/crds are) -----------
# JobSet's real CRD (sigs.k8s.io/jobset v0.11.1, test/kube/fetch-crds);
# the structural stand-in in test/kube/crds only when it cannot be fetched
CRDDIR=$("$SRC/test/kube/fetch-crds" 2>"$TMP/fetch.err" | tail -n 1) || CRDDIR=""
if [ -n "$CRDDIR" ] && [ -s "$CRDDIR/jobset.x-k8s.io_jobsets.yaml" ]; then
  "$K" apply --server-side --force-conflicts -f "$CRDDIR/jobset.x-k8s.io_jobsets.yaml" >/dev/null
else
  echo "note: JobSet's CRD could not be fetched: the stand-in"
  "$K" apply --server-side --force-conflicts -f "$SRC/test/kube/crds/jobset.x-k8s.io_jobsets.yaml" >/dev/null
fi || { echo "FAIL: JobSet CRD"; exit 1; }
# polled, not `kubectl wait`: on a busy apiserver the new CRD may have no
# status.conditions yet, which kubectl wait takes for an error
established() { [ "$("$K" get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]; }
wait_for 60 established jobsets.jobset.x-k8s.io ||
  { echo "FAIL: JobSet CRD not established"; exit 1; }
# The PyTorchJob CRD (the training operator's own) is installed only once a
# controller runs, to see discovery pick up a CRD installed later.
HAVE_PYTORCH=0
PT_LATE=1
"$K" get crd pytorchjobs.kubeflow.org >/dev/null 2>&1 && PT_LATE=0
if [ -n "$CRDDIR" ] && [ -s "$CRDDIR/kubeflow.org_pytorchjobs.yaml" ]; then
  HAVE_PYTORCH=1
else
  echo "skip: PyTorchJob (its CRD could not be fetched: $(tail -1 "$TMP/fetch.err"))"
fi
install_pytorch_crd() {
  # 575 kB: too large for client-side apply's last-applied annotation
  "$K" apply --server-side --force-conflicts -f "$CRDDIR/kubeflow.org_pytorchjobs.yaml" >/dev/null &&
    wait_for 60 established pytorchjobs.kubeflow.org
}

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"

# four GPU nodes of our own, tainted so that other tests' pods stay away
for n in g1 g2 g3 g4; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done

# the kubelet's part, every second: bound pods become Running, deleted pods go
start_kubelet

checkpoint() { # job step path
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS/$1"'","step":'"$2"',"path":"'"$3"'","state":"saved"}'
}
obj() { "$K" -n "$NS" get "$@" -o json 2>/dev/null; }
uid_of() { "$K" -n "$NS" get "$1" "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
ann_of() { # kind name key
  obj "$1" "$2" | jq -r --arg k "$3" '.metadata.annotations[$k] // empty'
}
restarted() { [ -n "$(ann_of "$1" "$2" gpuheal.io/restarted-for)" ]; }
gone() { ! "$K" -n "$NS" get "$@" >/dev/null 2>&1; }
# the nodes every pod template of a job keeps away from, one line per
# template: "NODE..." (NotIn matchFields on metadata.name)
avoided() { # kind name jq-path-to-templates
  obj "$1" "$2" | jq -r "[$3] | .[] | [.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]?.matchFields[]? | select(.key == \"metadata.name\" and .operator == \"NotIn\") | .values[]] | join(\",\")"
}
resume_steps() { # kind name jq-path-to-templates
  obj "$1" "$2" | jq -r "[$3] | .[] | .metadata.annotations[\"gpuheal.io/resume-step\"] // \"-\""
}
explain_has() { "$GH_BIN/gpuheal" explain "$1" --db "$DB" 2>/dev/null | grep -q "$2"; }

"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$TMP/policy.yaml"
grep -q "hold: 2s" "$TMP/policy.yaml" || { echo "FAIL: policy"; exit 1; }
DB="sqlite:$TMP/audit.db"

# ---- 1. JobSet --------------------------------------------------------------
# two replicatedJobs (workers: 2 Indexed pods; driver: 1 pod), each pod a
# whole node
cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create JobSet"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, labels: {team: llm}, annotations: {gpuheal.io/checkpoint-prefix: "s3://ckpt/js/"}}
spec:
  failurePolicy: {maxRestarts: 3}
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        completions: 2
        parallelism: 2
        completionMode: Indexed
        backoffLimit: 0
        template:
          metadata: {labels: {app: trainer}}
          spec:
            nodeSelector: {gpuheal.io/pool: "$NS"}
            tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
            restartPolicy: Never
            containers:
            - name: train
              image: trainer:latest
              resources: {limits: {nvidia.com/gpu: "8"}}
  - name: driver
    replicas: 1
    template:
      spec:
        completions: 1
        parallelism: 1
        template:
          metadata: {labels: {app: trainer}}
          spec:
            nodeSelector: {gpuheal.io/pool: "$NS"}
            tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
            restartPolicy: Never
            containers:
            - name: train
              image: trainer:latest
              resources: {limits: {nvidia.com/gpu: "8"}}
EOF
JS_UID=$(uid_of jobset js)
# the JobSet controller's part: one child Job per replicatedJob replica,
# controlled by the JobSet, its pods labelled as JobSet labels them -- but
# the driver's pods carry only what the Job controller adds: their JobSet
# is known from the ownerReferences alone (pod -> Job -> JobSet, through
# the controller's Job informer), and the XID is on the driver's node
child_job() { # rjob completions indexed pod-labels(0/1)
  local mode=NonIndexed; [ "$3" = 1 ] && mode=Indexed
  local plabels='{app: trainer}'; [ "$4" = 1 ] && plabels='*l'
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null
apiVersion: batch/v1
kind: Job
metadata:
  name: js-$1-0
  labels: &l
    jobset.sigs.k8s.io/jobset-name: js
    jobset.sigs.k8s.io/replicatedjob-name: $1
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
  ownerReferences:
  - {apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: js, uid: $JS_UID,
     controller: true, blockOwnerDeletion: true}
spec:
  completions: $2
  parallelism: $2
  completionMode: $mode
  backoffLimit: 0
  template:
    metadata:
      labels: $plabels
    spec:
      nodeSelector: {gpuheal.io/pool: "$NS"}
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      restartPolicy: Never
      containers:
      - name: train
        image: trainer:latest
        resources: {limits: {nvidia.com/gpu: "8"}}
EOF
}
child_job workers 2 1 1 || bad "child Job js-workers-0"
child_job driver 1 0 0 || bad "child Job js-driver-0"
bound_js() {
  [ "$("$K" -n "$NS" get pods -l 'batch.kubernetes.io/job-name in (js-workers-0,js-driver-0)' -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name}{"\n"}{end}' | grep -c .)" -ge 3 ]
}
check "JobSet pods created by the Job controller and bound" wait_for 60 bound_js
kubelet
B=$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=js-driver-0" -o jsonpath='{.items[0].spec.nodeName}')
[ -n "$B" ] || { bad "JobSet not scheduled"; "$K" -n "$NS" get pods -o wide; exit 1; }
echo "JobSet js: driver on $B"

GPUHEAL_TEST_CRASH_AFTER=restart_from_checkpoint start_controller "$DB" || exit 1
check "informer on batch/v1 Jobs (discovery)" wait_for 10 grep -q "event=job_informer kind=Job " "$CTL_LOG"
check "informer on JobSets (discovery)" wait_for 10 grep -q "event=job_informer kind=JobSet " "$CTL_LOG"
if [ $PT_LATE = 1 ]; then
  check "no informer on PyTorchJobs while their CRD is not installed" sh -c "! grep -q 'event=job_informer kind=PyTorchJob ' '$CTL_LOG'"
fi
sleep 1
{ checkpoint js 3000 s3://ckpt/js/step-3000; xid79 "$B" 2; } > "$TMP/js.jsonl"
inject < "$TMP/js.jsonl" || bad "inject"
check "JobSet: $B cordoned" wait_for 20 cordoned "$B"
check "JobSet: controller killed itself right after the restart" wait_for 30 died
stop_controller
check "JobSet: recreated (new UID, restarted-for)" sh -c "[ -n \"\$1\" ] && [ \"\$1\" != '$JS_UID' ]" _ "$(restarted jobset js && uid_of jobset js)"
NEW_UID=$(uid_of jobset js)
RJ='.spec.replicatedJobs[].template.spec.template'
av=$(avoided jobset js "$RJ")
check "JobSet: every replicatedJob's pod template avoids $B ($(echo $av))" \
  [ "$(echo "$av" | grep -cx "$B")" = 2 ]
steps=$(resume_steps jobset js "$RJ")
check "JobSet: resume-step annotation in every pod template ($(echo $steps))" [ "$(echo "$steps" | grep -cx 3000)" = 2 ]
check "JobSet: label and other spec kept" [ "$(obj jobset js | jq -r '.metadata.labels.team, .spec.failurePolicy.maxRestarts, .spec.replicatedJobs[0].template.spec.completions' | tr '\n' ' ')" = 'llm 3 2 ' ]
check "JobSet: restart-count 1" [ "$(ann_of jobset js gpuheal.io/restart-count)" = 1 ]
check "JobSet: resume ConfigMap step 3000" [ "$("$K" -n "$NS" get configmap js-gpuheal-resume -o jsonpath='{.data.step}' 2>/dev/null)" = 3000 ]
check "JobSet: resume ConfigMap path" [ "$("$K" -n "$NS" get configmap js-gpuheal-resume -o jsonpath='{.data.path}' 2>/dev/null)" = s3://ckpt/js/step-3000 ]
check "JobSet: resume ConfigMap names the JobSet" [ "$("$K" -n "$NS" get configmap js-gpuheal-resume -o jsonpath='{.data.job}' 2>/dev/null)" = "$NS/js" ]
check "JobSet: old child Jobs garbage-collected" wait_for 30 gone job js-workers-0 js-driver-0
check "JobSet: old pods gone" wait_for 30 sh -c "[ -z \"\$('$K' -n '$NS' get pods -l 'batch.kubernetes.io/job-name in (js-workers-0,js-driver-0)' -o name)\" ]"
# after kill -9: the next start replays the intent and finds it done
start_controller "$DB" || exit 1
check "JobSet: the replayed restart is a noop" wait_for 20 explain_has "job/$NS/js" "restart_from_checkpoint job/$NS/js: noop"
inject < "$TMP/js.jsonl"
sleep 2
check "JobSet: not restarted twice (same UID)" [ "$(uid_of jobset js)" = "$NEW_UID" ]
check "JobSet: restart-count still 1" [ "$(ann_of jobset js gpuheal.io/restart-count)" = 1 ]
check "JobSet: the incident names the JobSet, not its child Job" explain_has "job/$NS/js" "rule gpu-fell-off-bus chose"
check "JobSet: no incident on the child Job" sh -c "! '$GH_BIN/gpuheal' explain 'job/$NS/js-driver-0' --db '$DB' 2>/dev/null | grep -q 'rule '"
if [ $HAVE_PYTORCH = 1 ]; then
  install_pytorch_crd || { bad "PyTorchJob CRD not installed"; HAVE_PYTORCH=0; }
fi
if [ $HAVE_PYTORCH = 1 ]; then
  # discovery is retried every 30 s
  check "informer on PyTorchJobs once their CRD is installed" wait_for 40 grep -q "event=job_informer kind=PyTorchJob " "$CTL_LOG"
fi
stop_controller

# ---- 2. PyTorchJob ----------------------------------------------------------
if [ $HAVE_PYTORCH = 1 ]; then
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create PyTorchJob"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt, annotations: {gpuheal.io/checkpoint-prefix: /ckpt/pt/}}
spec:
  runPolicy: {backoffLimit: 3}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
          containers:
          - name: pytorch
            image: trainer:latest
            resources: {limits: {nvidia.com/gpu: "8"}}
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
          containers:
          - name: pytorch
            image: trainer:latest
            resources: {limits: {nvidia.com/gpu: "8"}}
EOF
  PT_UID=$(uid_of pytorchjob pt)
  FREE=$(for n in g1 g2 g3 g4; do cordoned "$NS-$n" || echo "$NS-$n"; done)
  PM=$(echo "$FREE" | sed -n 1p); PW=$(echo "$FREE" | sed -n 2p)
  # the training operator's part: one pod per replica, controlled by the
  # PyTorchJob, labelled as it labels them, bound to our nodes
  pt_pod() { # type index node
    local role=""; [ "$1" = master ] && role='training.kubeflow.org/job-role: master'
    cat <<EOF | "$K" -n "$NS" create -f - >/dev/null
apiVersion: v1
kind: Pod
metadata:
  name: pt-$1-$2
  labels:
    training.kubeflow.org/job-name: pt
    training.kubeflow.org/operator-name: pytorchjob-controller
    training.kubeflow.org/replica-type: $1
    training.kubeflow.org/replica-index: "$2"
    $role
  ownerReferences:
  - {apiVersion: kubeflow.org/v1, kind: PyTorchJob, name: pt, uid: $PT_UID,
     controller: true, blockOwnerDeletion: true}
spec:
  nodeName: $3
  tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
  restartPolicy: OnFailure
  containers:
  - name: pytorch
    image: trainer:latest
    resources: {limits: {nvidia.com/gpu: "8"}}
EOF
  }
  pt_pod master 0 "$PM" || bad "pod pt-master-0"
  pt_pod worker 0 "$PW" || bad "pod pt-worker-0"
  kubelet
  echo "PyTorchJob pt: master on $PM, worker on $PW"
  GPUHEAL_TEST_CRASH_AFTER=restart_from_checkpoint start_controller "$DB" || exit 1
  sleep 1
  { checkpoint pt 900 /ckpt/pt/900; xid79 "$PW" 5; } > "$TMP/pt.jsonl"
  inject < "$TMP/pt.jsonl" || bad "inject"
  check "PyTorchJob: $PW cordoned" wait_for 20 cordoned "$PW"
  check "PyTorchJob: controller killed itself right after the restart" wait_for 30 died
  stop_controller
  check "PyTorchJob: recreated (new UID, restarted-for)" sh -c "[ -n \"\$1\" ] && [ \"\$1\" != '$PT_UID' ]" _ "$(restarted pytorchjob pt && uid_of pytorchjob pt)"
  NEW_PT=$(uid_of pytorchjob pt)
  PT='.spec.pytorchReplicaSpecs[].template'
  av=$(avoided pytorchjob pt "$PT")
  check "PyTorchJob: Master and Worker templates avoid $PW ($(echo $av))" [ "$(echo "$av" | grep -cx "$PW")" = 2 ]
  steps=$(resume_steps pytorchjob pt "$PT")
  check "PyTorchJob: resume-step annotation in both templates ($(echo $steps))" [ "$(echo "$steps" | grep -cx 900)" = 2 ]
  check "PyTorchJob: spec kept" [ "$(obj pytorchjob pt | jq -r '.spec.runPolicy.backoffLimit, .spec.pytorchReplicaSpecs.Worker.restartPolicy' | tr '\n' ' ')" = "3 OnFailure " ]
  check "PyTorchJob: resume ConfigMap step 900" [ "$("$K" -n "$NS" get configmap pt-gpuheal-resume -o jsonpath='{.data.step}' 2>/dev/null)" = 900 ]
  check "PyTorchJob: resume ConfigMap path" [ "$("$K" -n "$NS" get configmap pt-gpuheal-resume -o jsonpath='{.data.path}' 2>/dev/null)" = /ckpt/pt/900 ]
  check "PyTorchJob: old pods garbage-collected" wait_for 30 gone pod pt-master-0 pt-worker-0
  start_controller "$DB" || exit 1
  check "PyTorchJob: the replayed restart is a noop" wait_for 20 explain_has "job/$NS/pt" "restart_from_checkpoint job/$NS/pt: noop"
  inject < "$TMP/pt.jsonl"
  sleep 2
  check "PyTorchJob: not restarted twice (same UID)" [ "$(uid_of pytorchjob pt)" = "$NEW_PT" ]
  check "PyTorchJob: restart-count 1" [ "$(ann_of pytorchjob pt gpuheal.io/restart-count)" = 1 ]
  check "PyTorchJob: master untouched node $PM not cordoned" sh -c "! [ \"\$('$K' get node '$PM' -o jsonpath='{.spec.unschedulable}')\" = true ]"
  check "controller stops cleanly" stop_controller
fi

echo "controller_jobs: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ $fail -eq 0 ]
