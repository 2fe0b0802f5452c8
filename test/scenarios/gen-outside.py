#!/usr/bin/env python3
"""gen-outside.py - writes the "outside" scenarios (ext-*.jsonl and
ext-*.expect.json): written from shared/spec/signals.md, issue 5 and
shared/data (xid-catalog.csv proposed actions, reliability-numbers.md
thresholds) only, before reading the engine or gen-suite.py, the way another
team's suite would be written. So they differ from the project's own files
on purpose: node names like node-a and ip-10-0-0-1.ec2.internal, jobs without
a namespace, no header or a header without jobs, `pci` instead of `gpu`,
`loss` as null/"nan"/"inf", unknown fields, lines out of time order,
duplicates with and without `id`, `injected`, ts fractions of 1 to 9 digits
and a +00:00 offset, bad lines.

Deterministic (fixed seeds). Run from anywhere:
    python3 test/scenarios/gen-outside.py [OUTDIR]
"""
import datetime as dt
import json
import math
import os
import random
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
BASE = dt.datetime(2026, 11, 29, 7, 0, 0)
N_WRITTEN = 0


def ts(sec, frac=6):
    t = BASE + dt.timedelta(seconds=sec)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    us = "%06d" % t.microsecond
    if frac == 9:
        return s + "." + us + "000Z"
    return s + "." + us[:frac] + "Z"


def J(d):
    return json.dumps(d, separators=(",", ":"))


def add(name, desc, lines, incidents, header=None, raw=None):
    """lines: signal dicts (or raw strings); incidents: the expect file's list."""
    global N_WRITTEN
    out = []
    if header is not None:
        out.append(J(dict(header, scenario=name)))
    for l in (raw if raw is not None else lines):
        out.append(l if isinstance(l, str) else J(l))
    with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
        f.write("\n".join(out) + "\n")
    with open(os.path.join(OUT, name + ".expect.json"), "w") as f:
        json.dump({"description": desc, "incidents": incidents}, f, indent=2)
        f.write("\n")
    N_WRITTEN += 1


def steps(job, nodes, rpn, s0, s1, t0=0.0, dt_s=1.0, ms=1000.0, jitter=0.0, rng=None,
          slow=None, loss=None, skip=None, tsf=None):
    L = []
    for st in range(s0, s1):
        for ni, n in enumerate(nodes):
            for g in range(rpn):
                r = ni * rpn + g
                if skip and skip(st, r):
                    continue
                m = ms * (1 + (rng.uniform(-jitter, jitter) if rng else 0))
                if slow:
                    m *= slow(st, r)
                d = {"ts": ts(t0 + (st - s0) * dt_s + 0.01 * g + (tsf(n) if tsf else 0)),
                     "node": n, "gpu": g, "source": "telemetry", "kind": "step",
                     "job": job, "rank": r, "step": st, "step_ms": round(m, 2)}
                if loss is not None:
                    v = loss(st, r)
                    if v != "absent":
                        d["loss"] = v
                L.append(d)
    return L


def ckpt(job, step, t, state="saved"):
    return {"ts": ts(t), "source": "telemetry", "kind": "checkpoint", "job": job, "step": step,
            "path": "s3://ck/%s/step-%d" % (job, step), "state": state}


def podf(t, node, job, pod, reason="Error", code=1, msg="", ns=None):
    return {"ts": ts(t), "node": node, "source": "kube", "kind": "pod_failed",
            "namespace": ns or "default", "pod": pod, "job": job, "reason": reason,
            "exit_code": code, "msg": msg}


def hdr(nodes, jobs=None, rpn=8):
    h = {"nodes": nodes, "gpus_per_node": 8}
    if jobs is not None:
        h["jobs"] = [{"name": j, "nodes": nodes, "ranks_per_node": rpn} for j in jobs]
    return h


OUT_OF_SERVICE = ["isolate_node", "drain_node", "replace_node"]
HW_ACTIONS = OUT_OF_SERVICE + ["reset_gpu", "reboot_node"]

# --- GPU hardware ------------------------------------------------------------
nodes = ["ip-10-0-0-%d.ec2.internal" % i for i in range(1, 6)]
L = steps("llm", nodes, 8, 0, 60)
L += [ckpt("llm", 20, 21.5), ckpt("llm", 50, 51.5)]
L.append({"ts": ts(60.2), "node": nodes[0], "pci": "0000:3b:00.0", "source": "kmsg", "kind": "xid",
          "code": 79, "msg": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
          "extra_field": {"a": [1, 2]}})
