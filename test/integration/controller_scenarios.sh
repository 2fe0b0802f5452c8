#!/usr/bin/env bash
# controller_scenarios.sh - the controller's gray-failure and safety
# scenarios end to end on the local control plane (test/kube) with the real
# gpuheal-controller: (1) the storm breaker (XID 79 on 5 nodes with
# --storm-nodes 3: the first two isolated, then isolations paused, the trip
# in /metrics, and a validated node still returned to service while the
# breaker holds); (2) a straggler node of a running Indexed Job, worth a
# restart (isolated, job restarted away, diagnostics requested) and, with a
# short remaining run, not worth it (incident recorded, nothing done), once
# from the policy's assume_remaining and once from the job's pods'
# gpuheal.io/expected-end annotation (the Job object's restart-cost used);
# (3) a flapping node (pods of three jobs failing first on it): quarantined
# (cordon + taint), diagnostics requested, kept out of service by a stale
# validation and returned only by a Validated=True set after the isolation.
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them). This script
# plays the kubelet (bound pods become Running; it fails pods by status
# patches). One private SQLite store per controller start.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-scen-$$-$RANDOM"
NODES="s1 s2 s3 s4 s5 s6 a1 a2 a3 a4 a5 b1 b2 b3 f1"
TMP=$(mktemp -d /tmp/gh-ctl-scen.XXXXXX)
CTL_PID=""
KUBELET_PID=""
HB_PID=""
CTL_FLAGS=(--lease-namespace "$NS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --identity "scen-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$KUBELET_PID" ] && kill "$KUBELET_PID" 2>/dev/null
  [ -n "$HB_PID" ] && kill "$HB_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  "$K" -n kube-node-lease delete leases -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  # GPUNodeHealths are named after their nodes (the controller creates them)
  delete_gnh $NODES
  delete_incidents '{.spec.node} {.spec.job}' "$NS"
  rm_tmp
}
trap cleanup EXIT

show_scheduling() {
  echo "--- nodes"; "$K" get nodes -l "gpuheal.io/pool=$NS" -o wide 2>&1 | sed 's/^/  /'
  echo "--- pods"; "$K" -n "$NS" get pods -o wide 2>&1 | sed 's/^/  /'
}
restarted_for() { [ -n "$("$K" -n "$NS" get job "$1" -o jsonpath='{.metadata.annotations.gpuheal\.io/restarted-for}' 2>/dev/null)" ]; }

# a Job of N completions on the nodes of one group; backoffLimit (100) and
# GPUs per pod (8: one pod per node)
mkjob_on() { # name completions group [backoffLimit [gpus]]
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null
apiVersion: batch/v1
kind: Job
metadata: {name: $1}
spec:
  completions: $2
  parallelism: $2
  completionMode: Indexed
  backoffLimit: ${4:-100}
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {gpuheal.io/pool: "$NS", scen-group: "$3"}
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      containers:
      - name: train
        image: trainer:latest
        resources: {limits: {nvidia.com/gpu: "${5:-8}"}}
EOF
}

# the kubelets' node Leases (lib.sh): no node_not_ready in play (a flapping
# count, the node-not-ready rule)
heartbeat() { heartbeat_leases $NODES; }

# node's GPUNodeHealth Validated=True, its lastTransitionTime at OFFSET (date -d)
validate() { # node offset
  "$K" patch gpunodehealth "$1" --subresource=status --type=merge \
    -p '{"status":{"conditions":[{"type":"Validated","status":"True","reason":"ProbePassed","message":"gemm_checksum passed","lastTransitionTime":"'"$(date -u -d "$2" +%FT%TZ)"'"}]}}' >/dev/null
}
# (output read whole before grep -q: under pipefail, a writer cut short by
# grep's early exit would fail the pipe)
explain() { "$GH_BIN/gpuheal" explain "$1" --db "$2" 2>/dev/null; }
explain_has() { local o; o=$(explain "$1" "$2") && grep -q -- "$3" <<< "$o"; } # subject db text
metric_ge1() { local o; o=$(curl -s "http://127.0.0.1:$PORT/metrics") && grep -qE "^$1 [1-9]" <<< "$o"; }
diag_requested() { local o; o=$("$K" get gpunodehealth "$1" -o jsonpath='{.metadata.annotations}' 2>/dev/null) && grep -q request-run_diagnostics <<< "$o"; }
job_uid() { "$K" -n "$NS" get job "$1" -o jsonpath='{.metadata.uid}'; }

