#!/usr/bin/env bash
# deploy_manifests.sh - the deploy/ manifests and the Helm chart against the
# real local control plane (test/kube):
#   1. every manifest passes `kubectl apply --dry-run=server` (in a fresh
#      namespace gpuheal-system-test-PID, cluster-scoped names suffixed);
#      the controller's pod template meets Pod Security "restricted";
#   2. the RBAC objects are applied for real and least privilege is shown
#      with `kubectl auth can-i --as=system:serviceaccount:NS:SA` - yes for
#      what each component needs, no for what it must not do;
#   3. the agent's own-node admission policy, with real service-account tokens
#      bound to a Node: its own node yes, another node no;
#   4. the Helm chart: lint, render (several value sets) and dry-run; its RBAC
#      equals the plain manifests'; controller.jobNamespaces confines the
#      resume-ConfigMap permission. Needs helm at
#      ${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/helm/bin/helm (deploy/helm/get-helm
#      builds it) or $GH_HELM; skipped (said so) otherwise;
#   5. deploy/policy-default.yaml is what tools/gen-policy-cr.py makes of
#      data/policy-default.yaml (when python3 with PyYAML is there).
# Everything created is deleted at the end. Prints ok/FAIL/skip lines and
# "deploy_manifests: N passed, N failed"; exits non-zero on any failure.
#
# By hand:  GH_KUBE_DIR=/tmp/dep-kube test/kube/up > /tmp/dep-env
#           GH_KUBE_ENV=/tmp/dep-env bash test/integration/deploy_manifests.sh
#           test/kube/down /tmp/dep-kube
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${GH_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
deploy=$repo/deploy

if [[ -z ${GH_KUBE_ENV:-} || ! -f ${GH_KUBE_ENV} ]]; then
  echo "FAIL GH_KUBE_ENV must name the env file test/kube/up wrote (see the header)" >&2
  exit 2
fi
# shellcheck disable=SC1090
. "$GH_KUBE_ENV"
export KUBECONFIG
K="$GH_KUBE_BIN/kubectl"
[[ -x $K ]] || { echo "FAIL no kubectl at $K" >&2; exit 2; }

id=$$
NS=gpuheal-system-test-$id
SUF=t$id
AGENT=gpuheal-agent-$SUF
CTRL=gpuheal-controller-$SUF
NODE_A=gh-dep-$SUF-a
NODE_B=gh-dep-$SUF-b
REL=gpuheal-$SUF
work=$(mktemp -d "${TMPDIR:-/tmp}/gh-deploy-test.XXXXXX")

pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
skip() { echo "skip $*"; }
# check DESC CMD... : ok when CMD succeeds; its output is shown on failure.
check() {
  local desc=$1; shift
  local out
  if out=$("$@" 2>&1); then ok "$desc"; else bad "$desc"; sed 's/^/     | /' <<<"$out" | tail -n 15; fi
}

# The manifests with the test's names: namespace gpuheal-system -> $NS, and
# gpuheal-agent / gpuheal-controller (not in paths such as /usr/local/bin/)
# suffixed, so that cluster-scoped objects never clash with other tests.
render() {
  perl -pe "s{gpuheal-system}{$NS}g; s{(?<![/\\w.-])gpuheal-(agent|controller)(?!\\w)}{gpuheal-\$1-$SUF}g" "$1"
}

cleanup() {
  set +e
  {
    "$K" delete node "$NODE_A" "$NODE_B" --ignore-not-found --wait=false
    "$K" delete gpunodehealths.gpuheal.io "$NODE_A" "$NODE_B" --ignore-not-found --wait=false
    for f in "$work"/rbac-*.yaml "$work"/helm-rbac-*.yaml; do
      [[ -f $f ]] && "$K" delete -f "$f" --ignore-not-found --wait=false
    done
    "$K" delete namespace "$NS" --ignore-not-found --wait=false
  } >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

echo "# deploy_manifests: namespace $NS, names suffixed -$SUF"

# ------------------------------------------------------------------ 5. generated policy
if python3 -c 'import yaml' >/dev/null 2>&1; then
  check "deploy/policy-default.yaml and the chart's rules are up to date (gen-policy-cr.py --check)" \
    python3 "$repo/tools/gen-policy-cr.py" --check
else
  skip "generated policy check (python3 with PyYAML not found)"
fi

# ------------------------------------------------------------------ Grafana dashboard
dash=$deploy/grafana/gpuheal-dashboard.json
if command -v python3 >/dev/null 2>&1; then
  if metrics=$(python3 - "$dash" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
assert d["uid"] and d["panels"], "no uid or panels"
names = set()
for p in d["panels"]:
    for t in p.get("targets", []):
        names.update(re.findall(r"gpuheal_[a-z0-9_]+", t["expr"]))
print(" ".join(sorted(n[:-7] if n.endswith("_bucket") else n for n in names)))
PY
  ); then
    ok "grafana/gpuheal-dashboard.json is valid JSON with panels"
    missing=()
    for m in $metrics; do grep -rqs "$m" "$repo/src" || missing+=("$m"); done
    [[ ${#missing[@]} -eq 0 ]] || echo "note dashboard metrics not exposed by src/ yet (docs/deploy.md lists them): ${missing[*]}"
  else
    bad "grafana/gpuheal-dashboard.json is valid JSON with panels"
  fi
fi

# ------------------------------------------------------------------ 1. dry runs
render "$deploy/namespace.yaml" >"$work/namespace.yaml"
check "apply --dry-run=server namespace.yaml" "$K" apply --dry-run=server -f "$work/namespace.yaml"
check "create namespace $NS (for the namespaced dry runs)" "$K" apply -f "$work/namespace.yaml"

for f in "$deploy"/crds/*.yaml; do
  check "apply --dry-run=server crds/$(basename "$f")" "$K" apply --dry-run=server -f "$f"
done
manifests=(rbac/agent.yaml rbac/agent-node-restriction.yaml rbac/controller.yaml
  rbac/controller-restart-policy.yaml ingest-token-secret.yaml agent-daemonset.yaml controller-deployment.yaml policy-default.yaml)
for m in "${manifests[@]}"; do
  if [[ ! -f $deploy/$m ]]; then bad "deploy/$m missing"; continue; fi
  out=$work/$(tr / - <<<"$m")
  render "$deploy/$m" >"$out"
  check "apply --dry-run=server $m" "$K" apply --dry-run=server -f "$out"
done
# Every YAML under deploy/ (but the CRDs, the chart and the CDI node file) is in the list above.
while IFS= read -r f; do
  rel=${f#"$deploy"/}
  case $rel in crds/* | helm/* | cdi/* | namespace.yaml) continue ;; esac
  # a here-string, not printf | grep -q: grep leaving at the first match
  # can kill printf with SIGPIPE, and pipefail then fails the match
  grep -qx -- "$rel" <<<"$(printf '%s\n' "${manifests[@]}")" || bad "deploy/$rel is not checked by this test"
done < <(find "$deploy" -name '*.yaml' -type f | sort)

# Pod Security: the controller meets "restricted"; PSA warns on workload
# objects whose pod template would violate the namespace's warn level.
"$K" label namespace "$NS" pod-security.kubernetes.io/warn=restricted --overwrite >/dev/null 2>&1
out=$("$K" apply --dry-run=server -f "$work/controller-deployment.yaml" 2>&1)
if [[ $? -eq 0 ]] && ! grep -qi "violate PodSecurity" <<<"$out"; then
  ok "controller pod template meets Pod Security \"restricted\""
else
  bad "controller pod template meets Pod Security \"restricted\""; sed 's/^/     | /' <<<"$out"
fi
out=$("$K" apply --dry-run=server -f "$work/agent-daemonset.yaml" 2>&1)
echo "note agent vs \"restricted\" (expected: it needs \"privileged\"): $(grep -oi 'would violate.*' <<<"$out" | head -c 300)"
"$K" label namespace "$NS" pod-security.kubernetes.io/warn- >/dev/null 2>&1

# ------------------------------------------------------------------ 2. RBAC, for real
for m in rbac/agent.yaml rbac/controller.yaml rbac/agent-node-restriction.yaml rbac/controller-restart-policy.yaml; do
  f=$work/rbac-$(basename "$m")
  render "$deploy/$m" >"$f"
  check "apply $m" "$K" apply -f "$f"
done

# can SA EXPECT VERB RESOURCE [kubectl args...]
can() {
  local sa=$1 want=$2 verb=$3 res=$4; shift 4
  local got
  got=$("$K" auth can-i "$verb" "$res" --as="system:serviceaccount:$NS:$sa" "$@" 2>/dev/null | tail -n1)
  [[ -n $got ]] || got="?"
  local what="$sa can-i $verb $res${*:+ $*}"
  what=${what//-$SUF/}
  if [[ $got == "$want" ]]; then ok "$what = $got"; else bad "$what = $got (want $want)"; fi
}

# ssar SA EXPECT VERB GROUP RESOURCE NAMESPACE: the SelfSubjectAccessReview
# that `auth can-i` sends, with the API group spelled out - for resources whose
# CRD is not installed here (JobSet, PyTorchJob, TrainJob, ...), which kubectl cannot resolve.
ssar() {
  local sa=$1 want=$2 verb=$3 group=$4 res=$5 ns=$6 got
  got=$(printf '{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"%s","group":"%s","resource":"%s","namespace":"%s"}}}' \
    "$verb" "$group" "$res" "$ns" |
    "$K" create -f - --as="system:serviceaccount:$NS:$sa" -o jsonpath='{.status.allowed}' 2>/dev/null)
  case $got in true) got=yes ;; false | "") got=no ;; esac
  local what="${sa/-$SUF/} can-i $verb $res.$group -n $ns (SelfSubjectAccessReview)"
  if [[ $got == "$want" ]]; then ok "$what = $got"; else bad "$what = $got (want $want)"; fi
}

echo "# agent: what it needs"
can "$AGENT" yes get nodes
can "$AGENT" yes get nodes --subresource=status
can "$AGENT" yes patch nodes --subresource=status
can "$AGENT" yes get gpunodehealths.gpuheal.io
can "$AGENT" yes list gpunodehealths.gpuheal.io
can "$AGENT" yes watch gpunodehealths.gpuheal.io
can "$AGENT" yes create gpunodehealths.gpuheal.io
can "$AGENT" yes patch gpunodehealths.gpuheal.io --subresource=status
can "$AGENT" yes create events.events.k8s.io -n default
echo "# agent: what it must not do"
can "$AGENT" no patch nodes
can "$AGENT" no update nodes
can "$AGENT" no delete nodes
can "$AGENT" no list nodes
can "$AGENT" no get secrets -A
can "$AGENT" no get secrets -n "$NS"
can "$AGENT" no list pods -A
can "$AGENT" no delete pods -n default
can "$AGENT" no create pods --subresource=eviction -n default
can "$AGENT" no patch gpunodehealths.gpuheal.io
can "$AGENT" no delete gpunodehealths.gpuheal.io
can "$AGENT" no create incidents.gpuheal.io
can "$AGENT" no patch recoverypolicies.gpuheal.io
can "$AGENT" no create events.events.k8s.io -n kube-system
can "$AGENT" no update configmaps -n default
can "$AGENT" no create leases.coordination.k8s.io -n "$NS"
# escalation paths (docs/reliability.md, "Security")
can "$AGENT" no get nodes --subresource=proxy
can "$AGENT" no create serviceaccounts --subresource=token -n "$NS"
can "$AGENT" no impersonate serviceaccounts -A
can "$AGENT" no create pods --subresource=exec -n default
can "$AGENT" no create tokenreviews.authentication.k8s.io
can "$AGENT" no '*' '*'

echo "# controller: what it needs"
# update: isolate_node writes the node back with its resourceVersion (a
# 403 here once refused every cordon of the shipped controller)
for v in get list watch patch update; do can "$CTRL" yes "$v" nodes; done
for v in get list watch; do can "$CTRL" yes "$v" pods -A; done
can "$CTRL" yes delete pods -n default # retry_in_place, in a job namespace only
can "$CTRL" yes patch pods --subresource=status -n default # replace_lost: DisruptionTarget first
can "$CTRL" yes create pods --subresource=eviction -n default
can "$CTRL" yes create tokenreviews.authentication.k8s.io # who an agent is (its node)
can "$CTRL" yes create events.events.k8s.io -n default
can "$CTRL" yes patch events -n default
for v in get list watch; do can "$CTRL" yes "$v" jobs.batch -A; done
# the restart's writes: only in the job namespaces (here "default")
for v in create delete; do can "$CTRL" yes "$v" jobs.batch -n default; done
for gr in jobset.x-k8s.io/jobsets kubeflow.org/pytorchjobs kubeflow.org/mpijobs \
  trainer.kubeflow.org/trainjobs leaderworkerset.x-k8s.io/leaderworkersets batch.volcano.sh/jobs; do
  for v in get list watch create delete; do ssar "$CTRL" yes "$v" "${gr%/*}" "${gr#*/}" default; done
  for v in update patch; do ssar "$CTRL" no "$v" "${gr%/*}" "${gr#*/}" default; done
  for v in create delete; do ssar "$CTRL" no "$v" "${gr%/*}" "${gr#*/}" kube-system; done
done
ssar "$AGENT" no delete jobset.x-k8s.io jobsets default
ssar "$AGENT" no delete trainer.kubeflow.org trainjobs default
# a TrainJob's pod templates are its runtime's: read only, one at a time
for r in trainingruntimes clustertrainingruntimes; do
  ssar "$CTRL" yes get trainer.kubeflow.org "$r" default
  for v in list create delete update; do ssar "$CTRL" no "$v" trainer.kubeflow.org "$r" default; done
done
for v in create patch; do can "$CTRL" yes "$v" configmaps -n default; done
can "$CTRL" yes get poddisruptionbudgets.policy -n default
can "$CTRL" yes list poddisruptionbudgets.policy -A
for v in get list watch; do can "$CTRL" yes "$v" recoverypolicies.gpuheal.io; done
can "$CTRL" yes update recoverypolicies.gpuheal.io --subresource=status
for r in gpunodehealths.gpuheal.io incidents.gpuheal.io; do
  for v in get list watch create patch; do can "$CTRL" yes "$v" "$r"; done
  can "$CTRL" yes patch "$r" --subresource=status
done
for v in get create update; do can "$CTRL" yes "$v" leases.coordination.k8s.io -n "$NS"; done
echo "# controller: what it must not do"
can "$CTRL" no get secrets -A
can "$CTRL" no list secrets -A
can "$CTRL" no get secrets -n "$NS"
can "$CTRL" no delete nodes
can "$CTRL" no create nodes
can "$CTRL" no create pods -n default
can "$CTRL" no create pods --subresource=exec -n default
can "$CTRL" no list configmaps -A
can "$CTRL" no get configmaps -n default
can "$CTRL" no update configmaps -n default
can "$CTRL" no delete configmaps -n default
# issue 24: no job, pod or ConfigMap write outside the job namespaces
for v in create delete patch update; do can "$CTRL" no "$v" jobs.batch -n kube-system; done
can "$CTRL" no create jobs.batch -A
can "$CTRL" no patch jobs.batch -n default
can "$CTRL" no update jobs.batch -n default
can "$CTRL" no delete pods -n kube-system
can "$CTRL" no delete pods -A
can "$CTRL" no patch pods --subresource=status -n kube-system
can "$CTRL" no patch pods -n default
can "$CTRL" no patch configmaps/kube-root-ca.crt -n kube-system
can "$CTRL" no create configmaps -n kube-system
can "$CTRL" no patch configmaps -n "$NS"
can "$CTRL" no create leases.coordination.k8s.io -n kube-system
can "$CTRL" no patch recoverypolicies.gpuheal.io
can "$CTRL" no delete recoverypolicies.gpuheal.io
can "$CTRL" no create clusterrolebindings.rbac.authorization.k8s.io
can "$CTRL" no patch daemonsets.apps -n "$NS"
can "$CTRL" no delete namespaces
# escalation paths (docs/reliability.md, "Security")
can "$CTRL" no get nodes --subresource=proxy
can "$CTRL" no create serviceaccounts --subresource=token -n "$NS"
can "$CTRL" no impersonate serviceaccounts -A
can "$CTRL" no impersonate users
can "$CTRL" no escalate clusterroles.rbac.authorization.k8s.io
can "$CTRL" no bind clusterroles.rbac.authorization.k8s.io
can "$CTRL" no update certificatesigningrequests.certificates.k8s.io --subresource=approval
can "$CTRL" no create mutatingwebhookconfigurations.admissionregistration.k8s.io
can "$CTRL" no '*' '*'

# ------------------------------------------------------------------ 3. own-node admission policy
server=$("$K" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
"$K" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
  base64 -d >"$work/ca.crt"
as_token() { # TOKEN kubectl-args...: kubectl as that token only (no client cert)
  local t=$1; shift
  "$K" --kubeconfig=/dev/null --server="$server" --certificate-authority="$work/ca.crt" --token="$t" "$@"
}
for n in "$NODE_A" "$NODE_B"; do
  printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$n" | "$K" create -f - >/dev/null 2>&1
done
tok_a=$("$K" -n "$NS" create token "$AGENT" --bound-object-kind Node --bound-object-name "$NODE_A" 2>/dev/null)
tok_none=$("$K" -n "$NS" create token "$AGENT" 2>/dev/null)
cond='{"status":{"conditions":[{"type":"GPUHealthy","status":"True","reason":"AllGPUsHealthy","message":"8/8 GPUs healthy","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}'
if [[ -z $tok_a || -z $tok_none ]]; then
  bad "create service-account tokens for the agent"
else
  node_of=$(as_token "$tok_a" auth whoami -o jsonpath='{.status.userInfo.extra.authentication\.kubernetes\.io/node-name}' 2>/dev/null)
  [[ $node_of == "[\"$NODE_A\"]" || $node_of == "$NODE_A" ]] && ok "a Node-bound agent token carries node-name $NODE_A" ||
    bad "a Node-bound agent token carries node-name (got '$node_of')"
  # the policy takes effect once the API server has loaded it: wait for the first denial.
  denied=""
  for _ in $(seq 1 50); do
    out=$(as_token "$tok_a" patch node "$NODE_B" --subresource=status --type=strategic -p "$cond" 2>&1) ||
      { grep -q "own node" <<<"$out" && { denied=1; break; }; }
    sleep 0.3
  done
  [[ -n $denied ]] && ok "agent token bound to $NODE_A: patch status of $NODE_B denied by the admission policy" ||
    bad "agent token bound to $NODE_A: patch status of $NODE_B denied (last: $out)"
  check "agent token bound to $NODE_A: patch its own node's status (GPUHealthy condition)" \
    as_token "$tok_a" patch node "$NODE_A" --subresource=status --type=strategic -p "$cond"
  out=$(as_token "$tok_a" patch node "$NODE_A" --type=strategic -p '{"spec":{"unschedulable":true}}' 2>&1) &&
    bad "agent token: cordon its own node must be forbidden" || ok "agent token: cordon (patch nodes spec) forbidden by RBAC"
  gnh() { printf '{"apiVersion":"gpuheal.io/v1alpha1","kind":"GPUNodeHealth","metadata":{"name":"%s"},"spec":{"nodeName":"%s"}}' "$1" "$1"; }
  gnh "$NODE_A" >"$work/gnh-a.json"
  gnh "$NODE_B" >"$work/gnh-b.json"
  printf '{"apiVersion":"gpuheal.io/v1alpha1","kind":"GPUNodeHealth","metadata":{"name":"%s"},"status":{"state":"Healthy","gpuCount":8,"healthyGPUs":8}}' \
    "$NODE_A" >"$work/gnh-a-status.json"
  check "agent token bound to $NODE_A: create GPUNodeHealth $NODE_A" as_token "$tok_a" create -f "$work/gnh-a.json"
  out=$(as_token "$tok_a" create -f "$work/gnh-b.json" 2>&1) &&
    bad "agent token bound to $NODE_A: create GPUNodeHealth $NODE_B must be denied" ||
    { grep -q "own node" <<<"$out" && ok "agent token bound to $NODE_A: create GPUNodeHealth $NODE_B denied" ||
      bad "agent token: create GPUNodeHealth $NODE_B denied for the wrong reason: $out"; }
  check "agent token bound to $NODE_A: server-side apply of its GPUNodeHealth status" \
    as_token "$tok_a" apply --server-side --field-manager=gpuheal-agent --subresource=status -f "$work/gnh-a-status.json"
  out=$(as_token "$tok_none" patch node "$NODE_A" --subresource=status --type=strategic -p "$cond" 2>&1) &&
    bad "an agent token bound to no node must not write a node" ||
    { grep -q "bound to no node" <<<"$out" && ok "an agent token bound to no node cannot write any node" ||
      bad "token bound to no node denied for the wrong reason: $out"; }
fi

# ------------------------------------------------------------------ 4. Helm chart
helm=${GH_HELM:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/helm/bin/helm}
chart=$deploy/helm/gpuheal
if [[ ! -x $helm ]]; then
  skip "helm chart checks: no helm at $helm (deploy/helm/get-helm builds it from the Go module proxy)"
else
  export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data
  hq() { "$helm" "$@" 2> >(grep -v 'found symbolic link' >&2); }
  echo "# helm $("$helm" version --short 2>/dev/null)"
  check "helm lint --strict (defaults)" hq lint --strict "$chart"
  variants=(
    "defaults|"
    "postgres|--set controller.db.type=postgres --set controller.db.postgres.url=postgres://gpuheal@db:5432/gpuheal?sslmode=require --set controller.db.postgres.passwordSecret.name=pg"
    "sqlite-pvc|--set controller.db.sqlite.persistence.enabled=true"
    "kmsg-cdi|--set agent.kmsg.access=cdi"
    "kmsg-file|--set agent.kmsg.access=file --set agent.runtimeClassName= --set agent.nodeRestriction.enabled=false"
    "enforce-approval|--set policy.dryRun=false --set policy.requireApproval=true --set policy.budgets.maxUnavailableNodes=3 --set controller.jobNamespaces={default} --set controller.clusterAPI=true"
    "no-agent-own-token|--set agent.enabled=false --set ingestToken.existingSecret=mine --set policy.create=false"
    "custom-rules|--set-json policy.rules=[{\"name\":\"xid-79\",\"match\":{\"class\":\"gpu_hardware\",\"codes\":[79]},\"actions\":[{\"action\":\"isolate_node\"}]}] --set-json extraPolicies=[{\"name\":\"gh-$SUF-extra\",\"spec\":{\"priority\":10,\"rules\":[{\"name\":\"app\",\"match\":{\"class\":\"application\"},\"actions\":[{\"action\":\"retry_in_place\"}]}]}}]"
  )
  for v in "${variants[@]}"; do
    name=${v%%|*}
    read -r -a args <<<"${v#*|}"
    out=$work/helm-$name.yaml
    if hq template "$REL" "$chart" -n "$NS" --include-crds "${args[@]}" >"$out" 2>"$work/helm-$name.err"; then
      check "helm template ($name) | kubectl apply --dry-run=server" "$K" apply --dry-run=server -f "$out"
      [[ $name == defaults ]] || check "helm lint ($name)" hq lint --strict "$chart" "${args[@]}"
    else
      bad "helm template ($name)"; sed 's/^/     | /' "$work/helm-$name.err"
    fi
  done
  # Rendered contents that matter.
  d=$work/helm-defaults.yaml
  grep -q 'privileged: true' "$d" && grep -q 'runtimeClassName: nvidia' "$d" && ok "chart default agent: /dev/kmsg privileged, runtimeClassName nvidia" || bad "chart default agent securityContext/runtimeClass"
  grep -q 'add: \[SYSLOG\]' "$work/helm-kmsg-cdi.yaml" && grep -q 'cdi.k8s.io/gpuheal-kmsg' "$work/helm-kmsg-cdi.yaml" && ! grep -q 'privileged: true' "$work/helm-kmsg-cdi.yaml" &&
    ok "chart kmsg=cdi: not privileged, only CAP_SYSLOG, CDI annotation" || bad "chart kmsg=cdi securityContext"
  ! grep -q 'privileged: true' "$work/helm-kmsg-file.yaml" && ! grep -q 'add:' "$work/helm-kmsg-file.yaml" && ! grep -q runtimeClassName "$work/helm-kmsg-file.yaml" &&
    ok "chart kmsg=file: no privilege, no capability, no runtime class" || bad "chart kmsg=file securityContext"
  grep -q 'replicas: 1' "$work/helm-sqlite-pvc.yaml" && grep -q 'type: Recreate' "$work/helm-sqlite-pvc.yaml" && grep -q 'kind: PersistentVolumeClaim' "$work/helm-sqlite-pvc.yaml" &&
    ok "chart sqlite on a PVC: one replica, Recreate" || bad "chart sqlite on a PVC: one replica, Recreate"
  grep -q 'name: PGPASSWORD' "$work/helm-postgres.yaml" && ! grep -q 'sqlite:' "$work/helm-postgres.yaml" &&
    ok "chart postgres: --db URL, password from a Secret via PGPASSWORD" || bad "chart postgres rendering"
  grep -q 'dryRun: true' "$d" && grep -q 'dryRun: false' "$work/helm-enforce-approval.yaml" && grep -q 'requireApproval: true' "$work/helm-enforce-approval.yaml" &&
    ok "chart policy: dry run by default; dryRun/requireApproval/budgets from values" || bad "chart policy values"
  if hq template "$REL" "$chart" -n "$NS" --set controller.db.type=postgres >/dev/null 2>&1; then
    bad "chart must refuse postgres without a URL"
  else ok "chart refuses controller.db.type=postgres without a URL"; fi
  if hq template "$REL" "$chart" -n "$NS" --set agent.kmsg.access=bogus >/dev/null 2>&1; then
    bad "chart must refuse an unknown agent.kmsg.access"
  else ok "chart refuses an unknown agent.kmsg.access"; fi

  # The chart's RBAC rules are the plain manifests' rules.
  rules_of() { # FILE KIND NAME -> JSON rules
    "$K" create --dry-run=client -f "$1" -o json 2>/dev/null |
      python3 -c 'import json,sys
text=sys.stdin.read(); dec=json.JSONDecoder(); i=0; items=[]
while True:
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    o, i = dec.raw_decode(text, i); items.extend(o.get("items", [o]))
for o in items:
    if o["kind"]==sys.argv[1] and o["metadata"]["name"]==sys.argv[2]: print(json.dumps(o.get("rules"),sort_keys=True))' "$2" "$3"
  }
  if command -v python3 >/dev/null 2>&1; then
    for pair in "ClusterRole $AGENT rbac-agent.yaml gpuheal-$SUF-agent" "ClusterRole $CTRL rbac-controller.yaml gpuheal-$SUF-controller" \
      "ClusterRole $CTRL-restart rbac-controller.yaml gpuheal-$SUF-controller-restart" "Role $CTRL-leader rbac-controller.yaml gpuheal-$SUF-controller-leader" \
      "Role $AGENT-events rbac-agent.yaml gpuheal-$SUF-agent-events"; do
      read -r kind plain file hname <<<"$pair"
      a=$(rules_of "$work/$file" "$kind" "$plain")
      b=$(rules_of "$d" "$kind" "$hname")
      [[ -n $a && $a == "$b" ]] && ok "chart $kind ${hname/-$SUF/} rules == deploy/rbac's" || bad "chart $kind $hname rules differ from deploy/rbac's"
    done
  fi

  # The chart's admission policies are the plain manifests' (the same files,
  # names and namespace substituted).
  if command -v python3 >/dev/null 2>&1; then
    spec_of() { # FILE NAME -> JSON spec, names made generic
      "$K" create --dry-run=client -f "$1" -o json 2>/dev/null |
        python3 -c 'import json,sys,re
text=sys.stdin.read(); dec=json.JSONDecoder(); i=0; items=[]
while True:
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    o, i = dec.raw_decode(text, i); items.extend(o.get("items", [o]))
for o in items:
    if o["kind"]=="ValidatingAdmissionPolicy" and o["metadata"]["name"]==sys.argv[1]:
        t=json.dumps(o["spec"],sort_keys=True)
        print(re.sub(r"gpuheal-(t[0-9]+-)?(agent|controller)(-t[0-9]+)?", r"gpuheal-\2", t))' "$2"
    }
    for pair in "$AGENT-own-node rbac-agent-node-restriction.yaml gpuheal-$SUF-agent-own-node" \
      "$CTRL-restart rbac-controller-restart-policy.yaml gpuheal-$SUF-controller-restart"; do
      read -r plain file hname <<<"$pair"
      a=$(spec_of "$work/$file" "$plain")
      b=$(spec_of "$d" "$hname")
      [[ -n $a && $a == "$b" ]] && ok "chart ValidatingAdmissionPolicy ${hname/-$SUF/} == deploy/rbac's" ||
        bad "chart ValidatingAdmissionPolicy $hname differs from deploy/rbac's"
    done
  fi
  for jn in kube-system "$NS"; do
    if hq template "$REL" "$chart" -n "$NS" --set ingestToken.existingSecret=x --set "controller.jobNamespaces={$jn}" >/dev/null 2>&1; then
      bad "chart must refuse controller.jobNamespaces={${jn/$NS/<release namespace>}}"
    else ok "chart refuses controller.jobNamespaces={${jn/$NS/<release namespace>}}"; fi
  done

  # controller.jobNamespaces: what a restart writes, only there.
  f=$work/helm-rbac-jobns.yaml
  hq template "$REL" "$chart" -n "$NS" --set agent.enabled=false --set policy.create=false \
    --set ingestToken.existingSecret=x --set controller.jobNamespaces='{default}' \
    --show-only templates/rbac-controller.yaml >"$f" 2>/dev/null
  if check "apply the chart's controller RBAC (jobNamespaces={default})" "$K" apply -f "$f"; then
    "$K" -n "$NS" create serviceaccount "gpuheal-$SUF-controller" >/dev/null 2>&1
    got_d=$("$K" auth can-i create configmaps -n default --as="system:serviceaccount:$NS:gpuheal-$SUF-controller" 2>/dev/null)
    got_k=$("$K" auth can-i create configmaps -n kube-system --as="system:serviceaccount:$NS:gpuheal-$SUF-controller" 2>/dev/null)
    [[ $got_d == yes && $got_k == no ]] && ok "chart jobNamespaces={default}: create configmaps in default = yes, in kube-system = no" ||
      bad "chart jobNamespaces={default}: configmaps default=$got_d kube-system=$got_k (want yes/no)"
    got_d=$("$K" auth can-i create jobs.batch -n default --as="system:serviceaccount:$NS:gpuheal-$SUF-controller" 2>/dev/null)
    got_k=$("$K" auth can-i create jobs.batch -n kube-system --as="system:serviceaccount:$NS:gpuheal-$SUF-controller" 2>/dev/null)
    [[ $got_d == yes && $got_k == no ]] && ok "chart jobNamespaces={default}: create jobs in default = yes, in kube-system = no" ||
      bad "chart jobNamespaces={default}: jobs default=$got_d kube-system=$got_k (want yes/no)"
  fi
fi

echo "deploy_manifests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
