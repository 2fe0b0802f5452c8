#!/usr/bin/env bash
# deploy_helm_values.sh - the chart's values.schema.json, its optional
# Prometheus Operator objects and the values for the dcgm-exporter URL and the
# taint key, with the real helm against the real control plane (test/kube):
#   - unknown keys and wrong types are refused by helm lint, template and
#     install (policy.dryRunn=false, policy.dryRun=flase, ...), naming the
#     key, and nothing is installed;
#   - `helm install --dry-run=server` passes (the CRDs are installed here;
#     docs/deploy.md says what a fresh cluster needs);
#   - metrics.serviceMonitor / metrics.prometheusRule: off by default; on,
#     two ServiceMonitors (controller, agents with a node label) whose
#     selectors and ports match the Services, a headless agent Service, and a
#     PrometheusRule whose spec is files/prometheus-rules.yaml exactly; with
#     the Prometheus Operator's own CRDs (from its Go module; skipped, said
#     so, without go) they pass `kubectl apply --dry-run=server`;
#   - agent.dcgmExporterURL renders --dcgm-exporter; controller.taintKey
#     renders --taint-key and the agents tolerate that key;
#     controller.nodeConditions renders --node-conditions (a list the schema
#     checks: never the kubelet's own conditions nor GPUHealthy).
# Needs helm (deploy/helm/get-helm); skipped, said so, without it.
# Prints ok/FAIL lines and "deploy_helm_values: N passed, N failed".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${GH_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
chart=$repo/deploy/helm/gpuheal
helm=${GH_HELM:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/helm/bin/helm}
PO_VERSION=v0.81.0   # prometheus-operator, for its ServiceMonitor / PrometheusRule CRDs

if [[ -z ${GH_KUBE_ENV:-} || ! -f ${GH_KUBE_ENV} ]]; then
  echo "FAIL GH_KUBE_ENV must name the env file test/kube/up wrote" >&2
  exit 2
fi
# shellcheck disable=SC1090
. "$GH_KUBE_ENV"
export KUBECONFIG
K="$GH_KUBE_BIN/kubectl"
if [[ ! -x $helm ]]; then
  echo "skip deploy_helm_values: no helm at $helm (deploy/helm/get-helm builds it)"
  exit 0
fi

NS=gpuheal-helm-values-$$
REL=gpuheal-hv$$
work=$(mktemp -d "${TMPDIR:-/tmp}/gh-helm-values.XXXXXX")
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data
cleanup() {
  set +e
  "$K" delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
check() {
  local desc=$1; shift
  local out
  if out=$("$@" 2>&1); then ok "$desc"; else bad "$desc"; sed 's/^/     | /' <<<"$out" | tail -n 15; fi
}
hq() { "$helm" "$@" 2> >(grep -v 'found symbolic link' >&2); }
# refused CMD-WORDS... -- WANT: helm exits non-zero and says WANT
refused() {
  local want=${*: -1} out
  set -- "${@:1:$#-1}"
  if out=$(hq "$@" 2>&1); then bad "helm $1 $(printf '%q ' "${@:2}") was accepted"; return; fi
  if grep -qF -- "$want" <<<"$out"; then ok "helm $1 refuses $(printf '%s ' "${@:2}" | grep -oE -- '--set(-string)? [^ ]+' | tr '\n' ' ')($want)"
  else bad "helm $1: not \"$want\""; sed 's/^/     | /' <<<"$out" | tail -n 8; fi
}

echo "# deploy_helm_values: release $REL in $NS, $("$helm" version --short 2>/dev/null)"
check "create namespace $NS" "$K" create namespace "$NS"
check "helm lint --strict (defaults, with values.schema.json)" hq lint --strict "$chart"

# ---- the schema: unknown keys and wrong types
refused template "$REL" "$chart" -n "$NS" --set policy.dryRunn=false -- "additional properties 'dryRunn' not allowed"
refused lint --strict "$chart" --set policy.dryRunn=false -- "additional properties 'dryRunn' not allowed"
refused template "$REL" "$chart" -n "$NS" --set policy.dryRun=flase -- "at '/policy/dryRun': got string, want boolean"
refused install "$REL" "$chart" -n "$NS" --set policy.dryRun=flase -- "at '/policy/dryRun': got string, want boolean"
check "the refused install left no release" sh -c "! '$helm' status '$REL' -n '$NS' >/dev/null 2>&1"
refused template "$REL" "$chart" -n "$NS" --set controler.replicas=1 -- "additional properties 'controler' not allowed"
refused template "$REL" "$chart" -n "$NS" --set agent.listenPort=http -- "at '/agent/listenPort': got string, want integer"
refused template "$REL" "$chart" -n "$NS" --set controller.db.type=mysql -- "at '/controller/db/type'"
refused template "$REL" "$chart" -n "$NS" --set agent.kmsg.access=root -- "at '/agent/kmsg/access'"
refused template "$REL" "$chart" -n "$NS" --set 'controller.taintKey=bad key' -- "at '/controller/taintKey'"
refused template "$REL" "$chart" -n "$NS" --set agent.dcgmExporterURL=localhost:9400 -- "at '/agent/dcgmExporterURL'"
refused template "$REL" "$chart" -n "$NS" --set 'agent.probes[0].name=x' -- "missing property 'command'"
refused template "$REL" "$chart" -n "$NS" --set metrics.serviceMonitor.enable=true -- "additional properties 'enable' not allowed"
refused template "$REL" "$chart" -n "$NS" --set 'controller.nodeConditions={KernelDeadlock,Ready}' -- "at '/controller/nodeConditions/1'"
refused template "$REL" "$chart" -n "$NS" --set 'controller.nodeConditions={GPUHealthy}' -- "at '/controller/nodeConditions/0'"
# every value of values.yaml itself, and a full set of good ones, pass
cat >"$work/good.yaml" <<'EOF'
policy: {dryRun: false, budgets: {maxUnavailableNodes: 3, maxActionsPerHour: 5, nodeCooldown: 1h}}
controller:
  taintKey: example.com/gpu-unhealthy
  nodeConditions: [KernelDeadlock, example.com/GpuCheck, FabricManagerDown]
  db: {type: postgres, postgres: {url: "postgres://gpuheal@db:5432/gpuheal", passwordSecret: {name: pg, key: password}}}
agent:
  dcgmExporterURL: http://$(NODE_IP):9400/metrics
  extraEnv: [{name: NODE_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}]
  tolerations: [{key: example.com/gpu-unhealthy, operator: Exists}, {key: other, operator: Exists, effect: NoSchedule}]
metrics:
  serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}, interval: 30s}
  prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