# step telemetry: 4 ranks per node of a job, steps 1..S, one second apart,
# ending now; the ranks on node SLOW take FACTOR times the others' time
steps() { # job slow-node factor steps rank-nodes...
  python3 - "$@" <<'EOF'
import sys, datetime, random
job, slow, factor, nsteps = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
nodes = sys.argv[5:]
rnd = random.Random(7)
end = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
t0 = end - datetime.timedelta(seconds=nsteps)
fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
print('{"ts":"%s","source":"telemetry","kind":"checkpoint","job":"%s","step":0,"path":"s3://ckpt/%s/step-0","state":"saved"}'
      % (fmt(t0 - datetime.timedelta(seconds=1)), job, job.replace("/", "-")))
for s in range(1, nsteps + 1):
    for i, n in enumerate(nodes):
        for g in range(4):
            r = i * 4 + g
            ms = 1000 * (1 + rnd.uniform(-0.01, 0.01)) * (factor if n == slow else 1)
            ts = t0 + datetime.timedelta(seconds=s, microseconds=300 * r)
            print('{"ts":"%s","node":"%s","gpu":%d,"source":"telemetry","kind":"step","job":"%s","rank":%d,"step":%d,"step_ms":%.3f}'
                  % (fmt(ts), n, g, job, r, s, ms))
EOF
}

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
heartbeat
( while kill -0 $$ 2>/dev/null; do sleep 5; heartbeat; done ) &
HB_PID=$!
# GPU nodes of our own in four groups (label scen-group), each job on one
for n in $NODES; do mknode "$n" || { echo "FAIL: node $n"; exit 1; }; done
for g in s a b f; do
  "$K" label node $(for n in $NODES; do [ "${n%[0-9]}" = "$g" ] && echo "$NS-$n"; done) \
    "scen-group=$g" >/dev/null || { echo "FAIL: label group $g"; exit 1; }
done
start_kubelet

"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$TMP/policy.yaml"
grep -q "hold: 2s" "$TMP/policy.yaml" || { echo "FAIL: policy"; exit 1; }
# the same policy, but a job's remaining run assumed 5 minutes: a 15%
# straggler then loses 45 s, less than the 10 min restart cost
sed 's/^\(    assume_remaining:\) *24h/\1 5m/' "$TMP/policy.yaml" > "$TMP/policy-short.yaml"
grep -q "assume_remaining: 5m" "$TMP/policy-short.yaml" || { echo "FAIL: short policy"; exit 1; }

# both straggler jobs are placed while the storm phase runs
mkjob_on sa 4 a
mkjob_on sb 3 b

# ---- 1. storm breaker --------------------------------------------------------
DB1="sqlite:$TMP/storm.db"
start_controller "$DB1" --storm-nodes 3 --max-unavailable 10 --max-actions-per-hour 0 || exit 1
for i in 1 2 3 4 5; do xid79 "$NS-s$i" 0; sleep 0.01; done | inject || bad "storm: inject"
check "storm: $NS-s1 isolated" wait_for 20 cordoned "$NS-s1"
check "storm: $NS-s2 isolated" wait_for 20 cordoned "$NS-s2"
check "storm: $NS-s1 tainted" wait_for 10 tainted "$NS-s1"
paused() { explain_has "node/$1" "$DB1" "not acted: storm breaker open (3 or more nodes blamed within 300 s); new isolations paused"; }
for i in 3 4 5; do
  check "storm: explain $NS-s$i says isolations paused" wait_for 20 paused "$NS-s$i"
