#!/usr/bin/env python3
# gen-npd.py - writes the npd-* scenarios (issue 16 item 14): Node conditions
# that node-problem-detector (NPD) or a GPU check sets, as the controller's
# Node informer turns them into node_condition signals, and what gpuheal
# must decide: a condition alone is a flag, not harm; one that means the
# node cannot run work takes it out of scheduling at once; a pod the host
# failed is harm (its job restarts); an application's own crash on a
# flagged node is the application's, never the node's. The condition names,
# reasons and meanings are NPD's own (test/scenarios/README.md cites them);
# the expectations were written before running the engine on them.
# Deterministic: run it after editing and commit the output. It writes only
# npd-* files. Usage: gen-npd.py [OUTDIR] (default: this folder).
import json
import os
import sys
from datetime import datetime, timedelta, timezone

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
BASE = datetime(2026, 11, 30, 3, 10, 0, tzinfo=timezone.utc)
OUT_OF_SERVICE = ["isolate_node", "drain_node", "replace_node", "reboot_node"]
JOB = "train/llm-13b"
NODES = ["a100-n01", "a100-n02", "a100-n03"]


def ts(sec):
    t = BASE + timedelta(seconds=sec)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06dZ" % t.microsecond


def sig(sec, **kw):
    d = {"ts": ts(sec)}
    d.update(kw)
    return d