for i in range(40):
    L.append(podf(62 + i * 0.25, nodes[i % 5], "llm", "llm-worker-%d" % i, msg="NCCL watchdog timeout"))
add("ext-x79-pci-noheader",
    "no header, EC2 node names, a job without namespace: XID 79 by PCI id, then 40 pod failures: one incident",
    L, [{"class": "gpu_hardware", "node": nodes[0], "job": "llm",
         "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 50,
         "max_decide_s": 1}])

add("ext-nvml-gpu-lost", "NVML says GPU 3 of node-a is lost; the header has no jobs",
    [{"ts": ts(5), "node": "node-a", "gpu": 3, "source": "nvml", "kind": "gpu_lost",
      "msg": "NVML_ERROR_GPU_IS_LOST"}],
    [{"class": "gpu_hardware", "node": "node-a", "gpu": 3, "actions_include": ["isolate_node"],
      "max_decide_s": 1}], header=hdr(["node-a", "node-b"]))

L = []
for i in range(200):
    L.append({"ts": ts(20 + i * 0.01), "node": "node-s", "gpu": 4, "source": "kmsg", "kind": "xid",
              "code": 79, "msg": "NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus."})
L = steps("storm", ["node-s", "node-t"], 8, 0, 20) + [ckpt("storm", 10, 10.5)] + L
add("ext-xid-storm", "200 lines of the same XID 79 within 2 s: one incident",
    L, [{"class": "gpu_hardware", "node": "node-s", "gpu": 4, "job": "storm", "checkpoint_step": 10,
         "max_decide_s": 1}])

