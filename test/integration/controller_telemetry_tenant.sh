#!/usr/bin/env bash
# controller_telemetry_tenant.sh - telemetry cannot harm another tenant's job
# (issue 24 #1), on the local control plane (test/kube) with the real
# gpuheal-controller, its Pod and Job informers and the real kube-apiserver's
# TokenReview. Agents authenticate with tokens bound to agent pods on their
# nodes (as controller_agent_auth.sh). Two jobs:
#   ckpt   one pod on n1, declares gpuheal.io/checkpoint-prefix
#          s3://ckpt/ckpt/; its own checkpoint (step 100) comes from n1;
#   strag  two pods, on n3 and n4, 8 ranks each, steps of ~100 ms from n3
#          and n4.
# The attacks, from n2's agent (n2 runs no pod of either job):
#   - a checkpoint of ckpt at step 200 with path s3://attacker/evil.pkl;
#     then a real XID 79 on n1: ckpt's resume ConfigMap must name step 100
#     and its own path, never the attacker's;
#   - step lines of 32 extra "ranks" of strag at 10 ms each step (the
#     job's real ranks then look 10x slower than its median): n3 and n4
#     must not be cordoned as stragglers.
# A job without a declared prefix (strag) resumes by step, with no path.
# And what a node of the job may still not say: a path outside the declared
# prefix (s3://ckpt/ckpt-evil/..., s3://ckpt/ckpt/../other), a line stamped
# with a pod of another job. Every refusal is a 422 that says why, counted
# in gpuheal_ingest_signals_forged_total.
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
shopt -s lastpipe # post, at the end of a pipe, sets $code here
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-tt-$$-$RANDOM"
NODES="n1 n2 n3 n4"
TMP=$(mktemp -d /tmp/gh-ctl-tt.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_READY=event=policy_rules
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --storm-nodes 0 --max-actions-per-hour 0
  --identity "tt-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$KUBELET_PID" ] && kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh $NODES
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

agent_pod() { # name node
  "$K" -n "$NS" create -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
  serviceAccountName: gh-agent
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers: [{name: agent, image: gpuheal/gpuheal:0.1.0}]
EOF2
}
# job NAME COUNT NODE... [ANNOTATIONS-YAML]: an Indexed Job whose COUNT pods
# (8 GPUs each: one per node) may run only on the nodes named
job() {
  local name=$1 count=$2 nodes=$3 ann=${4:-"{}"}
  "$K" -n "$NS" create -f - >/dev/null <<EOF2
apiVersion: batch/v1
kind: Job
metadata: {name: $name, annotations: $ann}
spec:
  completions: $count
  parallelism: $count
  completionMode: Indexed
  backoffLimit: 100
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$nodes]}]
      containers:
      - name: train
        image: trainer:latest
        resources: {limits: {nvidia.com/gpu: "8"}}
EOF2
}
running() { # job count: that many of its pods Running
  [ "$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" \
        -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}' | grep -c .)" -ge "$2" ]
}
token() { "$K" -n "$NS" create token gh-agent --audience gpuheal --duration 1h \
  --bound-object-kind Pod --bound-object-name "$1"; }
