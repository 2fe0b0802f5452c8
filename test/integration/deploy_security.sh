#!/usr/bin/env bash
# deploy_security.sh - the pod and container security settings of every
# workload in deploy/*.yaml and in the Helm chart as rendered (defaults,
# agent.kmsg.access=cdi and =file, PostgreSQL, SQLite on a PVC), checked
# field by field on the parsed YAML (python3 + PyYAML):
#   controller: runAsNonRoot, a non-zero runAsUser, seccomp RuntimeDefault,
#     allowPrivilegeEscalation false, capabilities drop ALL (none added),
#     readOnlyRootFilesystem, not privileged, no hostPath;
#   agent: seccomp RuntimeDefault, readOnlyRootFilesystem, and only what its
#     kernel-log access mode needs (docs/deploy.md "Agent privileges"):
#     privileged -> privileged (for the /dev/kmsg device cgroup rule), /dev/kmsg
#     mounted read-only; cdi -> not privileged, no escalation, drop ALL, add
#     only SYSLOG, no /dev/kmsg hostPath; file -> not privileged, no
#     escalation, drop ALL, no capability, the log directory read-only;
#     hostPaths only /dev/kmsg or the log directory, /run/gpuheal, /var/lib/gpuheal;
#   both: no host network/PID/IPC (the agent: hostPID, to identify the
#     telemetry socket's writers, issue 24), the token Secret mounted read-only with no
#     world permission bits, the image's USER non-root (deploy/Containerfile).
# An unknown container fails (a new one must be given a profile here). RBAC
# least privilege (kubectl auth can-i) is in deploy_manifests.sh.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${GH_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
deploy=$repo/deploy
work=$(mktemp -d "${TMPDIR:-/tmp}/gh-deploy-sec.XXXXXX")
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

if ! python3 -c 'import yaml' >/dev/null 2>&1; then
  echo "skip deploy_security: python3 with PyYAML not found (cannot parse the manifests)"
  exit 0
fi

# The image runs as a non-root user unless a manifest says otherwise.
user=$(sed -n 's/^USER[[:space:]]\+//p' "$deploy/Containerfile" | tail -n 1)
[[ -n $user && ${user%%:*} != 0 && ${user%%:*} != root ]] && ok "deploy/Containerfile: USER $user (non-root)" ||
  bad "deploy/Containerfile: USER '$user' is not a non-root user"

# check.py FILE MODE: prints "ok ..."/"FAIL ..." lines; MODE is the agent's
# kmsg access mode of that rendering (privileged, cdi, file).
cat >"$work/check.py" <<'PY'
import sys, yaml
path, mode = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(path)) if isinstance(d, dict)]
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod", "ReplicaSet"}
seen = 0
def out(good, what):
    print(("ok   " if good else "FAIL ") + what)

