"""manifests.py - the plain manifests of deploy/ as test/node/e2e applies
them on the real test node: reads the YAML documents named on the command
line and writes them to stdout with only the environment's differences:
image pulled Never (built locally); the agent without the nvidia
RuntimeClass, following the kernel-log file $HOST/log/kern.log (the chart's
kmsg.access=file form: not privileged, capabilities dropped) with its
hostPaths under $HOST, the controller reached at the Service's ClusterIP
(no cluster DNS here), the fake reboot / validate commands; one controller
replica pinned to the real node and tolerating the gpuheal taint; the ingest
token set; the RecoveryPolicy's node cooldown 0s and 1000 actions/hour.
Env: HOST, NODE, CONTROLLER_URL, TOKEN, SCRIPTS_CM.
"""
import os
import sys

import yaml

host, node = os.environ["HOST"], os.environ["NODE"]
url, token = os.environ["CONTROLLER_URL"], os.environ["TOKEN"]
scripts_cm = os.environ["SCRIPTS_CM"]


def agent(ds):
    spec = ds["spec"]["template"]["spec"]
    spec.pop("runtimeClassName", None)
    c = spec["containers"][0]
    c["imagePullPolicy"] = "Never"
    args = c["args"]
    i = args.index("--kmsg")
    args[i + 1] = "/host/kmsg/kern.log"
    args[i + 2:i + 2] = ["--kmsg-mode", "file"]
    i = args.index("--controller")
    args[i + 1] = url
    args += ["--boot-id-file", "/var/lib/gpuheal/boot_id",
             "--reboot-cmd", "/bin/sh /etc/gpuheal/scripts/fake-reboot.sh",
             "--validate-cmd", "/bin/true"]
    c["env"] = [e for e in c["env"] if not e["name"].startswith("NVIDIA_")]
    c["env"].append({"name": "BOOT_ID_FILE", "value": "/var/lib/gpuheal/boot_id"})
    sc = c["securityContext"]
    sc["privileged"] = False
    sc["allowPrivilegeEscalation"] = False
    sc["capabilities"] = {"drop": ["ALL"]}
    for m in c["volumeMounts"]:
        if m["name"] == "kmsg":
            m["mountPath"] = "/host/kmsg"
    c["volumeMounts"].append({"name": "scripts", "mountPath": "/etc/gpuheal/scripts", "readOnly": True})
    paths = {"kmsg": (host + "/log", "Directory"), "run": (host + "/run/gpuheal", None),
             "state": (host + "/lib/gpuheal", None)}
    for v in spec["volumes"]:
        if v["name"] in paths:
            p, t = paths[v["name"]]
            v["hostPath"]["path"] = p
            if t:
                v["hostPath"]["type"] = t
    spec["volumes"].append({"name": "scripts", "configMap": {"name": scripts_cm, "defaultMode": 0o555}})


def controller(dep):
    dep["spec"]["replicas"] = 1
    spec = dep["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    spec["tolerations"] = [{"key": "gpuheal.io/unhealthy", "operator": "Exists"}]
    spec["containers"][0]["imagePullPolicy"] = "Never"


docs = []
for path in sys.argv[1:]:
    with open(path) as f:
        docs += [d for d in yaml.safe_load_all(f) if d]
for d in docs:
    kind, name = d.get("kind"), d.get("metadata", {}).get("name")
    if kind == "DaemonSet" and name == "gpuheal-agent":
        agent(d)
    elif kind == "Deployment" and name == "gpuheal-controller":
        controller(d)
    elif kind == "Secret" and name == "gpuheal-ingest-token":
        d["stringData"] = {"token": token}
    elif kind == "RecoveryPolicy":
        d["spec"]["budgets"].update({"nodeCooldown": "0s", "maxActionsPerHour": 1000,
                                     "maxUnavailableNodes": 1})
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
