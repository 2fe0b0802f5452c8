#!/usr/bin/env bash
# controller_kinds.sh - the training-job kinds beyond Job, JobSet and
# PyTorchJob, on the local control plane (test/kube) with their REAL CRDs
# (test/kube/fetch-crds: Trainer v2.2.0, LeaderWorkerSet v0.9.0,
# mpi-operator v0.7.0 from the Go module proxy; Volcano's Job CRD generated
# by controller-gen from volcano.sh/apis' Go types):
#   - TrainJob: an XID 79 on the node of one of its pods (pod -> Job ->
#     JobSet -> TrainJob, through the Job and JobSet informers) -> the
#     TrainJob (not its JobSet) deleted and created again with gpuheal's
#     runtimePatches entry whose every replicated job's pod template avoids
#     the node, and the resume ConfigMap; the old JobSet goes with the old
#     TrainJob (garbage collector) and gpuheal creates no JobSet: that is
#     Trainer's part;
#   - LeaderWorkerSet, MPIJob (v2beta1), Volcano Job: the same restart, the
#     node avoided in every pod template (leader and worker; Launcher and
#     Worker; every task);
#   - retry in place: an application error on an MPIJob's failed worker
#     deletes that pod (for mpi-operator to recreate); on a Volcano Job
#     whose policy restarts the job on PodFailed nothing is deleted: left to
#     Volcano ("skipped").
# No Trainer, JobSet, LWS, MPI or Volcano controller runs: this script
# plays their part (child objects with their ownerReferences and labels)
# and the kubelet's. Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV, GH_SOURCE_DIR.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
SRC=${GH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
K="$GH_KUBE_BIN/kubectl"
NS="ctl-kinds-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-kinds.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--lease-namespace "$NS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --max-unavailable 10 --identity "kinds-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  delete_gnh g1 g2 g3 g4 g5 g6
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

if ! CRDDIR=$("$SRC/test/kube/fetch-crds" 2>"$TMP/fetch.err" | tail -n 1) || [ ! -d "$CRDDIR" ]; then
  echo "skip: the CRDs could not be fetched: $(tail -1 "$TMP/fetch.err")"; exit 77
fi
established() { [ "$("$K" get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]; }
install_crd() { # file crd-name
  "$K" apply --server-side --force-conflicts -f "$CRDDIR/$1" >/dev/null && wait_for 60 established "$2"
}
for f in jobset.x-k8s.io_jobsets.yaml:jobsets.jobset.x-k8s.io \
         trainer.kubeflow.org_trainjobs.yaml:trainjobs.trainer.kubeflow.org \
         trainer.kubeflow.org_trainingruntimes.yaml:trainingruntimes.trainer.kubeflow.org \
         leaderworkerset.x-k8s.io_leaderworkersets.yaml:leaderworkersets.leaderworkerset.x-k8s.io \
         kubeflow.org_mpijobs.yaml:mpijobs.kubeflow.org; do
  install_crd "${f%%:*}" "${f#*:}" || { echo "FAIL: CRD ${f%%:*}"; exit 1; }
done
HAVE_VC=0
if [ -s "$CRDDIR/batch.volcano.sh_jobs.yaml" ]; then
  install_crd batch.volcano.sh_jobs.yaml jobs.batch.volcano.sh && HAVE_VC=1
fi
[ $HAVE_VC = 1 ] || echo "skip: Volcano (no CRD)"

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
for n in g1 g2 g3 g4 g5 g6; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done
# the kubelets' leases too: the script outlasts the node grace period
start_kubelet_heartbeat g1 g2 g3 g4 g5 g6

checkpoint() { # job step path
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS/$1"'","step":'"$2"',"path":"'"$3"'","state":"saved"}'
}
obj() { "$K" -n "$NS" get "$@" -o json 2>/dev/null; }
uid_of() { "$K" -n "$NS" get "$1" "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
ann_of() { obj "$1" "$2" | jq -r --arg k "$3" '.metadata.annotations[$k] // empty'; }
restarted() { [ -n "$(ann_of "$1" "$2" gpuheal.io/restarted-for)" ]; }
gone() { ! "$K" -n "$NS" get "$@" >/dev/null 2>&1; }
avoided() { # kind name jq-path-to-templates
  obj "$1" "$2" | jq -r "[$3] | .[] | [.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]?.matchFields[]? | select(.key == \"metadata.name\" and .operator == \"NotIn\") | .values[]] | join(\",\")"
}
resume_steps() { obj "$1" "$2" | jq -r "[$3] | .[] | .metadata.annotations[\"gpuheal.io/resume-step\"] // \"-\""; }
cm() { "$K" -n "$NS" get configmap "$1-gpuheal-resume" -o jsonpath="{.data.$2}" 2>/dev/null; }
explain_has() { "$GH_BIN/gpuheal" explain "$1" --db "$DB" > "$TMP/explain.txt" 2>&1; grep -q "$2" "$TMP/explain.txt"; }
explain_show() { echo "--- explain $1"; "$GH_BIN/gpuheal" explain "$1" --db "$DB" 2>&1 | grep -E "retry_in_place|restart_from|chose|rule" | head -8; }
free_node() { for n in g1 g2 g3 g4 g5 g6; do cordoned "$NS-$n" || { echo "$NS-$n"; return; }; done; }
POD_SPEC='{"tolerations":[{"key":"gpuheal.io/test-only","operator":"Exists"}],"containers":[{"name":"train","image":"trainer:latest","resources":{"limits":{"nvidia.com/gpu":"8"}}}]}'
# a pod as a kind's controller makes it: owner apiVersion kind name uid, labels (JSON), node
mkpod() { # name api kind owner uid labels-json node [phase]
  "$K" -n "$NS" create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$1","labels":$6,
 "ownerReferences":[{"apiVersion":"$2","kind":"$3","name":"$4","uid":"$5","controller":true,"blockOwnerDeletion":true}]},
 "spec":$(echo "$POD_SPEC" | jq -c --arg n "$7" '. + {nodeName: $n, restartPolicy: "Never"}')}
EOF
}
restart_checks() { # what kind name uid node templates-jq ntemplates step path
  local what=$1 kind=$2 name=$3 old=$4 node=$5 tj=$6 nt=$7 step=$8 path=$9 av steps
  check "$what: $node cordoned" wait_for 30 cordoned "$node"
  check "$what: recreated (new UID, restarted-for)" wait_for 30 sh -c "u=\$('$K' -n '$NS' get $kind $name -o jsonpath='{.metadata.uid}{.metadata.annotations.gpuheal\\.io/restarted-for}' 2>/dev/null); [ -n \"\$u\" ] && [ \"\${u#$old}\" = \"\$u\" ] && [ \"\${#u}\" -gt 36 ]"
  av=$(avoided "$kind" "$name" "$tj")
  check "$what: every pod template avoids $node ($(echo $av))" [ "$(echo "$av" | grep -cx "$node")" = "$nt" ]
  steps=$(resume_steps "$kind" "$name" "$tj")
  check "$what: resume-step in every pod template ($(echo $steps))" [ "$(echo "$steps" | grep -cx "$step")" = "$nt" ]
  check "$what: resume ConfigMap step $step" [ "$(cm "$name" step)" = "$step" ]
  check "$what: resume ConfigMap path" [ "$(cm "$name" path)" = "$path" ]
  check "$what: restart-count 1" [ "$(ann_of "$kind" "$name" gpuheal.io/restart-count)" = 1 ]
}

"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$TMP/policy.yaml"
# one controller and audit DB per section: XIDs on four nodes within
# minutes would read as one shared cause (rule shared-cause), not four faults
section() { stop_controller; DB="sqlite:$TMP/audit-$1.db"; start_controller "$DB" || exit 1; }
section 0
for kd in TrainJob JobSet LeaderWorkerSet MPIJob; do
  check "informer on $kd (discovery)" wait_for 20 grep -q "event=job_informer kind=$kd " "$CTL_LOG"
done
[ $HAVE_VC = 1 ] && check "informer on Volcano Jobs (discovery)" wait_for 20 grep -q "event=job_informer kind=Job.batch.volcano.sh " "$CTL_LOG"

# ---- 1. TrainJob -------------------------------------------------------------
cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create TrainingRuntime"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: torch}
spec:
  mlPolicy: {numNodes: 2}
  template:
    spec:
      replicatedJobs:
      - name: node
        replicas: 1
        template:
          spec:
            template:
              spec:
                serviceAccountName: trainer-sa
                tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
                affinity:
                  nodeAffinity:
                    requiredDuringSchedulingIgnoredDuringExecution:
                      nodeSelectorTerms:
                      - matchExpressions: [{key: gpuheal.io/pool, operator: In, values: ["$NS"]}]
                containers: [{name: node, image: trainer:latest}]
EOF
cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create TrainJob"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj, annotations: {gpuheal.io/checkpoint-prefix: "s3://ckpt/tj/"}}
spec:
  runtimeRef: {name: torch, apiGroup: trainer.kubeflow.org, kind: TrainingRuntime}
  trainer: {numNodes: 2}
EOF
TJ_UID=$(uid_of trainjob tj)
# Trainer's part: the JobSet of the TrainJob's name, from the runtime
cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create the TrainJob's JobSet"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: tj
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: tj, uid: $TJ_UID,
     controller: true, blockOwnerDeletion: true}
