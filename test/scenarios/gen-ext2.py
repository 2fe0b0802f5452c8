#!/usr/bin/env python3
# gen-ext2.py - writes the ext2-* scenarios: a second outside review of
# `gpuheal diagnose`, written from shared/spec/signals.md, issue 5 and
# shared/data alone (without reading the engine or the other scenarios), with
# the expectations decided before running. Deterministic: run it after editing
# and commit the output. Usage: gen-ext2.py [OUTDIR] (default: this folder).
import json
import os
import random
import sys
from datetime import datetime, timedelta, timezone

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
BASE = datetime(2026, 11, 20, 3, 0, 0, tzinfo=timezone.utc)


def ts(sec):
    t = BASE + timedelta(seconds=sec)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06dZ" % t.microsecond


def sig(sec, **kw):
    d = {"ts": ts(sec)}
    d.update(kw)
    return d


def dumps(o):
    return json.dumps(o, separators=(",", ":"))


def write(name, desc, header, sigs, incidents, allow_extra=False, raw=None,
          shuffle=None, crlf=False, bom=False):
    lines = []
    if header is not None:
        lines.append(dumps(header))
    body = [dumps(s) for s in sigs]
    if shuffle is not None:
        random.Random(shuffle).shuffle(body)
    lines += body
    if raw:
        for pos, text in raw:
            lines.insert(pos, text)
    nl = "\r\n" if crlf else "\n"
    data = nl.join(lines) + nl
    if bom:
        data = "\ufeff" + data
    with open(os.path.join(OUT, name + ".jsonl"), "w", encoding="utf-8", newline="") as f:
        f.write(data)
    with open(os.path.join(OUT, name + ".expect.json"), "w") as f:
        f.write(json.dumps({"description": desc, "incidents": incidents,
                            "allow_extra": allow_extra}, indent=1) + "\n")


