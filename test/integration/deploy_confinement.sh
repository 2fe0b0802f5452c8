#!/usr/bin/env bash
# deploy_confinement.sh - issue 24 items 2 and 3 on the real local control
# plane (test/kube), with deploy/rbac applied (names suffixed, as
# deploy_manifests.sh does):
#   2. the controller's ServiceAccount is no way to cluster-admin. As
#      system:serviceaccount:<ns>:gpuheal-controller (impersonation goes
#      through admission with that user's info, so the policies apply):
#      a Job in kube-system running as clusterrole-aggregation-controller is
#      refused by RBAC, and by the admission policy when RBAC is bound there
#      too; in a job namespace a Job that is no replacement, one that names
#      another ServiceAccount than it runs as or one of another namespace,
#      one outside the namespace's allowed list, a JobSet one of whose
#      templates runs as another account than it names, are refused;
#      kube-root-ca.crt (kube-system and the job namespace), a ConfigMap not
#      named <job>-gpuheal-resume and a resume ConfigMap with other keys are
#      refused; on a Node any label but gpuheal.io/replace (the tenant label,
#      the pool label), a foreign annotation or taint, a spec field are
#      refused, the cordon and its own taint admitted. Then the real
#      gpuheal-controller, run with a token of that
#      ServiceAccount, restarts a Job (XID 79 on its node): recreated with
#      its ServiceAccount, resume ConfigMap written, no 403; and, with the
#      namespace allowing other accounts only, it refuses to delete a job
#      whose replacement the policy would refuse (the old job stays).
#   3. the agent cannot relabel its own Node: with a Node-bound token of the
#      agent's ServiceAccount, nodes/status writes of a label (the
#      node-restriction.kubernetes.io/tenant attack), an annotation, the
#      capacity and the kubelet's Ready condition are refused; its own
#      GPUHealthy condition (strategic merge patch, as the agent writes it,
#      and server-side apply) passes.
# Prints ok/FAIL lines and "deploy_confinement: N passed, N failed".
# By hand:  GH_KUBE_DIR=/tmp/c-kube test/kube/up > /tmp/c-env
#           GH_KUBE_ENV=/tmp/c-env GH_KUBECONFIG=/tmp/c-kube/admin.kubeconfig \
#             GH_BIN=build/bin bash test/integration/deploy_confinement.sh
#           test/kube/down /tmp/c-kube
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG=${GH_KUBECONFIG:-$KUBECONFIG}
GH_KUBECONFIG=$KUBECONFIG
SRC=${GH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
deploy=$SRC/deploy
K="$GH_KUBE_BIN/kubectl"
id=$$
SUF=c$id
CNS=gpuheal-system-test-$SUF # the controller's namespace
NS=gh-conf-$id-$RANDOM       # a job namespace (and the node pool)
CTRL=gpuheal-controller-$SUF
AGENT=gpuheal-agent-$SUF
TMP=$(mktemp -d /tmp/gh-confine.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--lease-namespace "$CNS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --identity "confine-$$" --max-unavailable 4)
. "$(dirname "$0")/lib.sh"

render() {
  perl -pe "s{gpuheal-system}{$CNS}g; s{(?<![/\\w.-])gpuheal-(agent|controller)(?!\\w)}{gpuheal-\$1-$SUF}g" "$1"
}

cleanup() {
  stop_controller
  kill "$KUBELET_PID" 2>/dev/null
  {
    for f in "$TMP"/rbac-*.yaml; do [ -f "$f" ] && "$K" delete -f "$f" --ignore-not-found --wait=false; done
    "$K" -n kube-system delete rolebinding "$CTRL-restart-test" --ignore-not-found
    "$K" -n kube-system delete job "evil-$SUF" --ignore-not-found --wait=false
    "$K" -n kube-system delete configmap "x$SUF-gpuheal-resume" --ignore-not-found
    "$K" delete ns "$NS" "$CNS" --wait=false
    "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false
  } >/dev/null 2>&1
  delete_gnh g1 g2 g3
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

# ---- the manifests, for real ------------------------------------------------
render "$deploy/namespace.yaml" | "$K" apply -f - >/dev/null || { echo "FAIL: namespace"; exit 1; }
"$K" create ns "$NS" >/dev/null || { echo "FAIL: job namespace"; exit 1; }
for m in rbac/controller.yaml rbac/controller-restart-policy.yaml rbac/agent.yaml \
  rbac/agent-node-restriction.yaml; do
  f=$TMP/rbac-$(basename "$m")
  if [ ! -f "$deploy/$m" ]; then bad "deploy/$m exists"; continue; fi
  render "$deploy/$m" > "$f"
  out=$("$K" apply -f "$f" 2>&1) && ok "apply $m" || { bad "apply $m"; sed 's/^/     | /' <<< "$out"; }
done
# $NS is a job namespace: what the chart's controller.jobNamespaces makes
"$K" -n "$NS" create rolebinding "$CTRL-restart" --clusterrole "$CTRL-restart" \
  --serviceaccount "$CNS:$CTRL" >/dev/null 2>&1
"$K" -n "$NS" create serviceaccount trainer >/dev/null

AS=(--as "system:serviceaccount:$CNS:$CTRL")
# refused WHAT PATTERN CMD...: CMD fails, its message matches PATTERN
refused() {
  local what=$1 pat=$2 out; shift 2
  if out=$("$@" 2>&1); then
    bad "$what: must be refused, was allowed"; sed 's/^/     | /' <<< "$out" | tail -n 3
  elif grep -qE -- "$pat" <<< "$out"; then
    ok "$what: refused ($(grep -oE -- "$pat" <<< "$out" | head -n1))"
  else
    bad "$what: refused for another reason"; sed 's/^/     | /' <<< "$out" | tail -n 3
  fi
}
job() { # name namespace serviceAccount annotation(or -) restarted-for(or -)
  local ann="" rf=""
  [ "$4" != - ] && ann="metadata: {annotations: {gpuheal.io/service-account: \"$4\"}}"
  [ "$5" != - ] && rf="annotations: {gpuheal.io/restarted-for: \"$5\"}"
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: $2, $rf}
spec:
  template:
    $ann
    spec:
      serviceAccountName: $3
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
EOF
}
as_ctl() { "$K" "${AS[@]}" "$@"; }
ssa_cm() { # namespace name labels-json data-json: server-side apply as the controller
  printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"%s","labels":%s},"data":%s}' \
    "$2" "$1" "$3" "$4" | as_ctl apply --server-side --force-conflicts --field-manager=gpuheal -f -
}
vap_deny='ValidatingAdmissionPolicy .gpuheal-controller[-a-z0-9]*-restart'
rbac_deny='cannot (create|patch|get) resource'

