#!/usr/bin/env bash
# python_pod_spec.sh - the training pod spec of python/README.md (its ```yaml
# block) is what the API server accepts and what the reporter reads:
#   - `kubectl apply --dry-run=server` of it, in a fresh namespace, passes;
#   - its container mounts the agent's socket directory (the chart's
#     agent.telemetrySocketDir) and GPUHEAL_SOCKET points into it; the resume
#     ConfigMap is <job>-gpuheal-resume, optional, mounted where
#     resume_checkpoint() reads;
#   - with its environment resolved as the kubelet would (downward API:
#     the namespace, the Job controller's job-name label, the node) and what
#     torchrun adds (RANK, LOCAL_RANK, WORLD_SIZE), Reporter() reports as
#     job NAMESPACE/NAME, the rank and the node, with no argument.
# Prints ok/FAIL lines and "python_pod_spec: N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${GH_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
[ -n "${GH_KUBE_ENV:-}" ] && [ -r "$GH_KUBE_ENV" ] || { echo "skip: no GH_KUBE_ENV"; exit 0; }
. "$GH_KUBE_ENV"
export KUBECONFIG
K="$GH_KUBE_BIN/kubectl"
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
NS=py-pod-$$-$RANDOM
work=$(mktemp -d "${TMPDIR:-/tmp}/gh-pypod.XXXXXX")
trap '"$K" delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1; rm -rf "$work"' EXIT

python3 - "$repo/python/README.md" > "$work/job.yaml" <<'PY'
import re, sys
blocks = re.findall(r"^```yaml\n(.*?)^```", open(sys.argv[1]).read(), re.S | re.M)
assert len(blocks) == 1, "python/README.md: %d yaml blocks, want 1" % len(blocks)
print(blocks[0], end="")
PY
[ -s "$work/job.yaml" ] || { bad "no pod spec in python/README.md"; echo "python_pod_spec: $pass passed, $fail failed"; exit 1; }
"$K" create namespace "$NS" >/dev/null && ok "namespace $NS" || bad "namespace $NS"
if out=$("$K" -n "$NS" apply --dry-run=server -f "$work/job.yaml" 2>&1); then
  ok "python/README.md's Job: kubectl apply --dry-run=server ($out)"
else
  bad "python/README.md's Job refused by the API server:"; sed 's/^/     | /' <<<"$out"
fi
# the object as the server defaults it, as JSON
"$K" -n "$NS" apply --dry-run=server -f "$work/job.yaml" -o json > "$work/job.json" 2>/dev/null

sock_dir=$(sed -nE 's/^  telemetrySocketDir: ([^ #]+).*/\1/p' "$repo/deploy/helm/gpuheal/values.yaml")
out=$(cd "$repo/python" && PYTHONDONTWRITEBYTECODE=1 python3 - "$work/job.json" "$NS" "$sock_dir" <<'PY'
import json, os, socket, sys, tempfile, threading
job = json.load(open(sys.argv[1])); ns = sys.argv[2]; sock_dir = sys.argv[3]
import gpuheal_reporter
from gpuheal_reporter import Reporter, DEFAULT_RESUME_DIR
problems = []
pod = job["spec"]["template"]; c = pod["spec"]["containers"][0]
name = job["metadata"]["name"]
vols = {v["name"]: v for v in pod["spec"]["volumes"]}
mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
env = {e["name"]: e for e in c["env"]}
# the socket
hp = [v for v in vols.values() if v.get("hostPath", {}).get("path") == sock_dir]
if not hp:
    problems.append("no hostPath volume of %s (the chart's telemetrySocketDir)" % sock_dir)
elif sock_dir not in mounts or mounts[sock_dir]["name"] != hp[0]["name"]:
    problems.append("%s not mounted at %s" % (hp[0]["name"], sock_dir))
sock = env.get("GPUHEAL_SOCKET", {}).get("value", gpuheal_reporter.DEFAULT_SOCKET)
if os.path.dirname(sock) != sock_dir:
    problems.append("GPUHEAL_SOCKET %s is not in %s" % (sock, sock_dir))
# the resume ConfigMap
cm = [v for v in vols.values() if "configMap" in v]
if not cm or cm[0]["configMap"].get("name") != name + "-gpuheal-resume" or cm[0]["configMap"].get("optional") is not True:
    problems.append("resume volume %r, want configMap %s-gpuheal-resume, optional" % (cm, name))
elif DEFAULT_RESUME_DIR not in mounts or mounts[DEFAULT_RESUME_DIR]["name"] != cm[0]["name"]:
    problems.append("the resume ConfigMap is not mounted at %s" % DEFAULT_RESUME_DIR)
# the environment, resolved as the kubelet would
labels = {"batch.kubernetes.io/job-name": name, "app": "llm-pretrain"}
resolved = {"RANK": "13", "LOCAL_RANK": "5", "WORLD_SIZE": "32"}   # torchrun, per process
for k, e in env.items():
    if "value" in e:
        resolved[k] = e["value"]
        continue
    path = e["valueFrom"]["fieldRef"]["fieldPath"]
    if path == "metadata.namespace":
        resolved[k] = ns
    elif path == "spec.nodeName":
        resolved[k] = "gpu-node-07"
    elif path.startswith("metadata.labels['"):
        key = path[len("metadata.labels['"):-2]
        if key not in labels:
            problems.append("%s: label %s is not one the Job controller sets" % (k, key))
        resolved[k] = labels.get(key, "")
    else:
        problems.append("%s: unexpected fieldRef %s" % (k, path))
d = tempfile.mkdtemp()
resolved["GPUHEAL_SOCKET"] = os.path.join(d, "telemetry.sock")   # the agent's socket, here
for k in list(os.environ):
    if k.startswith("GPUHEAL_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_NAME", "POD_NAMESPACE"):
        del os.environ[k]
os.environ.update(resolved)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind(resolved["GPUHEAL_SOCKET"]); srv.listen(1)
got = []
def serve():
    c, _ = srv.accept()
    buf = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        buf += b
    got.extend(json.loads(l) for l in buf.decode().splitlines())
t = threading.Thread(target=serve, daemon=True); t.start()
r = Reporter()
r.step(100, 950.0, loss=2.5)
r.close(timeout=5)
t.join(5)
want = {"job": ns + "/" + name, "rank": 13, "node": "gpu-node-07", "step": 100}
if not got or any(got[0].get(k) != v for k, v in want.items()):
    problems.append("Reporter() sent %r, want %r" % (got, want))
if (r.world_size, r.local_rank) != (32, 5):
    problems.append("world_size, local_rank %r" % ((r.world_size, r.local_rank),))
print("\n".join(problems) if problems else "OK Reporter() sent job %s rank %d node %s" % (got[0]["job"], got[0]["rank"], got[0]["node"]))
PY
)
[[ $out == OK* ]] && ok "the pod spec's socket, resume ConfigMap and environment: $out" ||
  { bad "the pod spec and the reporter disagree:"; sed 's/^/     | /' <<<"$out"; }
echo "python_pod_spec: $pass passed, $fail failed"
[ "$fail" = 0 ]