EOF
check "helm lint --strict (taint key, dcgm-exporter, postgres, monitoring on)" hq lint --strict "$chart" -f "$work/good.yaml"

# ---- helm install --dry-run=server (the CRDs are on this control plane)
check "helm install --dry-run=server (defaults)" hq install "$REL" "$chart" -n "$NS" --dry-run=server
# Issue 26: without the agent's RuntimeClass (none on this control plane) the
# DaemonSet would have 0 pods and only its Events said why: the NOTES say so
"$helm" install "$REL" "$chart" -n "$NS" --dry-run=server >"$work/notes.txt" 2>&1
check "NOTES warn: no RuntimeClass \"nvidia\", the DaemonSet stays at 0 pods" \
  grep -q 'WARNING: no RuntimeClass "nvidia" was found in the cluster' "$work/notes.txt"
"$helm" install "$REL" "$chart" -n "$NS" --dry-run=server --set agent.runtimeClassName= >"$work/notes2.txt" 2>&1
check "NOTES name the repair commands not configured (Incidents needing them end NotConfigured)" \
  grep -q 'Repair commands not configured: agent.requests.resetGpuCommand agent.requests.rebootCommand agent.requests.diagnosticsCommand' "$work/notes.txt"
check "NOTES: no such warning with agent.runtimeClassName=\"\"" \
  sh -c "grep -q 'installed in namespace' '$work/notes2.txt' && ! grep -q 'WARNING: no RuntimeClass' '$work/notes2.txt'"

# ---- monitoring objects: off by default
hq template "$REL" "$chart" -n "$NS" >"$work/default.yaml" 2>/dev/null
check "defaults render no ServiceMonitor or PrometheusRule" sh -c \
  "! grep -qE '^kind: (ServiceMonitor|PrometheusRule)$' '$work/default.yaml'"
if ! hq template "$REL" "$chart" -n "$NS" -f "$work/good.yaml" >"$work/all.yaml" 2>"$work/err"; then
  bad "helm template (good values)"; sed 's/^/     | /' "$work/err"
