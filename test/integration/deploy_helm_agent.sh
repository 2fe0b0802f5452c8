#!/usr/bin/env bash
# deploy_helm_agent.sh - the Helm chart's agent values for health probes,
# request commands and scripts (agent.probes, agent.requests, agent.scripts)
# against the real control plane (test/kube) and the built agent:
#   - rendered with them, the chart lints and passes `kubectl apply
#     --dry-run=server`; the DaemonSet's args carry one --probe NAME=COMMAND
#     [,timeout=D][,every=D][,gpu=N] per probe and --reset-gpu-cmd,
#     --reboot-cmd, --diagnostics-cmd, --validate-cmd, --request-timeout;
#     the scripts ConfigMap is mounted read-only at /etc/gpuheal/scripts and a
#     script change changes the pod template's checksum;
#   - the defaults render none of it; bad values are refused;
#   - gpuheal-agent started with exactly the rendered arguments (sources,
#     ports and paths pointed at a temporary directory) accepts them, runs
#     the probes and stops cleanly.
# Needs helm at ${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/helm/bin/helm (or
# $GH_HELM; deploy/helm/get-helm builds it): skipped, said so, without it.
# Prints ok/FAIL lines and "deploy_helm_agent: N passed, N failed".
#
# By hand:  GH_KUBE_DIR=/tmp/dep-kube test/kube/up > /tmp/dep-env
#           GH_KUBE_ENV=/tmp/dep-env GH_BIN=build/bin bash test/integration/deploy_helm_agent.sh
#           test/kube/down /tmp/dep-kube
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${GH_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
chart=$repo/deploy/helm/gpuheal
helm=${GH_HELM:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/helm/bin/helm}
agent=${GH_BIN:-$repo/build/bin}/gpuheal-agent

if [[ -z ${GH_KUBE_ENV:-} || ! -f ${GH_KUBE_ENV} ]]; then
  echo "FAIL GH_KUBE_ENV must name the env file test/kube/up wrote (see the header)" >&2
  exit 2
fi
# shellcheck disable=SC1090
. "$GH_KUBE_ENV"
export KUBECONFIG
K="$GH_KUBE_BIN/kubectl"
[[ -x $K ]] || { echo "FAIL no kubectl at $K" >&2; exit 2; }
if [[ ! -x $helm ]]; then
  echo "skip deploy_helm_agent: no helm at $helm (deploy/helm/get-helm builds it)"
  exit 0
fi
[[ -x $agent ]] || { echo "FAIL no gpuheal-agent at $agent" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "FAIL python3 is needed to read the rendered JSON" >&2; exit 2; }

NS=gpuheal-helm-agent-$$
REL=gpuheal-ha$$
work=$(mktemp -d "${TMPDIR:-/tmp}/gh-helm-agent.XXXXXX")
apid=""
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data
cleanup() {
  set +e
  [[ -n $apid ]] && kill -9 "$apid" 2>/dev/null
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

cat >"$work/values.yaml" <<'EOF'
agent:
  probes:
  - name: nvidia-smi
    command: nvidia-smi -q -d ECC >/dev/null
    every: 5m
    timeout: 30s
  - name: gpu3.check
    command: /bin/sh -c 'echo a,b; exit 0'
    every: 1s
    gpu: 3
  requests:
    resetGpuCommand: /bin/sh /etc/gpuheal/scripts/reset-gpu.sh
    rebootCommand: /bin/sh /etc/gpuheal/scripts/reboot.sh
    diagnosticsCommand: /usr/bin/nvidia-smi -q
    validateCommand: /bin/sh /etc/gpuheal/scripts/validate.sh
    timeout: 15m
  scripts:
    reset-gpu.sh: |
      #!/bin/sh
      exec nvidia-smi --gpu-reset -i "$GPUHEAL_GPU"
    reboot.sh: |
      #!/bin/sh
      exit 1
    validate.sh: |
      #!/bin/sh
      nvidia-smi -q -d ECC >/dev/null
EOF

echo "# deploy_helm_agent: release $REL in $NS, $("$helm" version --short 2>/dev/null)"
check "create namespace $NS" "$K" create namespace "$NS"
check "helm lint --strict (agent probes, requests, scripts)" hq lint --strict "$chart" -f "$work/values.yaml"
if ! hq template "$REL" "$chart" -n "$NS" -f "$work/values.yaml" >"$work/all.yaml" 2>"$work/err"; then
  bad "helm template (agent probes, requests, scripts)"; sed 's/^/     | /' "$work/err"
  echo "deploy_helm_agent: $pass passed, $fail failed"
  exit 1
fi
check "helm template (agent probes, requests, scripts) | kubectl apply --dry-run=server" \
  "$K" apply --dry-run=server -f "$work/all.yaml"

# The rendered DaemonSet and ConfigMap as JSON (kubectl converts; no PyYAML).
json_of() { # FILE KIND -> the object of that kind, as JSON
  "$K" create --dry-run=client -o json -f "$1" 2>/dev/null |
    python3 -c 'import json,sys
d=json.load(sys.stdin); items=d.get("items",[d])
print(json.dumps([o for o in items if o["kind"]==sys.argv[1]][0]))' "$2"
}
hq template "$REL" "$chart" -n "$NS" -f "$work/values.yaml" --show-only templates/agent-daemonset.yaml >"$work/ds.yaml"
hq template "$REL" "$chart" -n "$NS" -f "$work/values.yaml" --show-only templates/agent-scripts-configmap.yaml >"$work/cm.yaml"
json_of "$work/ds.yaml" DaemonSet >"$work/ds.json"
json_of "$work/cm.yaml" ConfigMap >"$work/cm.json"

out=$(python3 - "$work/ds.json" "$work/cm.json" <<'PY'
import json, sys
ds = json.load(open(sys.argv[1])); cm = json.load(open(sys.argv[2]))
pod = ds["spec"]["template"]; c = pod["spec"]["containers"][0]; args = c["args"]
def pairs(flag):
    return [args[i + 1] for i, a in enumerate(args) if a == flag]
problems = []
want = {
    "--probe": ["nvidia-smi=nvidia-smi -q -d ECC >/dev/null,timeout=30s,every=5m",
                "gpu3.check=/bin/sh -c 'echo a,b; exit 0',every=1s,gpu=3"],
    "--reset-gpu-cmd": ["/bin/sh /etc/gpuheal/scripts/reset-gpu.sh"],
    "--reboot-cmd": ["/bin/sh /etc/gpuheal/scripts/reboot.sh"],
    "--diagnostics-cmd": ["/usr/bin/nvidia-smi -q"],
    "--validate-cmd": ["/bin/sh /etc/gpuheal/scripts/validate.sh"],
    "--request-timeout": ["15m"],
}
for flag, vals in want.items():
    if pairs(flag) != vals:
        problems.append("%s: %r, want %r" % (flag, pairs(flag), vals))
mounts = [m for m in c["volumeMounts"] if m["name"] == "scripts"]
if mounts != [{"name": "scripts", "mountPath": "/etc/gpuheal/scripts", "readOnly": True}]:
    problems.append("scripts mount: %r" % mounts)
vols = [v for v in pod["spec"]["volumes"] if v["name"] == "scripts"]
if not vols or vols[0]["configMap"] != {"name": cm["metadata"]["name"], "defaultMode": 0o555}:
    problems.append("scripts volume: %r (ConfigMap %s)" % (vols, cm["metadata"]["name"]))
if sorted(cm["data"]) != ["reboot.sh", "reset-gpu.sh", "validate.sh"] or \
        cm["data"]["reset-gpu.sh"] != '#!/bin/sh\nexec nvidia-smi --gpu-reset -i "$GPUHEAL_GPU"\n':
    problems.append("ConfigMap data: %r" % cm["data"])
if "checksum/scripts" not in pod["metadata"]["annotations"]:
    problems.append("no checksum/scripts annotation")
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
) && ok "DaemonSet args: --probe per probe, the four request commands, --request-timeout; scripts ConfigMap mounted 0555" ||
  { bad "rendered agent values"; sed 's/^/     | /' <<<"$out"; }

sum() { hq template "$REL" "$chart" -n "$NS" -f "$work/values.yaml" "$@" --show-only templates/agent-daemonset.yaml | grep 'checksum/scripts'; }
[[ -n $(sum) && $(sum) != $(sum --set-string 'agent.scripts.reboot\.sh=exit 2') ]] &&
  ok "a script change changes the pod template (checksum/scripts)" || bad "checksum/scripts does not follow the scripts"

hq template "$REL" "$chart" -n "$NS" >"$work/defaults.yaml"
grep -qE -- '--probe|-cmd$|--request-timeout|/etc/gpuheal/scripts|-scripts' "$work/defaults.yaml" &&
  bad "defaults render no probe, request command or scripts" || ok "defaults render no probe, request command or scripts"
hq template "$REL" "$chart" -n "$NS" --set agent.requests=null >/dev/null 2>&1 &&
  ok "values without agent.requests (an old release's --reuse-values) still render" ||
  bad "values without agent.requests do not render"

refuse() { # DESC PATTERN ARGS...
  local desc=$1 pat=$2; shift 2
  local out
  if out=$(hq template "$REL" "$chart" -n "$NS" "$@" 2>&1); then
    bad "chart must refuse $desc"
  elif grep -q -- "$pat" <<<"$out"; then
    ok "chart refuses $desc"
  else
    bad "chart refuses $desc for another reason: $(tail -n 2 <<<"$out")"
  fi
}
refuse "a request command without an absolute path" "absolute PATH" --set agent.requests.rebootCommand=reboot
# values.schema.json refuses these first, naming the field
refuse "a probe name with a space" "/agent/probes/0/name" --set 'agent.probes[0].name=a b' --set 'agent.probes[0].command=true'
refuse "a probe without a command" "missing property 'command'" --set 'agent.probes[0].name=x'
refuse "a script file name with a slash" "not a valid file name" --set 'agent.scripts.a/b=x'

# The agent with exactly the rendered arguments; only where it reads and
# writes is moved to $work, and the sources that need a GPU node are off.
python3 - "$work/ds.json" "$work" >"$work/agent.args" <<'PY'
import json, sys
ds = json.load(open(sys.argv[1])); work = sys.argv[2]
args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
override = {"--node": "gh-helm-agent", "--kmsg": "off", "--telemetry-socket": "off",
            "--spool-dir": work + "/spool", "--listen": "off"}
drop = {"--controller", "--token-file"}
out, i = [], 0
while i < len(args):
    a = args[i]
    if a in drop:
        i += 2; continue
    out += [a, override.get(a, args[i + 1])]
    i += 2
out += ["--nvml-lib", "off", "--dcgm", "off", "--kubeconfig", "off", "--ib-sysfs-root", "off"]
print("\0".join(out), end="")
PY
mapfile -d '' -t aargs <"$work/agent.args"
"$agent" "${aargs[@]}" >"$work/agent.log" 2>&1 &
apid=$!
sleep 3.5
if kill -0 "$apid" 2>/dev/null; then
  kill -TERM "$apid"
  wait "$apid"; rc=$?
  apid=""
  if [[ $rc -eq 0 ]] && grep -q 'msg="probes running" count=2' "$work/agent.log" &&
     grep -Eq 'msg="stopped" spooled=[1-9]' "$work/agent.log"; then
    ok "gpuheal-agent accepts the rendered args: 2 probes running, results spooled, clean stop"
  else
    bad "gpuheal-agent with the rendered args (exit $rc)"; sed 's/^/     | /' "$work/agent.log" | tail -n 15
  fi
else
  wait "$apid"; rc=$?
  apid=""
  bad "gpuheal-agent refused the rendered args (exit $rc)"; sed 's/^/     | /' "$work/agent.log" | tail -n 15
fi

echo "deploy_helm_agent: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
