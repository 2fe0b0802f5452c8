#!/usr/bin/env python3
# gen-podhost.py - writes the podhost-* scenarios (issue 25 section 4): a
# node that stays Ready while its kubelet refuses every GPU pod at
# admission (a device plugin's Allocate failing: "nvml: GPU is lost",
# "requested number of devices unavailable") or its runtime cannot create
# their containers (nvidia-container-cli hung in a driver call). Judged from
# the pods' own failures, by whose pods they are: pods of several jobs
# refused by one node blame the node; one job's pods never do (its image or
# its placement may be what fails); the same refusal on many nodes at once
# is one shared cause (a device plugin rollout), not N node faults
# (issue 23).
#
# Written from the public reports test/scenarios/README.md cites (the
# message texts are theirs); every expectation was decided before the
# engine was run on it. Deterministic: run it after editing and commit the
# output. Usage: gen-podhost.py [OUTDIR] (default: this folder).
import json
import os
import random
import sys
from datetime import datetime, timedelta, timezone

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
BASE = datetime(2026, 12, 10, 6, 0, 0, tzinfo=timezone.utc)
OUT_OF_SERVICE = ["isolate_node", "drain_node", "reset_gpu", "reboot_node", "replace_node"]
NO_JOB = ["restart_from_checkpoint", "retry_in_place"]

# The kubelet's words (pod status.message), from the reports.
GPU_LOST = ("Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc "
            "error: code = Unknown desc = Unable to retrieve list of available devices: error creating "
            "nvml.Device 5: nvml: GPU is lost, which is unexpected")          # NVIDIA/k8s-device-plugin#231
UNAVAILABLE = ("Pod Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
               "Requested: %d, Available: 0, which is unexpected")             # kubernetes/kubernetes#130145
UPDATE_UNAVAILABLE = ("Pod Update plugin resources failed due to requested number of devices unavailable "
                      "for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected")  # kube-batch#931
PLUGIN_EOF = ("Allocate failed due to rpc error: code = Unavailable desc = error reading from server: "
              "EOF, which is unexpected")                                      # Project-HAMi/HAMi#71
CLI_TIMEOUT = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
               "runc create failed: unable to start container process: error during container init: "
               "error running hook #0: error running hook: exit status 1, stdout: , stderr: "
               "nvidia-container-cli: initialization error: driver rpc error: timed out: unknown")
# NVIDIA/nvidia-container-toolkit#237 (driver rpc error: timed out)
BAD_EXEC = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
            "runc create failed: unable to start container process: exec: \"torchrun2\": executable "
            "file not found in $PATH: unknown")


def ts(sec):
    t = BASE + timedelta(seconds=sec)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06dZ" % t.microsecond