# the policy takes effect once the API server has loaded it: its first denial
policy_on() { ! ssa_cm "$NS" probe-$RANDOM '{}' '{}' > "$TMP/probe.out" 2>&1 && grep -q "$vap_deny" "$TMP/probe.out"; }
WAIT_BY=clock wait_for 60 policy_on || echo "note: the controller's admission policy never denied a probe: $(tail -n1 "$TMP/probe.out")"

echo "# 2. the controller's ServiceAccount"
refused "Job in kube-system as clusterrole-aggregation-controller" "$rbac_deny" \
  as_ctl create -f <(job "evil-$SUF" kube-system clusterrole-aggregation-controller - -)
refused "server-side apply of kube-system/kube-root-ca.crt" "$rbac_deny" \
  ssa_cm kube-system kube-root-ca.crt '{}' '{"ca.crt":"forged"}'
refused "ConfigMap kube-system/x$SUF-gpuheal-resume" "$rbac_deny" \
  ssa_cm kube-system "x$SUF-gpuheal-resume" '{"gpuheal.io/job":"x'"$SUF"'"}' '{"step":"1"}'
# even when someone binds the restart role in kube-system
"$K" -n kube-system create rolebinding "$CTRL-restart-test" --clusterrole "$CTRL-restart" \
  --serviceaccount "$CNS:$CTRL" >/dev/null 2>&1