spec:
  replicatedJobs:
  - name: node
    replicas: 1
    template:
      spec:
        template:
          spec:
            serviceAccountName: trainer-sa
            restartPolicy: Never
            tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
            affinity:
              nodeAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  nodeSelectorTerms:
                  - matchExpressions: [{key: gpuheal.io/pool, operator: In, values: ["$NS"]}]
            containers: [{name: node, image: trainer:latest}]
EOF
JS_UID=$(uid_of jobset tj)
# JobSet's part: the child Job; its pods carry only the Job controller's labels
"$K" -n "$NS" create -f - >/dev/null <<EOF || bad "create tj-node-0"
apiVersion: batch/v1
kind: Job
metadata:
  name: tj-node-0
  labels: {jobset.sigs.k8s.io/jobset-name: tj}
  ownerReferences:
  - {apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: tj, uid: $JS_UID, controller: true, blockOwnerDeletion: true}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  backoffLimit: 0
  template:
    spec:
      nodeSelector: {gpuheal.io/pool: "$NS"}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: ["$NS-g1", "$NS-g2"]}]
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      restartPolicy: Never
      containers: [{name: node, image: trainer:latest, resources: {limits: {nvidia.com/gpu: "8"}}}]
EOF
bound_tj() { [ "$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=tj-node-0 -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name}{"\n"}{end}' | grep -c .)" -ge 2 ]; }
check "TrainJob: pods created by the Job controller and bound" wait_for 60 bound_tj
B=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=tj-node-0 -o jsonpath='{.items[0].spec.nodeName}')
sleep 2
{ checkpoint tj 500 s3://ckpt/tj/step-500; xid79 "$B" 1; } | inject || bad "inject"
TJ='.spec.runtimePatches[] | select(.manager == "gpuheal.io/controller") | .trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template'
restart_checks TrainJob trainjob tj "$TJ_UID" "$B" "$TJ" 1 500 s3://ckpt/tj/step-500
check "TrainJob: the incident names the TrainJob" wait_for 20 explain_has "job/$NS/tj" "restart_from_checkpoint job/$NS/tj: succeeded"
check "TrainJob: the action result says TrainJob" explain_has "job/$NS/tj" "restarted TrainJob $NS/tj"
check "TrainJob: the patch keeps the runtime's node affinity and ServiceAccount" \
  [ "$(obj trainjob tj | jq -r "[$TJ] | .[0].spec | (.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key) + \" \" + .serviceAccountName")" = "gpuheal.io/pool trainer-sa" ]
check "TrainJob: runtimeRef and trainer kept" [ "$(obj trainjob tj | jq -r '.spec.runtimeRef.name, .spec.trainer.numNodes' | tr '\n' ' ')" = "torch 2 " ]
check "TrainJob: the old JobSet went with the old TrainJob (garbage collector)" wait_for 60 gone jobset tj
check "TrainJob: gpuheal created no JobSet (Trainer's part)" sh -c "sleep 2; ! '$K' -n '$NS' get jobset tj >/dev/null 2>&1"

section 2
# ---- 2. LeaderWorkerSet ------------------------------------------------------
cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create LeaderWorkerSet"
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws, annotations: {gpuheal.io/checkpoint-prefix: "/ckpt/lws/"}}
spec:
  replicas: 1
  startupPolicy: LeaderCreated
  leaderWorkerTemplate:
    size: 2
    restartPolicy: RecreateGroupOnPodRestart
    leaderTemplate: {spec: $POD_SPEC}
    workerTemplate: {spec: $POD_SPEC}