else
  out=$(python3 - "$chart/files/prometheus-rules.yaml" "$work/all.yaml" <<'PY'
import sys, yaml
items = [o for o in yaml.safe_load_all(open(sys.argv[2])) if o]
rules = yaml.safe_load(open(sys.argv[1]))
by = {}
for o in items:
    by.setdefault(o["kind"], []).append(o)
problems = []
sms = {o["metadata"]["name"]: o for o in by.get("ServiceMonitor", [])}
svcs = {o["metadata"]["name"]: o for o in by.get("Service", [])}
if len(sms) != 2:
    problems.append("ServiceMonitors: %s" % sorted(sms))
for name, sm in sms.items():
    sel = sm["spec"]["selector"]["matchLabels"]
    match = [s for s in svcs.values() if all(s["metadata"]["labels"].get(k) == v for k, v in sel.items())]
    if len(match) != 1:
        problems.append("%s selects %d Services" % (name, len(match)))
        continue
    ports = [p["name"] for p in match[0]["spec"]["ports"]]
    ep = sm["spec"]["endpoints"][0]
    if ep["port"] not in ports or ep["path"] != "/metrics" or ep.get("interval") != "30s":
        problems.append("%s endpoint %r, Service ports %r" % (name, ep, ports))
    if sm["metadata"]["labels"].get("release") != "kube-prometheus-stack":
        problems.append("%s labels %r" % (name, sm["metadata"]["labels"]))
    if name.endswith("-agent"):
        if ep.get("relabelings") != [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]:
            problems.append("agent ServiceMonitor relabelings %r" % ep.get("relabelings"))
        if match[0]["spec"].get("clusterIP") != "None":
            problems.append("agent metrics Service not headless")
# the Services' target ports are the pods' container ports
pods = {o["kind"]: o["spec"]["template"] for o in items if o["kind"] in ("Deployment", "DaemonSet")}
for s in svcs.values():
    comp = s["spec"]["selector"].get("app.kubernetes.io/name")
    t = pods["DaemonSet" if comp == "gpuheal-agent" else "Deployment"]
    cports = [p["name"] for c in t["spec"]["containers"] for p in c.get("ports", [])]
    for p in s["spec"]["ports"]:
        if p["targetPort"] not in cports:
            problems.append("Service %s targetPort %r not a container port %r" % (s["metadata"]["name"], p["targetPort"], cports))
prs = by.get("PrometheusRule", [])
if len(prs) != 1 or prs[0]["spec"] != rules:
    problems.append("PrometheusRule spec differs from files/prometheus-rules.yaml")
ds = pods["DaemonSet"]; dep = pods["Deployment"]
aargs = ds["spec"]["containers"][0]["args"]; cargs = dep["spec"]["containers"][0]["args"]
def after(args, flag):
    return [args[i + 1] for i, a in enumerate(args) if a == flag]
if after(aargs, "--dcgm-exporter") != ["http://$(NODE_IP):9400/metrics"]:
    problems.append("agent --dcgm-exporter %r" % after(aargs, "--dcgm-exporter"))
if after(cargs, "--taint-key") != ["example.com/gpu-unhealthy"]:
    problems.append("controller --taint-key %r" % after(cargs, "--taint-key"))
if after(cargs, "--node-conditions") != ["KernelDeadlock,example.com/GpuCheck,FabricManagerDown"]:
    problems.append("controller --node-conditions %r" % after(cargs, "--node-conditions"))
tol = ds["spec"]["tolerations"]
if tol != [{"key": "example.com/gpu-unhealthy", "operator": "Exists"},
           {"key": "other", "operator": "Exists", "effect": "NoSchedule"}]:
    problems.append("agent tolerations %r" % tol)
print("\n".join(problems) if problems else "OK %d ServiceMonitors, %d PrometheusRule with %d alerts"
      % (len(sms), len(prs), sum(len(g["rules"]) for g in rules["groups"])))
PY
)
  [[ $out == OK* ]] && ok "monitoring on: $out; --dcgm-exporter, --taint-key, --node-conditions and the agents' toleration rendered" ||
    { bad "rendered objects:"; sed 's/^/     | /' <<<"$out"; }
  hq template "$REL" "$chart" -n "$NS" --show-only templates/agent-daemonset.yaml >"$work/ds-default.yaml"
  check "defaults: the agents tolerate gpuheal.io/unhealthy and nvidia.com/gpu" sh -c \
    "grep -qF '{key: \"gpuheal.io/unhealthy\", operator: Exists}' '$work/ds-default.yaml' &&
     grep -qF '{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\"}' '$work/ds-default.yaml'"
  # the Prometheus Operator's CRDs, from its Go module (a real copy, not ours)
  crds=""
  if command -v go >/dev/null 2>&1; then
    dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$PO_VERSION" 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("Dir",""))' 2>/dev/null)
    [[ -n $dir && -d $dir/example/prometheus-operator-crd ]] && crds=$dir/example/prometheus-operator-crd
  fi
  if [[ -z $crds ]]; then
    echo "skip ServiceMonitor/PrometheusRule against the operator's CRDs: prometheus-operator $PO_VERSION not in the Go module cache and go cannot fetch it"
  else
    # cluster-wide, like the chart's users have them; server-side apply keeps
    # a concurrent run's apply harmless
    check "the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs ($PO_VERSION) applied" \
      "$K" apply --server-side --force-conflicts -f "$crds/monitoring.coreos.com_servicemonitors.yaml" \
      -f "$crds/monitoring.coreos.com_prometheusrules.yaml"
    "$K" wait --for condition=established --timeout=60s crd/servicemonitors.monitoring.coreos.com \
      crd/prometheusrules.monitoring.coreos.com >/dev/null 2>&1
    check "helm template (monitoring on) | kubectl apply --dry-run=server" \
      "$K" apply --dry-run=server -f "$work/all.yaml"
  fi
fi

echo "deploy_helm_values: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