done
for i in 3 4 5; do check "storm: $NS-s$i not cordoned" uncordoned "$NS-s$i"; done
check "storm: guard trip in /metrics" metric_ge1 'gpuheal_guard_trips_total\{guard="storm"\}'
check "storm: 2 nodes isolated (gauge)" sh -c "curl -s http://127.0.0.1:$PORT/metrics | grep -qx 'gpuheal_nodes_isolated 2'"
# while the breaker holds, a validated node still goes back to service
validate "$NS-s1" '+2 seconds'
check "storm: validated $NS-s1 uncordoned while the breaker holds" wait_for 20 uncordoned "$NS-s1"
check "storm: validated $NS-s1 untainted" wait_for 10 untainted "$NS-s1"
check "storm: explain records release_node" wait_for 10 explain_has "node/$NS-s1" "$DB1" "release_node"
check "storm: $NS-s2 still held" cordoned "$NS-s2"
# the release does not close the breaker: a sixth node is not isolated
xid79 "$NS-s6" 1 | inject
check "storm: after the release $NS-s6 paused too" wait_for 20 paused "$NS-s6"
check "storm: $NS-s6 not cordoned" uncordoned "$NS-s6"
check "storm: controller stops cleanly" stop_controller

# ---- 2. straggler ------------------------------------------------------------
kubelet
wait_for 30 bound sa 4 && wait_for 30 bound sb 3 || { bad "straggler jobs bound"; show_scheduling; exit 1; }
kubelet
A=(); for i in 0 1 2 3; do A+=("$(node_of sa $i)"); done
BN=(); for i in 0 1 2; do BN+=("$(node_of sb $i)"); done
X=${A[1]} Y=${BN[2]}
echo "job sa on ${A[*]} (slow: $X); job sb on ${BN[*]} (slow: $Y)"

# A: worth it (the built-in 24 h remaining): one node's ranks 15% slow
DB2="sqlite:$TMP/straggler.db"
start_controller "$DB2" --max-unavailable 10 || exit 1
steps "$NS/sa" "$X" 1.15 24 "${A[@]}" | inject || bad "straggler A: inject"
strag_a() { explain_has "node/$X" "$DB2" "straggler"; }
check "straggler A: incident recorded for $X" wait_for 20 strag_a
explain "node/$X" "$DB2" > "$TMP/strag-a.txt"
check "straggler A: rule straggler-evict" grep -q "rule straggler-evict chose" "$TMP/strag-a.txt"
check "straggler A: worth restarting" grep -q "exceeds the restart cost" "$TMP/strag-a.txt"
check "straggler A: $X cordoned" wait_for 20 cordoned "$X"
check "straggler A: $X tainted" wait_for 10 tainted "$X"
check "straggler A: job restarted" wait_for 20 restarted_for sa
check "straggler A: diagnostics requested on $X" wait_for 20 diag_requested "$X"
check "straggler A: new pods bound" wait_for 30 bound sa 4
kubelet
newnodes=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=sa -o jsonpath='{range .items[*]}{.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}' | awk 'NF==1{print $1}')
check "straggler A: restarted away from $X ($(echo $newnodes))" sh -c "! echo '$newnodes' | grep -qx '$X'"
check "straggler A: metrics count the straggler" metric_ge1 'gpuheal_incidents_total\{class="straggler"\}'
check "straggler A: controller stops cleanly" stop_controller