EOF
LWS_UID=$(uid_of leaderworkerset lws)
L=$NS-g3
# LWS's part: the leader StatefulSet's pod (here owned by the LWS-named StatefulSet)
# LWS's part: the leader StatefulSet, whose pod lws-0 the real StatefulSet
# controller makes, labelled as LWS labels it
"$K" -n "$NS" create -f - >/dev/null <<EOF || bad "LWS leader StatefulSet"
{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"lws"},"spec":{"replicas":1,
 "selector":{"matchLabels":{"leaderworkerset.sigs.k8s.io/name":"lws"}},"serviceName":"lws",
 "template":{"metadata":{"labels":{"leaderworkerset.sigs.k8s.io/name":"lws","leaderworkerset.sigs.k8s.io/group-index":"0","leaderworkerset.sigs.k8s.io/worker-index":"0"}},
  "spec":$(echo "$POD_SPEC" | jq -c --arg n "$L" '. + {nodeSelector: {"kubernetes.io/hostname": $n}}')}}}
EOF
lws_bound() { [ "$("$K" -n "$NS" get pod lws-0 -o jsonpath='{.spec.nodeName}' 2>/dev/null)" = "$L" ]; }
check "LeaderWorkerSet: leader pod made by the StatefulSet controller on $L" wait_for 60 lws_bound
sleep 2
{ checkpoint lws 70 /ckpt/lws/70; xid79 "$L" 0; } | inject || bad "inject"
restart_checks LeaderWorkerSet leaderworkerset lws "$LWS_UID" "$L" '.spec.leaderWorkerTemplate.leaderTemplate, .spec.leaderWorkerTemplate.workerTemplate' 2 70 /ckpt/lws/70
check "LeaderWorkerSet: its own restartPolicy kept" [ "$(obj leaderworkerset lws | jq -r .spec.leaderWorkerTemplate.restartPolicy)" = RecreateGroupOnPodRestart ]