def steps(job, nodes, rpn, first, last, t0, period, rng, slow=None, stop=None,
          loss=None, skew=None, ns_gpu=0, comm=True):
    """Step signals for a job: rank r on nodes[r // rpn], gpu ns_gpu + r % rpn.
    slow(step, node, gpu) -> factor; stop(node) -> last step reported;
    loss(step) -> value; skew(node) -> seconds added to that node's clock."""
    out = []
    for s in range(first, last + 1):
        for r in range(len(nodes) * rpn):
            n = nodes[r // rpn]
            g = ns_gpu + r % rpn
            if stop and stop(n) is not None and s > stop(n):
                continue
            f = slow(s, n, g) if slow else 1.0
            ms = 1000.0 * f * (1 + rng.gauss(0, 0.02))
            t = t0 + (s - first) * period + rng.uniform(0, 0.3)
            if skew:
                t += skew(n)
            d = sig(t, node=n, gpu=g, source="telemetry", kind="step", job=job,
                    rank=r, step=s, step_ms=round(ms, 2))
            if comm:
                d["comm_ms"] = round(150 * (1 + rng.gauss(0, 0.05)), 2)
            if loss:
                d["loss"] = loss(s)
            out.append(d)
    return out


def ckpt(sec, job, step, state="saved"):
    return sig(sec, source="telemetry", kind="checkpoint", job=job, step=step,
               path="s3://ckpt/%s/step-%d" % (job.replace("/", "-"), step), state=state)


def podfail(sec, node, job, pod, reason="Error", code=1, msg="", ns=None):
    ns = ns or job.split("/")[0]
    d = sig(sec, node=node, source="kube", kind="pod_failed", namespace=ns, pod=pod,
            job=job, reason=reason, msg=msg)
    if code is not None:
        d["exit_code"] = code
    return d


def xid(sec, node, code, gpu=None, pci=None, msg=None, source="kmsg", **kw):
    d = sig(sec, node=node, source=source, kind="xid", code=code)
    if gpu is not None:
        d["gpu"] = gpu
    if pci is not None:
        d["pci"] = pci
    d["msg"] = msg or "NVRM: Xid (PCI:0000:%02x:00): %d, pid=4242, name=python3" % (0x18 + 16 * (gpu or 0), code)
    d.update(kw)
    return d


def header(name, nodes, jobs, gpn=8, **extra):
    h = {"scenario": name, "nodes": nodes, "gpus_per_node": gpn, "jobs": jobs}
    h.update(extra)
    return h


def job(name, nodes, rpn=8):
    return {"name": name, "nodes": nodes, "ranks_per_node": rpn}


NODES16 = ["dgx-%02d" % i for i in range(1, 17)]


def shared_cluster_one_fault():
    rng = random.Random(1)
    a, b = "vision/vit-h", "nlp/gpt-13b"
    na, nb = NODES16[0:2], NODES16[2:4]
    s = steps(a, na, 8, 1, 60, 0, 10, rng) + steps(b, nb, 8, 1, 30, 0, 10, rng)
    s += [ckpt(100, b, 10), ckpt(250, b, 25), ckpt(150, a, 15), ckpt(450, a, 45)]
    s.append(xid(302.5, "dgx-04", 79, gpu=2, msg="NVRM: Xid (PCI:0000:3b:00): 79, pid=911, GPU has fallen off the bus."))
    for r in range(16):
        s.append(podfail(320 + r * 0.2, nb[r // 8], b, "gpt-13b-worker-%d" % r, msg="NCCL error: unhandled system error"))
    write("ext2-shared-cluster-one-fault",
          "Two jobs on disjoint nodes; a GPU on dgx-04 falls off the bus: one incident for that job only.",
          header("shared", NODES16[:4], [job(a, na), job(b, nb)]), s,
          [{"class": "gpu_hardware", "node": "dgx-04", "gpu": 2, "job": b,
            "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 25, "max_decide_s": 5}])


def healthy_long_noise():
    rng = random.Random(2)
    j = "ml/llama-8b"
    nodes = ["dgx-01", "dgx-02"]
    s = steps(j, nodes, 8, 1, 720, 0, 20, rng, loss=lambda st: round(3.0 - st * 0.001 + rng.gauss(0, 0.03), 4))
    for k in range(0, 14400, 300):
        for n in nodes:
            for g in range(8):
                c = 62 + 8 * __import__("math").sin(k / 14400 * 6.283) + rng.uniform(-2, 2)
                s.append(sig(k + 1 + g * 0.01, node=n, gpu=g, source="nvml", kind="thermal", celsius=round(c, 1), throttled=False))
                s.append(sig(k + 2 + g * 0.01, node=n, gpu=g, source="nvml", kind="power", watts=round(610 + rng.uniform(-40, 40), 1), throttled=False))
        # single-bit ECC creeping on one GPU; correctable PCIe and NIC symbol errors at a low rate
        s.append(sig(k + 3, node="dgx-02", gpu=6, source="nvml", kind="ecc", bits="single", count=k // 1200, volatile=True))
        s.append(sig(k + 4, node="dgx-01", gpu=1, source="nvml", kind="pcie", counter="aer_correctable", count=k // 1800))
        s.append(sig(k + 4.5, node="dgx-01", gpu=1, source="nvml", kind="pcie", counter="replay", count=k // 3600))
        s.append(sig(k + 5, node="dgx-02", source="host", kind="nic", device="mlx5_3", port=1, counter="symbol_error", count=k // 900, state="up"))
        s.append(sig(k + 6, node="dgx-01", gpu=3, source="nvml", kind="nvlink", link=2, counter="crc_flit", count=k // 2400))
    for c in range(1, 5):
        s.append(ckpt(c * 3000, j, c * 150))
    write("ext2-healthy-long-noise",
          "Four healthy hours with diurnal temperature below throttling, creeping SBE, correctable PCIe, NIC symbol and NVLink CRC counts at low rates: no incident.",
          header("healthy", nodes, [job(j, nodes)]), s, [])


def hang_first_silent():
    rng = random.Random(3)
    j = "ml/moe-64"
    nodes = NODES16[:4]
    s = steps(j, nodes, 8, 1, 101, 0, 2, rng, stop=lambda n: 97 if n == "dgx-03" else None)
    s.append(ckpt(100, j, 50))
    # ten minutes later the watchdog fires everywhere
    for r in range(32):
        s.append(podfail(805 + r * 0.1, nodes[r // 8], j, "moe-64-worker-%d" % r,
                         msg="[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9120, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out." % r))
    write("ext2-hang-first-silent",
          "A collective hang with no GPU or NIC evidence: the ranks on dgx-03 stopped reporting first; one network incident localised to dgx-03.",
          header("hang", nodes, [job(j, nodes)]), s,
          [{"class": "network", "node": "dgx-03", "job": j}])


def xid45_caused_by_79():
    s = [xid(10, "dgx-05", 79, gpu=4, msg="NVRM: Xid (PCI:0000:9a:00): 79, pid=1201, GPU has fallen off the bus."),
         sig(10.2, node="dgx-05", gpu=4, source="nvml", kind="gpu_lost")]
    for g in range(8):
        s.append(xid(10.5 + g * 0.01, "dgx-05", 45, gpu=g,
                     msg="NVRM: Xid (PCI:0000:%02x:00): 45, pid=1201, name=python3, Ch 00000010 caused by previous Xid 79" % (0x18 + g * 16)))
    for r in range(8):
        s.append(podfail(20 + r * 0.1, "dgx-05", "ml/bert", "bert-worker-%d" % r, msg="CUDA error: unspecified launch failure"))
    write("ext2-xid45-caused-by-79",
          "XID 79 on GPU 4 then XID 45 on every GPU 'caused by previous Xid 79': one gpu_hardware incident on GPU 4, no application incident.",
          header("x45", ["dgx-05"], [job("ml/bert", ["dgx-05"])]), s,
          [{"class": "gpu_hardware", "node": "dgx-05", "gpu": 4, "max_decide_s": 5}])


def xid45_after_13():
    s = [xid(10, "dgx-06", 13, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 13, pid=777, name=python3, Graphics Exception: ESR 0x404490=0x80000001"),
         xid(10.4, "dgx-06", 45, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 45, pid=777, name=python3, Ch 00000008 caused by previous Xid 13"),
         podfail(12, "dgx-06", "cv/detr", "detr-0", msg="Traceback (most recent call last): RuntimeError: CUDA error: an illegal memory access was encountered")]
    write("ext2-xid45-after-13",
          "XID 45 caused by a previous application XID 13 on one GPU with a traceback: one application incident, no node.",
          header("x45app", ["dgx-06"], [job("cv/detr", ["dgx-06"], 1)]), s,
          [{"class": "application", "node": None, "job": "cv/detr",
            "actions_exclude": ["isolate_node", "drain_node", "replace_node"]}])


def xid154_reboot():
    s = [xid(30, "dgx-07", 119, gpu=6, msg="NVRM: Xid (PCI:0000:b8:00): 119, pid=3300, name=python3, Timeout after 6s of waiting for RPC response from GPU6 GSP! Expected function 76 (GSP_RM_CONTROL)."),
         xid(30.8, "dgx-07", 154, gpu=6, msg="NVRM: Xid (PCI:0000:b8:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")]
    write("ext2-xid154-reboot",
          "XID 119 decided at once; XID 154 then asks for a node reboot the incident lacks: a follow-up incident on GPU 6 with reboot_node.",
          header("x154", ["dgx-07"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-07", "gpu": 6, "actions_include": ["reset_gpu"], "max_decide_s": 0},
           {"class": "gpu_hardware", "node": "dgx-07", "gpu": 6, "actions_include": ["reboot_node"], "max_decide_s": 0}])


def xid154_drain_reset_alone():
    s = [xid(30, "dgx-08", 154, gpu=3, msg="NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)")]
    write("ext2-xid154-drain-reset",
          "XID 154 alone announcing 0x4 Drain and Reset: the driver's action is followed (drain_node and reset_gpu) on GPU 3.",
          header("x154b", ["dgx-08"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-08", "gpu": 3, "actions_include": ["drain_node", "reset_gpu"]}])


def xid63_pending():
    s = [xid(40, "dgx-09", 63, gpu=2, msg="NVRM: Xid (PCI:0000:3b:00): 63, pid=0, Row Remapper: New row (0x0000000000abc123) marked for remapping, reset gpu to activate."),
         sig(41, node="dgx-09", gpu=2, source="nvml", kind="row_remap", pending=True, failure=False, correctable=0, uncorrectable=1)]
    write("ext2-xid63-pending",
          "XID 63 then NVML row remap pending (no failure): one gpu_memory incident on GPU 2 with reset_gpu, not a replacement.",
          header("x63", ["dgx-09"], []), s,
          [{"class": "gpu_memory", "node": "dgx-09", "gpu": 2, "actions_include": ["reset_gpu"],
            "actions_exclude": ["replace_node"]}])


def xid64_failure():
    s = [xid(40, "dgx-09", 64, gpu=5, msg="NVRM: Xid (PCI:0000:9a:00): 64, pid=0, Row Remapper: remapping failed"),
         sig(41, node="dgx-09", gpu=5, source="nvml", kind="row_remap", pending=False, failure=True, correctable=0, uncorrectable=9)]
    write("ext2-xid64-remap-failure",
          "XID 64 then NVML row remap failure: one gpu_memory incident on GPU 5 that takes the node out of service.",
          header("x64", ["dgx-09"], []), s,
          [{"class": "gpu_memory", "node": "dgx-09", "gpu": 5, "actions_exclude": ["none", "retry_in_place"]}])


def xid48_pci_plus_nvml():
    j = "ml/t5"
    s = [xid(50, "dgx-10", 48, pci="0000:3b:00.0", msg="NVRM: Xid (PCI:0000:3b:00): 48, pid=5151, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0."),
         sig(50.6, node="dgx-10", gpu=2, source="nvml", kind="ecc", bits="double", count=1, volatile=True),
         sig(51, node="dgx-10", gpu=2, source="nvml", kind="row_remap", pending=True, failure=False, correctable=0, uncorrectable=1)]
    for r in range(8):
        s.append(podfail(55 + r * 0.1, "dgx-10", j, "t5-%d" % r, msg="CUDA error: uncorrectable ECC error encountered"))
    s.append(ckpt(10, j, 400))
    write("ext2-xid48-pci-and-nvml",
          "XID 48 from kmsg with only a PCI id, NVML double-bit ECC on GPU 2 and a pending remap: one gpu_memory incident on dgx-10.",
          header("x48", ["dgx-10"], [job(j, ["dgx-10"])]), s,
          [{"class": "gpu_memory", "node": "dgx-10", "job": j, "checkpoint_step": 400}])


def xid94_contained():
    a, b = "ml/a", "ml/b"
    rng = random.Random(9)
    s = steps(a, ["dgx-11"], 4, 1, 20, 0, 5, rng) + steps(b, ["dgx-11"], 4, 1, 20, 0, 5, rng, ns_gpu=4)
    s.append(ckpt(50, a, 10))
    s.append(xid(61, "dgx-11", 94, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 94, pid=801, name=python3, Contained: SM (0x1). RST: No, D-RST: No"))
    s.append(podfail(63, "dgx-11", a, "a-1", msg="CUDA error: uncorrectable ECC error encountered"))
    write("ext2-xid94-contained",
          "XID 94 (contained) on GPU 1 used by job ml/a while ml/b runs on GPUs 4-7: restart ml/a only; the node stays in service.",
          header("x94", ["dgx-11"], [job(a, ["dgx-11"], 4), job(b, ["dgx-11"], 4)]), s,
          [{"class": "gpu_memory", "node": "dgx-11", "gpu": 1, "job": a, "checkpoint_step": 10,
            "actions_include": ["restart_from_checkpoint"],
            "actions_exclude": ["isolate_node", "drain_node", "replace_node", "reboot_node"]}])


def xid95_uncontained():
    s = [xid(61, "dgx-12", 95, gpu=7, msg="NVRM: Xid (PCI:0000:db:00): 95, pid=802, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No")]
    write("ext2-xid95-uncontained",
          "XID 95 (uncontained) on GPU 7: gpu_memory with a GPU reset.",
          header("x95", ["dgx-12"], []), s,
          [{"class": "gpu_memory", "node": "dgx-12", "gpu": 7, "actions_include": ["reset_gpu"]}])


def sxid_nonfatal():
    rng = random.Random(4)
    j = "ml/llm"
    nodes = ["dgx-13", "dgx-14"]
    s = steps(j, nodes, 8, 1, 60, 0, 5, rng)
    for k in range(3):
        s.append(sig(40 + k * 60, node="dgx-13", source="kmsg", kind="sxid", code=20009, switch="nvidia-nvswitch0",
                     msg="nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate"))
    write("ext2-sxid-nonfatal",
          "Three non-fatal SXid 20009 on a healthy running job: no incident that takes the node out of service (none at all expected).",
          header("sxnf", nodes, [job(j, nodes)]), s, [])


def sxid_fatal_with_74():
    s = [sig(70, node="dgx-14", source="kmsg", kind="sxid", code=24007, switch="nvidia-nvswitch0",
             msg="nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)"),
         xid(70.4, "dgx-14", 74, gpu=3, msg="NVRM: Xid (PCI:0000:5d:00): 74, pid=99, name=python3, NVLink: fatal error detected on link 7(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")]
    write("ext2-sxid-fatal-with-74",
          "A fatal SXid propagated to the GPU as XID 74 within a second: one interconnect incident on dgx-14.",
          header("sxf", ["dgx-14"], []), s,
          [{"class": "interconnect", "node": "dgx-14"}])


def node_reboot_boot_noise():
    rng = random.Random(5)
    s = [sig(0, node="dgx-15", source="kube", kind="node_not_ready"), sig(180, node="dgx-15", source="kube", kind="node_ready")]
    for g in range(8):
        s.append(sig(185 + g * 0.1, node="dgx-15", gpu=g, source="nvml", kind="ecc", bits="single", count=0, volatile=True))
        s.append(sig(186 + g * 0.1, node="dgx-15", gpu=g, source="nvml", kind="thermal", celsius=round(38 + rng.uniform(0, 3), 1), throttled=False))
        s.append(sig(187 + g * 0.1, node="dgx-15", gpu=g, source="nvml", kind="pcie", counter="replay", count=rng.randint(0, 2)))
    s.append(sig(188, node="dgx-15", source="host", kind="nic", device="mlx5_0", port=1, counter="link_downed", count=1, state="down"))
    s.append(sig(195, node="dgx-15", source="host", kind="nic", device="mlx5_0", port=1, counter="link_downed", count=1, state="up"))
    write("ext2-reboot-boot-noise",
          "An idle node reboots (NotReady 3 min, Ready) with boot-time noise (counters reset, one link down while training up): no incident.",
          header("boot", ["dgx-15"], []), s, [])


def injected_xid79():
    s = [xid(10, "dgx-16", 79, gpu=0, injected=True, msg="NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.")]
    write("ext2-injected-xid79",
          "An injected XID 79 (demo/operator) is handled like a real one: one gpu_hardware incident on GPU 0.",
          header("inj", ["dgx-16"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-16", "gpu": 0}])


def two_jobs_one_node_app():
    rng = random.Random(6)
    a, b = "team1/train", "team2/train"
    s = steps(a, ["dgx-01"], 4, 1, 40, 0, 3, rng) + steps(b, ["dgx-01"], 4, 1, 20, 0, 3, rng, ns_gpu=4)
    s.append(xid(62, "dgx-01", 31, gpu=6, msg="NVRM: Xid (PCI:0000:bb:00): 31, pid=6060, name=python3, Ch 00000009, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_1 faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"))
    s.append(podfail(63, "dgx-01", b, "train-2", msg="Traceback (most recent call last): RuntimeError: CUDA error: an illegal memory access was encountered"))
    write("ext2-two-jobs-one-node-app",
          "Two jobs share dgx-01 (GPUs 0-3 and 4-7); XID 31 with a traceback in team2/train: one application incident, no node, nothing for team1/train.",
          header("share", ["dgx-01"], [job(a, ["dgx-01"], 4), job(b, ["dgx-01"], 4)]), s,
          [{"class": "application", "node": None, "job": b,
            "actions_exclude": ["isolate_node", "drain_node"]}])


def xid74_repeats():
    s = [xid(100, "dgx-02", 74, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 74, pid=11, name=python3, NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"),
         xid(7300, "dgx-02", 74, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 74, pid=12, name=python3, NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")]
    write("ext2-xid74-repeats",
          "XID 74 on the same GPU and link twice two hours apart: two interconnect incidents; the second escalates to isolate_node.",
          header("x74", ["dgx-02"], []), s,
          [{"class": "interconnect", "node": "dgx-02", "gpu": 1, "count_min": 2, "count_max": 2},
           ])


def flapping_6_jobs():
    s = []
    jobs = ["r%d/job-%d" % (i, i) for i in range(6)]
    for i, j in enumerate(jobs):
        t = i * 15 * 3600 + 3600
        s.append(sig(t - 600, node="dgx-03", source="kube", kind="pod_started", namespace=j.split("/")[0], pod="w-%d" % i, job=j))
        s.append(podfail(t, "dgx-03", j, "w-%d" % i, reason="Error", code=134,
                         msg="NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error"))
        s.append(sig(t + 120, node="dgx-04", source="kube", kind="pod_started", namespace=j.split("/")[0], pod="w-%d-r" % i, job=j))
    # the rest of the cluster fails at the base rate: one failure in four days elsewhere
    s.append(podfail(40 * 3600, "dgx-09", "r9/other", "o-0", reason="Error", code=134, msg="NCCL error: unhandled system error"))
    write("ext2-flapping-6-jobs",
          "dgx-03 is in six failures of six different jobs over four days, each restart elsewhere succeeding: one flapping_node incident on dgx-03.",
          header("flap", NODES16, [job(j, ["dgx-03"], 8) for j in jobs]), s,
          [{"class": "flapping_node", "node": "dgx-03"}], allow_extra=True)


def sdc_loss_ckpt_before():
    rng = random.Random(7)
    j = "ml/llm-sdc"
    nodes = ["dgx-05", "dgx-06"]

    def loss(st):
        if st >= 350:
            return round(18.0 + rng.uniform(0, 1), 3)
        return round(2.5 - st * 0.001 + rng.gauss(0, 0.01), 4)
    s = steps(j, nodes, 8, 300, 420, 0, 2, rng, loss=loss)
    s += [ckpt(-400, j, 100), ckpt(-200, j, 200), ckpt(1, j, 300, "failed"), ckpt(241, j, 420)]
    write("ext2-sdc-loss-ckpt-before",
          "Loss jumps 7x at step 350; checkpoint 300 failed and 420 was saved after the jump: resume from 200, probe the job's nodes.",
          header("sdc", nodes, [job(j, nodes)]), s,
          [{"class": "silent_data_corruption", "job": j, "checkpoint_step": 200,
            "actions_include": ["run_diagnostics", "restart_from_checkpoint"]}])


def nan_one_job():
    rng = random.Random(8)
    a, b = "ml/good", "ml/nanjob"
    s = steps(a, ["dgx-07"], 8, 1, 60, 0, 2, rng, loss=lambda st: round(2.0 + rng.gauss(0, 0.01), 4))
    s += steps(b, ["dgx-08"], 8, 1, 60, 0, 2, rng, loss=lambda st: "nan" if st >= 40 else round(2.2 + rng.gauss(0, 0.01), 4))
    s += [ckpt(50, b, 20), ckpt(50, a, 20), ckpt(100, b, 50)]
    write("ext2-nan-one-job",
          "Loss turns 'nan' at step 40 on ml/nanjob only: one SDC suspicion for that job, probes, resume from step 20; no isolation before the probes.",
          header("nan", ["dgx-07", "dgx-08"], [job(a, ["dgx-07"]), job(b, ["dgx-08"])]), s,
          [{"class": "silent_data_corruption", "job": b, "checkpoint_step": 20,
            "actions_include": ["run_diagnostics"], "actions_exclude": ["isolate_node", "drain_node", "replace_node"]}])


def skewed_hang():
    rng = random.Random(10)
    j = "ml/skew"
    nodes = NODES16[:4]
    s = steps(j, nodes, 8, 1, 101, 0, 2, rng,
              stop=lambda n: 99 if n == "dgx-04" else None,
              skew=lambda n: -180.0 if n == "dgx-02" else 0.0)
    for r in range(32):
        s.append(podfail(805 + r * 0.1, nodes[r // 8], j, "skew-%d" % r,
                         msg="Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE) ran for 600000 milliseconds"))
    write("ext2-skewed-hang",
          "A hang where dgx-04's ranks stop at step 99 while dgx-02's clock runs 3 minutes behind: localise to dgx-04, not to the skewed node.",
          header("skew", nodes, [job(j, nodes)]), s,
          [{"class": "network", "node": "dgx-04", "job": j}])


def ooo_beyond_window():
    j = "ml/ooo"
    s = []
    for r in range(8):
        s.append(podfail(40 + r, "dgx-09", j, "ooo-%d" % r, msg="CUDA error: unknown error"))
    s.append(xid(10, "dgx-09", 79, gpu=5, msg="NVRM: Xid (PCI:0000:9a:00): 79, pid=1, GPU has fallen off the bus."))
    s.append(ckpt(2, j, 900))
    write("ext2-ooo-beyond-window",
          "The XID line comes last in the file, 30-37 s after the pod failures it caused: replay sorts by ts; one gpu_hardware incident whose first_ts is the XID.",
          header("ooo", ["dgx-09"], [job(j, ["dgx-09"])]), s,
          [{"class": "gpu_hardware", "node": "dgx-09", "gpu": 5, "job": j, "checkpoint_step": 900, "max_decide_s": 5}])


def exact_dups():
    j = "ml/dup"
    x = xid(10, "dgx-10", 13, gpu=0, msg="NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0): Out Of Range Address")
    p = podfail(11, "dgx-10", j, "dup-0", msg="Traceback (most recent call last): RuntimeError: CUDA error: device-side assert triggered")
    s = [x, x, x, p, p]
    write("ext2-exact-dups",
          "An application XID 13 and its pod failure, each line repeated verbatim: one application incident, no repeat escalation.",
          header("dup", ["dgx-10"], [job(j, ["dgx-10"], 1)]), s,
          [{"class": "application", "node": None, "job": j}])


def crlf_79():
    s = [xid(10, "dgx-11", 79, gpu=3, msg="NVRM: Xid (PCI:0000:5d:00): 79, pid=1, GPU has fallen off the bus.")]
    write("ext2-crlf", "CRLF line endings: the header and the XID 79 line are read normally.",
          header("crlf", ["dgx-11"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-11", "gpu": 3}], crlf=True)


def bom_79():
    s = [xid(10, "dgx-12", 79, gpu=4, msg="NVRM: Xid (PCI:0000:9a:00): 79, pid=1, GPU has fallen off the bus.")]
    write("ext2-bom", "A UTF-8 byte order mark before the header: the header and the XID 79 line are read normally.",
          header("bom", ["dgx-12"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-12", "gpu": 4}], bom=True)


def blank_lines():
    s = [xid(10, "dgx-13", 48, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 48, pid=1, name=python3, An uncorrectable double bit error"),
         sig(10.5, node="dgx-13", gpu=1, source="nvml", kind="ecc", bits="double", count=1, volatile=True)]
    write("ext2-blank-lines", "Empty and whitespace-only lines between the signals are skipped.",
          header("blank", ["dgx-13"], []), s,
          [{"class": "gpu_memory", "node": "dgx-13", "gpu": 1}],
          raw=[(1, ""), (2, "   \t "), (4, "")])


def header_extra():
    s = [xid(10, "dgx-14", 79, gpu=2, msg="NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."),
         podfail(12, "dgx-14", "ml/x", "x-0", msg="CUDA error: unknown error")]
    h = header("extra", ["dgx-14"], [dict(job("ml/x", ["dgx-14"]), priority="high", owner={"team": "t"})],
               cluster="eu-west", version=7, pci={"0000:3b:00.0": 2}, generated_by="other-suite")
    write("ext2-header-extra", "A header with unknown fields (top level and in a job) is still used.",
          h, s, [{"class": "gpu_hardware", "node": "dgx-14", "gpu": 2, "job": "ml/x"}])


def straggler_shared():
    rng = random.Random(11)
    a, b = "ml/a", "ml/b"
    na, nb = NODES16[0:4], NODES16[4:8]
    s = steps(a, na, 8, 1, 150, 0, 1.1, rng)
    s += steps(b, nb, 8, 1, 150, 0, 1.3, rng,
               slow=lambda st, n, g: 1.3 if (n == "dgx-06" and g == 2 and st >= 50) else 1.0)
    s += [ckpt(40, b, 30), ckpt(40, a, 30)]
    write("ext2-straggler-shared",
          "Two 32-rank jobs on a shared cluster; GPU 2 of dgx-06 (job ml/b) runs 30% slow from step 50: one straggler for ml/b on dgx-06 GPU 2.",
          header("strag", NODES16[:8], [job(a, na), job(b, nb)]), s,
          [{"class": "straggler", "node": "dgx-06", "gpu": 2, "job": b,
            "actions_exclude": ["reboot_node", "replace_node"]}])


def bad_lines():
    s = [xid(10, "dgx-15", 79, gpu=1, msg="NVRM: Xid (PCI:0000:29:00): 79, pid=1, GPU has fallen off the bus.")]
    raw = [(1, '{"ts":"2026-11-20T03:00:01.000000Z","node":"dgx-15","source":"kmsg","kind":"xid","code":"seventy-nine"}'),
           (2, '{"ts":"yesterday","node":"dgx-15","source":"kmsg","kind":"xid","code":79}'),
           (3, '{"ts":"2026-11-20T03:00:02.000000Z","node":"dgx-15","source":"kmsg","kind":"xid","code":79,'),
           (4, '[1,2,3]'),
           (5, '{"node":"dgx-15","source":"nvml","kind":"gpu_lost","gpu":1}')]
    write("ext2-bad-lines",
          "Five bad lines (string code, bad ts, truncated JSON, an array, no ts) are reported; the good XID 79 still decides.",
          header("bad", ["dgx-15"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-15", "gpu": 1}], raw=raw)


def xid48_repeats():
    j = "ml/rep"
    s = [xid(100, "dgx-03", 48, gpu=4, msg="NVRM: Xid (PCI:0000:9a:00): 48, pid=1, name=python3, An uncorrectable double bit error"),
         xid(100 + 6 * 3600, "dgx-03", 48, gpu=4, msg="NVRM: Xid (PCI:0000:9a:00): 48, pid=2, name=python3, An uncorrectable double bit error")]
    write("ext2-xid48-repeats",
          "XID 48 twice on the same GPU six hours apart: two gpu_memory incidents; the repeat replaces the node (catalog: repeats -> replace_node).",
          header("x48r", ["dgx-03"], []), s,
          [{"class": "gpu_memory", "node": "dgx-03", "gpu": 4, "actions_exclude": ["replace_node"]},
           {"class": "gpu_memory", "node": "dgx-03", "gpu": 4, "actions_include": ["replace_node"]}])


def pci_nvml_format():
    s = [sig(5, node="dgx-04", gpu=3, pci="00000000:5D:00.0", source="nvml", kind="thermal", celsius=55.0, throttled=False),
         sig(6, node="dgx-04", gpu=4, pci="00000000:9A:00.0", source="nvml", kind="thermal", celsius=54.0, throttled=False),
         xid(20, "dgx-04", 79, pci="0000:5d:00.0", msg="NVRM: Xid (PCI:0000:5d:00): 79, pid=1, GPU has fallen off the bus.")]
    write("ext2-pci-nvml-format",
          "NVML names GPU 3 by its 8-digit, upper-case bus id; the kernel line by the 4-digit lower-case one: the XID maps to GPU 3.",
          header("pcifmt", ["dgx-04"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-04", "gpu": 3}])


def same_id_dropped():
    j = "ml/ids"
    s = [xid(10, "dgx-05", 79, gpu=2, id="dgx-05/boot-7/1001", msg="NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."),
         xid(12, "dgx-05", 13, gpu=6, id="dgx-05/boot-7/1001", msg="NVRM: Xid (PCI:0000:bb:00): 13, pid=1, name=python3, Graphics Exception")]
    write("ext2-same-id-dropped",
          "A second signal with the id of an earlier one is a duplicate and is dropped (spec 1, id): one gpu_hardware incident, nothing from the XID 13.",
          header("ids", ["dgx-05"], []), s,
          [{"class": "gpu_hardware", "node": "dgx-05", "gpu": 2}])


ALL = [shared_cluster_one_fault, healthy_long_noise, hang_first_silent, xid45_caused_by_79,
       xid45_after_13, xid154_reboot, xid154_drain_reset_alone, xid63_pending, xid64_failure,
       xid48_pci_plus_nvml, xid94_contained, xid95_uncontained, sxid_nonfatal, sxid_fatal_with_74,
       node_reboot_boot_noise, injected_xid79, two_jobs_one_node_app, xid74_repeats, flapping_6_jobs,
       sdc_loss_ckpt_before, nan_one_job, skewed_hang, ooo_beyond_window, exact_dups, crlf_79,
       bom_79, blank_lines, header_extra, straggler_shared, bad_lines, xid48_repeats,
       pci_nvml_format, same_id_dropped]

if __name__ == "__main__":
    for fn in ALL:
        fn()