# B: not worth it (5 min remaining): recorded, nothing done
DB3="sqlite:$TMP/straggler-short.db"
SB_UID=$(job_uid sb)
start_controller "$DB3" --max-unavailable 10 --policy "$TMP/policy-short.yaml" || exit 1
steps "$NS/sb" "$Y" 1.15 24 "${BN[@]}" | inject || bad "straggler B: inject"
strag_b() { explain_has "node/$Y" "$DB3" "straggler"; }
check "straggler B: incident recorded for $Y" wait_for 20 strag_b
explain "node/$Y" "$DB3" > "$TMP/strag-b.txt"
check "straggler B: explain says not worth restarting" grep -q "does not exceed the restart cost" "$TMP/strag-b.txt"
check "straggler B: rule straggler-not-worth-restart" grep -q "rule straggler-not-worth-restart chose" "$TMP/strag-b.txt"
sleep 2
check "straggler B: $Y not cordoned" uncordoned "$Y"
check "straggler B: $Y not tainted" untainted "$Y"
check "straggler B: job not restarted" sh -c "! '$K' -n '$NS' get job sb -o jsonpath='{.metadata.annotations}' | grep -q gpuheal.io/restarted-for"
check "straggler B: same Job object" [ "$(job_uid sb)" = "$SB_UID" ]
check "straggler B: no action recorded" sh -c "! grep -qE '(isolate_node|restart_from_checkpoint|run_diagnostics) .*: (succeeded|requested)' '$TMP/strag-b.txt'"
check "straggler B: controller stops cleanly" stop_controller

# C: the default policy (24 h assumed), but the job's pods say it ends in
# 5 min (gpuheal.io/expected-end): not worth it; their restart-cost is not
# a duration: a warning naming pod, annotation and value; the Job object's
# own restart-cost (48h) is the one used (the job object wins per figure)
DB4="sqlite:$TMP/straggler-annotated.db"
END=$(date -u -d '+5 minutes' +%FT%TZ)
"$K" -n "$NS" annotate pods -l batch.kubernetes.io/job-name=sb --overwrite \
  "gpuheal.io/expected-end=$END" gpuheal.io/restart-cost=soon >/dev/null || bad "straggler C: annotate"
"$K" -n "$NS" annotate job sb --overwrite gpuheal.io/restart-cost=48h >/dev/null || bad "straggler C: annotate job"
start_controller "$DB4" --max-unavailable 10 || exit 1
wait_for 20 grep -q "event=job_informer kind=Job " "$CTL_LOG" || bad "straggler C: Job informer"
sleep 1
costs_warned() { grep -q 'event=job_costs_invalid job='"$NS"'/sb pod '"$NS"'/sb-.*gpuheal.io/restart-cost "soon": not a duration' "$CTL_LOG"; }
check "straggler C: invalid restart-cost logged (pod, annotation, value)" wait_for 10 costs_warned
check "straggler C: logged once for the job" [ "$(grep -c 'event=job_costs_invalid job='"$NS"'/sb ' "$CTL_LOG")" = 1 ]
steps "$NS/sb" "$Y" 1.15 24 "${BN[@]}" | inject || bad "straggler C: inject"
strag_c() { explain_has "node/$Y" "$DB4" "straggler"; }
check "straggler C: incident recorded for $Y" wait_for 20 strag_c
explain "node/$Y" "$DB4" > "$TMP/strag-c.txt"
check "straggler C: not worth restarting" grep -q "does not exceed the restart cost" "$TMP/strag-c.txt"
check "straggler C: remaining is the job's" grep -qE "over the remaining 0\.0[78] h, does not exceed the restart cost of 48\.0[0-9] h" "$TMP/strag-c.txt"
check "straggler C: remaining from the pods' gpuheal.io/expected-end" grep -q "Job costs: remaining [0-9.]* min (annotation gpuheal.io/expected-end on pod $NS/sb-[^,]*, end ${END%Z}" "$TMP/strag-c.txt"
check "straggler C: from the Job object" grep -q "restart cost 48.0 h (annotation gpuheal.io/restart-cost on Job $NS/sb)" "$TMP/strag-c.txt"
check "straggler C: rule straggler-not-worth-restart" grep -q "rule straggler-not-worth-restart chose" "$TMP/strag-c.txt"
sleep 2
check "straggler C: $Y not cordoned" uncordoned "$Y"
check "straggler C: job not restarted" [ "$(job_uid sb)" = "$SB_UID" ]
check "straggler C: controller stops cleanly" stop_controller