L = []
for k, job in enumerate(["a/one", "b/two"]):
    t0 = k * 3 * 3600
    L += steps(job, ["node-r", "node-s"], 8, 0, 20, t0=t0)
    L.append(ckpt(job, 10, t0 + 10.5))
    L.append({"ts": ts(t0 + 20.5), "node": "node-r", "gpu": 6, "source": "kmsg", "kind": "xid",
              "code": 79, "msg": "GPU has fallen off the bus"})
    for i in range(16):
        L.append(podf(t0 + 22 + i * 0.1, ["node-r", "node-s"][i // 8], job,
                      "%s-%d" % (job.split("/")[1], i), msg="NCCL watchdog timeout", ns=job.split("/")[0]))
    if k == 0:
        L.append({"ts": ts(t0 + 600), "node": "node-r", "source": "kube", "kind": "node_ready"})
add("ext-xid79-recurs-escalates",
    "XID 79 on the same GPU in two jobs 3 h apart: the second incident escalates to replace_node",
    L, [{"class": "gpu_hardware", "node": "node-r", "gpu": 6, "job": "a/one", "checkpoint_step": 10,
         "actions_exclude": ["replace_node"]},
        {"class": "gpu_hardware", "node": "node-r", "gpu": 6, "job": "b/two", "checkpoint_step": 10,
         "actions_include": ["replace_node"]}])

# --- GPU memory ----------------------------------------------------------------
L = steps("ml/ft", ["node-c", "node-d"], 8, 0, 30)
L += [ckpt("ml/ft", 10, 11), ckpt("ml/ft", 20, 21)]
L.append({"ts": ts(30.5), "node": "node-d", "gpu": 6, "source": "nvml", "kind": "ecc",
          "bits": "double", "count": 1, "volatile": True})
L.append(podf(31, "node-d", "ml/ft", "ft-worker-14",
              msg="CUDA error: uncorrectable ECC error encountered", ns="ml"))
add("ext-ecc-double-nvml", "a double-bit ECC count from NVML (no XID line) and the pod it killed",
    L, [{"class": "gpu_memory", "node": "node-d", "gpu": 6, "job": "ml/ft",
         "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 20, "max_decide_s": 1}],
    header=hdr(["node-c", "node-d"], ["ml/ft"]))

add("ext-row-remap-failure", "NVML row remapping failed: the GPU is out of spare rows",
    [{"ts": ts(3), "node": "node-e", "gpu": 1, "source": "nvml", "kind": "row_remap", "pending": False,
      "failure": True, "correctable": 0, "uncorrectable": 9}],
    [{"class": "gpu_memory", "node": "node-e", "gpu": 1, "actions_include": ["replace_node"],
      "max_decide_s": 1}])

add("ext-row-remap-pending", "a row remap pending only: reset at the next drain, never isolate",
    [{"ts": ts(3), "node": "node-e", "gpu": 1, "source": "nvml", "kind": "row_remap", "pending": True,
      "failure": False, "correctable": 0, "uncorrectable": 1}],
    [{"class": "gpu_memory", "node": "node-e", "gpu": 1, "actions_include": ["reset_gpu"],
      "actions_exclude": ["isolate_node", "replace_node"]}])

L = steps("x48", ["node-q"], 8, 0, 10) + [ckpt("x48", 5, 5.5)]
L.append({"ts": ts(10.2), "node": "node-q", "gpu": 5, "source": "kmsg", "kind": "xid", "code": 48,
          "msg": "NVRM: Xid (PCI:0000:c1:00): 48, pid=77, DBE (0x1) (0x2) occurred"})
L.append({"ts": ts(10.3), "node": "node-q", "gpu": 5, "source": "kmsg", "kind": "xid", "code": 45,
          "msg": "Ch 0000000c caused by previous Xid 48"})
L.append(podf(11, "node-q", "x48", "x48-5", msg="uncorrectable ECC error"))
add("ext-x48-then-45", "XID 48 then the secondary XID 45 on the same GPU: one memory incident, no application one",
    L, [{"class": "gpu_memory", "node": "node-q", "gpu": 5, "job": "x48", "checkpoint_step": 5,
         "max_decide_s": 1}])

L = steps("ooo", ["node-a", "node-b"], 2, 0, 20) + [ckpt("ooo", 10, 10.5)]
x = {"ts": ts(20.1, frac=1), "node": "node-a", "gpu": 0, "source": "kmsg", "kind": "xid", "code": 48,
     "msg": "DBE", "id": "node-a/b1/900", "injected": True}
L += [x, dict(x), {"ts": ts(20.123456, frac=9), "node": "node-a", "gpu": 0, "source": "nvml",
                   "kind": "ecc", "bits": "double", "count": 1, "volatile": True}]
L.append(podf(21, "node-a", "ooo", "ooo-0", msg="uncorrectable ECC error"))
L.append(dict(L[-1]))
random.Random(3).shuffle(L)
add("ext-ooo-dups-fractions",
    "shuffled lines, an injected XID 48 twice with one id, a pod failure twice, ts with 1 and 9 fraction digits",
    L, [{"class": "gpu_memory", "node": "node-a", "gpu": 0, "job": "ooo", "checkpoint_step": 10,
         "max_decide_s": 1}])

add("ext-ts-offset", "a ts with a +00:00 offset and no fraction, another with one digit",
    [], [{"class": "gpu_memory", "node": "node-z", "gpu": 2, "max_decide_s": 1}],
    raw=[J({"ts": "2026-11-29T07:00:01+00:00", "node": "node-z", "gpu": 2, "source": "nvml",
            "kind": "ecc", "bits": "double", "count": 1, "volatile": True}),
         J({"ts": "2026-11-29T07:00:00.5Z", "node": "node-z", "gpu": 2, "source": "nvml",
            "kind": "thermal", "celsius": 60, "throttled": False})])

# --- thermal, interconnect ---------------------------------------------------------
L = []
for k in range(60):
    for g in range(8):
        hot = g == 7
        L.append({"ts": ts(k * 10 + g * 0.001, frac=3), "node": "node-e", "gpu": g, "source": "dcgm",
                  "kind": "thermal", "celsius": 91.0 if hot else 70.0 + g * 0.5, "throttled": hot})
add("ext-thermal-sustained", "GPU 7 of node-e throttled for heat for 10 minutes (ms timestamps)",
    L, [{"class": "thermal_power", "node": "node-e", "gpu": 7, "max_decide_s": 310}])

L = [{"ts": ts(k * 10), "node": "node-e", "gpu": 2, "source": "nvml", "kind": "thermal",
      "celsius": 88.0 if k == 12 else 72.0, "throttled": k == 12} for k in range(30)]
add("ext-thermal-blip", "one throttled reading among healthy ones: nothing", L, [])

L = []
for k in range(12):
    L.append({"ts": ts(k * 10), "node": "node-f", "gpu": 3, "source": "dcgm", "kind": "nvlink", "link": 2,
              "counter": "crc_flit", "count": 10 + (k * 5000 if k >= 4 else 0)})
    L.append({"ts": ts(k * 10 + 0.5), "node": "node-f", "gpu": 3, "source": "dcgm", "kind": "nvlink",
              "link": 2, "counter": "replay", "count": (k - 3) * 300 if k >= 4 else 0})
    L.append({"ts": ts(k * 10 + 0.2), "node": "node-f", "gpu": 4, "source": "dcgm", "kind": "nvlink",
              "link": 2, "counter": "crc_flit", "count": 3})
add("ext-nvlink-burst", "NVLink CRC and replay counters of one GPU jump by thousands per 10 s",
    L, [{"class": "interconnect", "node": "node-f", "gpu": 3}])

add("ext-sxid-fatal", "a fatal NVSwitch SXid from the kernel log",
    [{"ts": ts(4), "node": "node-h", "source": "kmsg", "kind": "sxid", "code": 20034,
      "switch": "0000:06:00.0",
      "msg": "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"}],
    [{"class": "interconnect", "node": "node-h", "max_decide_s": 1}])

# --- network -------------------------------------------------------------------------
nodes = ["node-a", "node-b", "node-c", "node-d"]
L = steps("pretrain", nodes, 8, 0, 40) + [ckpt("pretrain", 30, 31)]
L.append({"ts": ts(40), "node": "node-c", "source": "host", "kind": "nic", "device": "mlx5_1", "port": 1,
          "counter": "link_downed", "count": 1, "state": "down"})
for k in range(1, 10):
    L.append({"ts": ts(40 + k * 5), "node": "node-c", "source": "host", "kind": "nic", "device": "mlx5_1",
              "port": 1, "counter": "symbol_error", "count": 500 * k, "state": "down"})
for i in range(32):
    L.append(podf(70 + i * 0.1, nodes[i // 8], "pretrain", "pretrain-%d" % i,
                  msg="NCCL WARN NET/IB : Got completion from peer with error 12"))
add("ext-nic-dead-link",
    "an IB port goes down and stays down while its error counters climb; the job fails: one incident, move the job",
    L, [{"class": "network", "node": "node-c", "job": "pretrain",
         "actions_include": ["restart_from_checkpoint"], "actions_exclude": ["retry_in_place"],
         "checkpoint_step": 30, "max_decide_s": 65}], header=hdr(nodes, ["pretrain"]))

L = steps("pretrain", nodes, 8, 0, 60)
L.append({"ts": ts(20), "node": "node-b", "source": "host", "kind": "nic", "device": "mlx5_0", "port": 1,
          "counter": "link_downed", "count": 1, "state": "down"})
L.append({"ts": ts(21.5), "node": "node-b", "source": "host", "kind": "nic", "device": "mlx5_0", "port": 1,
          "counter": "link_downed", "count": 1, "state": "up"})
add("ext-nic-flap", "an IB port down for 1.5 s and back while the job keeps stepping: a transient flap",
    L, [{"class": "network", "node": "node-b", "count_min": 0, "count_max": 1,
         "actions_exclude": OUT_OF_SERVICE + ["restart_from_checkpoint"]}],
    header=hdr(nodes, ["pretrain"]))

L = steps("hang", nodes, 8, 0, 80)
L += steps("hang", nodes, 8, 80, 82, t0=80, skip=lambda st, r: r // 8 == 2)
L.append(ckpt("hang", 50, 51))
for i in range(32):
    L.append(podf(680 + i * 0.1, nodes[i // 8], "hang", "hang-%d" % i,
                  msg="[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
                      "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out." % i))
add("ext-hang-who-stopped",
    "node-c's ranks stop reporting two steps before the others; ten minutes later every pod times out",
    L, [{"class": "network", "node": "node-c", "job": "hang", "checkpoint_step": 50}],
    header=hdr(nodes, ["hang"]))

# --- application -----------------------------------------------------------------------
L = steps("ns1/tok", ["node-a"], 2, 0, 10)
L.append(podf(11, "node-a", "ns1/tok", "tok-0", reason="OOMKilled", code=137,
              msg="container exceeded memory limit", ns="ns1"))
add("ext-oomkilled", "OOMKilled, exit 137: the application's, no node blamed",
    L, [{"class": "application", "node": None, "job": "ns1/tok", "actions_exclude": HW_ACTIONS}])

L = steps("eval", ["node-b", "node-c"], 4, 0, 10)
L.append(podf(12, "node-b", "eval", "eval-2",
              msg="Traceback (most recent call last):\n  File \"train.py\", line 88\nKeyError: 'labels'"))
add("ext-exit1-traceback", "exit 1 with a Python traceback and no hardware signal",
    L, [{"class": "application", "node": None, "job": "eval", "actions_exclude": HW_ACTIONS,
         "max_decide_s": 35}])

nodes = ["node-a", "node-b", "node-c", "node-d"]
L = steps("ml/bad", nodes, 8, 0, 20) + [ckpt("ml/bad", 10, 11)]
for ni, n in enumerate(nodes):
    for g in range(8):
        b = 20 + ni * 0.05 + g * 0.003
        L.append({"ts": ts(b), "node": n, "gpu": g, "source": "kmsg", "kind": "xid", "code": 13,
                  "pid": 4000 + g, "process": "python3",
                  "msg": "NVRM: Xid (PCI:0000:%02x:00): 13, Graphics SM Warp Exception" % g})
        L.append({"ts": ts(b + 0.1), "node": n, "gpu": g, "source": "kmsg", "kind": "xid", "code": 31,
                  "msg": "MMU Fault"})
        L.append({"ts": ts(b + 0.2), "node": n, "gpu": g, "source": "kmsg", "kind": "xid", "code": 43,
                  "msg": "Ch 00000008"})
        L.append({"ts": ts(b + 0.3), "node": n, "gpu": g, "source": "kmsg", "kind": "xid", "code": 45,
                  "msg": "Preemptive cleanup"})
for i in range(32):
    L.append(podf(22 + i * 0.05, nodes[i // 8], "ml/bad", "bad-%d" % i,
                  msg="RuntimeError: CUDA error: an illegal memory access was encountered", ns="ml"))
add("ext-app-xids-many-gpus", "XIDs 13, 31, 43 and 45 on all 32 GPUs of one job, then every pod fails: one application incident",
    L, [{"class": "application", "node": None, "job": "ml/bad", "actions_exclude": HW_ACTIONS,
         "max_decide_s": 35}])

L = []
for j in range(3):
    job, t0 = "team/j%d" % j, j * 3600
    L += steps(job, ["node-b", "node-c"], 4, 0, 10, t0=t0)
    L.append({"ts": ts(t0 + 11), "node": "node-b", "gpu": 2, "source": "kmsg", "kind": "xid", "code": 31,
              "msg": "NVRM: Xid (PCI:0000:43:00): 31, MMU Fault: ENGINE GRAPHICS faulted"})
    L.append(podf(t0 + 12, "node-b", job, "j%d-w2" % j,
                  msg="RuntimeError: CUDA error: an illegal memory access was encountered", ns="team"))
    L.append({"ts": ts(t0 + 40), "node": "node-b", "source": "kube", "kind": "pod_started",
              "namespace": "team", "pod": "j%d-w2" % j, "job": job})
add("ext-xid31-same-gpu-3-jobs",
    "XID 31 on node-b GPU 2 in three jobs an hour apart: the first looks like the code, then it follows the GPU",
    L, [{"class": "application", "node": None, "job": "team/j0"},
        {"class": "gpu_hardware", "node": "node-b", "gpu": 2, "job": "team/j1",
         "actions_include": ["run_diagnostics"], "actions_exclude": ["retry_in_place"]},
        {"class": "gpu_hardware", "node": "node-b", "gpu": 2, "job": "team/j2",
         "actions_include": ["isolate_node", "run_diagnostics"]}])

L = steps("dupjob", ["node-b"], 4, 0, 10)
x = {"ts": ts(10.5), "node": "node-b", "gpu": 2, "source": "kmsg", "kind": "xid", "code": 31,
     "msg": "MMU Fault", "id": "node-b/boot7/31"}
y = {"ts": ts(10.6), "node": "node-b", "gpu": 2, "source": "kmsg", "kind": "xid", "code": 31,
     "msg": "MMU Fault again"}
p = podf(11, "node-b", "dupjob", "dupjob-2",
         msg="RuntimeError: CUDA error: an illegal memory access was encountered")
L += [x, dict(x), dict(x), y, dict(y), dict(y), p, dict(p), dict(p)]
add("ext-dups-no-repeat", "one XID 31 and one pod failure, each written three times (by id and by content): not a repeat",
    L, [{"class": "application", "node": None, "job": "dupjob"}])

L = []
ns = ["node-a", "node-b", "node-c"]
for k in range(8):
    L.append({"ts": ts(k * 30), "node": ns[k % 3], "source": "kube", "kind": "pod_started",
              "namespace": "default", "pod": "loop-0", "job": "loop"})
    L.append(podf(k * 30 + 5, ns[k % 3], "loop", "loop-0",
                  msg="ModuleNotFoundError: No module named 'flash_attn'"))
add("ext-crashloop-app", "a pod crash-loops on three nodes with an import error: no node blamed",
    L, [{"class": "application", "node": None, "job": "loop", "count_min": 1, "count_max": 8,
         "actions_exclude": HW_ACTIONS}])

# --- gray failures -------------------------------------------------------------------
nodes8 = ["node-%s" % c for c in "abcdefgh"]
L = steps("llm-64", nodes8, 8, 0, 125, jitter=0.02, rng=random.Random(7),
          slow=lambda st, r: 1.10 if (r == 45 and 20 <= st < 120) else 1.0)
add("ext-straggler-1of64", "one rank of 64 is 10% slow for 100 steps (2% jitter)",
    L, [{"class": "straggler", "node": "node-f", "gpu": 5, "job": "llm-64", "max_decide_s": 30}],
    header=hdr(nodes8, ["llm-64"]))

L = steps("j2s", nodes8[:4], 8, 0, 70, jitter=0.02, rng=random.Random(1),
          slow=lambda st, r: 1.12 if (r in (5, 24) and st >= 30) else 1.0)
add("ext-straggler-two-ranks", "two ranks on different nodes 12% slow: two stragglers, each its GPU",
    L, [{"class": "straggler", "node": "node-a", "gpu": 5, "job": "j2s", "max_decide_s": 30},
        {"class": "straggler", "node": "node-d", "gpu": 0, "job": "j2s", "max_decide_s": 30}],
    header=hdr(nodes8[:4], ["j2s"]))

L = steps("jsn", nodes8[:4], 8, 0, 70, jitter=0.02, rng=random.Random(2),
          slow=lambda st, r: 1.10 if (r // 8 == 2 and st >= 30) else 1.0)
add("ext-straggler-slow-node", "all 8 ranks of node-c 10% slow: the node is the straggler, no single GPU",
    L, [{"class": "straggler", "node": "node-c", "gpu": None, "job": "jsn", "max_decide_s": 30}],
    header=hdr(nodes8[:4], ["jsn"]))

L = steps("llm-32", nodes8[:4], 8, 0, 120, jitter=0.02, rng=random.Random(8),
          slow=lambda st, r: 1.3 if st >= 50 else 1.0)
add("ext-whole-job-slow", "every rank 30% slower from step 50 (input pipeline): not a straggler", L, [])

nodes = ["node-a", "node-b", "node-c", "node-d"]
L = steps("ml/sdc", nodes, 2, 0, 320, dt_s=0.5)
for st in range(50, 320, 50):
    for rep in range(4):
        val = "9f3a%04x" % st
        if rep == 2 and st >= 250:
            val = "dead%04x" % st
        L.append({"ts": ts(st * 0.5 + 0.3), "node": nodes[rep], "gpu": 0, "source": "telemetry",
                  "kind": "replica_checksum", "job": "ml/sdc", "step": st, "rank": rep * 2,
                  "replica": rep, "value": val})
for st in (100, 200, 300):
    L.append(ckpt("ml/sdc", st, st * 0.5 + 0.4))
add("ext-sdc-checksum", "replica 2's checksum differs from step 250; checkpoints at 100, 200, 300: resume from 200",
    L, [{"class": "silent_data_corruption", "node": "node-c", "gpu": 0, "job": "ml/sdc",
         "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 200, "max_decide_s": 5}],
    header=hdr(nodes, ["ml/sdc"], rpn=2))


def lossf(st, r):
    if r != 0:
        return None if st % 2 else "absent"
    if st >= 420:
        return 14.0 + 0.001 * st
    return round(3.0 - st * 0.001, 4)


L = steps("sdc2", ["node-a", "node-b"], 4, 0, 440, dt_s=0.5, loss=lossf)
for st in (100, 200, 300):
    L.append(ckpt("sdc2", st, st * 0.5 + 0.2))
L.append(ckpt("sdc2", 400, 400 * 0.5 + 0.2, state="failed"))
add("ext-sdc-loss-spike",
    "loss jumps about 5x at step 420 (other ranks report null or nothing); the step-400 checkpoint failed: resume from 300",
    L, [{"class": "silent_data_corruption", "job": "sdc2",
         "actions_include": ["restart_from_checkpoint", "run_diagnostics"],
         "actions_exclude": OUT_OF_SERVICE, "checkpoint_step": 300, "max_decide_s": 5}])


def lossn(st, r):
    if r != 0:
        return "absent"
    if st == 333:
        return "nan"
    return round(2.5 - st * 0.001, 4) if st < 333 else "inf"


L = steps("sdc3", ["node-a", "node-b"], 4, 0, 350, dt_s=0.5, loss=lossn)
for st in (100, 200, 300, 340):
    L.append(ckpt("sdc3", st, st * 0.5 + 0.2))
add("ext-sdc-nan-loss", "loss \"nan\" at step 333, \"inf\" after; a checkpoint saved after it (340) is not the one",
    L, [{"class": "silent_data_corruption", "job": "sdc3", "actions_include": ["restart_from_checkpoint"],
         "checkpoint_step": 300, "max_decide_s": 5}])

allnodes = ["ip-10-0-1-%d.ec2.internal" % i for i in range(1, 33)]
bad = allnodes[6]
L = []
for k in range(6):
    t, job = k * 4200, "research/exp%d" % k
    L.append({"ts": ts(t), "node": bad, "source": "kube", "kind": "pod_started", "namespace": "research",
              "pod": "exp%d-0" % k, "job": job})
    L.append(podf(t + 1800, bad, job, "exp%d-0" % k, msg="NCCL error: unhandled system error", ns="research"))
    L.append({"ts": ts(t + 1860), "node": allnodes[(k + 10) % 32], "source": "kube", "kind": "pod_started",
              "namespace": "research", "pod": "exp%d-0" % k, "job": job})
L.append(podf(9000, allnodes[20], "research/other", "other-0", msg="NCCL error: unhandled system error",
              ns="research"))
add("ext-flapping-node", "one of 32 nodes fails six jobs in seven hours, every restart elsewhere succeeds",
    L, [{"class": "flapping_node", "node": bad, "actions_include": ["isolate_node"]},
        {"class": "application", "node": None, "count_min": 0, "count_max": 7}],
    header=hdr(allnodes))

L = []
for k in range(3):
    p = podf(k * 5000 + 100, "node-07", "exp%d" % k, "exp%d-0" % k, reason="Evicted", code=0,
             msg="The node was low on resource: ephemeral-storage.")
    p["id"] = "kube/ev/%d" % k
    L += [p, dict(p), dict(p), dict(p)]
add("ext-dup-failures-no-flap", "three evictions, each written four times: not a flapping node",
    L, [], header=hdr(["node-%02d" % i for i in range(32)]))

# --- confounders ---------------------------------------------------------------------------
nodes = ["node-a", "node-b", "node-c", "node-d"]
L = steps("ml/big", nodes, 8, 0, 30) + [ckpt("ml/big", 25, 26)]
L.append({"ts": ts(30.5), "node": "node-a", "gpu": 1, "source": "kmsg", "kind": "xid", "code": 79,
          "msg": "GPU has fallen off the bus"})
L.append({"ts": ts(30.7), "node": "node-d", "gpu": 6, "source": "nvml", "kind": "ecc", "bits": "double",
          "count": 2, "volatile": True})
for i in range(32):
    L.append(podf(33 + i * 0.1, nodes[i // 8], "ml/big", "big-%d" % i, msg="NCCL watchdog timeout", ns="ml"))
add("ext-two-faults", "XID 79 on node-a and a double-bit ECC on node-d 0.2 s apart in one job: two incidents",
    L, [{"class": "gpu_hardware", "node": "node-a", "gpu": 1, "checkpoint_step": 25},
        {"class": "gpu_memory", "node": "node-d", "gpu": 6, "checkpoint_step": 25}],
    header=hdr(nodes, ["ml/big"]))

nodes = ["node-a", "node-b", "node-c"]
skew = {"node-a": 0.0, "node-b": 20.0, "node-c": -3.0}
L = steps("skewjob", nodes, 8, 0, 30, tsf=lambda n: skew[n]) + [ckpt("skewjob", 20, 21)]
L.append({"ts": ts(30.2 + skew["node-b"]), "node": "node-b", "gpu": 2, "source": "kmsg", "kind": "xid",
          "code": 79, "msg": "GPU has fallen off the bus"})
for i in range(24):
    n = nodes[i // 8]
    L.append(podf(31 + i * 0.05 + skew[n], n, "skewjob", "skew-%d" % i, msg="NCCL watchdog timeout"))
add("ext-clock-skew", "node-b's clock is 20 s ahead, so its XID 79 sorts after the other nodes' pod failures",
    L, [{"class": "gpu_hardware", "node": "node-b", "gpu": 2, "job": "skewjob"}],
    header=hdr(nodes, ["skewjob"]))

L = [{"ts": ts(0), "node": "node-g", "source": "kube", "kind": "node_not_ready"},
     {"ts": ts(90), "node": "node-g", "source": "kube", "kind": "node_ready"}]
for g in (1, 5):
    L.append({"ts": ts(100 + g), "node": "node-g", "gpu": g, "source": "kmsg", "kind": "xid", "code": 92,
              "msg": "High single-bit ECC error rate"})
    L.append({"ts": ts(101 + g), "node": "node-g", "gpu": g, "source": "nvml", "kind": "ecc",
              "bits": "single", "count": 4, "volatile": True})
for k in range(3):
    L.append({"ts": ts(110 + k * 5), "node": "node-g", "gpu": 3, "source": "kmsg", "kind": "xid",
              "code": 38, "msg": "Driver firmware error"})
L.append({"ts": ts(120), "node": "node-g", "gpu": 0, "source": "nvml", "kind": "pcie", "counter": "replay",
          "count": 12})
add("ext-boot-noise", "a reboot, then single-bit ECC, XIDs 92 and 38 and a few PCIe replays: nothing", L, [])


def x38(t0):
    return [{"ts": ts(t0 + k * 15), "node": "node-g", "gpu": 3, "source": "kmsg", "kind": "xid", "code": 38,
             "msg": "NVRM: Xid (PCI:0000:3b:00): 38, Driver firmware error"} for k in range(6)]


add("ext-boot-grace-xid38", "XID 38 six times in the first minutes after node_ready: boot grace, nothing",
    [{"ts": ts(0), "node": "node-g", "source": "kube", "kind": "node_not_ready"},
     {"ts": ts(60), "node": "node-g", "source": "kube", "kind": "node_ready"}] + x38(120), [])
add("ext-xid38-repeating", "the same six XID 38s with no boot before them: low severity repeating, diagnose",
    x38(7200), [{"class": "gpu_hardware", "node": "node-g", "gpu": 3, "actions_include": ["run_diagnostics"],
                 "actions_exclude": OUT_OF_SERVICE}])

rng = random.Random(11)
nodes = ["gpu-a1", "gpu-a2"]
L = steps("healthy", nodes, 8, 0, 200, jitter=0.05, rng=rng,
          loss=lambda st, r: round(3.0 - st * 0.002 + rng.uniform(-0.05, 0.05), 4) if r == 0 else "absent")
for k in range(40):
    for n in nodes:
        for g in range(8):
            L.append({"ts": ts(k * 5 + g * 0.01), "node": n, "gpu": g, "source": "dcgm", "kind": "thermal",
                      "celsius": round(74 + 8 * math.sin(k / 7.0) + rng.uniform(-1, 1), 1),
                      "throttled": False})
for st in range(50, 200, 50):
    L.append(ckpt("healthy", st, st + 0.5))
L.append({"ts": ts(77), "node": "gpu-a2", "gpu": 3, "source": "nvml", "kind": "ecc", "bits": "single",
          "count": 1, "volatile": True})
add("ext-healthy-noisy", "5% step jitter, noisy loss, temperature swings, one single-bit ECC: nothing",
    L, [], header=hdr(nodes, ["healthy"]))

add("ext-bad-lines", "truncated JSON, a missing ts and an unparseable ts before a real XID 79: the rest still decides",
    [], [{"class": "gpu_hardware", "node": "node-a", "gpu": 1, "max_decide_s": 1}],
    header=hdr(["node-a"]),
    raw=[J({"ts": ts(1), "node": "node-a", "gpu": 0, "source": "nvml", "kind": "thermal", "celsius": 60,
            "throttled": False}),
         '{"ts":"2026-11-29T07:00:02.000000Z","node":',
         J({"node": "node-a", "gpu": 0, "source": "kmsg", "kind": "xid", "code": 79}),
         J({"ts": "yesterday", "node": "node-a", "gpu": 0, "source": "kmsg", "kind": "xid", "code": 79}),
         J({"ts": ts(5), "node": "node-a", "gpu": 1, "source": "kmsg", "kind": "xid", "code": 79,
            "msg": "GPU has fallen off the bus"})])

print("wrote %d scenarios to %s" % (N_WRITTEN, OUT))
