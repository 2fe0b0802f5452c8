#!/usr/bin/env python3
"""gen-suite.py - writes gpuheal's labelled scenario suite: NAME.jsonl (spec
section 2: an optional header, then signals) and NAME.expect.json (the
incidents a correct engine decides) for every scenario below.

The files are committed; this script is how they were made, so that a change
to a scenario is a reviewable change here. Deterministic (fixed seeds).
Run from anywhere: python3 test/scenarios/gen-suite.py [OUTDIR]
"""
import json
import math
import os
import random
import sys
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 11, 29, 7, 0, 0, tzinfo=timezone.utc)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def ts(sec):
    return (T0 + timedelta(seconds=sec)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Scn:
    def __init__(self, name, desc, nodes, jobs=(), gpus=8):
        self.name, self.desc = name, desc
        self.header = {"scenario": name, "nodes": list(nodes), "gpus_per_node": gpus,
                       "jobs": [dict(j) for j in jobs]}
        self.lines = []  # (t, seq, dict or raw string)
        self.raw_order = None

    def add(self, t, **f):
        d = {"ts": ts(t)}
        d.update(f)
        self.lines.append((t, len(self.lines), d))

    def raw(self, t, text):
        self.lines.append((t, len(self.lines), text))

    # --- signal helpers ---------------------------------------------------
    def xid(self, t, node, code, gpu=None, pci=None, msg=None, **kw):
        d = {"node": node}
        if gpu is not None:
            d["gpu"] = gpu
        if pci:
            d["pci"] = pci
        d.update(source="kmsg", kind="xid", code=code)
        d["msg"] = msg or "NVRM: Xid (PCI:%s): %d, pid=4242, name=python3" % (pci or "0000:3b:00", code)
        d.update(kw)
        self.add(t, **d)

    def podfail(self, t, node, job, pod, reason="Error", exit_code=1, msg=None, ns="ml"):
        d = dict(node=node, source="kube", kind="pod_failed", namespace=ns, pod=pod, job=job,
                 reason=reason)
        if exit_code is not None:
            d["exit_code"] = exit_code
        if msg:
            d["msg"] = msg
        self.add(t, **d)

    def podstart(self, t, node, job, pod, ns="ml"):
        self.add(t, node=node, source="kube", kind="pod_started", namespace=ns, pod=pod, job=job)

    def ckpt(self, t, job, step, state="saved"):
        self.add(t, source="telemetry", kind="checkpoint", job=job, step=step,
                 path="s3://ckpt/%s/step-%d" % (job.replace("/", "-"), step), state=state)

    def steps(self, job, nodes, first, last, t0, step_s=1.2, rpn=8, jitter=0.03, seed=1,
              slow=None, loss=None, comm=None, skip=None):
        rnd = random.Random(seed)
        for st in range(first, last + 1):
            t = t0 + (st - first) * step_s
            for r in range(len(nodes) * rpn):
                if skip and skip(r, st):
                    continue
                f = slow(r, st) if slow else 1.0
                ms = 1000.0 * (1 + jitter * rnd.uniform(-1, 1)) * f
                d = dict(node=nodes[r // rpn], gpu=r % rpn, source="telemetry", kind="step",
                         job=job, rank=r, step=st, step_ms=round(ms, 3))
                if comm:
                    c = comm(r, st, ms)
                    if c is not None:
                        d["step_ms"], d["comm_ms"] = round(c[0], 3), round(c[1], 3)
                if loss:
                    lv = loss(r, st)
                    if lv is not None:
                        d["loss"] = lv if isinstance(lv, str) else round(lv, 5)
                self.add(t + r * 0.0003, **d)

    def write(self, incidents, allow_extra=False, shuffle_seed=None, dup=None):
        lines = sorted(self.lines, key=lambda x: (x[0], x[1]))
        body = [x[2] if isinstance(x[2], str) else json.dumps(x[2], separators=(",", ":"))
                for x in lines]
        if dup:
            body += [body[i] for i in dup(len(body))]
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(body)
        with open(os.path.join(OUT, self.name + ".jsonl"), "w") as f:
            f.write(json.dumps(self.header, separators=(",", ":")) + "\n")
            for b in body:
                f.write(b + "\n")
        exp = {"description": self.desc, "incidents": incidents}
        if allow_extra:
            exp["allow_extra"] = True
        with open(os.path.join(OUT, self.name + ".expect.json"), "w") as f:
            json.dump(exp, f, indent=2)
            f.write("\n")


def N(n, prefix="gpu-"):
    return ["%s%02d" % (prefix, i + 1) for i in range(n)]


def job(name, nodes, rpn=8, **kw):
    d = {"name": name, "nodes": list(nodes), "ranks_per_node": rpn}
    d.update(kw)
    return d


HW = ["isolate_node", "restart_from_checkpoint"]
NCCL_TIMEOUT = ("[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, "
                "OpType=ALLREDUCE, NumelIn=1048576) ran for 600000 milliseconds before timing out.")


def nccl_failures(s, t, nodes, jobname, per_node=8, spread=2.0):
    k = 0
    for n in nodes:
        for g in range(per_node):
            s.podfail(t + k * spread / (len(nodes) * per_node), n, jobname, "%s-worker-%d" % (jobname.split("/")[-1], k),
                      msg=NCCL_TIMEOUT % (k, 8123))
            k += 1


# ---------------------------------------------------------------------------
def hardware():
    nodes = N(4)
    s = Scn("xid79-fell-off-bus", "XID 79 on one GPU, then every pod of the job fails on the NCCL timeout: one incident, one node", nodes,
            [job("ml/llm-70b", nodes)])
    s.ckpt(60, "ml/llm-70b", 1000)
    s.ckpt(600, "ml/llm-70b", 1100)
    s.xid(700, "gpu-03", 79, gpu=5, pci="0000:bd:00.0", msg="NVRM: Xid (PCI:0000:bd:00): 79, pid=1234, GPU has fallen off the bus.")
    nccl_failures(s, 1300, nodes, "ml/llm-70b", per_node=10)
    s.write([{"class": "gpu_hardware", "node": "gpu-03", "job": "ml/llm-70b", "actions_include": HW,
              "checkpoint_step": 1100, "max_decide_s": 1}])

    s = Scn("xid48-double-bit-ecc", "XID 48 (double-bit ECC) and the CUDA errors it causes", N(2), [job("ml/bert", N(2))])
    s.ckpt(100, "ml/bert", 2000)
    s.xid(500, "gpu-02", 48, gpu=1, msg="NVRM: Xid (PCI:0000:1b:00): 48, pid=777, DBE (double bit error) ECC error")
    for i in range(16):
        s.podfail(503 + i * 0.1, N(2)[i // 8], "ml/bert", "bert-%d" % i,
                  msg="RuntimeError: CUDA error: uncorrectable ECC error encountered" if i // 8 == 1 else "RuntimeError: NCCL error: unhandled system error")
    s.write([{"class": "gpu_memory", "node": "gpu-02", "gpu": 1, "actions_include": HW, "checkpoint_step": 2000, "max_decide_s": 1}])

    s = Scn("ecc-dbe-from-nvml", "NVML's volatile double-bit ECC counter goes from 0 to 2; single-bit noise around it", N(4), [job("ml/vit", N(4))])
    for k in range(20):
        for n in N(4):
            s.add(k * 60, node=n, gpu=0, source="nvml", kind="ecc", bits="single", count=3 + k // 4, volatile=True)
            s.add(k * 60 + 0.1, node=n, gpu=0, source="nvml", kind="ecc", bits="double",
                  count=2 if (n == "gpu-04" and k >= 15) else 0, volatile=True)
    s.write([{"class": "gpu_memory", "node": "gpu-04", "gpu": 0, "actions_include": ["isolate_node"], "max_decide_s": 1}])

    s = Scn("row-remap-failure", "row remapping fails: no spare rows left on the GPU", N(2), [job("ml/t5", N(2))])
    for k in range(6):
        s.add(k * 60, node="gpu-01", gpu=4, source="nvml", kind="row_remap", pending=k >= 3, failure=k >= 5,
              correctable=0, uncorrectable=2 * k)
    # pending first (recorded: the GPU works on, the reset waits for a safe moment), then failure
    # (isolate + replace): the second calls for more, so it is a new decision
    s.write([{"class": "gpu_memory", "node": "gpu-01", "gpu": 4, "actions_exclude": ["isolate_node", "drain_node", "reset_gpu"]},
             {"class": "gpu_memory", "node": "gpu-01", "gpu": 4, "actions_include": ["isolate_node", "replace_node"]}])

    s = Scn("row-remap-pending", "a row remap is pending under a running job: the GPU keeps working and the remap takes effect at the next reset, "
            "so the reset waits for a safe moment and the node is not drained", N(2), [job("ml/t5", N(2))])
    for k in range(6):
        s.add(k * 60, node="gpu-02", gpu=2, source="nvml", kind="row_remap", pending=k >= 2, failure=False,
              correctable=0, uncorrectable=1 if k >= 2 else 0)
    s.write([{"class": "gpu_memory", "node": "gpu-02", "gpu": 2, "actions_exclude": ["isolate_node", "drain_node", "reset_gpu"]}])

    s = Scn("gpu-lost-nvml", "NVML reports the GPU lost; the kernel log's XID 79 follows", N(3), [job("ml/rl", N(3))])
    s.ckpt(10, "ml/rl", 40)
    s.add(300, node="gpu-02", gpu=6, source="nvml", kind="gpu_lost", msg="NVML_ERROR_GPU_IS_LOST")
    s.xid(300.4, "gpu-02", 79, pci="0000:cb:00.0", msg="NVRM: GPU 0000:cb:00.0: GPU has fallen off the bus.")
    nccl_failures(s, 900, N(3), "ml/rl")
    s.write([{"class": "gpu_hardware", "node": "gpu-02", "gpu": 6, "actions_include": HW, "checkpoint_step": 40, "max_decide_s": 1}])

    s = Scn("xid119-gsp-timeout", "XID 119: the GPU System Processor stopped answering", N(2), [job("ml/llm", N(2))])
    s.xid(50, "gpu-01", 119, gpu=7, msg="NVRM: Xid (PCI:0000:e4:00): 119, pid=31337, Timeout after 6s of waiting for RPC response from GPU7 GSP!")
    s.write([{"class": "gpu_hardware", "node": "gpu-01", "gpu": 7, "actions_include": ["isolate_node"], "max_decide_s": 1}])

    s = Scn("xid74-nvlink", "XID 74: an NVLink error", N(2), [job("ml/moe", N(2))])
    s.xid(70, "gpu-02", 74, gpu=3, msg="NVRM: Xid (PCI:0000:4e:00): 74, pid=555, NVLink: fatal error detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
    s.write([{"class": "interconnect", "node": "gpu-02", "actions_include": ["isolate_node"], "max_decide_s": 1}])

    s = Scn("nvlink-crc-burst", "NVLink CRC flit errors jump by thousands in minutes; nothing shows the job harmed: recorded, the drain waits", N(2), [job("ml/moe", N(2))])
    vals = [120, 121, 121, 123, 124, 900, 2600, 4000]
    for k, v in enumerate(vals):
        s.add(k * 60, node="gpu-01", gpu=2, source="nvml", kind="nvlink", link=5, counter="crc_flit", count=v)
        s.add(k * 60 + 1, node="gpu-02", gpu=2, source="nvml", kind="nvlink", link=5, counter="crc_flit", count=40 + k)
    s.write([{"class": "interconnect", "node": "gpu-01", "actions_exclude": ["isolate_node", "drain_node"]}])

    s = Scn("nvlink-crc-trickle-healthy", "a few NVLink CRC errors an hour: normal, no incident", N(4), [job("ml/moe", N(4))])
    for k in range(48):
        for i, n in enumerate(N(4)):
            s.add(k * 300 + i, node=n, gpu=k % 8, source="dcgm", kind="nvlink", link=k % 12, counter="replay", count=1000 * i + k // 3)
    s.write([])

    s = Scn("pcie-aer-uncorrectable", "a PCIe uncorrectable AER error on a GPU", N(2), [job("ml/dit", N(2))])
    s.ckpt(5, "ml/dit", 300)
    for k in range(5):
        s.add(k * 30, node="gpu-02", gpu=0, source="host", kind="pcie", counter="aer_uncorrectable", count=0 if k < 3 else 1)
        s.add(k * 30 + 1, node="gpu-02", gpu=0, source="host", kind="pcie", counter="replay", count=5 + k)
    s.write([{"class": "interconnect", "node": "gpu-02", "actions_include": HW, "checkpoint_step": 300}])

    s = Scn("thermal-sustained-throttle", "one GPU throttles for heat for eight minutes straight; no step telemetry shows the job slower: recorded, no drain", N(2), [job("ml/llm", N(2))])
    for k in range(60):
        for n in N(2):
            hot = n == "gpu-02" and 20 <= k < 52
            s.add(k * 15, node=n, gpu=3, source="nvml", kind="thermal", celsius=91.0 if hot else 71.0 + (k % 5), throttled=hot)
    s.write([{"class": "thermal_power", "node": "gpu-02", "actions_exclude": ["isolate_node", "drain_node"]}])

    s = Scn("thermal-diurnal-healthy", "a day of temperature swings and two one-sample throttle blips: no incident", N(4), [job("ml/llm", N(4))])
    for k in range(144):
        for i, n in enumerate(N(4)):
            c = 69 + 14 * math.sin(2 * math.pi * k / 144.0) + i
            blip = (n == "gpu-03" and k in (40, 90))
            s.add(k * 600 + i, node=n, gpu=1, source="dcgm", kind="thermal", celsius=round(c, 1), throttled=blip)
            s.add(k * 600 + i + 0.5, node=n, gpu=1, source="dcgm", kind="power", watts=round(600 + 60 * math.sin(k / 10.0), 1), throttled=False)
    s.write([])

    s = Scn("sxid-nvswitch", "an NVSwitch SXID on one node", N(2), [job("ml/moe", N(2))])
    s.add(40, node="gpu-01", source="kmsg", kind="sxid", code=20034, switch="nvidia-nvswitch3",
          msg="nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 30 LTSSM Fault Up")
    s.write([{"class": "interconnect", "node": "gpu-01", "actions_include": ["drain_node"]}])

    s = Scn("unknown-xid", "an XID the catalog does not know: diagnostics, not isolation", N(2), [job("ml/llm", N(2))])
    s.xid(20, "gpu-02", 999, gpu=4)
    s.write([{"class": "unknown", "node": "gpu-02", "actions_include": ["run_diagnostics"], "actions_exclude": ["isolate_node", "drain_node"]}])

    s = Scn("xid-storm", "XID 79 then hundreds of follow-on XIDs (45, 79, 13, 31) and pod failures: one incident", N(2), [job("ml/llm", N(2))])
    s.ckpt(1, "ml/llm", 10)
    s.xid(100, "gpu-01", 79, gpu=2)
    rnd = random.Random(7)
    for i in range(300):
        s.xid(100.5 + i * 0.4, "gpu-01", rnd.choice([45, 45, 45, 79, 13, 31, 43]), gpu=rnd.randrange(8))
    nccl_failures(s, 700, N(2), "ml/llm")
    s.write([{"class": "gpu_hardware", "node": "gpu-01", "gpu": 2, "actions_include": HW, "checkpoint_step": 10, "max_decide_s": 1}])

    # The rebooting node runs no job's pods: a node down with a job on it is
    # an incident of its own (node-not-ready-restart).
    s = Scn("boot-time-noise", "low-severity XIDs in the minutes after a node boots: no incident", N(2), [job("ml/llm", ["gpu-01"])])
    s.add(0, node="gpu-02", source="kube", kind="node_not_ready")
    s.add(240, node="gpu-02", source="kube", kind="node_ready")
    for i in range(7):
        s.xid(260 + i * 45, "gpu-02", 38, gpu=i)
    s.write([])

    s = Scn("low-severity-xid-repeating", "a low-severity XID five times in an hour on a healthy-looking node: diagnostics", N(3), [job("ml/llm", N(3))])
    for i in range(5):
        s.xid(1000 + i * 480, "gpu-03", 38, gpu=6)
    s.write([{"class": "gpu_hardware", "node": "gpu-03", "actions_include": ["run_diagnostics"], "actions_exclude": ["isolate_node", "drain_node"]}])

    s = Scn("two-simultaneous-faults", "XID 79 on one job's node and XID 48 on another job's node within a second", N(3),
            [job("ml/a", ["gpu-01", "gpu-02"]), job("ml/b", ["gpu-03"])])
    s.ckpt(10, "ml/a", 500)
    s.ckpt(11, "ml/b", 70)
    s.xid(100, "gpu-01", 79, gpu=1)
    s.xid(100.6, "gpu-03", 48, gpu=5)
    nccl_failures(s, 130, ["gpu-01", "gpu-02"], "ml/a")
    for i in range(8):
        s.podfail(101 + i * 0.2, "gpu-03", "ml/b", "b-%d" % i, msg="RuntimeError: CUDA error: uncorrectable ECC error encountered")
    s.write([{"class": "gpu_hardware", "node": "gpu-01", "job": "ml/a", "checkpoint_step": 500, "actions_include": HW},
             {"class": "gpu_memory", "node": "gpu-03", "job": "ml/b", "checkpoint_step": 70, "actions_include": HW}])

    s = Scn("xid-pci-only", "a kernel-log XID that names the PCI bus id, not the GPU index", N(4), [job("ml/llm", N(4))])
    s.xid(10, "gpu-04", 79, pci="0000:9b:00.0", msg="NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    s.write([{"class": "gpu_hardware", "node": "gpu-04", "actions_include": ["isolate_node"]}])

    s = Scn("xid-pci-resolved", "NVML readings tie PCI bus ids to GPU indices; a kernel-log XID naming only the bus is placed on GPU 3", N(4), [job("ml/llm", N(4))])
    for g in range(8):
        s.add(1 + g * 0.01, node="gpu-04", gpu=g, pci="00000000:%02X:00.0" % (0x18 + 0x1b * g), source="nvml", kind="thermal", celsius=65.0, throttled=False)
    s.xid(60, "gpu-04", 79, pci="0000:%02x:00" % (0x18 + 0x1b * 3), msg="NVRM: Xid (PCI:0000:%02x:00): 79, GPU has fallen off the bus." % (0x18 + 0x1b * 3))
    s.write([{"class": "gpu_hardware", "node": "gpu-04", "gpu": 3, "actions_include": ["isolate_node"]}])

    s = Scn("xid94-contained-ecc", "XID 94: a contained memory error; the catalog restarts the job and resets the GPU, no isolation", N(2), [job("ml/llm", N(2))])
    s.ckpt(10, "ml/llm", 600)
    s.xid(300, "gpu-01", 94, gpu=6, msg="NVRM: Xid (PCI:0000:da:00): 94, pid=8123, Contained: SM (0x1). RST: No, D-RST: No")
    s.podfail(302, "gpu-01", "ml/llm", "llm-6", msg="RuntimeError: CUDA error: uncorrectable ECC error encountered")
    s.write([{"class": "gpu_memory", "node": "gpu-01", "gpu": 6, "actions_include": ["restart_from_checkpoint", "reset_gpu"],
              "actions_exclude": ["isolate_node"], "checkpoint_step": 600}])

    s = Scn("xid154-recovery-action", "XID 154: the driver asks for a recovery action; diagnostics", N(2), [job("ml/llm", N(2))])
    s.xid(30, "gpu-02", 154, gpu=1, msg="NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    s.write([{"class": "gpu_hardware", "node": "gpu-02", "actions_include": ["run_diagnostics"], "actions_exclude": ["isolate_node"]}])

    s = Scn("xid63-single-remap-event", "one XID 63 (a row remapping event, low severity): recorded, no incident", N(2), [job("ml/llm", N(2))])
    s.xid(30, "gpu-02", 63, gpu=1, msg="NVRM: Xid (PCI:0000:3b:00): 63, pid=1, Row Remapper: New row (0x0000000000000123) marked for remapping, reset gpu to activate.")
    s.write([])

    s = Scn("hardware-and-app-two-jobs", "XID 79 under one job and a Python error in another job on other nodes: two causes", N(4),
            [job("ml/a", ["gpu-01", "gpu-02"]), job("ml/b", ["gpu-03", "gpu-04"])])
    s.xid(100, "gpu-02", 79, gpu=4)
    nccl_failures(s, 700, ["gpu-01", "gpu-02"], "ml/a", per_node=4)
    for i in range(8):
        s.podfail(130 + i * 0.2, N(4)[2 + i // 4], "ml/b", "b-%d" % i, msg="Traceback (most recent call last): ... ZeroDivisionError: division by zero")
    s.write([{"class": "gpu_hardware", "node": "gpu-02", "job": "ml/a", "actions_include": HW},
             {"class": "application", "node": None, "job": "ml/b", "actions_exclude": ["isolate_node"]}])


def application():
    s = Scn("app-xid13-many-gpus", "XID 13 on eight GPUs of one job across two nodes, no hardware evidence: the application", N(2), [job("ml/llm", N(2))])
    for i in range(8):
        s.xid(50 + i * 0.05, N(2)[i % 2], 13, gpu=i, msg="NVRM: Xid (PCI:0000:%02x:00): 13, pid=9%03d, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address" % (0x1b + i, i))
    for i in range(16):
        s.podfail(53 + i * 0.1, N(2)[i // 8], "ml/llm", "llm-%d" % i, msg="RuntimeError: CUDA error: an illegal memory access was encountered")
    s.write([{"class": "application", "node": None, "job": "ml/llm", "actions_exclude": ["isolate_node", "drain_node"], "max_decide_s": 31}])

    s = Scn("app-oom-killed", "a worker is OOMKilled", N(2), [job("ml/data", N(2))])
    s.podfail(30, "gpu-01", "ml/data", "data-0", reason="OOMKilled", exit_code=137)
    s.write([{"class": "application", "node": None, "job": "ml/data", "actions_include": ["retry_in_place"], "max_decide_s": 1}])

    s = Scn("app-python-exception", "every pod exits 1 with a Python traceback on healthy nodes", N(2), [job("ml/sft", N(2))])
    for i in range(16):
        s.podfail(200 + i * 0.3, N(2)[i // 8], "ml/sft", "sft-%d" % i,
                  msg="Traceback (most recent call last): ... KeyError: 'labels'")
    s.write([{"class": "application", "node": None, "job": "ml/sft", "actions_exclude": ["isolate_node"]}])

    s = Scn("crash-loop", "a single-pod job crash-loops for an hour and a half with back-off", ["gpu-05"], [job("ml/bad", ["gpu-05"], rpn=1)])
    t, k = 0.0, 0
    while t < 5400:
        s.podstart(t, "gpu-05", "ml/bad", "bad-0")
        s.podfail(t + 4, "gpu-05", "ml/bad", "bad-0", msg="ImportError: cannot import name 'flash_attn_func'")
        t += 4 + min(300, 10 * 2 ** k)
        k += 1
    s.write([{"class": "application", "node": None, "job": "ml/bad", "count_min": 2, "count_max": 4,
              "actions_exclude": ["isolate_node", "drain_node"]}])

    s = Scn("app-xid-follows-gpu", "XID 31 on the same GPU in two different jobs hours apart: the GPU, not the code", ["gpu-07"],
            [job("a/train", ["gpu-07"]), job("b/finetune", ["gpu-07"])])
    s.steps("a/train", ["gpu-07"], 1, 5, 10)
    s.xid(100, "gpu-07", 31, gpu=2, msg="NVRM: Xid (PCI:0000:2a:00): 31, pid=1001, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f00_00000000")
    s.podfail(101, "gpu-07", "a/train", "train-2", msg="RuntimeError: CUDA error: an illegal memory access was encountered")
    s.steps("b/finetune", ["gpu-07"], 1, 5, 7000)
    s.xid(7100, "gpu-07", 31, gpu=2, msg="NVRM: Xid (PCI:0000:2a:00): 31, pid=2002, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f01_00000000")
    s.podfail(7101, "gpu-07", "b/finetune", "finetune-2", msg="RuntimeError: CUDA error: an illegal memory access was encountered")
    s.write([{"class": "application", "node": None, "job": "a/train"},
             {"class": "gpu_hardware", "node": "gpu-07", "gpu": 2, "job": "b/finetune"}])

    s = Scn("evicted-and-preempted", "pods evicted and preempted by the scheduler: not faults", N(2), [job("ml/batch", N(2))])
    for i in range(6):
        s.podfail(100 + i, N(2)[i % 2], "ml/batch", "batch-%d" % i, reason="Evicted" if i % 2 else "Preempted", exit_code=143,
                  msg="The node was low on resource: ephemeral-storage." if i % 2 else None)
    s.write([])

    NODE_DOWN = ["isolate_node", "restart_from_checkpoint", "run_diagnostics"]
    s = Scn("node-not-ready-restart", "a node with the job's pods goes NotReady for five minutes (a reboot); its pods fail meanwhile: "
            "past node_down the job is restarted without blaming the node, which comes back within Kubernetes' 300 s toleration and is not isolated",
            N(3), [job("ml/llm", N(3))])
    s.ckpt(20, "ml/llm", 300)
    s.add(100, node="gpu-03", source="kube", kind="node_not_ready")
    for i in range(8):
        s.podfail(140 + i, "gpu-03", "ml/llm", "llm-%d" % (16 + i), reason="Error", exit_code=137, msg="NodeLost")
    s.add(400, node="gpu-03", source="kube", kind="node_ready")
    s.write([{"class": "unknown", "node": None, "job": "ml/llm", "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 300, "max_decide_s": 61}])

    s = Scn("node-not-ready-blip", "a node with the job's pods is NotReady for 30 s (a kubelet restart) and comes back: no incident", N(3), [job("ml/llm", N(3))])
    s.add(100, node="gpu-02", source="kube", kind="node_not_ready")
    s.add(130, node="gpu-02", source="kube", kind="node_ready")
    s.add(5000, node="gpu-02", source="kube", kind="node_not_ready")
    s.add(5045, node="gpu-02", source="kube", kind="node_ready")
    s.write([])

    s = Scn("node-down", "a node running the job goes NotReady and never comes back, no hardware signal: restart the job from its latest checkpoint "
            "past node_down, isolate the node past the 300 s not-ready toleration", N(4),
            [job("ml/llm", N(4))])
    s.ckpt(100, "ml/llm", 1000)
    s.ckpt(700, "ml/llm", 1500)
    s.add(1000, node="gpu-04", source="kube", kind="node_not_ready")
    s.add(1030, node="gpu-04", source="kube", kind="node_not_ready")  # the condition re-reported: the same outage
    s.write([{"class": "unknown", "node": None, "job": "ml/llm", "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 1500, "max_decide_s": 61},
             {"class": "unknown", "node": "gpu-04", "actions_include": ["isolate_node", "run_diagnostics"], "max_decide_s": 301}])

    s = Scn("node-down-after-xid", "XID 79 on a node, which then goes NotReady for good and its pods fail: one root cause, one incident", N(2),
            [job("ml/llm", N(2))])
    s.ckpt(10, "ml/llm", 200)
    s.xid(500, "gpu-02", 79, gpu=4)
    s.add(540, node="gpu-02", source="kube", kind="node_not_ready")
    for i in range(8):
        s.podfail(580 + i, "gpu-02", "ml/llm", "llm-%d" % (8 + i), reason="Error", exit_code=137, msg="NodeLost")
    s.write([{"class": "gpu_hardware", "node": "gpu-02", "gpu": 4, "job": "ml/llm", "actions_include": HW, "checkpoint_step": 200}])

    s = Scn("node-down-then-xid", "a node goes NotReady, then its agent reports XID 79 before the node_down grace ends: one incident, the GPU's", N(2),
            [job("ml/llm", N(2))])
    s.ckpt(10, "ml/llm", 200)
    s.add(500, node="gpu-01", source="kube", kind="node_not_ready")
    s.xid(520, "gpu-01", 79, gpu=1)
    s.write([{"class": "gpu_hardware", "node": "gpu-01", "gpu": 1, "job": "ml/llm", "actions_include": HW, "checkpoint_step": 200}])

    s = Scn("pod-started-replacement", "after XID 79 on gpu-02 the job's pod starts on gpu-03, a node the header never listed; "
            "hours later XID 79 there is the job's too", N(3), [job("ml/llm", ["gpu-01", "gpu-02"])])
    s.ckpt(10, "ml/llm", 100)
    s.xid(100, "gpu-02", 79, gpu=0)
    s.podstart(800, "gpu-03", "ml/llm", "llm-1")
    s.ckpt(3000, "ml/llm", 400)
    s.xid(7200, "gpu-03", 79, gpu=6)
    s.write([{"class": "gpu_hardware", "node": "gpu-02", "job": "ml/llm", "actions_include": HW, "checkpoint_step": 100},
             {"class": "gpu_hardware", "node": "gpu-03", "gpu": 6, "job": "ml/llm", "actions_include": HW, "checkpoint_step": 400}])

    s = Scn("app-then-hardware", "an OOM, then an hour later XID 79 in the same job: two causes, two incidents", N(2), [job("ml/llm", N(2))])
    s.ckpt(10, "ml/llm", 100)
    s.podfail(100, "gpu-01", "ml/llm", "llm-0", reason="OOMKilled", exit_code=137)
    s.ckpt(3000, "ml/llm", 250)
    s.xid(3700, "gpu-02", 79, gpu=0)
    nccl_failures(s, 4300, N(2), "ml/llm")
    s.write([{"class": "application", "node": None, "job": "ml/llm"},
             {"class": "gpu_hardware", "node": "gpu-02", "checkpoint_step": 250, "actions_include": HW}])


def timing():
    s = Scn("clock-skew-xid-late", "the failing node's kernel clock runs 12 s ahead: its XID is stamped after the pod failures it caused", N(2), [job("ml/llm", N(2))])
    for i in range(16):
        s.podfail(1000 + i * 0.1, N(2)[i // 8], "ml/llm", "llm-%d" % i,
                  msg="RuntimeError: CUDA error: unspecified launch failure" if i // 8 == 1 else "NCCL error: remote process exited")
    s.xid(1012, "gpu-02", 48, gpu=6)
    s.write([{"class": "gpu_memory", "node": "gpu-02"}])

    s = Scn("clock-skew-steps", "one node's telemetry clock is 40 s behind; the job is healthy: no incident", N(4), [job("ml/llm", N(4), rpn=4)])
    rnd = random.Random(3)
    for st in range(1, 101):
        for r in range(16):
            skew = -40 if r // 4 == 2 else 0
            s.add(st * 1.2 + skew + r * 0.0003, node=N(4)[r // 4], gpu=r % 4, source="telemetry", kind="step", job="ml/llm",
                  rank=r, step=st, step_ms=round(1000 * (1 + 0.03 * rnd.uniform(-1, 1)), 3))
    s.write([])

    nodes = N(4)
    s = Scn("out-of-order-duplicates", "the XID 79 scenario with lines shuffled and duplicated: the same single incident", nodes, [job("ml/llm-70b", nodes)])
    s.ckpt(60, "ml/llm-70b", 1000)
    s.xid(700, "gpu-03", 79, gpu=5, id="gpu-03-boot7-000123")
    s.xid(700, "gpu-03", 79, gpu=5, id="gpu-03-boot7-000123", msg="(the same line again from a second reader)")
    nccl_failures(s, 1300, nodes, "ml/llm-70b")
    s.write([{"class": "gpu_hardware", "node": "gpu-03", "gpu": 5, "checkpoint_step": 1000, "actions_include": HW}],
            shuffle_seed=11, dup=lambda n: list(range(0, n, 3)))

    s = Scn("bad-lines", "malformed lines among good ones: reported, skipped, the rest still decides", N(2), [job("ml/llm", N(2))])
    s.raw(1, "this is not json")
    s.raw(2, '{"ts":"yesterday","node":"gpu-01","source":"kmsg","kind":"xid","code":79}')
    s.raw(3, '{"ts":"2026-11-29T07:00:03Z","node":"gpu-01","source":"kmsg","kind":"teleport"}')
    s.raw(4, '{"ts":"2026-11-29T07:00:04Z","node":"gpu-01","source":"kmsg","kind":"xid","code":"seventy-nine"}')
    s.xid(50, "gpu-02", 48, gpu=3)
    s.raw(51, '{"ts":"2026-11-29T07:00:51Z", "node": "gpu-02", "source": "kube", "kind": "pod_failed", "namespace": "ml", "pod": "x"')
    s.write([{"class": "gpu_memory", "node": "gpu-02", "gpu": 3}])


def gray():
    nodes = N(4)
    R = 4  # ranks per node in the telemetry-heavy scenarios (keeps the files small)
    def healthy_loss(r, st):
        return 2.0 + 8.0 * math.exp(-st / 60.0)

    s = Scn("healthy-noisy-run", "four nodes training normally: jitter, blips, loss noise, checksums agree, thermal swings, counter trickles", nodes, [job("ml/llm", nodes, rpn=R)])
    rnd = random.Random(5)
    def blip(r, st):
        return 1.08 if rnd.random() < 0.01 else 1.0
    s.steps("ml/llm", nodes, 1, 160, 10, rpn=R, slow=blip, loss=lambda r, st: healthy_loss(r, st) * (1 + 0.03 * math.sin(st * 1.7 + r)) if r == 0 else None)
    for st in range(10, 161, 10):
        for rep in range(4):
            s.add(10 + (st - 1) * 1.2 + 0.5 + rep * 0.01, node=nodes[rep], gpu=0, source="telemetry", kind="replica_checksum",
                  job="ml/llm", step=st, rank=rep * R, replica=rep, value="%08x" % (st * 2654435761 % 2 ** 32))
    for st in (50, 100, 150):
        s.ckpt(10 + st * 1.2 + 0.7, "ml/llm", st)
    for k in range(8):
        for i, n in enumerate(nodes):
            s.add(10 + k * 30 + i, node=n, gpu=k, source="nvml", kind="thermal", celsius=70 + 8 * math.sin(k + i), throttled=False)
            s.add(10 + k * 30 + i + 0.2, node=n, gpu=k, source="nvml", kind="ecc", bits="single", count=10 + k, volatile=True)
            s.add(10 + k * 30 + i + 0.4, node=n, source="host", kind="nic", device="mlx5_%d" % (k % 4), port=1, counter="symbol_error", count=3 + k)
    s.write([])

    def onset(rank, factor, start=60, end=None):
        return lambda r, st: factor if (r == rank and st >= start and (end is None or st < end)) else 1.0

    s = Scn("straggler-one-gpu", "rank 10 (gpu-03 GPU 2) becomes 15% slower at step 40", nodes, [job("ml/llm", nodes, rpn=R)])
    s.ckpt(5, "ml/llm", 0)
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, slow=onset(10, 1.15, 40))
    s.write([{"class": "straggler", "node": "gpu-03", "gpu": 2, "actions_include": ["isolate_node", "restart_from_checkpoint"], "max_decide_s": 60}])

    s = Scn("straggler-latest-checkpoint", "rank 10 becomes 15% slower at step 40; a checkpoint saved at step 45, after the slowdown began, "
            "is good: a straggler resumes from the latest", nodes, [job("ml/llm", nodes, rpn=R)])
    s.ckpt(10 + 20 * 1.2 + 0.7, "ml/llm", 20)
    s.ckpt(10 + 45 * 1.2 + 0.7, "ml/llm", 45)
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, slow=onset(10, 1.15, 40))
    s.write([{"class": "straggler", "node": "gpu-03", "gpu": 2, "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 45}])

    s = Scn("straggler-one-node", "every GPU of gpu-02 becomes 12% slower (a host problem)", nodes, [job("ml/llm", nodes, rpn=R)])
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, slow=lambda r, st: 1.12 if (r // R == 1 and st >= 40) else 1.0)
    s.write([{"class": "straggler", "node": "gpu-02", "gpu": None, "actions_include": ["isolate_node"]}])

    s = Scn("straggler-two-node-job", "a two-node job where one node is 15% slower: the median cannot tell, the node medians can", N(2), [job("ml/small", N(2), rpn=R)])
    s.steps("ml/small", N(2), 1, 100, 10, rpn=R, slow=lambda r, st: 1.15 if (r // R == 0 and st >= 40) else 1.0)
    s.write([{"class": "straggler", "node": "gpu-01", "actions_include": ["isolate_node"]}])

    s = Scn("straggler-compute-time", "synchronous steps all take the same time; rank 5's compute is 12% longer and its communication shorter", nodes, [job("ml/llm", nodes, rpn=R)])
    def comm(r, st, ms):
        step_ms = 1000.0 + (ms - 1000.0) * 0.2
        compute = 800.0 * (ms / 1000.0) * (1.12 if (r == 5 and st >= 40) else 1.0)
        return (step_ms, max(1.0, step_ms - compute))
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, comm=comm)
    s.write([{"class": "straggler", "node": "gpu-02", "gpu": 1}])

    s = Scn("whole-job-slowdown", "every rank slows 25% at step 40 (storage, input pipeline): not a straggler", nodes, [job("ml/llm", nodes, rpn=R)])
    s.steps("ml/llm", nodes, 1, 120, 10, rpn=R, slow=lambda r, st: 1.25 if st >= 40 else 1.0)
    s.write([])

    s = Scn("straggler-not-worth-restart", "a 15% straggler with five minutes of the job left: noted, no restart", nodes, [job("ml/llm", nodes, rpn=R, remaining_s=300)])
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, slow=onset(10, 1.15, 40))
    s.write([{"class": "straggler", "node": "gpu-03", "gpu": 2, "actions_include": ["none"], "actions_exclude": ["isolate_node", "restart_from_checkpoint"]}])

    s = Scn("straggler-transient", "one rank is 20% slower for five steps only: not persistent, no incident", nodes, [job("ml/llm", nodes, rpn=R)])
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, slow=onset(5, 1.20, 40, 45))
    s.write([])

    s = Scn("straggler-then-silence", "gpu-04's ranks never report (a sampled or broken reporter); gpu-03 is 60% slower for ten "
            "steps, then the job goes quiet; three hours later its steps resume at one speed: the slowness is decided when it "
            "was seen, not three hours later", nodes, [job("ml/llm", nodes, rpn=R)])
    s.steps("ml/llm", nodes, 1, 49, 10, rpn=R, slow=lambda r, st: 1.6 if (r // R == 2 and st >= 40) else 1.0,
            skip=lambda r, st: r // R == 3)
    s.steps("ml/llm", nodes, 50, 60, 10 + 3 * 3600, rpn=R, skip=lambda r, st: r // R == 3, seed=2)
    s.write([{"class": "straggler", "node": "gpu-03", "max_decide_s": 180}])

    # --- silent data corruption -----------------------------------------
    s = Scn("sdc-replica-checksum", "replica 5's checksum disagrees with the seven others from step 150", nodes, [job("ml/llm", nodes, rpn=8)])
    for st in range(10, 241, 10):
        t = 10 + st * 1.2
        for rep in range(8):
            r = rep * 4
            v = "%08x" % (st * 2654435761 % 2 ** 32)
            if rep == 5 and st >= 150:
                v = "deadbeef%02x" % (st % 256)
            s.add(t + rep * 0.01, node=nodes[r // 8], gpu=r % 8, source="telemetry", kind="replica_checksum",
                  job="ml/llm", step=st, rank=r, replica=rep, value=v)
        if st % 50 == 0:
            s.ckpt(t + 0.5, "ml/llm", st)
    s.write([{"class": "silent_data_corruption", "node": "gpu-03", "gpu": 4, "actions_include": HW, "checkpoint_step": 100, "max_decide_s": 1}])

    s = Scn("sdc-checkpoint-unverified", "checksums every 20 steps agree up to step 140 and disagree at 160; the checkpoint of step 150 lies between: unverified, so the restart resumes from 100, which the agreement at 140 verified", nodes, [job("ml/llm", nodes, rpn=8)])
    for st in range(20, 241, 20):
        t = 10 + st * 1.2
        for rep in range(8):
            r = rep * 4
            v = "%08x" % (st * 2654435761 % 2 ** 32)
            if rep == 2 and st >= 160:
                v = "c0ffee%04x" % st
            s.add(t + rep * 0.01, node=nodes[r // 8], gpu=r % 8, source="telemetry", kind="replica_checksum",
                  job="ml/llm", step=st, rank=r, replica=rep, value=v)
    for st in (50, 100, 150, 200):
        s.ckpt(10 + st * 1.2 + 0.5, "ml/llm", st)
    s.write([{"class": "silent_data_corruption", "node": "gpu-02", "gpu": 0, "actions_include": HW, "checkpoint_step": 100, "max_decide_s": 1}])

    s = Scn("sdc-loss-spike", "the loss jumps 7x at step 120 with no application error: suspect the job's nodes", nodes, [job("ml/llm", nodes, rpn=R)])
    s.steps("ml/llm", nodes, 1, 130, 10, rpn=R, loss=lambda r, st: (healthy_loss(r, st) * (7.0 if st >= 120 else 1.0)) if r % R == 0 else None)
    for st in (50, 100):
        s.ckpt(10 + st * 1.2 + 0.7, "ml/llm", st)
    s.ckpt(10 + 121 * 1.2, "ml/llm", 120)
    s.write([{"class": "silent_data_corruption", "node": None, "actions_include": ["run_diagnostics", "restart_from_checkpoint"], "checkpoint_step": 100, "max_decide_s": 10}])

    s = Scn("sdc-nan-loss-then-probe", "loss turns NaN at step 90; probes then find gpu-02 GPU 3 computes wrong results", nodes, [job("ml/llm", nodes, rpn=R)])
    s.ckpt(10 + 80 * 1.2 + 0.5, "ml/llm", 80)
    s.steps("ml/llm", nodes, 1, 95, 10, rpn=R, loss=lambda r, st: ("nan" if st >= 90 else healthy_loss(r, st)) if r % R == 0 else None)
    s.ckpt(10 + 95 * 1.2 + 0.5, "ml/llm", 95)
    for i, n in enumerate(nodes):
        bad = n == "gpu-02"
        s.add(400 + i, node=n, gpu=3 if bad else 0, source="probe", kind="probe_result", check="gemm_checksum", passed=not bad,
              detail="3 of 4096 tiles differ from the reference" if bad else "ok")
    s.write([{"class": "silent_data_corruption", "node": None, "checkpoint_step": 80, "actions_include": ["run_diagnostics"]},
             {"class": "silent_data_corruption", "node": "gpu-02", "gpu": 3, "checkpoint_step": 80, "actions_include": ["isolate_node"]}])

    s = Scn("sdc-two-replicas-disagree", "two replicas, two checksums, no majority: suspect both, ask for probes", N(2), [job("ml/dp2", N(2))])
    for st in range(10, 121, 10):
        for rep in range(2):
            v = "%08x" % (st * 40503)
            if rep == 1 and st >= 80:
                v = "0badf00d"
            s.add(10 + st + rep * 0.01, node=N(2)[rep], gpu=0, source="telemetry", kind="replica_checksum", job="ml/dp2",
                  step=st, rank=rep * 8, replica=rep, value=v)
    s.ckpt(60, "ml/dp2", 50)
    s.write([{"class": "silent_data_corruption", "node": None, "actions_include": ["run_diagnostics"], "checkpoint_step": 50}])

    s = Scn("loss-noisy-healthy", "noisy loss with 2-3x bumps: no anomaly", nodes, [job("ml/rl", nodes, rpn=R)])
    rnd = random.Random(9)
    s.steps("ml/rl", nodes, 1, 150, 10, rpn=R, loss=lambda r, st: (1.0 + 0.3 * rnd.random()) * (2.5 if st % 37 == 0 else 1.0) if r == 0 else None)
    s.write([])

    # --- flapping ----------------------------------------------------------
    nodes8 = N(8)
    s = Scn("flapping-node", "gpu-06 is the first to fail in three different jobs in a day; every restart succeeds", nodes8,
            [job("ml/j1", ["gpu-05", "gpu-06"]), job("ml/j2", ["gpu-06", "gpu-07"]), job("ml/j3", ["gpu-03", "gpu-06"]), job("ml/j4", ["gpu-01", "gpu-02"])])
    s.add(0, node="gpu-01", source="kube", kind="node_ready")
    for k, (jn, other) in enumerate([("ml/j1", "gpu-05"), ("ml/j2", "gpu-07"), ("ml/j3", "gpu-03")]):
        t0 = 3600 * (2 + 6 * k)
        s.podfail(t0, "gpu-06", jn, "%s-1" % jn[3:], msg="RuntimeError: CUDA error: unspecified launch failure")
        s.podfail(t0 + 25, other, jn, "%s-0" % jn[3:], msg="RuntimeError: NCCL error: remote process exited or there was a network error")
        s.podstart(t0 + 300, "gpu-06", jn, "%s-1" % jn[3:])
    s.podfail(3600 * 10, "gpu-02", "ml/j4", "j4-0", msg="ValueError: shape mismatch")
    s.write([{"class": "flapping_node", "node": "gpu-06", "actions_include": ["isolate_node", "run_diagnostics"]},
             {"class": "application", "node": None, "count_min": 0, "count_max": 3}])

    s = Scn("hang-rank0-first-thrice", "a job hangs three times six hours apart; each time every pod times out in its collectives, "
            "gpu-01's (rank 0) reported first: a waiting rank names no node, nothing is flapping", N(4), [job("ml/llm", N(4))])
    for k in range(3):
        t0 = 3600 * (2 + 6 * k)
        s.ckpt(t0 - 600, "ml/llm", 1000 * (k + 1))
        nccl_failures(s, t0, N(4), "ml/llm")
        for i, n in enumerate(N(4)):
            s.podstart(t0 + 300, n, "ml/llm", "llm-worker-%d" % (8 * i))
    s.write([{"class": "network", "node": None, "actions_include": ["restart_from_checkpoint"],
              "actions_exclude": ["isolate_node", "drain_node"], "count_min": 3, "count_max": 3}])

    s = Scn("failures-at-base-rate", "three failures on three different nodes in a day: applications, not a flapping node", nodes8,
            [job("ml/j%d" % i, [nodes8[2 * i], nodes8[2 * i + 1]]) for i in range(4)])
    for k, (n, jn) in enumerate([("gpu-01", "ml/j0"), ("gpu-04", "ml/j1"), ("gpu-07", "ml/j3")]):
        s.podfail(3600 * (3 + 7 * k), n, jn, "p-%d" % k, msg="AssertionError")
    s.write([{"class": "application", "node": None, "count_min": 3, "count_max": 3}])

    # --- more SDC and flapping shapes -----------------------------------
    s = Scn("sdc-sharded-checksums-healthy", "three replicas of four model shards each: shards differ, replicas agree; no incident", nodes,
            [job("ml/tp4", nodes, rpn=4)])
    for st in range(10, 201, 10):
        for rep in range(3):
            for sh in range(4):
                r = rep * 4 + sh
                s.add(10 + st + r * 0.001, node=nodes[rep], gpu=sh, source="telemetry", kind="replica_checksum", job="ml/tp4",
                      step=st, rank=r, replica=rep, value="%08x" % ((st * 7919 + sh * 104729) % 2 ** 32))
    s.write([])

    s = Scn("sdc-sharded-checksums-odd", "three replicas of four shards; shard 2 of replica 1 (gpu-02 GPU 2) goes wrong from step 120", nodes,
            [job("ml/tp4", nodes, rpn=4)])
    s.ckpt(15, "ml/tp4", 0)
    for st in range(10, 201, 10):
        for rep in range(3):
            for sh in range(4):
                r = rep * 4 + sh
                v = "%08x" % ((st * 7919 + sh * 104729) % 2 ** 32)
                if rep == 1 and sh == 2 and st >= 120:
                    v = "f00f%04x" % st
                s.add(10 + st + r * 0.001, node=nodes[rep], gpu=sh, source="telemetry", kind="replica_checksum", job="ml/tp4",
                      step=st, rank=r, replica=rep, value=v)
        if st % 50 == 0:
            s.ckpt(10 + st + 0.5, "ml/tp4", st)
    s.write([{"class": "silent_data_corruption", "node": "gpu-02", "gpu": 2, "checkpoint_step": 100, "actions_include": ["isolate_node"]}])

    s = Scn("flapping-node-not-ready", "gpu-04 drops NotReady three times in a day and comes back each time", nodes8, [])
    for k in range(3):
        t0 = 3600 * (3 + 7 * k)
        s.add(t0, node="gpu-04", source="kube", kind="node_not_ready")
        s.add(t0 + 420, node="gpu-04", source="kube", kind="node_ready")
    s.write([{"class": "flapping_node", "node": "gpu-04", "actions_include": ["isolate_node", "run_diagnostics"]}])

    s = Scn("app-xid43-alone", "one XID 43 (NVIDIA: ignore unless the job failed) and the job carries on: no incident", N(2), [job("ml/llm", N(2))])
    s.steps("ml/llm", N(2), 1, 30, 10, rpn=4)
    s.xid(20, "gpu-01", 43, gpu=1, msg="NVRM: Xid (PCI:0000:3b:00): 43, pid=1234, Ch 00000008")
    s.write([])

    # --- network -------------------------------------------------------------
    def nic(s, t, node, state, downed, dev="mlx5_1"):
        s.add(t, node=node, source="host", kind="nic", device=dev, port=1, counter="link_downed", count=downed, state=state)

    s = Scn("nic-flap-transient", "an InfiniBand port drops for 3 s and returns; one NCCL error: retry in place", N(2), [job("ml/llm", N(2))])
    nic(s, 0, "gpu-02", "up", 2)
    nic(s, 500, "gpu-02", "down", 3)
    nic(s, 503, "gpu-02", "up", 3)
    s.podfail(505, "gpu-02", "ml/llm", "llm-9", msg="RuntimeError: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5")
    s.write([{"class": "network", "node": "gpu-02", "actions_include": ["retry_in_place"], "actions_exclude": ["isolate_node", "drain_node"], "max_decide_s": 5}])

    s = Scn("nic-dead-link", "an InfiniBand port goes down and stays down; the job hangs then times out: move the job", N(3), [job("ml/llm", N(3))])
    s.ckpt(100, "ml/llm", 900)
    nic(s, 0, "gpu-03", "up", 0)
    nic(s, 1000, "gpu-03", "down", 1)
    for k in range(1, 10):
        nic(s, 1000 + k * 30, "gpu-03", "down", 1)
    nccl_failures(s, 1600, N(3), "ml/llm")
    s.write([{"class": "network", "node": "gpu-03", "actions_include": HW, "checkpoint_step": 900, "max_decide_s": 61}])

    s = Scn("nic-error-burst", "symbol errors on one port (link up) jump by thousands in minutes; nothing shows the job harmed: recorded, the drain waits", N(2), [job("ml/llm", N(2))])
    for k, v in enumerate([10, 12, 15, 900, 3100, 5200]):
        s.add(k * 60, node="gpu-01", source="host", kind="nic", device="mlx5_0", port=1, counter="symbol_error", count=v, state="up")
    s.write([{"class": "network", "node": "gpu-01", "actions_exclude": ["isolate_node", "drain_node"]}])

    s = Scn("nccl-timeout-localised", "no GPU or link evidence; gpu-03's ranks stopped a step before the rest, then the watchdog fired", nodes, [job("ml/llm", nodes, rpn=R)])
    s.ckpt(5, "ml/llm", 0)
    s.steps("ml/llm", nodes, 1, 100, 10, rpn=R, skip=lambda r, st: r // R == 2 and st == 100)
    nccl_failures(s, 10 + 100 * 1.2 + 600, nodes, "ml/llm")
    s.write([{"class": "network", "node": "gpu-03", "actions_include": ["restart_from_checkpoint", "run_diagnostics"], "checkpoint_step": 0}])

    s = Scn("nccl-timeout-after-xid", "XID 79 ten minutes before the NCCL watchdog fires: the GPU, not the network", nodes, [job("ml/llm", nodes, rpn=R)])
    s.ckpt(5, "ml/llm", 0)
    s.steps("ml/llm", nodes, 1, 60, 10, rpn=R, skip=lambda r, st: r == 3 and st == 60)
    s.xid(10 + 59 * 1.2 + 0.5, "gpu-01", 79, gpu=3)
    nccl_failures(s, 10 + 60 * 1.2 + 600, nodes, "ml/llm")
    s.write([{"class": "gpu_hardware", "node": "gpu-01", "gpu": 3, "actions_include": HW}])

    s = Scn("nccl-timeout-unlocalised", "watchdog timeouts with no telemetry and no hardware evidence: restart, nobody blamed", N(2), [job("ml/llm", N(2))])
    s.ckpt(5, "ml/llm", 40)
    nccl_failures(s, 900, N(2), "ml/llm")
    s.write([{"class": "network", "node": None, "actions_include": ["restart_from_checkpoint"], "actions_exclude": ["isolate_node"], "checkpoint_step": 40}])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    # its own files only: the other generators' (ext-, ext2-, harm-) and the
    # kernel-log pastes (kmsg-) and the Node-condition cases (npd-) stay
    others = ("ext-", "ext2-", "harm-", "kmsg-", "npd-")
    for f in os.listdir(OUT):
        if (f.endswith(".jsonl") or f.endswith(".expect.json")) and not f.startswith(others):
            os.remove(os.path.join(OUT, f))
    hardware()
    application()
    timing()
    gray()
    n = len([f for f in os.listdir(OUT) if f.endswith(".expect.json")])
    print("wrote %d scenarios to %s" % (n, OUT))