section 3
# ---- 3. MPIJob v2beta1 ---------------------------------------------------------
cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create MPIJob"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: mpi, annotations: {gpuheal.io/checkpoint-prefix: "/ckpt/mpi/"}}
spec:
  slotsPerWorker: 8
  runPolicy: {backoffLimit: 4}
  mpiReplicaSpecs:
    Launcher: {replicas: 1, template: {spec: $POD_SPEC}}
    Worker: {replicas: 2, template: {spec: $POD_SPEC}}
EOF
MPI_UID=$(uid_of mpijob mpi)
W1=$NS-g4
W2=$NS-g5
ML='{"training.kubeflow.org/job-name":"mpi","training.kubeflow.org/operator-name":"mpi-operator","training.kubeflow.org/job-role":"worker"}'
mkpod mpi-worker-0 kubeflow.org/v2beta1 MPIJob mpi "$MPI_UID" "$ML" "$W1" || bad "MPI worker 0"
mkpod mpi-worker-1 kubeflow.org/v2beta1 MPIJob mpi "$MPI_UID" "$ML" "$W2" || bad "MPI worker 1"
kubelet
# retry in place: worker 1 failed with an application error
"$K" -n "$NS" patch pod mpi-worker-1 --subresource=status --type=merge -p '{"status":{"phase":"Failed"}}' >/dev/null
pod_error mpi-worker-1 "Traceback (most recent call last): ValueError: bad config" || bad "pod error"
"$K" -n "$NS" patch pod mpi-worker-1 --subresource=status --type=merge -p '{"status":{"phase":"Failed"}}' >/dev/null
check "MPIJob: retry in place deleted the failed worker (mpi-operator recreates it)" wait_for 40 gone pod mpi-worker-1
check "MPIJob: retry_in_place recorded" wait_for 20 explain_has "job/$NS/mpi" "retry_in_place job/$NS/mpi: succeeded"
explain_has "job/$NS/mpi" "retry_in_place job/$NS/mpi: succeeded" || explain_show "job/$NS/mpi"
check "MPIJob: the healthy worker kept" sh -c "'$K' -n '$NS' get pod mpi-worker-0 >/dev/null"
check "MPIJob: no node cordoned for an application error" uncordoned "$W2"
{ checkpoint mpi 40 /ckpt/mpi/40; xid79 "$W1" 3; } | inject || bad "inject"
restart_checks MPIJob mpijob mpi "$MPI_UID" "$W1" '.spec.mpiReplicaSpecs[].template' 2 40 /ckpt/mpi/40
check "MPIJob: runPolicy kept" [ "$(obj mpijob mpi | jq -r .spec.runPolicy.backoffLimit)" = 4 ]

