#!/usr/bin/env python3
# gen-fleet.py - writes the fleet-* scenarios (issue 23): causes several
# nodes share (an InfiniBand leaf switch, a driver rollout, a misfiring
# health-check rule, a rack's power or cooling, an NVLink domain) must be
# ONE incident naming the component, blaming no node and taking none out of
# service, with a job restarted only when it was measurably harmed; a real
# node fault inside such an event is still its own incident. Beside them:
# the source's own word on severity (Fatal / Non-fatal, XID 154's recovery
# action), harm measured rather than assumed, one incident per episode and
# cause, history that escalates, a job its controller declared failed,
# checkpoints that turned out unusable, corruption against application
# divergence, and stragglers under sparse telemetry.
#
# Written outside-style from shared/spec/signals.md (with its 2026-12-07
# additions: node_labels, scope, affected_nodes, "How some fields are
# read") and the public reports test/scenarios/README.md cites; every
# expectation was decided before the engine was run on it, without reading
# src/engine/. Fleets of 16-512 nodes, with and without node_labels (rack,
# leaf/rail, NVLink clique, driver version, cloud topology keys), EKS, AKS,
# GKE, DGX, HGX and GB200 node names, `pci` instead of `gpu` where the
# kernel log gives only a bus id, sampled step telemetry (a few ranks per
# step; no file writes every rank of a large fleet).
#
# Deterministic: run it after editing and commit the output. It writes only
# fleet-* files. Usage: gen-fleet.py [OUTDIR] (default: this folder).
import json
import os
import random
import sys
from datetime import datetime, timedelta, timezone

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
# The scenarios the engine does not pass yet go to OUT/open (README.md, "Open
# fleet scenarios"); their expectations are the same wherever they are written.
OPEN = {
    "fleet-same-gpu-three-jobs", "fleet-sxid12028-says-nonfatal",
    "fleet-two-jobs-two-stragglers", "fleet-xid145-nonfatal-one-tray",
    "fleet-xid154-drain-and-reset", "fleet-xid154-node-reboot",
}
BASE = datetime(2026, 12, 9, 1, 30, 0, tzinfo=timezone.utc)
# What a shared cause must never do to the nodes that showed it (spec 3).
SHARED_EXCL = ["isolate_node", "drain_node", "reset_gpu", "reboot_node", "replace_node"]
NO_OUT = ["isolate_node", "drain_node", "replace_node"]
NO_JOB = ["restart_from_checkpoint", "retry_in_place"]
# HGX H100 baseboard: GPU index -> PCI bus (as NVML enumerates them).
H100_BUS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
# GB200 compute tray: four GPUs in their own PCI domains (shared/data kmsg samples).
GB200_PCI = ["0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00"]


def ts(sec):
    t = BASE + timedelta(seconds=sec)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06dZ" % t.microsecond


def sig(sec, **kw):
    d = {"ts": ts(sec)}
    d.update(kw)
    return d


class Scn:
    def __init__(self, name, nodes, gpn, jobs, labels=None):
        self.name = name
        self.h = {"scenario": name, "nodes": nodes, "gpus_per_node": gpn,
                  "jobs": [{"name": j, "nodes": ns, "ranks_per_node": gpn} for j, ns in jobs]}
        if labels is not None:
            self.h["node_labels"] = labels
        self.s = []

    def add(self, sec, **kw):
        self.s.append(sig(sec, **kw))

    def write(self, desc, incidents, allow_extra=False):
        lines = [json.dumps(self.h, separators=(",", ":"))]
        lines += [json.dumps(d, separators=(",", ":")) for d in sorted(self.s, key=lambda d: d["ts"])]
        out = os.path.join(OUT, "open") if self.name in OPEN else OUT
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, self.name + ".jsonl"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(out, self.name + ".expect.json"), "w") as f:
            f.write(json.dumps({"description": desc, "incidents": incidents,
                                "allow_extra": allow_extra}, indent=1) + "\n")