refused "with the restart role bound in kube-system: a replacement Job there" "$vap_deny.*namespace kube-system" \
  as_ctl create -f <(job "evil-$SUF" kube-system clusterrole-aggregation-controller \
    system:serviceaccount:kube-system:clusterrole-aggregation-controller inc-x)
refused "with the restart role bound in kube-system: kube-system/x$SUF-gpuheal-resume" "$vap_deny.*namespace kube-system" \
  ssa_cm kube-system "x$SUF-gpuheal-resume" '{"gpuheal.io/job":"x'"$SUF"'"}' '{"step":"1"}'
"$K" -n kube-system delete rolebinding "$CTRL-restart-test" >/dev/null 2>&1
refused "Job in job namespace $NS, not a replacement" "$vap_deny.*only replacements" \
  as_ctl create -f <(job evil "$NS" clusterrole-aggregation-controller - -)
refused "replacement naming the ServiceAccount of kube-system" "$vap_deny.*runs as the ServiceAccount" \
  as_ctl create -f <(job evil "$NS" clusterrole-aggregation-controller \
    system:serviceaccount:kube-system:clusterrole-aggregation-controller inc-x)
refused "replacement running as another ServiceAccount than it names" "$vap_deny.*runs as the ServiceAccount" \
  as_ctl create -f <(job evil "$NS" clusterrole-aggregation-controller "system:serviceaccount:$NS:trainer" inc-x)
refused "replacement without the ServiceAccount annotation" "$vap_deny.*runs as the ServiceAccount" \
  as_ctl create -f <(job evil "$NS" trainer - inc-x)
out=$(as_ctl create --dry-run=server -f <(job ok "$NS" trainer "system:serviceaccount:$NS:trainer" inc-x) 2>&1) &&
  ok "a replacement as the ServiceAccount it names, in its namespace: admitted (dry run)" ||
  { bad "a replacement as the ServiceAccount it names: admitted"; sed 's/^/     | /' <<< "$out"; }
# a JobSet: every replicated Job's template (the CRD stand-in of test/kube/crds)
jobset() { # driver-sa driver-claim worker-claim
  cat <<EOF
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: $NS, annotations: {gpuheal.io/restarted-for: inc-x}}
spec:
  replicatedJobs:
  - name: driver
    replicas: 1
    template:
      spec:
        template:
          metadata: {annotations: {gpuheal.io/service-account: "$2"}}
          spec: {serviceAccountName: $1, restartPolicy: Never, containers: [{name: c, image: x}]}
  - name: worker
    replicas: 1
    template:
      spec:
        template:
          metadata: {annotations: {gpuheal.io/service-account: "$3"}}
          spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
EOF
}
if "$K" apply -f "$SRC/test/kube/crds/jobset.x-k8s.io_jobsets.yaml" >/dev/null 2>&1 &&
  WAIT_BY=clock wait_for 30 "$K" get jobsets -n "$NS"; then
  sa=system:serviceaccount:$NS
  out=$(as_ctl create --dry-run=server -f <(jobset trainer "$sa:trainer" "$sa:default") 2>&1) &&
    ok "a JobSet replacement, each template as the account it names: admitted (dry run)" ||
    { bad "a JobSet replacement, each template as the account it names: admitted"; sed 's/^/     | /' <<< "$out"; }
  refused "a JobSet replacement whose worker template runs as another account than it names" "$vap_deny.*runs as the ServiceAccount" \
    as_ctl create --dry-run=server -f <(jobset trainer "$sa:trainer" "$sa:trainer")
else
  bad "the JobSet CRD (test/kube/crds)"
fi
"$K" annotate ns "$NS" gpuheal.io/restart-service-accounts=other >/dev/null
refused "replacement outside the namespace's gpuheal.io/restart-service-accounts" "$vap_deny.*allows restarts only as" \
  as_ctl create --dry-run=server -f <(job ok "$NS" trainer "system:serviceaccount:$NS:trainer" inc-x)