def steps(first, last, t0, step_s=4.0, rpn=4, nodes=NODES, stop=None):
    """Steps of JOB on every rank; stop(node) -> the step after which that
    node's ranks say nothing more (their pod died)."""
    out = []
    for st in range(first, last + 1):
        t = t0 + (st - first) * step_s
        for r in range(len(nodes) * rpn):
            node = nodes[r // rpn]
            if stop and stop(node) is not None and st > stop(node):
                continue
            ms = 3900.0 + 40.0 * ((r * 7 + st * 3) % 5)
            out.append(sig(t + r * 0.001, node=node, gpu=r % rpn, source="telemetry", kind="step",
                           job=JOB, rank=r, step=st, step_ms=ms))
    return out


def ckpt(sec, step):
    return sig(sec, source="telemetry", kind="checkpoint", job=JOB, step=step,
               path="s3://ckpt/llm-13b/step-%d" % step, state="saved")


def cond(sec, node, condition, status, reason=None, msg=None):
    d = dict(node=node, source="kube", kind="node_condition", condition=condition, status=status,
             id="kube:node:%s:cond:%s:%s:%s" % (node, condition, status, ts(sec)))
    if reason:
        d["reason"] = reason
    if msg:
        d["msg"] = msg
    return sig(sec, **d)


def write(name, desc, lines, incidents, allow_extra=False):
    hdr = {"scenario": name, "nodes": NODES, "gpus_per_node": 4,
           "jobs": [{"name": JOB, "nodes": NODES, "ranks_per_node": 4}]}
    lines = sorted(lines, key=lambda d: d["ts"])
    with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
        f.write(json.dumps(hdr, separators=(",", ":")) + "\n")
        for d in lines:
            f.write(json.dumps(d, separators=(",", ":")) + "\n")
    exp = {"description": desc, "incidents": incidents}
    if allow_extra:
        exp["allow_extra"] = True
    with open(os.path.join(OUT, name + ".expect.json"), "w") as f:
        json.dump(exp, f, indent=2)
        f.write("\n")


def kernel_deadlock():
    # NPD's kernel monitor: "task docker:N blocked for more than N seconds"
    # sets KernelDeadlock (reason DockerHung). The runtime is stuck in the
    # kernel: no pod can start or stop there, so the node leaves scheduling
    # at once; the job's ranks there still step, so nothing is restarted.
    lines = steps(1, 80, 0.0) + [ckpt(100.0, 25)]
    lines.append(cond(150.0, "a100-n02", "KernelDeadlock", "True", "DockerHung",
                      "kernel: INFO: task docker:1234 blocked for more than 120 seconds."))
    write("npd-kernel-deadlock",
          "NPD sets KernelDeadlock (DockerHung) on a node under a running job whose ranks there keep "
          "stepping: the node cannot start or stop pods, so it is isolated at once; nothing was "
          "harmed, so the job is not restarted",
          lines,
          [{"class": "unknown", "node": "a100-n02", "actions_include": ["isolate_node"],
            "actions_exclude": ["restart_from_checkpoint", "drain_node", "reboot_node"],
            "max_decide_s": 1}])


def readonly_fs_pod_fails():
    # NPD's kernel monitor: "Remounting filesystem read-only" sets
    # ReadonlyFilesystem. Then the job's pod there fails writing to it: the
    # host's doing, so the job restarts from its checkpoint, and no
    # application incident blames the job's code.
    stop = lambda n: 45 if n == "a100-n03" else None
    lines = steps(1, 90, 0.0, stop=stop) + [ckpt(100.0, 25)]
    lines.append(cond(170.0, "a100-n03", "ReadonlyFilesystem", "True", "FilesystemIsReadOnly",
                      "EXT4-fs (nvme0n1p1): Remounting filesystem read-only"))
    lines.append(sig(181.0, node="a100-n03", source="kube", kind="pod_failed", namespace="train",
                     pod="llm-13b-worker-2", job=JOB, reason="Error", exit_code=1,
                     msg="OSError: [Errno 30] Read-only file system: '/scratch/shard-0042.bin'"))
    write("npd-readonly-fs-pod-fails",
          "NPD sets ReadonlyFilesystem on a node, then the job's pod there fails with EROFS: the node "
          "is isolated at once and, once its pod fails for the host's reason, the job restarts from "
          "its checkpoint; no application incident",
          lines,
          [{"class": "unknown", "node": "a100-n03", "actions_include": ["isolate_node"],
            "actions_exclude": ["restart_from_checkpoint"], "max_decide_s": 1},
           {"class": "unknown", "node": "a100-n03", "job": JOB,
            "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 25,
            "max_decide_s": 15}])


def runtime_restarts_app_crash():
    # NPD's systemd monitor: the kubelet started 5 times in 20 minutes sets
    # FrequentKubeletRestart. A flag: the drain waits for harm. Then the
    # job's own code crashes on that node (a Python exception, exit 1): the
    # application's bug, retried in place; the node is not blamed for it.
    stop = lambda n: 60 if n == "a100-n01" else None
    lines = steps(1, 90, 0.0, stop=stop) + [ckpt(100.0, 25)]
    lines.append(cond(120.0, "a100-n01", "FrequentKubeletRestart", "True",
                      "FrequentKubeletRestart", "kubelet is restarting frequently"))
    lines.append(sig(241.0, node="a100-n01", source="kube", kind="pod_failed", namespace="train",
                     pod="llm-13b-worker-0", job=JOB, reason="Error", exit_code=1,
                     msg="Traceback (most recent call last):\n  File \"train.py\", line 412, in <module>\n"
                         "KeyError: 'attention_mask'"))
    write("npd-runtime-restarts-app-crash",
          "NPD sets FrequentKubeletRestart (a flag: the drain waits), then the job's own code crashes "
          "on that node with a KeyError: an application incident that blames no node; the node's "
          "record takes it out of nothing",
          lines,
          # harmless (the job keeps pace, nothing to do now): decided once
          # the fleet hold (15 s) showed no other node with it (issue 23)
          [{"class": "unknown", "node": "a100-n01", "actions_exclude": OUT_OF_SERVICE,
            "max_decide_s": 15},
           {"class": "application", "node": None, "job": JOB,
            "actions_include": ["retry_in_place"], "actions_exclude": OUT_OF_SERVICE}])


def condition_cleared():
    # FrequentContainerdRestart on one node, cleared by NPD 25 minutes
    # later; meanwhile a node whose check cannot run says Unknown, and
    # another reports its conditions False (NPD's initial state). After the
    # job finishes (the safe moment a waiting drain would take), nothing is
    # drained: the flag went away. Unknown and False raise nothing.
    lines = steps(1, 90, 0.0) + [ckpt(360.0, 90)]
    lines.append(cond(30.0, "a100-n01", "KernelDeadlock", "False", "KernelHasNoDeadlock"))
    lines.append(cond(30.0, "a100-n01", "ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly"))
    lines.append(cond(60.0, "a100-n02", "FrequentContainerdRestart", "True",
                      "FrequentContainerdRestart", "containerd is restarting frequently"))
    lines.append(cond(90.0, "a100-n03", "GpuHealthCheck", "Unknown", "CheckTimedOut",
                      "the check did not finish in 60s"))
    lines.append(cond(1560.0, "a100-n02", "FrequentContainerdRestart", "False",
                      "NoFrequentContainerdRestart", "containerd is functioning properly"))
    lines.append(sig(1800.0, source="kube", kind="job_finished", job=JOB, state="complete"))
    write("npd-condition-cleared",
          "FrequentContainerdRestart is raised and cleared again before the job finishes: one record, "
          "nothing drained, not when the job finishes either; False and Unknown conditions raise "
          "nothing",
          lines,
          # harmless: decided once the fleet hold (15 s) saw no other node
          [{"class": "unknown", "node": "a100-n02", "actions_exclude": OUT_OF_SERVICE,
            "max_decide_s": 15}])


def fabric_manager_down():
    # A GPU check in NPD (NVSentinel's system-service checks) sets
    # FabricManagerDown on an NVSwitch node: no multi-GPU job can start
    # there, so it leaves scheduling at once and its GPUs are probed.
    lines = [cond(10.0, "a100-n03", "FabricManagerDown", "True", "FabricManagerNotActive",
                  "nvidia-fabricmanager.service is not active")]
    write("npd-fabric-manager-down",
          "a GPU check sets FabricManagerDown on an NVSwitch node: interconnect, isolated at once "
          "with diagnostics",
          lines,
          [{"class": "interconnect", "node": "a100-n03",
            "actions_include": ["isolate_node", "run_diagnostics"],
            "actions_exclude": ["restart_from_checkpoint"], "max_decide_s": 1}])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    kernel_deadlock()
    readonly_fs_pod_fails()
    runtime_restarts_app_crash()
    condition_cleared()
    fabric_manager_down()
    print("wrote 5 npd-* scenarios to %s" % OUT)