# post TOKEN: stdin to POST /v1/signals; status in $code, body in $TMP/body
post() {
  code=$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 30 -X POST \
    -H "Authorization: Bearer $1" --data-binary @- "http://127.0.0.1:$PORT/v1/signals")
}
body_has() { grep -qF -- "$1" "$TMP/body"; }
ckpt() { # job step path [pod_uid]
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS/$1"'","step":'"$2"',"path":"'"$3"'","state":"saved"'"${4:+,\"pod_uid\":\"$4\"}"'}'
}
steps() { # job step first-rank count step_ms
  local r ts
  ts=$(now)
  for r in $(seq "$3" $(($3 + $4 - 1))); do
    echo '{"ts":"'"$ts"'","source":"telemetry","kind":"step","job":"'"$NS/$1"'","rank":'"$r"',"gpu":'"$((r % 8))"',"step":'"$2"',"step_ms":'"$5"'}'
  done
}
forged() { curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1 == "gpuheal_ingest_signals_forged_total" {print $2}'; }
cm() { "$K" -n "$NS" get configmap ckpt-gpuheal-resume -o "jsonpath={.data.$1}" 2>/dev/null; }
restarted() { [ -n "$("$K" -n "$NS" get job ckpt -o jsonpath='{.metadata.annotations.gpuheal\.io/restarted-for}' 2>/dev/null)" ]; }

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "operator-token-$RANDOM$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
for n in $NODES; do mknode "$n" || { echo "FAIL: node $n"; exit 1; }; done
start_kubelet_heartbeat $NODES
"$K" -n "$NS" create serviceaccount gh-agent >/dev/null || { echo "FAIL: service account"; exit 1; }
for n in $NODES; do agent_pod "agent-$n" "$NS-$n" || { echo "FAIL: agent pod $n"; exit 1; }; done
T1=$(token agent-n1) && T2=$(token agent-n2) && T3=$(token agent-n3) && T4=$(token agent-n4) ||
  { echo "FAIL: tokens"; exit 1; }
job ckpt 1 "$NS-n1" '{gpuheal.io/checkpoint-prefix: "s3://ckpt/ckpt/"}' &&
  job strag 2 "$NS-n3, $NS-n4" || { echo "FAIL: jobs"; exit 1; }
check "ckpt's pod running on n1" wait_for 60 running ckpt 1
check "strag's two pods running" wait_for 60 running strag 2
CKPT_POD_UID=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=ckpt -o jsonpath='{.items[0].metadata.uid}')
S3=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=strag -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' ')
check "strag on n3 and n4 ($S3)" test "$S3" = "$NS-n3 $NS-n4 "

DB="sqlite:$TMP/audit.db"
start_controller "$DB" --agent-service-account "$NS/gh-agent" --agent-token-audience gpuheal || exit 1

# ---- 1. a checkpoint for another tenant's job ------------------------------
# ckpt's own checkpoint, from its node (the controller may still be listing
# pods: a 503 is "retry")
post_ok() { post "$1" < "$2"; [ "$code" = 200 ]; }
ckpt ckpt 100 s3://ckpt/ckpt/step-100 "$CKPT_POD_UID" > "$TMP/own.jsonl"
check "n1's agent: ckpt's own checkpoint step 100 (stamped with ckpt's pod) taken (200)" wait_for 30 post_ok "$T1" "$TMP/own.jsonl"
f0=$(forged)
ckpt ckpt 400 s3://ckpt/ckpt-evil/step-400 | post "$T1"
check "n1's agent: a path beside the prefix (s3://ckpt/ckpt-evil/) refused 422 ($code)" test "$code" = 422
check "the refusal names the prefix" body_has "not under job \\\"$NS/ckpt\\\"'s declared checkpoint prefix \\\"s3://ckpt/ckpt/\\\""
ckpt ckpt 500 s3://ckpt/ckpt/../other/step-500 | post "$T1"
check "n1's agent: a path escaping the prefix (/../) refused 422 ($code)" test "$code" = 422
ckpt ckpt 900 s3://attacker/evil.pkl | post "$T2"
check "n2's agent: a checkpoint of ckpt (no pod there) refused: 422 ($code)" test "$code" = 422
check "the refusal says why" body_has "job \\\"$NS/ckpt\\\" has no pod on node \\\"$NS-n2\\\""
ckpt ckpt 950 s3://attacker/evil.pkl "$CKPT_POD_UID" | post "$T2"
check "n2's agent naming ckpt's pod: refused 422 ($code)" test "$code" = 422
check "the refusal names the pod's node" body_has "is a pod of job \\\"$NS/ckpt\\\" on node \\\"$NS-n1\\\""
f1=$(forged)
echo "gpuheal_ingest_signals_forged_total: $f0 -> $f1"
check "forged lines counted (4 more: $f0 -> $f1)" test "${f1:-0}" -ge $((${f0:-0} + 4))
xid79 "$NS-n1" 0 | post "$T1"
check "n1's agent: XID 79 on n1 taken ($code)" test "$code" = 200
check "n1 cordoned" wait_for 30 cordoned "$NS-n1"
check "ckpt restarted" wait_for 30 restarted
check "the resume ConfigMap is written" wait_for 10 sh -c "[ -n \"\$('$K' -n '$NS' get configmap ckpt-gpuheal-resume -o name 2>/dev/null)\" ]"
echo "resume ConfigMap: step=$(cm step) path=$(cm path)"
check "resume ConfigMap: not the attacker's path ($(cm path))" sh -c "! echo '$(cm path)' | grep -q attacker"
check "resume ConfigMap: ckpt's own checkpoint (step $(cm step), path $(cm path))" \
  test "$(cm step) $(cm path)" = "100 s3://ckpt/ckpt/step-100"