"$K" annotate ns "$NS" gpuheal.io/restart-service-accounts- >/dev/null
refused "server-side apply of $NS/kube-root-ca.crt" "$vap_deny.*only the resume ConfigMaps" \
  ssa_cm "$NS" kube-root-ca.crt '{}' '{"ca.crt":"forged"}'
refused "ConfigMap $NS/app-config" "$vap_deny.*only the resume ConfigMaps" \
  ssa_cm "$NS" app-config '{}' '{"a":"b"}'
refused "ConfigMap $NS/x-gpuheal-resume labelled for another job" "$vap_deny.*only the resume ConfigMaps" \
  ssa_cm "$NS" x-gpuheal-resume '{"gpuheal.io/job":"y"}' '{"step":"1"}'
refused "resume ConfigMap with a key of its own" "$vap_deny.*holds only" \
  ssa_cm "$NS" x-gpuheal-resume '{"gpuheal.io/job":"x"}' '{"step":"1","LD_PRELOAD":"/x.so"}'
out=$(ssa_cm "$NS" x-gpuheal-resume '{"gpuheal.io/job":"x"}' '{"step":"1","path":"s3://c/x","job":"'"$NS"'/x","incident":"i","restart-count":"1"}' 2>&1) &&
  ok "a resume ConfigMap as the controller writes it: admitted" ||
  { bad "a resume ConfigMap as the controller writes it: admitted"; sed 's/^/     | /' <<< "$out"; }

# Nodes: only the cordon, its taint, gpuheal's label and annotations
for n in g1 g2 g3; do mknode $n || bad "node $n"; done
N1=$NS-g1
refused "controller: label $N1 node-restriction.kubernetes.io/tenant=secret-team" "$vap_deny.*only the label gpuheal.io/replace" \
  as_ctl label node "$N1" node-restriction.kubernetes.io/tenant=secret-team
refused "controller: remove $N1's gpuheal.io/pool label (its node selector)" "$vap_deny.*only the label gpuheal.io/replace" \
  as_ctl label node "$N1" gpuheal.io/pool-
refused "controller: annotate $N1 outside gpuheal.io/" "$vap_deny.*only the label gpuheal.io/replace" \
  as_ctl annotate node "$N1" example.com/owner=x
refused "controller: another taint on $N1" "$vap_deny.*only spec.unschedulable" \
  as_ctl taint node "$N1" example.com/evil=x:NoExecute
refused "controller: remove $N1's other taint" "$vap_deny.*only spec.unschedulable" \
  as_ctl taint node "$N1" gpuheal.io/test-only-
refused "controller: $N1's podCIDR" "$vap_deny.*only spec.unschedulable" \
  as_ctl patch node "$N1" --type=merge -p '{"spec":{"podCIDR":"10.9.0.0/24"}}'
out=$(as_ctl patch node "$N1" --type=merge -p '{"spec":{"unschedulable":true,"taints":[{"key":"gpuheal.io/test-only","effect":"NoSchedule"},{"key":"gpuheal.io/unhealthy","value":"true","effect":"NoSchedule"}]},"metadata":{"labels":{"gpuheal.io/replace":"true"},"annotations":{"gpuheal.io/cordoned-by":"inc-x"}}}' 2>&1) &&
  as_ctl patch node "$N1" --type=json -p '[{"op":"remove","path":"/spec/unschedulable"},{"op":"remove","path":"/spec/taints/1"},{"op":"remove","path":"/metadata/labels/gpuheal.io~1replace"},{"op":"remove","path":"/metadata/annotations/gpuheal.io~1cordoned-by"}]' > "$TMP/undo.out" 2>&1 &&
  ok "controller: cordon, its taint, gpuheal.io/replace and gpuheal.io/* annotations, and back: admitted" ||
  { bad "controller: cordon, its taint, gpuheal's label and annotation: admitted"; sed 's/^/     | /' <<< "$out" "$TMP/undo.out"; }