# ---- 3. flapping node --------------------------------------------------------
F="$NS-f1"
"$K" -n "$NS" delete job sa sb --wait=false >/dev/null 2>&1
# a validation from before the trouble: it must not release the node later
cat <<EOF | "$K" create -f - >/dev/null || bad "flapping: GPUNodeHealth"
apiVersion: gpuheal.io/v1alpha1
kind: GPUNodeHealth
metadata: {name: $F, labels: {gpuheal.io/pool: "$NS"}}
spec: {nodeName: $F}
EOF
validate "$F" '-1 hour'
for j in 1 2 3; do mkjob_on "fl$j" 1 f 0 2; done
wait_for 30 bound fl1 1 && wait_for 30 bound fl2 1 && wait_for 30 bound fl3 1 ||
  { bad "flapping: jobs bound"; show_scheduling; exit 1; }
kubelet
running() { [ "$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" -o jsonpath='{.items[0].status.phase}')" = Running ]; }
for j in 1 2 3; do wait_for 20 running "fl$j" || bad "flapping: fl$j running"; done
node_ready() { [ "$("$K" get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
check "flapping: $F still Ready (its Lease renewed: no NotReady in play)" node_ready "$F"
# the kubelet loop stops here: a patch of its, from a list taken before,
# must not turn a failed pod Running again
stop_kubelet
for j in 1 2 3; do wait_for 20 running "fl$j" || bad "flapping: fl$j running after the kubelet stopped"; done
DB4="sqlite:$TMP/flap.db"
start_controller "$DB4" --max-unavailable 10 || exit 1
# the kubelet reports each job's pod failed on $F, one job after the other
for j in 1 2 3; do
  pod=$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=fl$j" -o jsonpath='{.items[0].metadata.name}')
  "$K" -n "$NS" patch pod "$pod" --subresource=status --type=merge -p '{"status":{"phase":"Failed","containerStatuses":[{"name":"train","ready":false,"restartCount":0,"image":"trainer:latest","imageID":"","state":{"terminated":{"exitCode":1,"reason":"Error","message":"RuntimeError: CUDA error: unspecified launch failure","startedAt":"'"$(date -u +%FT%TZ)"'","finishedAt":"'"$(date -u +%FT%TZ)"'"}}}]}}' >/dev/null ||
    bad "flapping: fail pod $pod"
  sleep 0.3
done
phases=$("$K" -n "$NS" get pods -l 'batch.kubernetes.io/job-name in (fl1,fl2,fl3)' -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')
check "flapping: three pods Failed ($(echo $phases))" [ "$(grep -c '^Failed$' <<< "$phases")" = 3 ]
flap() { explain_has "node/$F" "$DB4" "flapping"; }
check "flapping: incident recorded for $F" wait_for 60 flap
explain "node/$F" "$DB4" > "$TMP/flap.txt"
check "flapping: rule flapping-node" grep -q "rule flapping-node chose" "$TMP/flap.txt"
check "flapping: evidence of three jobs" sh -c "grep -c 'CUDA error: unspecified launch failure' '$TMP/flap.txt' | grep -qE '^[3-9]'"
check "flapping: $F cordoned" wait_for 20 cordoned "$F"
check "flapping: $F tainted" wait_for 10 tainted "$F"
check "flapping: diagnostics requested on $F" wait_for 20 diag_requested "$F"
check "flapping: metrics count the flapping node" metric_ge1 'gpuheal_incidents_total\{class="flapping_node"\}'
sleep 3
check "flapping: stale validation does not release $F" cordoned "$F"
validate "$F" '+2 seconds'
check "flapping: validated after isolation -> uncordoned" wait_for 20 uncordoned "$F"
check "flapping: untainted" wait_for 10 untainted "$F"
check "flapping: explain records release_node" wait_for 10 explain_has "node/$F" "$DB4" "release_node"
check "flapping: controller stops cleanly" stop_controller

echo "controller_scenarios: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ $fail -eq 0 ]