def steps(s, rng, job, nodes, rpn, first, last, t_of, ms, every=1, per_step=None, factor=None,
          comm=None, loss=None, stop=None, jitter=0.008, only=None):
    """Sampled step telemetry. Node i reports at step st when (st + i) % every == 0, one rank
    (its GPU rotating with the step); per_step (if given) instead picks that many ranks of the
    whole job per step, rotating. factor(st, node) scales step_ms; stop(node) -> the last step
    that node's ranks report (None: all); only: report just these nodes' ranks."""
    R = len(nodes) * rpn
    for st in range(first, last + 1):
        if per_step:
            off = (st * per_step * 7) % R
            ranks = [(off + k * (R // per_step) + st) % R for k in range(per_step)]
        else:
            ranks = [i * rpn + (st // every) % rpn for i in range(len(nodes)) if (st + i) % every == 0]
        for r in ranks:
            n = nodes[r // rpn]
            if only and n not in only:
                continue
            if stop and stop(n) is not None and st > stop(n):
                continue
            f = factor(st, n) if factor else 1.0
            d = dict(node=n, gpu=r % rpn, source="telemetry", kind="step", job=job, rank=r, step=st,
                     step_ms=round(ms * f * (1 + rng.gauss(0, jitter)), 1))
            if comm:
                d["comm_ms"] = round(comm * (1 + rng.gauss(0, 0.03)), 1)
            if loss:
                v = loss(st, r)
                if v is not None:
                    d["loss"] = v
            s.add(t_of(st) + rng.uniform(0, 0.4), **d)


def ckpt(s, sec, job, step, state="saved", root="s3://ckpt"):
    s.add(sec, source="telemetry", kind="checkpoint", job=job, step=step,
          path="%s/%s/step-%07d" % (root, job.replace("/", "-"), step), state=state)


def podfail(s, sec, node, job, pod, msg, reason="Error", code=1):
    ns = job.split("/")[0] if "/" in job else "default"
    s.add(sec, node=node, source="kube", kind="pod_failed", namespace=ns, pod=pod, job=job,
          reason=reason, exit_code=code, msg=msg)


def cond(s, sec, node, condition, status, reason, msg=None):
    d = dict(node=node, source="kube", kind="node_condition", condition=condition, status=status,
             reason=reason)
    if msg:
        d["msg"] = msg
    s.add(sec, **d)


def xid_h100(s, sec, node, gpu, code, body, pid=None, name="python3", with_gpu=False):
    bus = H100_BUS[gpu]
    who = "pid=%d, name=%s, " % (pid, name) if pid else "pid='<unknown>', name=<unknown>, "
    d = dict(node=node, pci="0000:%s:00.0" % bus, source="kmsg", kind="xid", code=code,
             msg="NVRM: Xid (PCI:0000:%s:00): %d, %s%s" % (bus, code, who, body))
    if with_gpu:
        d["gpu"] = gpu
    s.add(sec, **d)


def xid_gb200(s, sec, node, gpu, code, body, pid=None, name="python3"):
    pci = GB200_PCI[gpu]
    who = "pid=%d, name=%s, " % (pid, name) if pid else ""
    s.add(sec, node=node, pci=pci + ".0", source="kmsg", kind="xid", code=code,
          msg="NVRM: Xid (PCI:%s): %d, %s%s" % (pci, code, who, body))


def nic(s, sec, node, dev, state, count, counter="link_downed"):
    phys = "LinkUp" if state == "up" else "Polling"
    s.add(sec, node=node, source="host", kind="nic", device=dev, port=1, counter=counter,
          count=count, state=state,
          msg="%s port 1: State: %s, Physical state: %s" % (dev, "Active" if state == "up" else "Down", phys))


def leaf_outage(s, rng, nodes, dev, t_down, t_up, poll=60.0, baseline=30.0):
    """A leaf switch's ports go down on every node under it within a second (one port of one
    NIC per node, the rail the leaf carries); the host agent polls the port every poll s; the
    ports train up again within a few seconds of each other when the switch is back (t_up None:
    it never comes back)."""
    for n in nodes:
        nic(s, baseline + rng.uniform(0, 5), n, dev, "up", 0)
        td = t_down + rng.uniform(0, 0.9)
        nic(s, td, n, dev, "down", 1)
        t = td + poll
        end = t_up if t_up is not None else t_down + 1800
        while t < end:
            nic(s, t, n, dev, "down", 1)
            t += poll
        if t_up is not None:
            nic(s, t_up + rng.uniform(0, 4), n, dev, "up", 1)


def pick(ns, k=3):
    """Some of the nodes that showed a shared cause: first, middle, last."""
    return [ns[0], ns[len(ns) // 2], ns[-1]][:k]


def shared(cls, scope, nodes, extra_excl=(), **kw):
    e = {"class": cls, "node": None}
    if scope:
        e["scope"] = scope
    e["affected_nodes"] = pick(nodes)
    e["actions_exclude"] = SHARED_EXCL + list(extra_excl)
    e.update(kw)
    return e


def rail_labels(su, k_leaf_prefix, extra):
    d = dict(extra)
    for k in range(8):
        d["example.com/ib-leaf-rail%d" % k] = "%s-l%d" % (k_leaf_prefix % su, k)
    return d


# ---------------------------------------------------------------------------
# 1. A shared cause is one incident, not N node faults.
# ---------------------------------------------------------------------------

# 1a. A rail-optimised DGX H100 fabric (one leaf switch per rail per 32-node
# scalable unit): the rail-2 leaf of SU1 reboots. mlx5_2 port 1 goes down on
# all 32 nodes within a second and trains up 4:47 later. The site runs
# NCCL's IB resiliency over merged NICs (NVIDIA/nccl#2323, #2309), so the
# collectives move to the other rails and steps keep coming, 3% slower. One
# network incident naming the switch; nothing restarted, no node touched.
def ib_leaf_reboot_rail_failover():
    rng = random.Random(101)
    nodes, labels = [], {}
    for su in range(4):
        for i in range(1, 33):
            n = "sjc2-h100-su%d-%02d" % (su, i)
            nodes.append(n)
            labels[n] = rail_labels(su, "sjc2-su%d", {
                "topology.kubernetes.io/zone": "sjc2-hall-b",
                "example.com/rack": "b%02d" % (su * 8 + (i - 1) // 4 + 1),
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/cuda.driver-version.full": "570.172.08"})
    big, small = nodes[:96], nodes[96:]
    leaf = nodes[32:64]
    s = Scn("fleet-ib-leaf-reboot-rail-failover", nodes, 8,
            [("llm/pretrain-405b", big), ("llm/sft-70b", small)], labels)
    t_down, t_up = 1800.3, 1800.3 + 287
    out = lambda st, n, t_of: 1.03 if t_down <= t_of(st) <= t_up + 20 else 1.0
    ta = lambda st: (st - 5001) * 9.8
    steps(s, rng, "llm/pretrain-405b", big, 8, 5001, 5368, ta, 9500, every=32, comm=1400,
          factor=lambda st, n: out(st, n, ta))
    tb = lambda st: 2 + (st - 801) * 6.0
    steps(s, rng, "llm/sft-70b", small, 8, 801, 1400, tb, 5800, every=22)
    for k in range(6):
        ckpt(s, ta(5001 + 60 * k) + 4.0, "llm/pretrain-405b", 5001 + 60 * k)
    leaf_outage(s, rng, leaf, "mlx5_2", t_down, t_up)
    s.write("the rail-2 leaf switch of one 32-node scalable unit reboots: mlx5_2 port 1 goes down on all 32 "
            "nodes within a second and comes back 4:47 later while NCCL keeps both jobs stepping on the other "
            "rails (3% slower): one network incident naming the switch, no node blamed or touched, no restart",
            [shared("network", "switch", leaf, NO_JOB)])


# 1b. The same event with no node_labels: 64 nodes, two jobs; the rail-5
# leaf serving nodes 17-48 (across both jobs) reboots. Only the signals
# show what the nodes share: the same NIC and port, down within a second.
def ib_leaf_reboot_nolabels():
    rng = random.Random(102)
    nodes = ["gpu-node-%03d" % i for i in range(1, 65)]
    ja, jb = nodes[:40], nodes[40:]
    leaf = nodes[16:48]
    s = Scn("fleet-ib-leaf-reboot-nolabels", nodes, 8, [("a/llm-34b", ja), ("b/vlm-11b", jb)])
    t_down, t_up = 2400.5, 2400.5 + 215
    ta = lambda st: (st - 12001) * 4.0
    steps(s, rng, "a/llm-34b", ja, 8, 12001, 12950, ta, 3900, every=32,
          factor=lambda st, n: 1.04 if t_down <= ta(st) <= t_up else 1.0)
    tb = lambda st: 1 + (st - 301) * 5.0
    steps(s, rng, "b/vlm-11b", jb, 8, 301, 1060, tb, 4700, every=24)
    ckpt(s, 1200, "a/llm-34b", 12300)
    ckpt(s, 3000, "a/llm-34b", 12750)
    leaf_outage(s, rng, leaf, "mlx5_5", t_down, t_up, poll=30.0)
    s.write("no node labels: mlx5_5 port 1 goes down within 0.9 s on 32 of 64 nodes (both jobs' nodes) and "
            "comes back 3:35 later while both jobs keep stepping: the same port on many nodes at once is the "
            "rail's switch, one network incident, no node blamed or touched, no restart",
            [shared("network", "switch", leaf, NO_JOB)])


# 1c. A leaf that dies and stays dead, on a fabric without NCCL resiliency:
# "If something fails (a link, NIC, ...), NCCL is going to fail"
# (NVIDIA/nccl#998). The nodes under the leaf see "NET/IB : Got completion
# from peer ... with status=12" (NVIDIA/nccl#1405) and the job's pods fail;
# the job restarts from its latest checkpoint, the other job (not under the
# leaf) runs on, and still no node is blamed.
def ib_leaf_dead_job_hangs():
    rng = random.Random(103)
    nodes = ["hgx-h200-%03d" % i for i in range(1, 57)]
    labels = {}
    for i, n in enumerate(nodes):
        labels[n] = rail_labels(i // 16, "pod1-g%d", {
            "example.com/rack": "p1-r%02d" % (i // 4 + 1),
            "nvidia.com/gpu.product": "NVIDIA-H200"})
    ja, jb = nodes[:48], nodes[48:]
    leaf = nodes[:16]
    job = "research/moe-1t"
    s = Scn("fleet-ib-leaf-dead-job-hangs", nodes, 8, [(job, ja), ("eval/harness", jb)], labels)
    t_down = 1900.2
    ta = lambda st: (st - 20001) * 7.5
    last = 20001 + int(t_down // 7.5)
    steps(s, rng, job, ja, 8, 20001, last, ta, 7300, every=12)
    tb = lambda st: 3 + (st - 1) * 2.5
    steps(s, rng, "eval/harness", jb, 8, 1, 1400, tb, 2400, every=24)
    ckpt(s, ta(20100) + 5, job, 20100)
    ckpt(s, ta(20200) + 5, job, 20200)
    leaf_outage(s, rng, leaf, "mlx5_0", t_down, None, poll=120.0)
    for i, n in enumerate(leaf):
        podfail(s, t_down + 28 + rng.uniform(0, 6), n, job, "moe-1t-worker-%d" % i,
                "NCCL WARN NET/IB : Got completion from peer 10.12.%d.%d<4529%d> with status=12 opcode=0 len=0 "
                "vendor err 129 (Send) localGid ::ffff:10.12.0.%d" % (i // 4, 20 + i, i % 10, 40 + i))
    for i, n in enumerate(ja[16:]):
        podfail(s, t_down + 36 + rng.uniform(0, 4), n, job, "moe-1t-worker-%d" % (16 + i),
                "torch.distributed.DistBackendError: NCCL communicator was aborted on rank %d" % (8 * (16 + i)))
    s.write("the rail-0 leaf under 16 of a 48-node job's nodes dies and stays down; without NCCL failover the "
            "job's pods fail (IB completion errors on the leaf's nodes first): one network incident naming the "
            "switch restarts the job from step 20200, blames and touches no node; the other job runs on",
            [shared("network", "switch", leaf, job=job, actions_include=["restart_from_checkpoint"],
                    checkpoint_step=20200)])


# 1d. A leaf reboot with a real node fault in the middle of it: XID 79 on
# one of the nodes under the leaf (the GPU is gone, its pod fails, the job
# stops). Two incidents: the switch's (nothing done for it) and the GPU's
# (isolate that node, restart the job from its checkpoint).
def leaf_reboot_plus_xid79():
    rng = random.Random(104)
    nodes = ["cw-h100-%03d" % i for i in range(1, 65)]
    labels = {n: {"topology.kubernetes.io/zone": "us-east-04a",
                  "example.com/rack": "e4-r%02d" % (i // 8 + 1),
                  "example.com/ib-leaf-rail4": "e4-su%d-leaf4" % (i // 32),
                  "example.com/ib-leaf-rail5": "e4-su%d-leaf5" % (i // 32)}
              for i, n in enumerate(nodes)}
    job = "llm/70b"
    leaf = nodes[32:]
    bad = "cw-h100-041"
    s = Scn("fleet-leaf-reboot-plus-xid79", nodes, 8, [(job, nodes)], labels)
    t_down, t_up, t_x = 1500.1, 1500.1 + 240, 1580.4
    ta = lambda st: (st - 2001) * 6.0
    steps(s, rng, job, nodes, 8, 2001, 2001 + int(t_x // 6), ta, 5800, every=8)
    ckpt(s, ta(2100) + 3, job, 2100)
    ckpt(s, ta(2200) + 3, job, 2200)
    leaf_outage(s, rng, leaf, "mlx5_4", t_down, t_up)
    xid_h100(s, t_x, bad, 6, 79, "GPU has fallen off the bus.")
    s.add(t_x + 0.5, node=bad, gpu=6, source="nvml", kind="gpu_lost", msg="NVML_ERROR_GPU_IS_LOST")
    podfail(s, t_x + 3.1, bad, job, "llm-70b-worker-40", "RuntimeError: CUDA error: unspecified launch failure")
    for i, n in enumerate(nodes):
        if n != bad:
            podfail(s, t_x + 9 + rng.uniform(0, 3), n, job, "llm-70b-worker-%d" % i,
                    "torch.distributed.elastic.multiprocessing.api: SignalException: Process got signal: 15",
                    code=143)
    s.write("the rail-4 leaf of 32 of 64 nodes reboots (ports back after 4 min) and during it XID 79 takes a GPU "
            "of one of those nodes off the bus and the job dies: the switch is one incident with no action on "
            "nodes or job; the GPU is its own incident: isolate that node, restart the job from step 2200",
            [shared("network", "switch", [n for n in leaf if n != bad], NO_JOB),
             {"class": "gpu_hardware", "node": bad, "job": job,
              "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 2200}])


# 1e. Two different leaves reboot two hours apart (rail 3 of SU0, rail 6 of
# SU2): two episodes, two incidents, each with its own nodes.
def two_leaves_two_incidents():
    rng = random.Random(105)
    nodes = ["gpu%03d" % i for i in range(1, 97)]
    labels = {n: rail_labels(i // 32, "dc2-su%d", {"example.com/rack": "dc2-%02d" % (i // 4 + 1)})
              for i, n in enumerate(nodes)}
    job = "prod/gpt-moe"
    s = Scn("fleet-two-leaves-two-incidents", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 10.0
    steps(s, rng, job, nodes, 8, 1, 1000, ta, 9800, per_step=1)
    for k in range(1, 10):
        ckpt(s, ta(100 * k) + 6, job, 100 * k)
    a, b = nodes[:32], nodes[64:]
    leaf_outage(s, rng, a, "mlx5_3", 1000.6, 1250.0, poll=120.0)
    leaf_outage(s, rng, b, "mlx5_6", 8200.2, 8500.0, poll=120.0, baseline=7000.0)
    s.write("two leaf switches reboot two hours apart (rail 3 under nodes 1-32, rail 6 under nodes 65-96) while "
            "the job keeps stepping: two network incidents, each naming its switch and its own nodes; no node "
            "touched, no restart",
            [shared("network", "switch", a, NO_JOB), shared("network", "switch", b, NO_JOB)])


# 1f. GKE A3 Ultra-style nodes with Google's topology labels
# (cloud.google.com/gce-topology-block / -subblock / -host): the rail-4
# switch of one sub-block restarts; RoCE NIC mlx5_4 port 1 down on the 16
# hosts of that sub-block, back after 3 minutes; the JobSet keeps stepping.
def gke_subblock_rail():
    rng = random.Random(106)
    nodes, labels = [], {}
    for i in range(48):
        n = "gke-a3u-train-np1-7c9d2e1a-%s" % "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                                                       for _ in range(4))
        nodes.append(n)
        labels[n] = {"topology.kubernetes.io/zone": "us-central1-b",
                     "cloud.google.com/gke-nodepool": "a3u-train-np1",
                     "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
                     "cloud.google.com/gce-topology-block": "7a1f3c0e9b2d",
                     "cloud.google.com/gce-topology-subblock": "sb-%02d" % (i // 16 + 1),
                     "cloud.google.com/gce-topology-host": "h%05x" % (0x3a000 + 37 * i)}
    job = "default/llama3-70b-js"
    sb = nodes[16:32]
    s = Scn("fleet-gke-subblock-rail", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 40001) * 3.2
    steps(s, rng, job, nodes, 8, 40001, 41100, ta, 3100, per_step=1,
          factor=lambda st, n: 1.05 if 1300 <= ta(st) <= 1490 else 1.0)
    ckpt(s, ta(40500) + 2, job, 40500, root="gs://llama3-ckpt")
    leaf_outage(s, rng, sb, "mlx5_4", 1300.8, 1300.8 + 181, poll=20.0)
    s.write("GKE topology labels: the rail-4 switch of one 16-host sub-block restarts (mlx5_4 port 1 down on all "
            "16 within 0.9 s, back after 3 minutes) while the 48-node JobSet keeps stepping: one network "
            "incident for the switch, nothing done to nodes or job",
            [shared("network", "switch", sb, NO_JOB)])


def gb200_fleet(racks, prefix_fmt, rng, driver=None, extra=None):
    """GB200 NVL72 racks of 18 compute trays (4 GPUs each), one NVLink clique per rack
    (nvidia.com/gpu.clique = <cluster uuid>.<clique id>, as the GPU operator's DRA driver labels it)."""
    nodes, labels = [], {}
    for r in range(1, racks + 1):
        uuid = "%08x-%04x-4%03x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12),
                                              0x8000 | rng.getrandbits(14), rng.getrandbits(48))
        for t in range(1, 19):
            n = prefix_fmt % (r, t)
            nodes.append(n)
            d = {"nvidia.com/gpu.clique": "%s.32766" % uuid,
                 "example.com/rack": "nvl72-%02d" % r,
                 "nvidia.com/gpu.product": "NVIDIA-GB200",
                 "topology.kubernetes.io/zone": "dfw-1c"}
            if driver:
                d["nvidia.com/cuda.driver-version.full"] = driver(r, t)
                d["nvidia.com/cuda.driver-version.major"] = driver(r, t).split(".")[0]
            if extra:
                d.update(extra(r, t))
            labels[n] = d
    return nodes, labels


# 1g. A driver rollout: half of every GB200 rack's trays run the new
# 580.95.05 driver (nvidia.com/cuda.driver-version.full; GPU feature
# discovery's label). When the job starts, every upgraded tray logs the same
# NVLink5 XID 145 "RLW_RXPIPE Nonfatal" on each GPU (the catalog's XID
# 144-150 decode differs between driver branches: NVIDIA/NVSentinel#748);
# the job steps normally. One interconnect incident for the rollout
# (scope fleet: it crosses all four NVLink domains), nothing done.
def driver_rollout_xid145():
    rng = random.Random(107)
    nodes, labels = gb200_fleet(4, "gb200-r%d-t%02d", rng,
                                driver=lambda r, t: "580.95.05" if t <= 9 else "570.172.08")
    upg = [n for n in nodes if labels[n]["nvidia.com/cuda.driver-version.full"] == "580.95.05"]
    job = "frontier/llm-1t"
    s = Scn("fleet-driver-rollout-xid145", nodes, 4, [(job, nodes)], labels)
    for i, n in enumerate(nodes):
        s.add(5 + 0.05 * i, node=n, source="kube", kind="pod_started", namespace="frontier",
              pod="llm-1t-w%d" % i, job=job)
    ta = lambda st: 60 + (st - 1) * 5.5
    steps(s, rng, job, nodes, 4, 1, 640, ta, 5300, every=20)
    for k in (200, 400, 600):
        ckpt(s, ta(k) + 8, job, k)
    for i, n in enumerate(upg):
        pid = 41000 + 17 * i
        t = 62 + rng.uniform(0, 80)
        for g in range(4):
            xid_gb200(s, t + 0.002 * g, n, g, 145,
                      "RLW_RXPIPE Nonfatal XC0 i0 Link %02d (0x0409a0c2 0x00000008 0x00000001 0x00000000 "
                      "0x00100000 0x00000004)" % (4 + 3 * g), pid=pid + g, name="python3")
    s.write("a driver rollout: the 36 GB200 trays on the new driver (half of each of four NVLink domains) all log the "
            "same XID 145 RLW_RXPIPE Nonfatal line on every GPU when the job starts; the job steps normally: one "
            "interconnect incident for the rollout, no tray reset, drained or isolated, no restart",
            [shared("interconnect", "fleet", upg, NO_JOB)])


# 1h. The same kind of rollout with no labels, another site: 20 of 36 trays
# (the upgraded ones, in both racks) log XID 149 "NETIR_BER_EVENT Nonfatal"
# (a real line, shared/data/kmsg-samples.txt) within two minutes of the job
# starting. Without labels the engine cannot tell a rollout from a domain;
# the scope is left open, the rest is not.
def driver_rollout_nolabels():
    rng = random.Random(108)
    nodes = ["nvl72-%s-c%02d" % (r, t) for r in "ab" for t in range(1, 19)]
    upg = [n for n in nodes if int(n[-2:]) <= 10]
    job = "ml/dense-340b"
    s = Scn("fleet-driver-rollout-nolabels", nodes, 4, [(job, nodes)])
    ta = lambda st: 40 + (st - 1) * 4.2
    steps(s, rng, job, nodes, 4, 1, 700, ta, 4000, every=14)
    ckpt(s, ta(300) + 6, job, 300)
    ckpt(s, ta(600) + 6, job, 600)
    for n in upg:
        t = 45 + rng.uniform(0, 110)
        for g in range(4):
            xid_gb200(s, t + 0.003 * g, n, g, 149,
                      "NETIR_BER_EVENT Nonfatal XC0 i0 Link %02d (0x00082226 0x00000001 0x00000000 0x00000000 "
                      "0x00000000 0x00000000)" % (1 + 2 * g))
    s.write("no labels: 20 of 36 GB200 trays (spread over both racks) log the same XID 149 NETIR_BER_EVENT Nonfatal "
            "line on every GPU within two minutes of the job starting, which steps normally: one interconnect "
            "incident naming no node, nothing done to trays or job",
            [shared("interconnect", None, upg, NO_JOB)])


def b36(i, w=6):
    d = "0123456789abcdefghijklmnopqrstuvwxyz"
    s = ""
    for _ in range(w):
        s = d[i % 36] + s
        i //= 36
    return s


# 1i. A health-check rule rolled out with a bug (node-problem-detector
# custom plugin; a check that fails everywhere, as in
# keiretsu-labs/kubernetes-manifests#2731 where a re-enabled NPD monitor set
# KubeletUnhealthy on every node): the DaemonSet update sets the site's own
# condition True on 470 of 512 AKS nodes within 7 minutes; rolled back 30
# minutes later. Three jobs keep stepping on every node. One `unknown`
# incident (a site's own condition), scope fleet; nothing cordoned.
def npd_rule_bug_512():
    rng = random.Random(109)
    nodes = ["aks-ndh100-28461937-vmss%s" % b36(i) for i in range(512)]
    labels = {n: {"topology.kubernetes.io/zone": "eastus2-%d" % (i % 3 + 1),
                  "kubernetes.azure.com/agentpool": "ndh100",
                  "node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5",
                  "example.com/rack": "e2-rk%03d" % (i // 8)} for i, n in enumerate(nodes)}
    jobs = [("pretrain/gpt-400b", nodes[:256]), ("pretrain/moe-200b", nodes[256:448]), ("ft/sweep-01", nodes[448:])]
    s = Scn("fleet-npd-rule-bug-512", nodes, 8, jobs, labels)
    for (j, ns), period, ms, every in zip(jobs, (12.0, 8.0, 3.0), (11800, 7900, 2900), (125, 185, 500)):
        steps(s, rng, j, ns, 8, 1, int(6000 // period), lambda st, p=period: (st - 1) * p, ms, every=every)
        ckpt(s, 1500, j, int(1500 // period))
        ckpt(s, 4500, j, int(4500 // period))
    order = list(range(512))
    rng.shuffle(order)
    flagged = sorted(order[:470])
    for k, i in enumerate(order[:470]):
        cond(s, 2700 + (k // 47) * 42 + rng.uniform(0, 8), nodes[i], "SiteNodeCheck", "True", "UnexpectedSysctl",
             "vm.max_map_count=1048576, expected 1048576 (check_sysctl.sh exit 1)")
    for k, i in enumerate(order[:470]):
        cond(s, 4500 + (k // 47) * 35 + rng.uniform(0, 8), nodes[i], "SiteNodeCheck", "False", "SysctlOK")
    fl = [nodes[i] for i in flagged]
    s.write("a buggy health-check rule rolls out and sets the site's own condition True on 470 of 512 nodes within 7 "
            "minutes (cleared by the rollback 30 minutes later) while three jobs keep stepping on every node: one "
            "unknown incident for the fleet, no node cordoned or drained, no restart",
            [shared("unknown", "fleet", fl, NO_JOB)])


# 1j. The same misfiring check with no labels: 152 of 160 nodes within 3
# minutes, never cleared before the scenario ends.
def npd_rule_bug_nolabels():
    rng = random.Random(110)
    nodes = ["n%04d" % i for i in range(1, 161)]
    jobs = [("llm/pretrain", nodes[:128]), ("llm/eval", nodes[128:])]
    s = Scn("fleet-npd-rule-bug-nolabels", nodes, 8, jobs)
    steps(s, rng, "llm/pretrain", nodes[:128], 8, 1, 800, lambda st: st * 6.0, 5900, every=50)
    steps(s, rng, "llm/eval", nodes[128:], 8, 1, 1600, lambda st: st * 3.0, 2900, every=100)
    ckpt(s, 1800, "llm/pretrain", 300)
    ckpt(s, 3600, "llm/pretrain", 600)
    idx = list(range(160))
    rng.shuffle(idx)
    fl = sorted(idx[:152])
    for k, i in enumerate(idx[:152]):
        cond(s, 1200 + k * 1.15 + rng.uniform(0, 1), nodes[i], "KernelParamsDrift", "True", "SysctlMismatch",
             "net.core.rmem_max differs from the baseline")
    s.write("no labels: a site check's new rule sets KernelParamsDrift True on 152 of 160 nodes within 3 minutes while "
            "both jobs keep stepping everywhere: one unknown incident for the fleet, nothing cordoned, no restart",
            [shared("unknown", "fleet", [nodes[i] for i in fl], NO_JOB)])


# 1k. The misfiring check again (EKS, AWS topology labels
# topology.k8s.aws/network-node-layer-1..3), and in the middle of it a real
# double-bit ECC error (XID 48) on one of the flagged nodes kills the job's
# rank there: two incidents, the check's (nothing done) and the GPU's.
def npd_bug_plus_xid48():
    rng = random.Random(111)
    nodes = ["ip-10-20-%d-%d.ec2.internal" % (i // 16, 10 + 3 * i) for i in range(64)]
    labels = {n: {"topology.kubernetes.io/zone": "us-east-1e",
                  "node.kubernetes.io/instance-type": "p5.48xlarge",
                  "topology.k8s.aws/network-node-layer-1": "nn-1f2e3d4c5b6a7980",
                  "topology.k8s.aws/network-node-layer-2": "nn-2a%02d" % (i // 32),
                  "topology.k8s.aws/network-node-layer-3": "nn-3b%02d" % (i // 16)} for i, n in enumerate(nodes)}
    job = "ml/llama-70b"
    bad = nodes[17]
    s = Scn("fleet-npd-bug-plus-xid48", nodes, 8, [(job, nodes)], labels)
    t_x = 1500.7
    ta = lambda st: (st - 1) * 5.0
    steps(s, rng, job, nodes, 8, 1, int(t_x // 5), ta, 4800, every=12)
    for k in (60, 120, 180, 240):
        ckpt(s, ta(k) + 4, job, k)
    idx = list(range(64))
    rng.shuffle(idx)
    fl = sorted(i for i in idx[:61])
    if 17 not in fl:
        fl = sorted(fl[:-1] + [17])
    for k, i in enumerate(fl):
        cond(s, 900 + k * 3.9 + rng.uniform(0, 2), nodes[i], "AmiConfigDrift", "True", "UnexpectedKernelCmdline",
             "iommu=pt missing from /proc/cmdline")
    xid_h100(s, t_x, bad, 3, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the "
             "framebuffer at partition 6, subpartition 0.", pid=18842)
    s.add(t_x + 0.3, node=bad, gpu=3, source="nvml", kind="ecc", bits="double", count=1, volatile=True)
    podfail(s, t_x + 2.2, bad, job, "llama-70b-worker-17", "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    for i, n in enumerate(nodes):
        if n != bad:
            podfail(s, t_x + 8 + rng.uniform(0, 3), n, job, "llama-70b-worker-%d" % i,
                    "torch.distributed.DistBackendError: NCCL communicator was aborted on rank %d" % (8 * i), code=1)
    s.write("a site check misfires on 61 of 64 nodes (AmiConfigDrift True within 4 minutes, jobs unharmed); ten "
            "minutes later XID 48 on one flagged node kills the job: one unknown fleet incident with nothing done, "
            "and the GPU's own incident: isolate that node, restart the job from step 240",
            [shared("unknown", "fleet", [nodes[i] for i in fl if i != 17], NO_JOB),
             {"class": "gpu_memory", "node": bad, "job": job,
              "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 240}])


def power_readings(s, rng, nodes, t0, t1, every, capped, cap_t0, cap_t1):
    """dcgm power readings: one GPU per node every other round (rotating), all eight on a
    capped node every round while it is capped."""
    k = 0
    t = t0
    while t < t1:
        for i, n in enumerate(nodes):
            on = n in capped and cap_t0 <= t <= cap_t1
            if not on and (k + i) % 2:
                continue
            gs = range(8) if on else [(k + i) % 8]
            for g in gs:
                s.add(t + rng.uniform(0, 2) + 0.01 * g, node=n, gpu=g, source="dcgm", kind="power",
                      watts=round((538.0 if on else 655.0) + rng.uniform(-6, 6), 1), throttled=on)
        t += every
        k += 1


# 1l. A rack's power cap (Meta, "Provisioning to Runtime Optimization of a
# 100 MW-Scale AI Cluster", arXiv:2605.24461: rack- and row-level power
# limits on 83K GB200s; Google's rack-level power throttling, US20240094799A1):
# all eight nodes of rack r05 report power throttling together for 25
# minutes; the synchronous job runs 4% slower as a whole. One thermal_power
# incident for the rack, nothing taken out, no restart (a restart would not
# lift the cap).
def rack_power_cap():
    rng = random.Random(112)
    nodes = ["sv5-r%02du%02d" % (r, u) for r in range(1, 9) for u in range(1, 9)]
    labels = {n: {"example.com/rack": n[:7], "example.com/pdu": n[:7] + "-pdu-a",
                  "topology.kubernetes.io/zone": "sv5-dh2"} for n in nodes}
    job = "gen/llama-405b-ft"
    rack = [n for n in nodes if n.startswith("sv5-r05")]
    s = Scn("fleet-rack-power-cap", nodes, 8, [(job, nodes)], labels)
    c0, c1 = 1200.0, 2700.0
    ta = lambda st: (st - 1) * 8.0
    steps(s, rng, job, nodes, 8, 1, 450, ta, 7700, every=16,
          factor=lambda st, n: 1.04 if c0 <= ta(st) <= c1 else 1.0)
    ckpt(s, 1000, job, 125)
    ckpt(s, 2800, job, 350)
    power_readings(s, rng, nodes, 600, 3300, 120.0, set(rack), c0, c1)
    s.write("a rack power cap: all eight nodes of rack r05 report power throttling on every GPU for 25 minutes and the "
            "64-node job runs 4% slower as a whole: one thermal_power incident naming the rack, no node taken out, "
            "no restart",
            [shared("thermal_power", "rack", rack, NO_JOB)])


# 1m. The same with no labels: nodes 09-16 of 24 throttle within 4 s.
def rack_power_cap_nolabels():
    rng = random.Random(113)
    nodes = ["hpc-gpu-%02d" % i for i in range(1, 25)]
    job = "sci/weather-fm"
    capped = nodes[8:16]
    s = Scn("fleet-rack-power-cap-nolabels", nodes, 8, [(job, nodes)])
    c0, c1 = 900.0, 2100.0
    ta = lambda st: (st - 1) * 4.0
    steps(s, rng, job, nodes, 8, 1, 700, ta, 3800, every=12,
          factor=lambda st, n: 1.05 if c0 <= ta(st) <= c1 else 1.0)
    ckpt(s, 600, job, 150)
    ckpt(s, 2400, job, 600)
    power_readings(s, rng, nodes, 20, 2800, 90.0, set(capped), c0, c1)
    s.write("no labels: eight of 24 nodes report power throttling on every GPU together for 20 minutes while the job "
            "runs 5% slower as a whole: one thermal_power incident naming no node, none taken out, no restart",
            [shared("thermal_power", None, capped, NO_JOB)])


# 1n. A rack's rear-door heat exchanger fails: within two minutes every GPU
# of rack r07's eight nodes climbs to 87-91 C and throttles, for half an
# hour (Llama 3, arXiv:2407.21783 3.3.4: temperature drives DVFS; Acme,
# NSDI'24: overheating). One thermal_power incident for the rack.
def rack_thermal_rdhx():
    rng = random.Random(114)
    nodes = ["dc3-row4-r%02d-n%d" % (r, k) for r in range(1, 13) for k in range(1, 9)]
    labels = {n: {"example.com/rack": n[:12], "example.com/row": "dc3-row4",
                  "topology.kubernetes.io/zone": "dc3"} for n in nodes}
    ja, jb = nodes[:64], nodes[64:]
    rack = [n for n in nodes if n.startswith("dc3-row4-r07")]
    s = Scn("fleet-rack-thermal-rdhx", nodes, 8, [("vision/vit-22b", ja), ("audio/asr-3b", jb)], labels)
    h0, h1 = 1800.0, 3600.0
    ta = lambda st: (st - 1) * 6.0
    steps(s, rng, "vision/vit-22b", ja, 8, 1, 700, ta, 5900, every=64,
          factor=lambda st, n: 1.03 if h0 + 120 <= ta(st) <= h1 else 1.0)
    steps(s, rng, "audio/asr-3b", jb, 8, 1, 1400, lambda st: st * 3.0, 2900, every=56)
    ckpt(s, 1500, "vision/vit-22b", 250)
    ckpt(s, 3900, "vision/vit-22b", 650)
    t, k = 1200.0, 0
    while t < 4200:
        for i, n in enumerate(nodes):
            hot = n in rack and h0 <= t <= h1
            if n not in rack and k % 3:
                continue
            for g in (range(8) if n in rack else [(k + i) % 8]):
                if hot:
                    c = min(87.0 + (g % 5), 66.0 + (t - h0) * 0.25 + rng.uniform(0, 2))
                    thr = c >= 85.0
                else:
                    c, thr = 63.0 + (g % 4) + rng.uniform(0, 2), False
                s.add(t + rng.uniform(0, 2) + 0.01 * g, node=n, gpu=g, source="nvml", kind="thermal",
                      celsius=round(c, 1), throttled=thr)
        t += 120.0
        k += 1
    s.write("rack r07's rear-door cooling fails: within two minutes all 64 GPUs of its eight nodes reach 87-91 C and "
            "throttle for half an hour, its job 3% slower as a whole: one thermal_power incident naming the rack, no "
            "node taken out, no restart",
            [shared("thermal_power", "rack", rack, NO_JOB)])


# 1o. An NVLink domain event that the source calls non-fatal: every GPU of
# one GB200 NVL72 rack (one clique) logs XID 149 NETIR_BER_EVENT Nonfatal
# within a second, twice, five minutes apart (the domain's switch trays
# retraining); the job steps on. One interconnect incident naming the
# domain; no tray reset, no restart.
def clique_nonfatal():
    rng = random.Random(115)
    nodes, labels = gb200_fleet(2, "gb-r%d-ct%02d", rng)
    job = "llm/mnnvl-pretrain"
    dom = [n for n in nodes if n.startswith("gb-r2-")]
    s = Scn("fleet-nvl72-clique-nonfatal", nodes, 4, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 4.5
    steps(s, rng, job, nodes, 4, 1, 900, ta, 4300, every=16)
    ckpt(s, ta(400) + 5, job, 400)
    ckpt(s, ta(800) + 5, job, 800)
    for t0 in (2000.2, 2300.9):
        for n in dom:
            t = t0 + rng.uniform(0, 0.9)
            for g in range(4):
                xid_gb200(s, t + 0.001 * g, n, g, 149,
                          "NETIR_BER_EVENT Nonfatal XC0 i0 Link %02d (0x00082226 0x00000001 0x00000000 0x00000000 "
                          "0x00000000 0x00000000)" % (rng.randrange(0, 18)))
    s.write("every GPU of one GB200 NVL72 rack (one NVLink clique) logs XID 149 NETIR_BER_EVENT Nonfatal within a second, "
            "twice, while the job steps on: one interconnect incident naming the NVLink domain, no tray reset or "
            "taken out, no restart",
            [shared("interconnect", "nvlink_domain", dom, NO_JOB)])


# 1p. The NVLink domain fails for real: XID 149 NETIR_LINK_EVT Fatal on every
# GPU of rack 2's 18 trays within a second (XID 45 "caused by previous Xid
# 149" follows), the job spanning racks 1-2 dies with CUDA's "uncorrectable
# NVLink error". One interconnect incident naming the domain restarts that
# job; the other job (racks 3-4) runs on; no tray is reset or isolated for
# the domain's fault (the repair is the switch trays', not 72 GPU resets).
def clique_fatal():
    rng = random.Random(116)
    nodes, labels = gb200_fleet(4, "gb200-r%d-t%02d", rng)
    ja, jb = nodes[:36], nodes[36:]
    dom = nodes[18:36]
    job = "lab/gpt-mnnvl"
    s = Scn("fleet-nvl72-clique-fatal", nodes, 4, [(job, ja), ("lab/rl-policy", jb)], labels)
    t_f = 2500.4
    ta = lambda st: (st - 1) * 5.0
    steps(s, rng, job, ja, 4, 1, int(t_f // 5), ta, 4800, every=12)
    steps(s, rng, "lab/rl-policy", jb, 4, 1, 1000, lambda st: st * 3.1, 2900, every=40)
    for k in (80, 160, 240, 320, 400, 480):
        ckpt(s, ta(k) + 4, job, k)
    for i, n in enumerate(dom):
        t = t_f + rng.uniform(0, 0.8)
        for g in range(4):
            xid_gb200(s, t + 0.001 * g, n, g, 149,
                      "NETIR_LINK_EVT Fatal XC0 i0 Link -1 (0x004525c6 0x00000000 0x00000000 0x00000000 0x00000000 "
                      "0x00000000)")
            xid_gb200(s, t + 0.2 + 0.001 * g, n, g, 45, "Ch 0000000c caused by previous Xid 149",
                      pid=70100 + 4 * i + g, name="python3")
    for i, n in enumerate(ja):
        first = n in dom
        podfail(s, t_f + (3 if first else 9) + rng.uniform(0, 2), n, job, "gpt-mnnvl-w%d" % i,
                "RuntimeError: CUDA error: uncorrectable NVLink error was detected during the execution" if first else
                "torch.distributed.DistBackendError: NCCL communicator was aborted on rank %d" % (4 * i))
    s.write("one GB200 NVLink domain fails: XID 149 NETIR_LINK_EVT Fatal on all 72 GPUs of its 18 trays within a second "
            "and the job on racks 1-2 dies: one interconnect incident naming the domain restarts that job from step "
            "480; no tray reset or isolated for it; the job on racks 3-4 runs on",
            [shared("interconnect", "nvlink_domain", dom, job=job, actions_include=["restart_from_checkpoint"],
                    checkpoint_step=480)])


# 1q. HGX H100 nodes joined by an NVLink Switch System into 32-node NVLink
# cliques (the DGX H100 SuperPOD's NVLink-network switches: 256 GPUs in one
# domain, each node's NVSwitches keeping 72 links for them; naddod.com,
# 2024): the external switch's
# optics degrade and every node of one clique logs SXid 20009 "Non-fatal,
# RX Short Error Rate" on its trunk links within two seconds (SXid format:
# shared/data/gpu-signals.md 2.4). The job steps on.
def nvlink_network_sxid():
    rng = random.Random(117)
    nodes = ["dgx-h100-%03d" % i for i in range(1, 65)]
    labels = {n: {"nvidia.com/gpu.clique": "4d9c1e77-0b6a-4f3e-8a21-%012x.%d" % (0x5e00 + i // 32, i // 32),
                  "example.com/rack": "sp-r%02d" % (i // 4 + 1),
                  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"} for i, n in enumerate(nodes)}
    job = "nlp/t-600b"
    dom = nodes[32:]
    s = Scn("fleet-nvlink-network-sxid", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 7.0
    steps(s, rng, job, nodes, 8, 1, 500, ta, 6900, every=16)
    ckpt(s, ta(200) + 5, job, 200)
    ckpt(s, ta(400) + 5, job, 400)
    for n in dom:
        t = 1500.3 + rng.uniform(0, 1.8)
        for sw, link in ((0, 32), (2, 33)):
            s.add(t + 0.01 * sw, node=n, source="kmsg", kind="sxid", code=20009, switch="nvidia-nvswitch%d" % sw,
                  msg="nvidia-nvswitch%d: SXid (PCI:0000:%02x:00.0): 20009, Non-fatal, Link %d RX Short Error Rate"
                      % (sw, 5 + sw, link))
    s.write("every node of one 32-node NVLink clique (NVLink Switch System) logs SXid 20009 Non-fatal RX Short Error Rate "
            "on its trunk links within two seconds; the job steps on: one interconnect incident naming the NVLink "
            "domain, no node drained or reset, no restart",
            [shared("interconnect", "nvlink_domain", dom, NO_JOB)])


# 1r. An NVLink domain event with no labels: one 18-tray rack of three logs
# XID 145 RLW_RXPIPE Nonfatal on every GPU within a second.
def nvl72_nonfatal_nolabels():
    rng = random.Random(118)
    nodes = ["cn-%03d" % i for i in range(1, 55)]
    dom = nodes[18:36]
    job = "ai/omni-400b"
    s = Scn("fleet-nvl72-nonfatal-nolabels", nodes, 4, [(job, nodes)])
    ta = lambda st: (st - 1) * 6.0
    steps(s, rng, job, nodes, 4, 1, 600, ta, 5900, every=16)
    ckpt(s, ta(300) + 5, job, 300)
    t0 = 1700.5
    for i, n in enumerate(dom):
        t = t0 + rng.uniform(0, 0.9)
        for g in range(4):
            xid_gb200(s, t + 0.001 * g, n, g, 145,
                      "RLW_RXPIPE Nonfatal XC0 i0 Link %02d (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 "
                      "0x00000004)" % (g * 4 + 1), pid=55100 + 4 * i + g, name="python3")
    s.write("no labels: the 18 trays cn-019..cn-036 log XID 145 RLW_RXPIPE Nonfatal on every GPU within a second while the "
            "job steps on: one interconnect incident naming no node, no reset, drain or isolation, no restart",
            [shared("interconnect", None, dom, NO_JOB)])


# 1s. A rack's management switch drops: its eight nodes go NotReady together
# for 200 s (under the 300 s not-ready toleration: no pod is evicted,
# kubernetes.io taint-based evictions); the pods run on and every rank keeps
# stepping over the back-end fabric. Nothing harmed: at most one record for
# the rack, nothing restarted, no node taken out.
def mgmt_rack_notready():
    rng = random.Random(119)
    nodes = ["r%02d-gpu%d" % (r, k) for r in range(1, 11) for k in range(1, 9)]
    labels = {n: {"example.com/rack": n[:3], "example.com/mgmt-switch": "tor-mgmt-" + n[:3],
                  "topology.kubernetes.io/zone": "fra-2"} for n in nodes}
    job = "rec/dlrm-xl"
    rack = [n for n in nodes if n.startswith("r03-")]
    s = Scn("fleet-mgmt-rack-notready", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 2.0
    steps(s, rng, job, nodes, 8, 1, 1200, ta, 1900, every=40)
    ckpt(s, 600, job, 300)
    ckpt(s, 1800, job, 900)
    for n in rack:
        s.add(1000.0 + rng.uniform(0, 1.5), node=n, source="kube", kind="node_not_ready",
              msg="Kubelet stopped posting node status.")
        s.add(1200.0 + rng.uniform(0, 6), node=n, source="kube", kind="node_ready", msg="kubelet is posting ready status")
    s.write("a rack's management switch drops: its eight nodes go NotReady together for 200 s while their pods run on "
            "and every rank keeps stepping: at most one record naming no node, no restart, no node taken out",
            [{"class": "unknown", "node": None, "count_min": 0, "count_max": 1,
              "actions_exclude": SHARED_EXCL + NO_JOB}])


# ---------------------------------------------------------------------------
# 2. The source's own word on severity.
# ---------------------------------------------------------------------------

def dgx16(seed, name, job):
    rng = random.Random(seed)
    nodes = ["dgxh100-%02d" % i for i in range(1, 17)]
    labels = {n: {"example.com/rack": "su1-r%d" % ((i // 4) + 1),
                  "nvidia.com/cuda.driver-version.full": "550.163.01"} for i, n in enumerate(nodes)}
    return rng, nodes, Scn(name, nodes, 8, [(job, nodes)], labels)


# 2a. SXid 12028 is "always fatal" in the Fabric Manager guide's table, but
# this line (a real one, shared/data/kmsg-samples.txt) says "Non-fatal",
# and the job on the node keeps pace: the line's own word stands (spec
# section 1, "The source's own words are evidence"). Recorded on the node;
# no drain, no GPU reset, no restart.
def sxid12028_says_nonfatal():
    job = "ml/codegen-34b"
    rng, nodes, s = dgx16(201, "fleet-sxid12028-says-nonfatal", job)
    ta = lambda st: (st - 1) * 3.0
    steps(s, rng, job, nodes, 8, 1, 900, ta, 2900, every=8)
    ckpt(s, 600, job, 200)
    ckpt(s, 2100, job, 700)
    n = "dgxh100-09"
    s.add(700.2, node=n, source="kmsg", kind="sxid", code=12028, switch="nvidia-nvswitch3",
          msg="nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)")
    s.add(1900.8, node=n, source="kmsg", kind="sxid", code=12028, switch="nvidia-nvswitch3",
          msg="nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error")
    s.write("SXid 12028 (a code the catalog calls fatal) logged twice as 'Non-fatal' on one node whose ranks keep pace: "
            "the line's own word stands: one interconnect record on the node, no drain, reset or restart",
            [{"class": "interconnect", "node": n, "actions_exclude": SHARED_EXCL + NO_JOB}])


# 2b. The same code, the line says "Fatal", XID 74 follows on two GPUs, and
# the job dies (harm-sxid-fatal-restarts-job's shape on another fleet):
# acted on, the job restarts from its latest checkpoint.
def sxid12028_says_fatal():
    job = "ml/codegen-34b"
    rng, nodes, s = dgx16(202, "fleet-sxid12028-says-fatal", job)
    t_f = 1240.5
    ta = lambda st: (st - 1) * 3.0
    steps(s, rng, job, nodes, 8, 1, int(t_f // 3), ta, 2900, every=4)
    ckpt(s, 600, job, 200)
    ckpt(s, 1200, job, 400)
    n = "dgxh100-04"
    s.add(t_f, node=n, source="kmsg", kind="sxid", code=12028, switch="nvidia-nvswitch1",
          msg="nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 12028, Fatal, Link 20 egress non-posted PRIV error (First)")
    for g in (2, 3):
        xid_h100(s, t_f + 0.4 + 0.01 * g, n, g, 74,
                 "NVLink: fatal error detected on link 20(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", pid=30411 + g)
    for i, m in enumerate(nodes):
        podfail(s, t_f + (28 if m == n else 34) + rng.uniform(0, 2), m, job, "codegen-34b-%d" % i,
                "RuntimeError: CUDA error: uncorrectable NVLink error was detected during the execution" if m == n else
                "torch.distributed.DistBackendError: NCCL communicator was aborted on rank %d" % (8 * i))
    s.write("SXid 12028 logged as 'Fatal' on one node, XID 74 on two of its GPUs, the job's pods fail: the node is "
            "blamed and the job restarts from step 400",
            [{"class": "interconnect", "node": n, "job": job, "actions_include": ["restart_from_checkpoint"],
              "checkpoint_step": 400}])


# 2c. One GB200 tray logs XID 145 RLW_SRC_TRACK Nonfatal three times in 20
# minutes (the real line's shape, shared/data/kmsg-samples.txt) under a job
# that keeps pace. A single node, so no shared cause: recorded on the tray,
# no drain, no GPU reset, no restart.
def xid145_nonfatal_one_tray():
    rng = random.Random(203)
    nodes, labels = gb200_fleet(2, "gb-r%d-ct%02d", rng)
    job = "llm/mnnvl-pretrain"
    s = Scn("fleet-xid145-nonfatal-one-tray", nodes, 4, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 4.5
    steps(s, rng, job, nodes, 4, 1, 800, ta, 4300, every=14)
    ckpt(s, ta(400) + 5, job, 400)
    n = "gb-r1-ct07"
    for t in (1100.3, 1620.9, 2310.4):
        xid_gb200(s, t, n, 2, 145, "RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 (0x040868e2 0x00000008 0x00000000 0x00000000 "
                  "0x00000000 0x00000000)", pid=922932, name="python3")
    s.write("one GB200 tray logs XID 145 RLW_SRC_TRACK Nonfatal three times in 20 minutes while its ranks keep pace: one "
            "interconnect record on that tray, no drain, GPU reset or restart",
            [{"class": "interconnect", "node": n, "actions_exclude": SHARED_EXCL + NO_JOB}])


# 2d. One GB200 tray logs XID 149 NETIR_LINK_EVT Fatal (a real line) and
# XID 45 "caused by previous Xid 149"; its pod dies with "uncorrectable
# NVLink error" and the job stops. One tray only: its own incident, the job
# restarts from its checkpoint.
def xid149_fatal_one_tray():
    rng = random.Random(204)
    nodes, labels = gb200_fleet(2, "gb-r%d-ct%02d", rng)
    job = "llm/mnnvl-pretrain"
    s = Scn("fleet-xid149-fatal-one-tray", nodes, 4, [(job, nodes)], labels)
    t_f = 1300.6
    ta = lambda st: (st - 1) * 4.5
    steps(s, rng, job, nodes, 4, 1, int(t_f // 4.5), ta, 4300, every=4)
    ckpt(s, ta(100) + 5, job, 100)
    ckpt(s, ta(250) + 5, job, 250)
    n = "gb-r2-ct11"
    xid_gb200(s, t_f, n, 2, 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 09 (0x004525c6 0x00000000 0x00000000 0x00000000 "
              "0x00000000 0x00000000)")
    xid_gb200(s, t_f + 0.2, n, 2, 45, "Ch 0000000c caused by previous Xid 149", pid=81234, name="python3")
    for i, m in enumerate(nodes):
        podfail(s, t_f + (3 if m == n else 9) + rng.uniform(0, 2), m, job, "mnnvl-pretrain-w%d" % i,
                "RuntimeError: CUDA error: uncorrectable NVLink error was detected during the execution" if m == n else
                "torch.distributed.DistBackendError: NCCL communicator was aborted on rank %d" % (4 * i))
    s.write("one GB200 tray logs XID 149 NETIR_LINK_EVT Fatal (and XID 45 caused by it), its pod dies and the job stops: "
            "that tray's interconnect incident restarts the job from step 250",
            [{"class": "interconnect", "node": n, "job": job, "actions_include": ["restart_from_checkpoint"],
              "checkpoint_step": 250}])


# 2e. XID 145 RLW_REMAP (the catalog's decode: XID_154_EVAL, follow XID
# 154), then XID 154 "GPU recovery action changed from 0x0 (None) to 0x4
# (Drain and Reset)" (a real line) on the same GPU; the job keeps pace.
# The driver states the action: drain the node and reset the GPU.
def xid154_drain_and_reset():
    rng = random.Random(205)
    nodes, labels = gb200_fleet(2, "gb-r%d-ct%02d", rng)
    job = "llm/mnnvl-pretrain"
    s = Scn("fleet-xid154-drain-and-reset", nodes, 4, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 4.5
    steps(s, rng, job, nodes, 4, 1, 700, ta, 4300, every=14)
    ckpt(s, ta(200) + 5, job, 200)
    ckpt(s, ta(400) + 5, job, 400)
    n = "gb-r1-ct14"
    xid_gb200(s, 1000.1, n, 1, 145, "RLW_REMAP Nonfatal XC0 i0 Link 05 (0x04080000 0x00000004 0x00000000 0x00000000 "
              "0x00000000 0x00000000)", pid=66120, name="python3")
    xid_gb200(s, 1000.4, n, 1, 154, "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)")
    s.write("XID 145 RLW_REMAP then XID 154 'recovery action changed ... to 0x4 (Drain and Reset)' on one tray's GPU "
            "under a job that keeps pace: the driver's stated action is taken: drain the node, reset the GPU",
            [{"class": "interconnect", "node": n, "actions_include": ["drain_node", "reset_gpu"]},
             {"class": "interconnect", "node": n, "count_min": 0, "count_max": 1}])


# 2f. Two XID 119 GSP timeouts (Llama 3 Table 5: GPU system processor) then
# XID 154 "... to 0x2 (Node Reboot Required)" (NVIDIA/open-gpu-kernel-modules
# issue 1134's title); the job's pod on the node dies: reboot the node (the
# driver's word) and restart the job from its checkpoint.
def xid154_node_reboot():
    rng = random.Random(206)
    nodes = ["h100-%s-%02d" % (z, i) for z in ("east", "west") for i in range(1, 13)]
    labels = {n: {"topology.kubernetes.io/zone": "us-%s-2a" % n.split("-")[1],
                  "nvidia.com/cuda.driver-version.full": "570.172.08"} for n in nodes}
    job = "ml/rag-embed-13b"
    s = Scn("fleet-xid154-node-reboot", nodes, 8, [(job, nodes)], labels)
    n = "h100-west-05"
    t_f = 900.3
    ta = lambda st: (st - 1) * 2.0
    steps(s, rng, job, nodes, 8, 1, int(t_f // 2), ta, 1900, every=6)
    ckpt(s, 300, job, 150)
    ckpt(s, 800, job, 400)
    xid_h100(s, t_f, n, 3, 119, "Timeout after 6s of waiting for RPC response from GPU3 GSP! Expected function 76 "
             "(GSP_RM_CONTROL) (0x20800a4c 0x4).", pid=40711)
    xid_h100(s, t_f + 6.1, n, 3, 119, "Timeout after 6s of waiting for RPC response from GPU3 GSP! Expected function 10 "
             "(FREE) (0xa55a0210 0x0).", pid=40711)
    s.add(t_f + 6.4, node=n, pci="0000:%s:00.0" % H100_BUS[3], source="kmsg", kind="xid", code=154,
          msg="NVRM: Xid (PCI:0000:%s:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot "
              "Required)" % H100_BUS[3])
    podfail(s, t_f + 19, n, job, "rag-embed-13b-5", "RuntimeError: CUDA error: unspecified launch failure")
    s.write("two XID 119 GSP timeouts then XID 154 'recovery action changed ... to 0x2 (Node Reboot Required)' on one "
            "node, whose pod then dies: reboot the node as the driver says and restart the job from step 400",
            [{"class": "gpu_hardware", "node": n, "job": job,
              "actions_include": ["reboot_node", "restart_from_checkpoint"], "checkpoint_step": 400}])


# ---------------------------------------------------------------------------
# 3. Harm is measured, not assumed.
# ---------------------------------------------------------------------------

# 3a. One node's InfiniBand port goes down (a cable) and stays down; NCCL's
# IB resiliency (NVIDIA/nccl#2323: "the healthy PF(s) can continue carrying
# traffic, so the training job can keep making progress") keeps the job
# stepping at pace. Not "died": no restart, no retry, and the node is not
# taken out under a job it is serving; at most a record on it.
def port_down_one_node_failover():
    rng = random.Random(301)
    nodes = ["gpu-a-%03d" % i for i in range(1, 33)]
    labels = {n: rail_labels(0, "a%d", {"example.com/rack": "a-r%d" % (i // 4 + 1)}) for i, n in enumerate(nodes)}
    job = "ml/t5-11b"
    n = "gpu-a-012"
    s = Scn("fleet-port-down-one-node-failover", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 3.0
    steps(s, rng, job, nodes, 8, 1, 1000, ta, 2950, every=16, comm=420)
    ckpt(s, 1000, job, 333)
    ckpt(s, 2400, job, 800)
    nic(s, 40, n, "mlx5_3", "up", 0)
    nic(s, 900.4, n, "mlx5_3", "down", 1)
    t = 960.4
    while t < 3000:
        nic(s, t, n, "mlx5_3", "down", 1)
        t += 60
    s.write("one node's mlx5_3 port goes down and stays down while NCCL carries the job on its other rails at full pace: "
            "not a death: no restart or retry, the node not taken out under the job; at most one network record",
            [{"class": "network", "node": n, "count_min": 0, "count_max": 1,
              "actions_exclude": NO_OUT + ["reset_gpu", "reboot_node"] + NO_JOB}])


# 3b. A node's management network is cut for 4.5 minutes: the control plane
# marks it NotReady (kube clock), yet its pods run and its ranks (like every
# other node's) keep reporting steps. Under the 300 s not-ready toleration
# nothing is evicted. No restart, no isolation.
def mgmt_net_cut_one_node():
    rng = random.Random(302)
    nodes = ["gpu-%s-%03d" % (c, i) for c in "ab" for i in range(1, 65)]
    labels = {n: {"example.com/rack": "%s-r%02d" % (n[4], (i % 64) // 8 + 1),
                  "topology.kubernetes.io/zone": "ams-3"} for i, n in enumerate(nodes)}
    job = "llm/pretrain-34b"
    n = "gpu-b-017"
    s = Scn("fleet-mgmt-net-cut-one-node", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 3.5
    steps(s, rng, job, nodes, 8, 1, 900, ta, 3400, every=48)
    # the node's own ranks report every 4th step through the cut
    steps(s, rng, job, nodes, 8, 1, 900, ta, 3400, every=4, only={n})
    ckpt(s, 700, job, 200)
    ckpt(s, 2450, job, 700)
    s.add(1400.0, node=n, source="kube", kind="node_not_ready", msg="Kubelet stopped posting node status.")
    s.add(1440.0, node=n, source="kube", kind="node_not_ready", msg="Kubelet stopped posting node status.")
    s.add(1670.0, node=n, source="kube", kind="node_ready", msg="kubelet is posting ready status")
    s.write("a node's management network is cut for 4.5 minutes: NotReady, but its pods run and its ranks keep stepping "
            "with everyone else's: no restart, no isolation; at most one record",
            [{"class": "unknown", "count_min": 0, "count_max": 1,
              "actions_exclude": NO_OUT + ["reset_gpu", "reboot_node"] + NO_JOB}])


# ---------------------------------------------------------------------------
# 4. One incident per episode and cause; history escalates.
# ---------------------------------------------------------------------------

# 4a. A site's own Node condition flaps True/False six times in 45 minutes on
# one node (a check on the edge of its threshold) while the job keeps pace:
# one record, not six; a flag, not harm.
def condition_flapping():
    rng = random.Random(401)
    nodes = ["gpu-c-%03d" % i for i in range(1, 41)]
    labels = {n: {"example.com/rack": "c-r%d" % (i // 8 + 1)} for i, n in enumerate(nodes)}
    job = "ml/dit-8b"
    n = "gpu-c-033"
    s = Scn("fleet-condition-flapping", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 2.5
    steps(s, rng, job, nodes, 8, 1, 1400, ta, 2400, every=25)
    ckpt(s, 1000, job, 400)
    ckpt(s, 3000, job, 1200)
    for k in range(6):
        t = 600 + k * 450
        cond(s, t + rng.uniform(0, 5), n, "SiteNodeCheck", "True", "CheckTimeout", "check_mounts.sh timed out after 30s")
        cond(s, t + 180 + rng.uniform(0, 5), n, "SiteNodeCheck", "False", "CheckPassed")
    s.write("a site's own Node condition flaps True/False six times in 45 minutes on one node while its ranks keep pace: "
            "one record for the episode, no restart, the node not isolated",
            [{"class": "unknown", "node": n,
              "actions_exclude": ["isolate_node", "replace_node", "reset_gpu", "reboot_node"] + NO_JOB}])


# 4b. XID 79 on GPU 0 (isolate, restart from 1700 on a spare), and fifteen
# minutes later XID 48 on GPU 3 of the same node: a different fault on a
# node with an open incident is its own incident (the job, moved off the
# node, is not restarted again).
def xid79_then_xid48():
    rng = random.Random(402)
    nodes = ["hpc-h100-%02d" % i for i in range(1, 33)]
    spare = "hpc-h100-spare1"
    labels = {m: {"example.com/rack": "h-r%d" % (i // 8 + 1)} for i, m in enumerate(nodes + [spare])}
    job = "sci/protein-lm"
    n = "hpc-h100-13"
    s = Scn("fleet-xid79-then-xid48", nodes + [spare], 8, [(job, nodes)], labels)
    t_x = 1200.3
    ta = lambda st: (st - 1001) * 1.0
    steps(s, rng, job, nodes, 8, 1001, 1001 + int(t_x), ta, 950, every=32)
    ckpt(s, ta(1100) + 2, job, 1100)
    ckpt(s, ta(1700) + 2, job, 1700)
    xid_h100(s, t_x, n, 0, 79, "GPU has fallen off the bus.")
    s.add(t_x + 0.4, node=n, gpu=0, source="nvml", kind="gpu_lost")
    podfail(s, t_x + 2.8, n, job, "protein-lm-12", "RuntimeError: CUDA error: unspecified launch failure")
    # the job comes back from 1700 on 31 nodes and the spare
    after = [m for m in nodes if m != n] + [spare]
    for i, m in enumerate(after):
        s.add(1500 + 0.1 * i, node=m, source="kube", kind="pod_started", namespace="sci", pod="protein-lm-r1-%d" % i,
              job=job)
    tb = lambda st: 1560 + (st - 1701) * 1.0
    steps(s, rng, job, after, 8, 1701, 2500, tb, 950, every=32)
    t_y = t_x + 900.0
    xid_h100(s, t_y, n, 3, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
             "partition 2, subpartition 1.")
    s.add(t_y + 0.6, node=n, gpu=3, pci="00000000:%s:00.0" % H100_BUS[3].upper(), source="nvml", kind="ecc",
          bits="double", count=1, volatile=True)
    s.write("XID 79 on GPU 0 of a node (isolate it, restart the job from step 1700; it resumes on a spare), then fifteen "
            "minutes later XID 48 on GPU 3 of the same node: its own gpu_memory incident, the job not restarted again",
            [{"class": "gpu_hardware", "node": n, "job": job, "actions_include": ["isolate_node", "restart_from_checkpoint"],
              "checkpoint_step": 1700},
             {"class": "gpu_memory", "node": n, "gpu": 3, "actions_exclude": NO_JOB}])


# 4c. The same GPU (bus 9a) raises XID 13 with the same GPC/TPC/SM in three
# unrelated jobs over eight hours, each time killing that job's pod while
# the jobs' other nodes are fine. The catalog's WORKFLOW_XID_13 (repeats on
# the same unit) and k8s-device-plugin's reading (13 alone is the
# application's) together: the first failures are the applications', the
# repeat across jobs escalates to the GPU.
def same_gpu_three_jobs():
    rng = random.Random(403)
    nodes = ["k8s-gpu-%03d" % i for i in range(101, 125)]
    labels = {m: {"example.com/rack": "k-r%d" % ((i // 6) + 1)} for i, m in enumerate(nodes)}
    n = "k8s-gpu-117"
    jobs = [("team-a/sft-8b", nodes[12:20], 0.0), ("team-b/dpo-13b", nodes[14:22], 10000.0),
            ("team-c/eval-moe", nodes[16:24], 25000.0)]
    s = Scn("fleet-same-gpu-three-jobs", nodes, 8, [(j, ns) for j, ns, _ in jobs], labels)
    for k, (j, ns, t0) in enumerate(jobs):
        t_f = t0 + 2000 + 500 * k + 0.7
        ta = lambda st, t0=t0: t0 + 30 + (st - 1) * 2.0
        steps(s, rng, j, ns, 8, 1, int((t_f - t0 - 30) // 2), ta, 1900, every=12)
        ckpt(s, t0 + 1030, j, 500)
        xid_h100(s, t_f, n, 4, 13, "Graphics SM Warp Exception on (GPC 4, TPC 1, SM 1): Out Of Range Address",
                 pid=12000 + 977 * k)
        xid_h100(s, t_f + 0.001, n, 4, 13, "Graphics SM Global Exception on (GPC 4, TPC 1, SM 1): Multiple Warp Errors",
                 pid=12000 + 977 * k)
        podfail(s, t_f + 1.5, n, j, "%s-w%d" % (j.split("/")[1], ns.index(n)),
                "RuntimeError: CUDA error: an illegal memory access was encountered")
    s.write("the same GPU raises XID 13 on the same GPC/TPC/SM in three unrelated jobs over eight hours, each time "
            "killing that job's pod: the first are the applications' (no node blamed), the repeat across jobs "
            "escalates to a gpu_hardware incident on that node",
            [{"class": "application", "node": None, "count_min": 1, "count_max": 3, "actions_exclude": NO_OUT},
             {"class": "gpu_hardware", "node": n}])


# ---------------------------------------------------------------------------
# 5. Job lifecycle, checkpoints, corruption, stragglers.
# ---------------------------------------------------------------------------

# 5a. A fine-tuning job crash-loops (a KeyError in its data loader, the
# controller restarting its pod three times) and its controller declares it
# failed (backoffLimit reached). Forty minutes later a GPU of one of its
# former nodes, now idle, falls off the bus: the node is isolated; the failed
# job is neither retried nor restarted (nothing of it runs). The other job,
# on other nodes, is untouched.
def crashloop_then_failed():
    rng = random.Random(501)
    nodes = ["n%02d.gpu.example.net" % i for i in range(1, 17)]
    labels = {n: {"example.com/rack": "g%d" % (i // 4 + 1)} for i, n in enumerate(nodes)}
    jf, jo = "nlp/ft-13b", "nlp/pretrain-7b"
    s = Scn("fleet-crashloop-then-failed", nodes, 8, [(jf, nodes[:4]), (jo, nodes[4:])], labels)
    steps(s, rng, jo, nodes[4:], 8, 1, 1500, lambda st: st * 3.0, 2900, every=12)
    ckpt(s, 1500, jo, 500)
    ckpt(s, 3900, jo, 1300)
    t = 100.0
    for k in range(4):
        for i, n in enumerate(nodes[:4]):
            s.add(t - 30 + 0.2 * i, node=n, source="kube", kind="pod_started", namespace="nlp",
                  pod="ft-13b-%d-r%d" % (i, k), job=jf)
        last = t + rng.uniform(0, 1)
        podfail(s, last, nodes[1], jf, "ft-13b-1-r%d" % k,
                "Traceback (most recent call last): ... File \"/app/data.py\", line 88, in collate: KeyError: 'input_ids'")
        t += 60 * (k + 1) + 30
    s.add(last + 1.2, source="kube", kind="job_finished", job=jf, state="failed",
          msg="Job has reached the specified backoff limit")
    n = "n03.gpu.example.net"
    xid_h100(s, last + 2400, n, 5, 79, "GPU has fallen off the bus.")
    s.write("a job crash-loops on a KeyError and its controller declares it failed; 40 minutes later a GPU of one of its "
            "former nodes falls off the bus: isolate that node; the failed job is neither retried nor restarted",
            [{"class": "application", "node": None, "job": jf, "count_min": 1, "count_max": 4,
              "actions_exclude": NO_OUT + ["reset_gpu", "reboot_node"]},
             {"class": "gpu_hardware", "node": n, "actions_include": ["isolate_node"], "actions_exclude": NO_JOB}])


# 5b. Checkpoint 1200 is reported saved, and four minutes later failed (its
# verification found shards missing): by the spec's "later reports win" it
# is not a restart point. XID 79 then: restart from 1100.
def ckpt_saved_then_failed():
    rng = random.Random(502)
    nodes = ["tpx-%02d" % i for i in range(1, 33)]
    labels = {n: {"example.com/rack": "tpx-r%d" % (i // 8 + 1), "topology.kubernetes.io/zone": "lhr-1"}
              for i, n in enumerate(nodes)}
    job = "llm/pretrain-65b"
    s = Scn("fleet-ckpt-saved-then-failed", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 901) * 5.0
    t_x = 1900.7
    steps(s, rng, job, nodes, 8, 901, 901 + int(t_x // 5), ta, 4900, every=8)
    for k in (1000, 1100, 1200):
        ckpt(s, ta(k) + 9, job, k, root="s3://pretrain-65b")
    ckpt(s, ta(1200) + 250, job, 1200, state="failed", root="s3://pretrain-65b")
    n = "tpx-22"
    xid_h100(s, t_x, n, 7, 79, "GPU has fallen off the bus.", pid=77812)
    podfail(s, t_x + 3, n, job, "pretrain-65b-21", "RuntimeError: CUDA error: unspecified launch failure")
    s.write("checkpoint 1200 is reported saved, then failed four minutes later (verification found shards missing); "
            "XID 79 then takes a GPU off the bus: isolate the node, restart the job from 1100, not 1200",
            [{"class": "gpu_hardware", "node": n, "job": job,
              "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 1100}])


def replica_checksums(s, rng, job, place, n_rep, per_rep, first, last, every, t_of, bad=()):
    """One checksum per replica every `every` steps (rank rep*per_rep + 3); bad: list of
    (replica, from_step, to_step) whose value differs."""
    for st in range(first, last + 1, every):
        v = (st * 0x9E3779B97F4A7C15) % 2 ** 64
        for rep in range(n_rep):
            x = v
            for (br, b0, b1) in bad:
                if rep == br and b0 <= st <= b1:
                    x ^= 0x20000
            rank = rep * per_rep + 3
            n, g = place(rank, st)
            s.add(t_of(st) + rng.uniform(0.5, 1.0), node=n, gpu=g, source="telemetry", kind="replica_checksum",
                  job=job, rank=rank, step=st, replica=rep, value="%016x" % x)


# 5c. NaN from step 7310 on every reporting rank while all four replicas'
# checksums agree before and after (Megatron's "found NaN in local grad
# norm" stops the job): the divergence is the job's own (nanoGPT#167,
# byteps#411), not silent data corruption; no node blamed or taken out.
def nan_replicas_agree():
    rng = random.Random(503)
    nodes = ["p4d-%02d" % i for i in range(1, 17)]
    labels = {n: {"topology.kubernetes.io/zone": "us-west-2b", "node.kubernetes.io/instance-type": "p4d.24xlarge"}
              for n in nodes}
    ja, jb = "lm/gpt-20b", "lm/bert-ft"
    A = nodes[:12]
    s = Scn("fleet-nan-replicas-agree", nodes, 8, [(ja, A), (jb, nodes[12:])], labels)
    ta = lambda st: (st - 7001) * 3.0
    last = 7312
    steps(s, rng, ja, A, 8, 7001, last, ta, 2950, every=3,
          loss=lambda st, r: "nan" if st >= 7310 else round(2.31 - 0.0001 * (st - 7000) + rng.gauss(0, 0.01), 4))
    steps(s, rng, jb, nodes[12:], 8, 1, 900, lambda st: st * 1.2, 1100, every=3)
    ckpt(s, ta(7100) + 4, ja, 7100)
    ckpt(s, ta(7200) + 4, ja, 7200)
    ckpt(s, ta(7300) + 4, ja, 7300)
    replica_checksums(s, rng, ja, lambda r, st: (A[r // 8], r % 8), 4, 24, 7010, last, 10, ta)
    for i, n in enumerate(A):
        podfail(s, ta(last) + 5 + rng.uniform(0, 2), n, ja, "gpt-20b-%d" % i,
                "RuntimeError: Rank %d: found NaN in local grad norm in backward pass before data-parallel "
                "communication collective" % (8 * i))
    s.write("the loss turns NaN at step 7310 on every reporting rank while all four replicas' checksums agree, and the "
            "job stops on 'found NaN in local grad norm': the application's divergence, not silent data corruption; "
            "no node blamed or taken out",
            [{"class": "application", "node": None, "job": ja, "actions_exclude": NO_OUT + ["reset_gpu"]}])


# 5d. A loss spike (5x for about 20 steps, then back on its curve, the
# spikes the OPT-175B logbook and the Llama 3 report describe) while every
# replica's checksum agrees: the optimisation's, not the hardware's; no
# corruption suspect, no restart; at most one application record.
def loss_spike_replicas_agree():
    rng = random.Random(504)
    nodes = ["a100-%s%02d" % (c, i) for c in "pq" for i in range(1, 9)]
    job = "res/olmo-7b"
    s = Scn("fleet-loss-spike-replicas-agree", nodes, 8, [(job, nodes)])

    def loss(st, r):
        base = 2.65 - 0.00005 * (st - 20000) + rng.gauss(0, 0.01)
        if 20410 <= st < 20430:
            return round(base * (5.0 - 0.18 * (st - 20410)), 4)
        return round(base, 4)
    ta = lambda st: (st - 20001) * 2.2
    steps(s, rng, job, nodes, 8, 20001, 20700, ta, 2150, every=5, loss=loss)
    ckpt(s, ta(20200) + 3, job, 20200)
    ckpt(s, ta(20600) + 3, job, 20600)
    replica_checksums(s, rng, job, lambda r, st: (nodes[r // 8], r % 8), 4, 32, 20010, 20700, 10, ta)
    s.write("a 5x loss spike for 20 steps that returns to its curve while all four replicas' checksums agree: the "
            "optimisation's, not corruption: no node suspected, no restart; at most one application record",
            [{"class": "application", "node": None, "count_min": 0, "count_max": 1,
              "actions_exclude": NO_OUT + ["reset_gpu", "restart_from_checkpoint"]}])


# 5e. Replica 2's checksum disagrees from step 3300 on one node (isolate
# it, resume from 3200 on a spare); two hours later replica 6's disagrees
# from step 4560 on another node: a second suspect on its own node, resumed
# from its own last agreed checkpoint (4400) (Dixit et al., "Silent Data
# Corruptions at Scale", arXiv:2102.11245; Llama 3: 6 SDC interruptions in
# 54 days).
def sdc_second_replica_later():
    rng = random.Random(505)
    nodes = ["xe9680-%02d" % i for i in range(1, 33)]
    spare = ["xe9680-s1", "xe9680-s2"]
    labels = {n: {"example.com/rack": "x-r%d" % (i // 8 + 1)} for i, n in enumerate(nodes + spare)}
    job = "fm/llm-130b"
    s = Scn("fleet-sdc-second-replica-later", nodes + spare, 8, [(job, nodes)], labels)
    # 256 ranks, 8 replicas of 32 (4 nodes each); replica r's rank r*32+3 sits on node 4r, GPU 3
    a, b = nodes[8], nodes[24]
    place1 = lambda r, st: (nodes[r // 8], r % 8)
    place2 = lambda r, st: ((spare[0] if nodes[r // 8] == a else nodes[r // 8]), r % 8)
    t1 = lambda st: (st - 3001) * 4.0
    replica_checksums(s, rng, job, place1, 8, 32, 3020, 3340, 20, t1, bad=[(2, 3300, 3340)])
    steps(s, rng, job, nodes, 8, 3001, 3335, t1, 3900, every=32)
    ckpt(s, t1(3100) + 6, job, 3100)
    ckpt(s, t1(3200) + 6, job, 3200)
    # resumed from 3200 with the spare in a's place
    t2 = lambda st: 2000 + (st - 3201) * 4.0
    ns2 = [spare[0] if n == a else n for n in nodes]
    steps(s, rng, job, ns2, 8, 3201, 4560, t2, 3900, every=32)
    replica_checksums(s, rng, job, place2, 8, 32, 3220, 4580, 20, t2, bad=[(6, 4560, 4580)])
    for k in (3400, 3600, 3800, 4000, 4200, 4400):
        ckpt(s, t2(k) + 6, job, k)
    s.write("replica 2's checksum disagrees from step 3300 on one node: isolate it, resume from 3200; after the resume "
            "replica 6's disagrees from step 4560 on another node: a second suspect on its own node, resumed from 4400",
            [{"class": "silent_data_corruption", "node": a, "job": job,
              "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 3200},
             {"class": "silent_data_corruption", "node": b, "job": job,
              "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 4400}])


# 5f. A fail-slow node (ByteDance's stragglers, OSDI'25; FALCON) found under
# rotating sampling: every step 16 of 512 ranks report, a different set
# each step; node 41's GPUs run 25% slower from step 300.
def straggler_rotating_ranks():
    rng = random.Random(506)
    nodes = ["ml-h100-%03d" % i for i in range(1, 65)]
    labels = {n: {"example.com/rack": "ml-r%02d" % (i // 8 + 1)} for i, n in enumerate(nodes)}
    job = "ml/llama-34b"
    n = "ml-h100-041"
    s = Scn("fleet-straggler-rotating-ranks", nodes, 8, [(job, nodes)], labels)
    ta = lambda st: (st - 1) * 2.6
    steps(s, rng, job, nodes, 8, 1, 900, ta, 2500, per_step=3,
          factor=lambda st, m: 1.25 if m == n and st >= 300 else 1.0, comm=300)
    ckpt(s, 700, job, 260)
    ckpt(s, 1800, job, 690)
    s.write("every step only 16 of 512 ranks report, a different set each time; from step 300 one node's GPUs run 25% "
            "slower: a straggler found on that node",
            [{"class": "straggler", "node": n, "job": job}])


# 5g. Each node reports one rank only every 20th step (staggered, so the
# fleet reports every step): 128 nodes, no labels, node 77 20% slower from
# step 250.
def straggler_every_20th():
    rng = random.Random(507)
    nodes = ["worker-%03d" % i for i in range(128)]
    job = "llm/gemma-27b"
    n = "worker-077"
    s = Scn("fleet-straggler-every-20th", nodes, 8, [(job, nodes)])
    ta = lambda st: (st - 1) * 3.1
    steps(s, rng, job, nodes, 8, 1, 460, ta, 3000, every=20,
          factor=lambda st, m: 1.2 if m == n and st >= 250 else 1.0)
    ckpt(s, 700, job, 220)
    ckpt(s, 1300, job, 410)
    s.write("no labels; each of 128 nodes reports one rank every 20th step; from step 250 of 460 one node is 20% slower: a "
            "straggler found on that node",
            [{"class": "straggler", "node": n, "job": job}])


# 5h. Two jobs slowed at once by two different slow nodes (one in each):
# two findings, each on its own node and job.
def two_jobs_two_stragglers():
    rng = random.Random(508)
    nodes = ["sxm5-%02d" % i for i in range(1, 49)]
    labels = {n: {"example.com/rack": "s-r%d" % (i // 8 + 1)} for i, n in enumerate(nodes)}
    ja, jb = "a/llm-13b", "b/diffusion-xl"
    A, B = nodes[:32], nodes[32:]
    na, nb = "sxm5-17", "sxm5-43"
    s = Scn("fleet-two-jobs-two-stragglers", nodes, 8, [(ja, A), (jb, B)], labels)
    steps(s, rng, ja, A, 8, 1, 800, lambda st: st * 2.0, 1900, every=16,
          factor=lambda st, m: 1.3 if m == na and st * 2.0 >= 1200 else 1.0)
    steps(s, rng, jb, B, 8, 1, 1100, lambda st: st * 1.5, 1400, every=12,
          factor=lambda st, m: 1.22 if m == nb and st * 1.5 >= 1200 else 1.0)
    ckpt(s, 1000, ja, 500)
    ckpt(s, 1000, jb, 666)
    s.write("at the same moment one node of each of two jobs slows down (30% and 22%): two straggler findings, each on "
            "its own node and job",
            [{"class": "straggler", "node": na, "job": ja}, {"class": "straggler", "node": nb, "job": jb}])


ALL = [ib_leaf_reboot_rail_failover, ib_leaf_reboot_nolabels, ib_leaf_dead_job_hangs, leaf_reboot_plus_xid79,
       two_leaves_two_incidents, gke_subblock_rail, driver_rollout_xid145, driver_rollout_nolabels, npd_rule_bug_512,
       npd_rule_bug_nolabels, npd_bug_plus_xid48, rack_power_cap, rack_power_cap_nolabels, rack_thermal_rdhx,
       clique_nonfatal, clique_fatal, nvlink_network_sxid, nvl72_nonfatal_nolabels, mgmt_rack_notready,
       sxid12028_says_nonfatal, sxid12028_says_fatal, xid145_nonfatal_one_tray, xid149_fatal_one_tray,
       xid154_drain_and_reset, xid154_node_reboot, port_down_one_node_failover, mgmt_net_cut_one_node,
       condition_flapping, xid79_then_xid48, same_gpu_three_jobs, crashloop_then_failed, ckpt_saved_then_failed,
       nan_replicas_agree, loss_spike_replicas_agree, sdc_second_replica_later, straggler_rotating_ranks,
       straggler_every_20th, two_jobs_two_stragglers]


def main():
    for f in ALL:
        f()


if __name__ == "__main__":
    main()