# ---- the real controller with its ServiceAccount's token ---------------------
server=$("$K" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
"$K" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > "$TMP/ca.crt"
tok=$("$K" -n "$CNS" create token "$CTRL" --duration 1h 2>/dev/null)
cat > "$TMP/ctl.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority: "$TMP/ca.crt"}}]
users: [{name: u, user: {token: "$tok"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$TMP/policy.yaml"
start_kubelet
tjob() { # name: an Indexed Job of 1 pod running as trainer
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null
apiVersion: batch/v1
kind: Job
metadata: {name: $1}
spec:
  completions: 1
  parallelism: 1
  completionMode: Indexed
  backoffLimit: 100
  template:
    spec:
      serviceAccountName: trainer
      restartPolicy: Never
      nodeSelector: {gpuheal.io/pool: "$NS"}
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      containers: [{name: train, image: trainer:latest, resources: {limits: {nvidia.com/gpu: "8"}}}]
EOF
}
restarted_for() { [ -n "$("$K" -n "$NS" get job "$1" -o jsonpath='{.metadata.annotations.gpuheal\.io/restarted-for}' 2>/dev/null)" ]; }
tjob llm
wait_for 60 bound llm 1 || bad "job llm bound"
B=$(node_of llm 0)
DB="sqlite:$TMP/audit.db"
if GH_KUBECONFIG=$TMP/ctl.kubeconfig start_controller "$DB"; then
  ok "controller started with its ServiceAccount's token"
  {
    echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS"'/llm","step":700,"path":"s3://ckpt/llm/step-700","state":"saved"}'
    xid79 "$B" 3
  } | inject || bad "inject"
  check "as its ServiceAccount: $B cordoned" wait_for 60 cordoned "$B"
  check "as its ServiceAccount: Job llm restarted" wait_for 60 restarted_for llm
  sa=$("$K" -n "$NS" get job llm -o jsonpath='{.spec.template.spec.serviceAccountName}' 2>/dev/null)
  claim=$("$K" -n "$NS" get job llm -o jsonpath='{.spec.template.metadata.annotations.gpuheal\.io/service-account}' 2>/dev/null)
  check "the replacement runs as trainer ($sa), its template says so ($claim)" \
    [ "$sa" = trainer -a "$claim" = "system:serviceaccount:$NS:trainer" ]
  cnt=$("$K" -n "$NS" get job llm -o jsonpath='{.metadata.annotations.gpuheal\.io/restart-count}' 2>/dev/null)
  check "restarted once (restart-count $cnt)" [ "$cnt" = 1 ]
  step=$("$K" -n "$NS" get configmap llm-gpuheal-resume -o jsonpath='{.data.step}' 2>/dev/null)
  check "resume ConfigMap written by the controller (step $step)" [ "$step" = 700 ]
  check "no 403 in the controller's log" sh -c "! grep -qiE 'forbidden|HTTP 403|(code|status|http)=403' '$CTL_LOG'"

  # a replacement the policy would refuse: the old job must stay
  tjob llm2
  wait_for 60 bound llm2 1 || bad "job llm2 bound"
  B2=$(node_of llm2 0)
  uid=$("$K" -n "$NS" get job llm2 -o jsonpath='{.metadata.uid}')
  "$K" annotate ns "$NS" gpuheal.io/restart-service-accounts=other >/dev/null
  xid79 "$B2" 5 | inject || bad "inject"
  said_refused() { "$GH_BIN/gpuheal" explain "job/$NS/llm2" --db "$DB" 2>/dev/null | grep -q "would be refused"; }
  check "refused replacement: the controller says so (would be refused)" wait_for 60 said_refused
  "$GH_BIN/gpuheal" explain "job/$NS/llm2" --db "$DB" 2>/dev/null | grep -m1 "would be refused" | sed 's/^/     | /' 
  check "refused replacement: the old Job llm2 is left running (same uid)" \
    [ "$("$K" -n "$NS" get job llm2 -o jsonpath='{.metadata.uid}' 2>/dev/null)" = "$uid" ]
  "$K" annotate ns "$NS" gpuheal.io/restart-service-accounts- >/dev/null
else
  bad "controller started with its ServiceAccount's token"
fi
stop_controller

# ---- 3. the agent on its own Node --------------------------------------------
echo "# 3. the agent's own Node"
NODE=$NS-g3
tokn=$("$K" -n "$CNS" create token "$AGENT" --bound-object-kind Node --bound-object-name "$NODE" 2>/dev/null)
as_agent() { "$K" --kubeconfig=/dev/null --server="$server" --certificate-authority="$TMP/ca.crt" --token="$tokn" "$@"; }
agent_vap='ValidatingAdmissionPolicy .gpuheal-agent[-a-z0-9]*-own-node'
cond() { # type status message
  printf '{"status":{"conditions":[{"type":"%s","status":"%s","reason":"R","message":"%s","lastHeartbeatTime":"%s","lastTransitionTime":"%s"}]}}' \
    "$1" "$2" "$3" "$(date -u +%FT%TZ)" "$(date -u +%FT%TZ)"
}
stpatch() { as_agent patch node "$NODE" --subresource=status "$@"; }
# wait for the policy: its first denial of another node
other_denied() { ! as_agent patch node "$NS-g1" --subresource=status --type=strategic -p "$(cond GPUHealthy True x)" > "$TMP/probe.out" 2>&1 && grep -q "own node" "$TMP/probe.out"; }
WAIT_BY=clock wait_for 60 other_denied || echo "note: the agent's policy never denied another node: $(tail -n1 "$TMP/probe.out")"
refused "agent: label node-restriction.kubernetes.io/tenant=secret-team via nodes/status" "$agent_vap.*metadata" \
  stpatch --type=merge -p '{"metadata":{"labels":{"node-restriction.kubernetes.io/tenant":"secret-team"}}}'
refused "agent: remove the node's gpuheal.io/pool label via nodes/status" "$agent_vap.*metadata" \
  stpatch --type=json -p '[{"op":"remove","path":"/metadata/labels/gpuheal.io~1pool"}]'
refused "agent: annotation via nodes/status" "$agent_vap.*metadata" \
  stpatch --type=merge -p '{"metadata":{"annotations":{"x":"y"}}}'
refused "agent: capacity via nodes/status" "$agent_vap.*only the GPUHealthy condition" \
  stpatch --type=merge -p '{"status":{"capacity":{"nvidia.com/gpu":"64"}}}'
refused "agent: the kubelet's Ready condition" "$agent_vap.*only the GPUHealthy condition" \
  stpatch --type=strategic -p "$(cond Ready False forged)"
refused "agent: a condition of another name" "$agent_vap.*only the GPUHealthy condition" \
  stpatch --type=strategic -p "$(cond NetworkUnavailable True forged)"
labels=$("$K" get node "$NODE" -o jsonpath='{.metadata.labels}')
check "node labels unchanged ($labels)" bash -c "grep -q 'gpuheal.io/pool' <<< '$labels' && ! grep -q tenant <<< '$labels'"
out=$(stpatch --type=strategic -p "$(cond GPUHealthy False '1/8 GPUs unhealthy')" 2>&1) &&
  ok "agent: its GPUHealthy condition (strategic merge patch, as health_publish.c)" ||
  { bad "agent: its GPUHealthy condition"; sed 's/^/     | /' <<< "$out"; }
printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s"},%s}' "$NODE" "$(cond GPUHealthy True ok | sed 's/^{//; s/}$//')" > "$TMP/ssa.json"
out=$(as_agent apply --server-side --force-conflicts --field-manager=gpuheal-agent --subresource=status -f "$TMP/ssa.json" 2>&1) &&
  ok "agent: its GPUHealthy condition (server-side apply)" ||
  { bad "agent: its GPUHealthy condition (server-side apply)"; sed 's/^/     | /' <<< "$out"; }
gst=$("$K" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="GPUHealthy")].status}')
check "GPUHealthy written ($gst)" [ "$gst" = True ]

echo "deploy_confinement: $pass passed, $fail failed"
if [ $fail -ne 0 ] && [ -f "$CTL_LOG" ]; then echo "--- controller log (tail)"; tail -30 "$CTL_LOG"; fi
[ $fail -eq 0 ]