for d in docs:
    if d.get("kind") not in WORKLOADS:
        continue
    spec = d["spec"]
    if d["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod = spec if d["kind"] == "Pod" else spec["template"]["spec"]
    name = "%s/%s" % (d["kind"], d["metadata"]["name"])
    psc = pod.get("securityContext") or {}
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if host == "hostPID" and d["kind"] == "DaemonSet" and "agent" in d["metadata"]["name"]:
            # the agent identifies the telemetry socket's writers by PID
            # and cgroup (issue 24: a rank speaks only for its own pod)
            out(pod.get(host) is True, "%s: hostPID (telemetry writers identified)" % name)
            continue
        out(not pod.get(host), "%s: no %s" % (name, host))
    for c in (pod.get("initContainers") or []) + pod["containers"]:
        seen += 1
        cn = "%s[%s]" % (name, c["name"])
        sc = c.get("securityContext") or {}
        def eff(key):  # container setting, else pod setting
            return sc[key] if key in sc else psc.get(key)
        caps = sc.get("capabilities") or {}
        drop = [x.upper() for x in caps.get("drop") or []]
        add = sorted(x.upper() for x in caps.get("add") or [])
        seccomp = (eff("seccompProfile") or {}).get("type")
        out(seccomp == "RuntimeDefault", "%s: seccompProfile RuntimeDefault (%s)" % (cn, seccomp))
        out(sc.get("readOnlyRootFilesystem") is True, "%s: readOnlyRootFilesystem true" % cn)
        mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
        hostpaths = {}
        for vn, m in mounts.items():
            v = vols.get(vn, {})
            if "hostPath" in v:
                hostpaths[v["hostPath"]["path"]] = bool(m.get("readOnly"))
            if "secret" in v:
                out(m.get("readOnly") is True, "%s: Secret volume %s mounted read-only" % (cn, vn))
                dm = v["secret"].get("defaultMode", 0o644)
                out(dm & 0o007 == 0, "%s: Secret volume %s defaultMode %s has no world bits" % (cn, vn, oct(dm)))
            if "projected" in v:
                out(m.get("readOnly") is True, "%s: projected token volume %s mounted read-only" % (cn, vn))
                dm = v["projected"].get("defaultMode", 0o644)
                out(dm & 0o007 == 0, "%s: projected volume %s defaultMode %s has no world bits" % (cn, vn, oct(dm)))
        if c["name"] == "controller":
            out(eff("runAsNonRoot") is True, "%s: runAsNonRoot true" % cn)
            uid = eff("runAsUser")
            out(isinstance(uid, int) and uid > 0, "%s: runAsUser %s (non-zero)" % (cn, uid))
            out(sc.get("allowPrivilegeEscalation") is False, "%s: allowPrivilegeEscalation false" % cn)
            out("ALL" in drop and not add, "%s: capabilities drop ALL, add none (drop=%s add=%s)" % (cn, drop, add))
            out(not sc.get("privileged"), "%s: not privileged" % cn)
            out(not hostpaths, "%s: no hostPath volume (%s)" % (cn, sorted(hostpaths)))
        elif c["name"] == "agent":
            allowed = {"/run/gpuheal", "/var/lib/gpuheal"}
            if mode == "privileged":
                out(sc.get("privileged") is True, "%s [kmsg=privileged]: privileged (device cgroup for /dev/kmsg)" % cn)
                out(hostpaths.get("/dev/kmsg") is True, "%s [kmsg=privileged]: /dev/kmsg hostPath mounted read-only" % cn)
                allowed.add("/dev/kmsg")
            else:
                out(sc.get("privileged") is False, "%s [kmsg=%s]: privileged false" % (cn, mode))
                out(sc.get("allowPrivilegeEscalation") is False, "%s [kmsg=%s]: allowPrivilegeEscalation false" % (cn, mode))
                want = ["SYSLOG"] if mode == "cdi" else []
                out("ALL" in drop and add == want,
                    "%s [kmsg=%s]: capabilities drop ALL, add %s (drop=%s add=%s)" % (cn, mode, want or "none", drop, add))
                out("/dev/kmsg" not in hostpaths, "%s [kmsg=%s]: no /dev/kmsg hostPath" % (cn, mode))
                if mode == "file":
                    logdirs = [p for p in hostpaths if p not in allowed]
                    out(len(logdirs) == 1 and hostpaths[logdirs[0]] is True,
                        "%s [kmsg=file]: the kernel-log directory %s mounted read-only" % (cn, logdirs))
                    allowed.update(logdirs)
            extra = sorted(set(hostpaths) - allowed)
            out(not extra, "%s: hostPaths only %s (extra: %s)" % (cn, sorted(allowed), extra))
        else:
            out(False, "%s: unknown container: give it a profile in deploy_security.sh" % cn)
out(seen > 0, "%s: %d container(s) checked" % (path.rsplit("/", 1)[-1], seen))
PY

run_check() { # LABEL FILE MODE
  local label=$1 f=$2 mode=$3 line
  while IFS= read -r line; do
    case $line in
      "ok   "*) ok "$label: ${line#ok   }" ;;
      "FAIL "*) bad "$label: ${line#FAIL }" ;;
      *) bad "$label: $line" ;;
    esac
  done < <(python3 "$work/check.py" "$f" "$mode" 2>&1)
}

run_check deploy/controller-deployment.yaml "$deploy/controller-deployment.yaml" privileged
run_check deploy/agent-daemonset.yaml "$deploy/agent-daemonset.yaml" privileged
# Every plain manifest with a workload is covered above.
for f in "$deploy"/*.yaml; do
  case $(basename "$f") in controller-deployment.yaml | agent-daemonset.yaml) continue ;; esac
  grep -qE '^kind: (Deployment|DaemonSet|StatefulSet|Job|CronJob|Pod)$' "$f" && bad "deploy/$(basename "$f") has a workload this test does not check"
done

helm=${GH_HELM:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/helm/bin/helm}
if [[ ! -x $helm ]]; then
  echo "skip helm chart: no helm at $helm (deploy/helm/get-helm builds it)"
else
  export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data
  variants=(
    "defaults|privileged|"
    "kmsg-cdi|cdi|--set agent.kmsg.access=cdi"
    "kmsg-file|file|--set agent.kmsg.access=file --set agent.runtimeClassName="
    "postgres|privileged|--set controller.db.type=postgres --set controller.db.postgres.url=postgres://gpuheal@db:5432/gpuheal?sslmode=require --set controller.db.postgres.passwordSecret.name=pg"
    "sqlite-pvc|privileged|--set controller.db.sqlite.persistence.enabled=true"
  )
  for v in "${variants[@]}"; do
    IFS='|' read -r name mode flags <<<"$v"
    read -r -a args <<<"$flags"
    out=$work/helm-$name.yaml
    if "$helm" template gpuheal "$deploy/helm/gpuheal" -n gpuheal-system "${args[@]}" >"$out" 2>"$work/helm.err"; then
      run_check "helm($name)" "$out" "$mode"
    else
      bad "helm template ($name): $(head -c 300 "$work/helm.err")"
    fi
  done
fi

echo "deploy_security: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