check "the restarted pods: resume-path annotation is ckpt's own" sh -c "'$K' -n '$NS' get job ckpt -o jsonpath='{.spec.template.metadata.annotations.gpuheal\\.io/resume-path}' | grep -qx 's3://ckpt/ckpt/step-100'"

# ---- 2. forged step times for another tenant's ranks ----------------------
# strag's 16 real ranks at ~100 ms from n3 and n4; 32 made-up ranks at
# 10 ms from n2 (the job's median would fall to 10 ms and every real rank be
# 10x slower than it); 40 steps
acc2=0; ref2=0; real=0
for s in $(seq 1 40); do
  steps strag "$s" 0 8 "10$((s % 3))" | post "$T3"; [ "$code" = 200 ] && real=$((real + 1))
  steps strag "$s" 8 8 "10$(((s + 1) % 3))" | post "$T4"; [ "$code" = 200 ] && real=$((real + 1))
  steps strag "$s" 16 32 10 | post "$T2"
  if [ "$code" = 200 ]; then acc2=$((acc2 + 1)); else ref2=$((ref2 + 1)); fi
  [ "$s" = 1 ] && cp "$TMP/body" "$TMP/strag-first.json"
done
echo "strag: real batches taken $real/80; n2's batches taken $acc2, refused $ref2"
check "the real ranks' 80 batches from n3 and n4 taken" test "$real" = 80
check "n2's 40 batches of strag's steps refused" test "$ref2" = 40
check "n2's refusal says strag has no pod there" grep -qF "job \\\"$NS/strag\\\" has no pod on node \\\"$NS-n2\\\"" "$TMP/strag-first.json"
# what the engine makes of it: a straggler verdict would come as the steps
# complete and be acted on within seconds (before the fix: n3 and n4
# cordoned); 30 s without a cordon on any of the three
any_cordoned() { cordoned "$NS-n3" || cordoned "$NS-n4" || cordoned "$NS-n2"; }
not_within() { ! wait_for "$@"; }
check "no node cordoned within 30 s (n3, n4: strag's; n2: the sender)" not_within 30 any_cordoned
echo "gpuheal_ingest_signals_forged_total at the end: $(forged); cordoned of n2 n3 n4: $(for n in n2 n3 n4; do cordoned "$NS-$n" && printf '%s ' "$n"; done)"

"$GH_BIN/gpuheal" explain "job/$NS/strag" --db "$DB" > "$TMP/strag.txt" 2>&1
check "no straggler incident about strag" sh -c "! grep -q straggler '$TMP/strag.txt'"

# ---- 3. a job that declares no checkpoint prefix: its step, never a path ---
ckpt strag 7 s3://ckpt/strag/step-7 | post "$T3"
check "n3's agent: strag's own checkpoint (no prefix declared) taken ($code)" test "$code" = 200
xid79 "$NS-n3" 0 | post "$T3"
check "n3's agent: XID 79 on n3 taken ($code)" test "$code" = 200
scm() { "$K" -n "$NS" get configmap strag-gpuheal-resume -o "go-template={{or (index .data \"$1\") \"\"}}" 2>/dev/null; }
check "strag's resume ConfigMap written" wait_for 30 sh -c "[ -n \"\$('$K' -n '$NS' get configmap strag-gpuheal-resume -o name 2>/dev/null)\" ]"
echo "strag's resume ConfigMap: step=$(scm step) path=$(scm path) path-withheld=$(scm path-withheld)"
check "strag's resume: step 7, no path" test "$(scm step)/$(scm path)" = "7/"
check "strag's resume: why the path is withheld" sh -c "echo '$(scm path-withheld)' | grep -q 'declares no gpuheal.io/checkpoint-prefix'"
check "controller stops cleanly" stop_controller

echo "controller_telemetry_tenant: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