class Scn:
    def __init__(self, name, nodes, jobs):
        self.name = name
        self.h = {"scenario": name, "nodes": nodes, "gpus_per_node": 8,
                  "jobs": [{"name": j, "nodes": ns, "ranks_per_node": r} for j, ns, r in jobs]}
        self.s = []

    def add(self, sec, **kw):
        d = {"ts": ts(sec)}
        d.update(kw)
        self.s.append(d)

    def write(self, desc, incidents, allow_extra=False):
        lines = [json.dumps(self.h, separators=(",", ":"))]
        lines += [json.dumps(d, separators=(",", ":")) for d in sorted(self.s, key=lambda d: d["ts"])]
        with open(os.path.join(OUT, self.name + ".jsonl"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(OUT, self.name + ".expect.json"), "w") as f:
            f.write(json.dumps({"description": desc, "incidents": incidents,
                                "allow_extra": allow_extra}, indent=1) + "\n")


def refused(s, sec, node, job, pod, reason, msg, code=None):
    ns = job.split("/")[0]
    d = dict(node=node, source="kube", kind="pod_failed", namespace=ns, pod=pod, job=job,
             reason=reason, msg=msg)
    if code is not None:
        d["exit_code"] = code
    s.add(sec, **d)


def started(s, sec, node, job, pod):
    s.add(sec, node=node, source="kube", kind="pod_started", namespace=job.split("/")[0], pod=pod, job=job)


def training(s, rng, job, nodes, t0, t1, period=6.0, ms=5800):
    """A healthy job stepping on nodes (one rank per node per step, rotating GPUs)."""
    st = 1
    t = t0
    while t < t1:
        for i, n in enumerate(nodes):
            s.add(t + rng.uniform(0, 0.3), node=n, gpu=(st + i) % 8, source="telemetry", kind="step",
                  job=job, rank=i * 8 + (st + i) % 8, step=st, step_ms=round(ms * (1 + rng.gauss(0, 0.01)), 1))
        if st % 100 == 0:
            s.add(t + 2, source="telemetry", kind="checkpoint", job=job, step=st,
                  path="s3://ckpt/%s/step-%06d" % (job.replace("/", "-"), st), state="saved")
        st += 1
        t += period


def sfx(rng):
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


# 1. A GPU is lost on an idle node; the device plugin's GetPreferredAllocation
# fails for every pod after it ("nvml: GPU is lost"), the Node stays Ready and
# the scheduler keeps sending it the pods of three queued jobs, whose
# controllers create them again and again. Isolate the node (no pod of any
# job ever ran there: nothing restarts), run diagnostics.
def gpu_lost_three_jobs():
    rng = random.Random(2501)
    nodes = ["dgx-a100-%02d" % i for i in range(1, 13)]
    bad = "dgx-a100-10"
    jobs = [("ml/pretrain-30b", nodes[:8], 8), ("research/sweep-lr", [nodes[8], bad], 1),
            ("ml/eval-7b", [nodes[10], bad], 8), ("ml/finetune-13b", [nodes[11], bad], 8)]
    s = Scn("podhost-gpu-lost-three-jobs", nodes, jobs)
    training(s, rng, "ml/pretrain-30b", nodes[:8], 10, 1500)
    # the sweep: one-GPU trials; the scheduler picks the "free" node again and again
    t = 600.0
    for k in range(6):
        started(s, t - 40 + k, nodes[8], "research/sweep-lr", "sweep-lr-%d-%s" % (k, sfx(rng)))
        refused(s, t, bad, "research/sweep-lr", "sweep-lr-%d-%s" % (k + 6, sfx(rng)), "UnexpectedAdmissionError",
                GPU_LOST)
        t += rng.uniform(25, 40)
    for k in range(3):
        refused(s, 640 + 45 * k + rng.uniform(0, 5), bad, "ml/eval-7b", "eval-7b-%s" % sfx(rng),
                "UnexpectedAdmissionError", GPU_LOST)
    started(s, 620, nodes[10], "ml/eval-7b", "eval-7b-%s" % sfx(rng))
    for k in range(4):
        refused(s, 700 + 30 * k + rng.uniform(0, 5), bad, "ml/finetune-13b", "finetune-13b-worker-1",
                "UnexpectedAdmissionError", GPU_LOST)
    started(s, 690, nodes[11], "ml/finetune-13b", "finetune-13b-worker-0")
    s.write("a node whose GPU was lost stays Ready and refuses the pods of three jobs at admission "
            "(the device plugin's GetPreferredAllocation: \"nvml: GPU is lost\"): one incident on that node "
            "that isolates it, no job restarted or blamed, the training elsewhere untouched",
            [{"class": "unknown", "node": bad, "actions_include": ["isolate_node"],
              "actions_exclude": NO_JOB, "max_decide_s": 300}])


# 2. The kubelet's device manager keeps stale allocations (kubernetes#130145):
# every pod that asks for a GPU is refused ("requested number of devices
# unavailable ... Available: 0") until the kubelet restarts. Two jobs' pods,
# four in all, on one node: the node.
def devices_unavailable_two_jobs():
    rng = random.Random(2502)
    nodes = ["gpu-node-%03d" % i for i in range(1, 17)]
    bad = nodes[5]
    jobs = [("batch/infer-nightly", nodes[:6], 1), ("team-b/finetune", nodes[4:10], 2)]
    s = Scn("podhost-devices-unavailable-two-jobs", nodes, jobs)
    for k in range(6):
        n = nodes[k]
        if n != bad:
            started(s, 100 + k, n, "batch/infer-nightly", "infer-nightly-%d-%s" % (k, sfx(rng)))
    for k, t in enumerate((300, 420, 560)):
        refused(s, t + rng.uniform(0, 3), bad, "batch/infer-nightly", "infer-nightly-5-%s" % sfx(rng),
                "UnexpectedAdmissionError", UNAVAILABLE % 1)
    refused(s, 480, bad, "team-b/finetune", "finetune-1-%s" % sfx(rng), "UnexpectedAdmissionError",
            UNAVAILABLE % 2)
    s.write("the kubelet's device manager on one node keeps stale allocations and refuses every pod that "
            "asks for a GPU (\"requested number of devices unavailable ... Available: 0\"), pods of two "
            "jobs within five minutes: one incident on that node that isolates it, no job blamed",
            [{"class": "unknown", "node": bad, "actions_include": ["isolate_node"],
              "actions_exclude": NO_JOB, "max_decide_s": 600}])


# 3. A hung driver call: nvidia-container-cli times out in the prestart hook
# ("driver rpc error: timed out") for every GPU container the runtime starts
# there (StartError, exit code 128); the pods of three jobs fail within a
# minute. Isolate; the jobs are not the application's fault.
def container_cli_timeout():
    rng = random.Random(2503)
    nodes = ["hgx-h100-%02d" % i for i in range(1, 9)]
    bad = "hgx-h100-04"
    jobs = [("nlp/pretrain-8b", nodes[:4], 8), ("vision/vit-h", [bad, nodes[4]], 8),
            ("nlp/rlhf-reward", [bad, nodes[5]], 4)]
    s = Scn("podhost-container-cli-timeout", nodes, jobs)
    # the 8B job was running on the node before the hang; its pod there
    # failed on restart and its peers time out
    training(s, rng, "nlp/pretrain-8b", nodes[:3], 10, 900)
    refused(s, 905.2, bad, "nlp/pretrain-8b", "pretrain-8b-worker-3", "StartError", CLI_TIMEOUT, 128)
    refused(s, 917.8, bad, "vision/vit-h", "vit-h-worker-0", "StartError", CLI_TIMEOUT, 128)
    refused(s, 931.4, bad, "nlp/rlhf-reward", "rlhf-reward-0", "StartError", CLI_TIMEOUT, 128)
    refused(s, 960.0, bad, "vision/vit-h", "vit-h-worker-0", "RunContainerError", CLI_TIMEOUT)
    s.write("a hung driver call makes nvidia-container-cli time out (\"driver rpc error: timed out\") "
            "in the prestart hook of every GPU container on one node: pods of three jobs fail with "
            "StartError within half a minute: one incident on that node that isolates it, no "
            "application blamed",
            [{"class": "unknown", "node": bad, "actions_include": ["isolate_node"],
              "max_decide_s": 120}])


# 4. One job's pods refused at admission on one node, again and again (a
# batch scheduler's stale cache placed it on a node whose GPUs are taken:
# kube-batch#931). No other job's pod goes there: nothing says the node is
# at fault; nothing is taken out of service.
def one_job_one_node():
    rng = random.Random(2504)
    nodes = ["gpu-%02d" % i for i in range(1, 9)]
    bad = "gpu-06"
    jobs = [("tf/imgsr-11103465", [bad], 1), ("ml/llm-13b", nodes[:4], 8)]
    s = Scn("podhost-one-job-one-node", nodes, jobs)
    training(s, rng, "ml/llm-13b", nodes[:4], 10, 1200)
    t = 300.0
    for k in range(8):
        refused(s, t, bad, "tf/imgsr-11103465", "imgsr-11103465-worker-0", "UnexpectedAdmissionError",
                UPDATE_UNAVAILABLE)
        t += rng.uniform(20, 60)
    s.write("one job's pod refused at admission eight times on one node (a scheduler's stale cache "
            "placed it where no GPU is free: \"Pod Update plugin resources failed ... Available: 0\"), "
            "no other job's pod refused there: no node blamed, nothing taken out of service",
            [{"class": "application", "node": None, "actions_exclude": OUT_OF_SERVICE,
              "count_min": 0, "count_max": 1}])


# 5. One job's image names a command that is not in it: every pod of the
# job fails at container start on four nodes (runc: exec: "torchrun2":
# executable file not found). The job's own doing: an application incident
# at most, no node blamed.
def one_job_bad_image():
    rng = random.Random(2505)
    nodes = ["gpu-%02d" % i for i in range(1, 9)]
    jobs = [("ml/llm-7b", nodes[:4], 8), ("ml/llm-13b", nodes[4:], 8)]
    s = Scn("podhost-one-job-bad-image", nodes, jobs)
    training(s, rng, "ml/llm-13b", nodes[4:], 10, 900)
    for r in range(2):
        for i, n in enumerate(nodes[:4]):
            refused(s, 200 + 40 * r + i * 0.7 + rng.uniform(0, 0.2), n, "ml/llm-7b", "llm-7b-worker-%d" % i,
                    "StartError", BAD_EXEC, 128)
    s.write("one job's image lacks its entrypoint: its pods fail at container start (exec: \"torchrun2\": "
            "executable file not found) on all four of its nodes, twice: the application's, no node "
            "blamed or taken out",
            [{"class": "application", "node": None, "job": "ml/llm-7b", "actions_exclude": OUT_OF_SERVICE}])


# 6. A device plugin rollout gone wrong: the new DaemonSet restarts the plugin
# on 40 nodes within four minutes and, while it re-registers, the kubelet's
# Allocate calls fail ("error reading from server: EOF") for the pods of
# several jobs on every node. One shared cause: no node taken out.
def plugin_rollout_40():
    rng = random.Random(2506)
    nodes = ["gke-a3-pool-9f3c%02d" % i for i in range(40)]
    array = "batch/embed-corpus"
    smalls = ["team-%s/notebook" % c for c in "abcdefgh"]
    jobs = [(array, nodes, 1)] + [(j, nodes[i * 5:(i + 1) * 5], 1) for i, j in enumerate(smalls)]
    s = Scn("podhost-device-plugin-rollout-40", nodes, jobs)
    order = list(range(40))
    rng.shuffle(order)
    for k, i in enumerate(order):
        n = nodes[i]
        t = 600 + 6 * k + rng.uniform(0, 3)  # the plugin restarts on this node
        refused(s, t + rng.uniform(1, 8), n, array, "embed-corpus-%d-%s" % (i, sfx(rng)),
                "UnexpectedAdmissionError", PLUGIN_EOF)
        refused(s, t + rng.uniform(10, 20), n, array, "embed-corpus-%d-%s" % (i, sfx(rng)),
                "UnexpectedAdmissionError", PLUGIN_EOF)
        refused(s, t + rng.uniform(20, 40), n, smalls[i // 5], "notebook-%s-%s" % (sfx(rng), sfx(rng)),
                "UnexpectedAdmissionError", PLUGIN_EOF)
    s.write("a device plugin rollout restarts the plugin on 40 nodes within four minutes and the kubelet "
            "refuses pods of several jobs on every one of them (\"Allocate failed due to rpc error: ... "
            "error reading from server: EOF\"): one shared-cause incident, no node blamed or taken out",
            [{"class": "unknown", "node": None, "scope": "fleet",
              "affected_nodes": [nodes[order[0]], nodes[order[20]], nodes[order[39]]],
              "actions_exclude": OUT_OF_SERVICE + NO_JOB}])


for f in (gpu_lost_three_jobs, devices_unavailable_two_jobs, container_cli_timeout, one_job_one_node,
          one_job_bad_image, plugin_rollout_40):
    f()