# ---- 4. Volcano Job -----------------------------------------------------------
if [ $HAVE_VC = 1 ]; then
  section 4
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null || bad "create Volcano Job"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vc, annotations: {gpuheal.io/checkpoint-prefix: "/ckpt/vc/"}}
spec:
  minAvailable: 2
  maxRetry: 3
  policies: [{event: PodFailed, action: RestartJob}]
  tasks:
  - {name: master, replicas: 1, template: {spec: $(echo "$POD_SPEC" | jq -c '. + {restartPolicy: "Never"}')}}
  - {name: worker, replicas: 1, template: {spec: $(echo "$POD_SPEC" | jq -c '. + {restartPolicy: "Never"}')}}
EOF
  VC_UID=$(uid_of jobs.batch.volcano.sh vc)
  V1=$NS-g6
  VL='{"volcano.sh/job-name":"vc","volcano.sh/job-namespace":"'"$NS"'","volcano.sh/task-spec":"worker"}'
  mkpod vc-worker-0 batch.volcano.sh/v1alpha1 Job vc "$VC_UID" "$VL" "$V1" || bad "Volcano pod"
  kubelet
  pod_error vc-worker-0 "Traceback (most recent call last): ValueError: bad config" || bad "pod error"
  "$K" -n "$NS" patch pod vc-worker-0 --subresource=status --type=merge -p '{"status":{"phase":"Failed"}}' >/dev/null
  check "Volcano: retry in place left to its PodFailed -> RestartJob policy" wait_for 30 explain_has "job/$NS/vc" "retry_in_place job/$NS/vc: skipped"
  explain_has "job/$NS/vc" "retry_in_place job/$NS/vc: skipped" || explain_show "job/$NS/vc"
  check "Volcano: the failed pod not deleted" sh -c "sleep 2; '$K' -n '$NS' get pod vc-worker-0 >/dev/null"
  "$K" -n "$NS" delete pod vc-worker-0 --wait=false >/dev/null 2>&1
  mkpod vc-worker-1 batch.volcano.sh/v1alpha1 Job vc "$VC_UID" "$VL" "$V1" || bad "Volcano pod 2"
  kubelet
  sleep 2
  { checkpoint vc 12 /ckpt/vc/12; xid79 "$V1" 4; } | inject || bad "inject"
  restart_checks "Volcano Job" jobs.batch.volcano.sh vc "$VC_UID" "$V1" '.spec.tasks[].template' 2 12 /ckpt/vc/12
  check "Volcano Job: its policies and maxRetry kept" [ "$(obj jobs.batch.volcano.sh vc | jq -r '.spec.policies[0].action, .spec.maxRetry' | tr '\n' ' ')" = "RestartJob 3 " ]
  check "Volcano Job: the batch/v1 Job of no such name untouched" gone job.batch vc
fi
check "controller stops cleanly" stop_controller

echo "controller_kinds: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ $fail -eq 0 ]
