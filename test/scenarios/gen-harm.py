#!/usr/bin/env python3
# gen-harm.py - writes the harm-* scenarios (issue 14 sections 1-2): whether
# gpuheal acts in proportion to the harm the evidence shows and restarts
# exactly the jobs that were harmed. Written outside-style from public
# failure reports (test/scenarios/README.md cites each), with fleets of
# 4-256 nodes, 4 or 8 GPUs, other node-name styles and PCI maps, several
# jobs, finished jobs, missing or failed checkpoints and days-long quiet
# periods; the expectations were decided before running the engine on them.
# Deterministic: run it after editing and commit the output. It writes only
# harm-* files. Usage: gen-harm.py [OUTDIR] (default: this folder).
import json
import os
import random
import sys
from datetime import datetime, timedelta, timezone

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
BASE = datetime(2026, 10, 5, 13, 20, 0, tzinfo=timezone.utc)
NO_OUT = ["isolate_node", "drain_node", "replace_node"]


def ts(sec):
    t = BASE + timedelta(seconds=sec)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06dZ" % t.microsecond


def sig(sec, **kw):
    d = {"ts": ts(sec)}
    d.update(kw)
    return d


def dumps(o):
    return json.dumps(o, separators=(",", ":"))


def write(name, desc, header, sigs, incidents, allow_extra=False):
    lines = [dumps(header)] if header is not None else []
    lines += [dumps(s) for s in sorted(sigs, key=lambda s: s["ts"])]
    with open(os.path.join(OUT, name + ".jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, name + ".expect.json"), "w") as f:
        f.write(json.dumps({"description": desc, "incidents": incidents,
                            "allow_extra": allow_extra}, indent=1) + "\n")


def header(name, nodes, gpn, jobs):
    return {"scenario": name, "nodes": nodes, "gpus_per_node": gpn,
            "jobs": [{"name": j, "nodes": ns, "ranks_per_node": gpn} for j, ns in jobs]}


def steps(job, nodes, rpn, first, last, t0, period, rng, slow=None, loss=None, comm=False,
          every_rank=True):
    """Step telemetry: rank r on nodes[r // rpn], GPU r % rpn. slow(step, node) -> factor."""
    out = []
    for s in range(first, last + 1):
        for r in range(len(nodes) * rpn):
            if not every_rank and r % rpn:
                continue
            n = nodes[r // rpn]
            f = slow(s, n) if slow else 1.0
            d = sig(t0 + (s - first) * period + rng.uniform(0, 0.2), node=n, gpu=r % rpn,
                    source="telemetry", kind="step", job=job, rank=r, step=s,
                    step_ms=round(1800.0 * f * (1 + rng.gauss(0, 0.01)), 2))
            if comm:
                d["comm_ms"] = round(250 * (1 + rng.gauss(0, 0.03)), 2)
            if loss:
                d["loss"] = loss(s, n)
            out.append(d)
    return out


def ckpt(sec, job, step, state="saved"):
    return sig(sec, source="telemetry", kind="checkpoint", job=job, step=step,
               path="s3://ckpt/%s/step-%d" % (job.replace("/", "-"), step), state=state)


def podfail(sec, node, job, pod, reason="Error", code=1, msg=""):
    ns, _ = job.split("/")
    return sig(sec, node=node, source="kube", kind="pod_failed", namespace=ns, pod=pod,
               job=job, reason=reason, exit_code=code, msg=msg)


def kube(sec, node, kind, **kw):
    return sig(sec, node=node, source="kube", kind=kind, **kw)


def main():
    # 1. NVIDIA memory error management: "Row-remapping pending flag ... Even
    # with the flag set, unaffected applications can continue running";
    # XID 63 "Row Remapper: New row marked for remapping, reset gpu to
    # activate" (stas00/ml-engineering debug.md).
    rng = random.Random(1)
    nodes = ["dgx-h100-%03d" % i for i in range(1, 17)]
    s = steps("llm/pretrain-70b", nodes, 8, 1, 30, 0, 2.0, rng)
    s.append(ckpt(5, "llm/pretrain-70b", 1))
    s.append(sig(31.2, node="dgx-h100-011", source="kmsg", kind="xid", code=63,
                 pci="0000:9d:00.0",
                 msg="NVRM: Xid (PCI:0000:9d:00): 63, pid=88121, name=python, Row Remapper: New row marked for remapping, reset gpu to activate."))
    s.append(sig(31.0, node="dgx-h100-011", gpu=5, pci="00000000:9D:00.0", source="nvml", kind="ecc",
                 bits="single", count=3, volatile=True))
    for k in range(8):
        s.append(sig(32 + 30 * k, node="dgx-h100-011", gpu=5, pci="00000000:9D:00.0", source="nvml",
                     kind="row_remap", pending=True, failure=False, correctable=0, uncorrectable=1))
    write("harm-remap-pending-running",
          "a row remap pending (failure false) on one H100 of a 16-node job whose ranks keep pace: the GPU works on "
          "and the remap takes effect at the next reset: one record, no drain and no reset under the job",
          header("harm-remap-pending-running", nodes, 8, [("llm/pretrain-70b", nodes)]), s,
          [{"class": "gpu_memory", "node": "dgx-h100-011", "gpu": 5,
            "actions_exclude": NO_OUT + ["reset_gpu"]}])

    # 2. The same on a 4-GPU fleet, and the job then finishes: the deferred
    # reset may run once nothing of it is left on the GPU.
    rng = random.Random(2)
    nodes = ["a100x4-%s" % c for c in "abcd"]
    s = steps("research/vit-huge", nodes, 4, 1, 40, 0, 3.0, rng)
    s.append(ckpt(60, "research/vit-huge", 20))
    s.append(sig(70, node="a100x4-c", gpu=2, source="dcgm", kind="row_remap", pending=True,
                 failure=False, correctable=0, uncorrectable=1))
    s.append(ckpt(121, "research/vit-huge", 40))
    for i, n in enumerate(nodes):
        for g in range(4):
            s.append(kube(125 + i, n, "pod_succeeded", namespace="research",
                          pod="vit-huge-worker-%d" % (4 * i + g), job="research/vit-huge"))
    s.append(sig(130, source="kube", kind="job_finished", job="research/vit-huge", state="complete"))
    write("harm-remap-pending-job-ends",
          "a pending row remap while a job runs is recorded with the reset waiting; when the job has finished "
          "the reset is due: a follow-up resets the GPU, still without draining the node",
          header("harm-remap-pending-job-ends", nodes, 4, [("research/vit-huge", nodes)]), s,
          [{"class": "gpu_memory", "node": "a100x4-c", "gpu": 2,
            "actions_exclude": NO_OUT + ["reset_gpu", "restart_from_checkpoint"]},
           {"class": "gpu_memory", "node": "a100x4-c", "gpu": 2, "actions_include": ["reset_gpu"],
            "actions_exclude": NO_OUT + ["restart_from_checkpoint"]}])

    # 2b. The same, and the job's pods complete with no job_finished (a
    # controller that reports none, or its update not yet seen), within a
    # minute of the record: the last pod leaving the node is the safe moment.
    s = [x for x in s if x.get("kind") != "job_finished"]
    write("harm-remap-pending-pods-complete",
          "a pending row remap while a job runs is recorded with the reset waiting; 55 s later the job's pods on "
          "the node complete (pod_succeeded, no job_finished): a follow-up resets the GPU, without draining",
          header("harm-remap-pending-pods-complete", nodes, 4, [("research/vit-huge", nodes)]), s,
          [{"class": "gpu_memory", "node": "a100x4-c", "gpu": 2,
            "actions_exclude": NO_OUT + ["reset_gpu", "restart_from_checkpoint"]},
           {"class": "gpu_memory", "node": "a100x4-c", "gpu": 2, "actions_include": ["reset_gpu"],
            "actions_exclude": NO_OUT + ["restart_from_checkpoint"]}])

    # 2c. One of the four pods on the node completes early (an elastic job
    # shrinking) while the other three run on: the job has not left the
    # node, so the reset still waits.
    rng = random.Random(2)
    s = steps("research/vit-huge", nodes, 4, 1, 40, 0, 3.0, rng)
    for i, n in enumerate(nodes):
        for g in range(4):
            s.append(kube(1 + i, n, "pod_started", namespace="research",
                          pod="vit-huge-worker-%d" % (4 * i + g), job="research/vit-huge"))
    s.append(ckpt(60, "research/vit-huge", 20))
    s.append(sig(70, node="a100x4-c", gpu=2, source="dcgm", kind="row_remap", pending=True,
                 failure=False, correctable=0, uncorrectable=1))
    s.append(kube(100, "a100x4-c", "pod_succeeded", namespace="research", pod="vit-huge-worker-8",
                  job="research/vit-huge"))
    write("harm-remap-pending-one-pod-done",
          "a pending row remap while a job runs is recorded with the reset waiting; one of the job's four pods on "
          "the node completes while three run on there: not yet the safe moment, no reset under them",
          header("harm-remap-pending-one-pod-done", nodes, 4, [("research/vit-huge", nodes)]), s,
          [{"class": "gpu_memory", "node": "a100x4-c", "gpu": 2,
            "actions_exclude": NO_OUT + ["reset_gpu", "restart_from_checkpoint"]}])

    # 3. Llama 3 (arXiv:2407.21783 section 3.3.4): "a diurnal 1-2% throughput
    # variation ... higher mid-day temperatures impacting GPU dynamic voltage
    # and frequency scaling". A hot aisle's four nodes throttle for 20 min;
    # their ranks' step times equal their peers'.
    rng = random.Random(3)
    nodes = ["rack%02d-node%02d" % (r, n) for r in range(1, 5) for n in range(1, 5)]
    hot = nodes[8:12]
    s = steps("gen/llama-13b", nodes, 8, 1, 200, 0, 6.0, rng, every_rank=False,
              slow=lambda st, n: 1.015 if n in hot else 1.0)
    s.append(ckpt(10, "gen/llama-13b", 3))
    for k in range(48):
        for n in nodes:
            for g in range(8):
                h = n in hot and 6 <= k < 46
                s.append(sig(k * 25 + 0.01 * g, node=n, gpu=g, source="nvml", kind="thermal",
                             celsius=86.0 + (g % 3) if h else 66.0 + (g % 4), throttled=h))
    write("harm-thermal-hot-aisle-no-harm",
          "a hot aisle: eight GPUs on each of four of 16 nodes thermally throttle for 17 minutes at 86-88 C while every "
          "rank steps at its peers' pace (1.5% off): no drain, at most one record per node",
          header("harm-thermal-hot-aisle-no-harm", nodes, 8, [("gen/llama-13b", nodes)]), s,
          [{"class": "thermal_power", "actions_exclude": NO_OUT + ["restart_from_checkpoint"],
            "count_min": 0, "count_max": 4}])

    # 4. The same cause with measured harm: one node throttles for heat for
    # five minutes, then (a failed fan) its ranks fall 25% behind their
    # peers (Acme, NSDI'24: overheating; Llama 3: DVFS). Taking it out is
    # worth it.
    rng = random.Random(4)
    nodes = ["gpu-node-%d" % i for i in range(1, 9)]
    slow = "gpu-node-6"
    s = steps("ml/bert-xl", nodes, 8, 1, 300, 0, 2.0, rng, every_rank=False,
              slow=lambda st, n: 1.25 if n == slow and st >= 146 else 1.0)
    s.append(ckpt(30, "ml/bert-xl", 10))
    s.append(ckpt(250, "ml/bert-xl", 120))
    for k in range(40):
        for g in range(8):
            s.append(sig(k * 15 + 0.01 * g, node=slow, gpu=g, source="nvml", kind="thermal",
                         celsius=93.0, throttled=True))
    write("harm-thermal-slow-node",
          "one node's eight GPUs throttle for heat for ten minutes and after five its ranks run 25% slower than "
          "their peers: measured harm, the node is drained (and a straggler verdict on it may follow)",
          header("harm-thermal-slow-node", nodes, 8, [("ml/bert-xl", nodes)]), s,
          [{"class": "thermal_power", "node": slow, "actions_include": ["drain_node"]},
           {"class": "straggler", "node": slow, "count_min": 0}])

    # 5. Llama 3: power swings of tens of megawatts; a site power cap makes
    # every GPU of a 64-node fleet report power throttling for 10 min. The
    # whole job slows a little; nothing is any node's fault.
    rng = random.Random(5)
    nodes = ["hgx-%02d" % i for i in range(64)]
    s = steps("lm/moe-8x22b", nodes, 8, 1, 60, 0, 12.0, rng, every_rank=False,
              slow=lambda st, n: 1.06 if 10 <= st <= 60 else 1.0)
    s.append(ckpt(20, "lm/moe-8x22b", 1))
    for k in range(30):
        for n in nodes:
            s.append(sig(k * 30, node=n, gpu=k % 8, source="dcgm", kind="power",
                         watts=590.0 if k >= 4 else 690.0, throttled=k >= 4))
    write("harm-power-cap-fleet",
          "a site power cap: every GPU of a 64-node job reports power throttling for 13 minutes and the whole job "
          "is 6% slower; no node is slower than its peers: nothing is taken out of service",
          header("harm-power-cap-fleet", nodes, 8, [("lm/moe-8x22b", nodes)]), s,
          [{"class": "thermal_power", "actions_exclude": NO_OUT + ["restart_from_checkpoint"],
            "count_min": 0, "count_max": 64}])

    # 6. NVIDIA Fabric Manager guide / shared/data 1.5: a fatal SXid (12028)
    # takes the NVLink fabric down for the node's GPUs, propagated as XID 74;
    # the job's collectives hang: restart it from its checkpoint.
    rng = random.Random(6)
    nodes = ["hgx-b%02d" % i for i in range(1, 13)]
    s = steps("train/gpt-175b", nodes, 8, 1, 40, 0, 2.5, rng)
    s.append(ckpt(30, "train/gpt-175b", 12))
    s.append(ckpt(80, "train/gpt-175b", 32))
    s.append(sig(101.0, node="hgx-b07", source="kmsg", kind="sxid", code=12028, switch="nvidia-nvswitch2",
                 msg="nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Fatal, Link 33 egress non-posted PRIV error (First)"))
    for g in (0, 3):
        s.append(sig(101.4 + g * 0.1, node="hgx-b07", gpu=g, source="kmsg", kind="xid", code=74,
                     msg="NVRM: Xid (PCI:0000:%02x:00): 74, pid=5521, name=python3, NVLink: fatal error detected on link 12" % (0x18 + g)))
    write("harm-sxid-fatal-restarts-job",
          "a fatal NVSwitch SXid on one HGX node of a 12-node job (XID 74 on its GPUs follows): the node goes "
          "out of service and the hung job restarts from its latest checkpoint",
          header("harm-sxid-fatal-restarts-job", nodes, 8, [("train/gpt-175b", nodes)]), s,
          [{"class": "interconnect", "node": "hgx-b07", "job": "train/gpt-175b",
            "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 32, "max_decide_s": 2}])

    # 7. Llama 3 Table 5: GPU HBM3 memory 17.2% of interruptions. A burst of
    # single-bit ECC errors, then the job's process on that GPU dies with
    # PyTorch's "CUDA error: uncorrectable ECC error encountered".
    rng = random.Random(7)
    nodes = ["ip-10-42-%d-%d.ec2.internal" % (i // 4, 10 + i) for i in range(8)]
    bad = nodes[5]
    s = steps("ai/llm-34b", nodes, 8, 1, 20, 0, 2.0, rng)
    s.append(ckpt(12, "ai/llm-34b", 5))
    for k, v in enumerate([40, 41, 300, 1500, 3200]):
        s.append(sig(20 + 30 * k, node=bad, gpu=6, source="dcgm", kind="ecc", bits="single", count=v,
                     volatile=True))
    s.append(podfail(150, bad, "ai/llm-34b", "llm-34b-worker-46", msg="RuntimeError: CUDA error: uncorrectable ECC error encountered"))
    write("harm-ecc-storm-kills-rank",
          "a single-bit ECC storm on one GPU, then the job's pod on that node dies with 'CUDA error: uncorrectable "
          "ECC error encountered': recorded first, then the memory's fault harmed the job: it restarts from its checkpoint",
          header("harm-ecc-storm-kills-rank", nodes, 8, [("ai/llm-34b", nodes)]), s,
          # (amended after the first run, argued from the spec's one-incident rule: the storm is
          # recorded when it crosses the threshold, 40 s before the pod fails; the failure calls
          # for stronger actions, so it is a follow-up incident, not more of the record)
          [{"class": "gpu_memory", "node": bad, "actions_exclude": NO_OUT + ["restart_from_checkpoint"]},
           {"class": "gpu_memory", "node": bad, "job": "ai/llm-34b",
            "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 5}])

    # 8. The same storm with nothing harmed: the ranks keep pace, no pod fails.
    rng = random.Random(8)
    nodes = ["ip-10-42-%d-%d.ec2.internal" % (i // 4, 10 + i) for i in range(8)]
    bad = nodes[2]
    s = steps("ai/llm-34b", nodes, 8, 1, 150, 0, 2.0, rng, every_rank=False)
    s.append(ckpt(12, "ai/llm-34b", 5))
    for k, v in enumerate([40, 41, 300, 1500, 3200, 3300]):
        s.append(sig(20 + 30 * k, node=bad, gpu=1, source="dcgm", kind="ecc", bits="single", count=v,
                     volatile=True))
    write("harm-ecc-storm-no-harm",
          "a single-bit ECC storm on one GPU while the job's ranks keep their peers' pace and no pod fails: "
          "corrected errors, recorded; the node is not drained under the job",
          header("harm-ecc-storm-no-harm", nodes, 8, [("ai/llm-34b", nodes)]), s,
          [{"class": "gpu_memory", "node": bad, "actions_exclude": NO_OUT + ["restart_from_checkpoint"]}])

    # 9. OPT-175B logbook / BLOOM chronicles: nodes rebooted and came back.
    # A node of an EKS-style fleet reboots: NotReady 4 min, its pods fail
    # (NodeLost), back Ready with a new boot, link training, clean counters.
    rng = random.Random(9)
    nodes = ["ip-172-31-%d-%d.us-west-2.compute.internal" % (i, 40 + i) for i in range(8)]
    rb = nodes[3]
    s = steps("nlp/t5-xxl", nodes, 8, 1, 20, 0, 3.0, rng, every_rank=False)
    s.append(ckpt(20, "nlp/t5-xxl", 6))
    s.append(kube(70, rb, "node_not_ready"))
    for g in range(8):
        s.append(podfail(75 + g, rb, "nlp/t5-xxl", "t5-xxl-%d" % (24 + g), code=137, msg="NodeLost"))
    s.append(kube(310, rb, "node_ready", msg="kubelet is posting ready status"))
    s.append(sig(312, node=rb, source="host", kind="nic", device="mlx5_0", port=1, counter="link_downed",
                 count=0, state="down"))
    s.append(sig(318, node=rb, source="host", kind="nic", device="mlx5_0", port=1, counter="link_downed",
                 count=0, state="up"))
    for g in range(8):
        s.append(sig(320, node=rb, gpu=g, source="nvml", kind="ecc", bits="double", count=0, volatile=True))
    write("harm-notready-reboot-back",
          "a node reboots: NotReady for 4 minutes (its pods fail, NodeLost), back Ready with a new boot and clean "
          "counters: the job restarts from its checkpoint without blaming the node, which is not isolated",
          header("harm-notready-reboot-back", nodes, 8, [("nlp/t5-xxl", nodes)]), s,
          [{"class": "unknown", "node": None, "job": "nlp/t5-xxl", "actions_include": ["restart_from_checkpoint"],
            "checkpoint_step": 6}])

    # 10. A node of a 128-node GKE-style fleet goes NotReady and stays down,
    # no hardware signal: the job moves at once; the node is isolated only
    # past Kubernetes' 300 s not-ready toleration.
    nodes = ["gke-a3-mega-pool-%08x" % (0x1f3a0000 + 97 * i) for i in range(128)]
    dn = nodes[77]
    s = [ckpt(10, "prod/llm-400b", 700), ckpt(3600, "prod/llm-400b", 900, state="failed")]
    s.append(kube(4000, dn, "node_not_ready"))
    s.append(kube(4040, dn, "node_not_ready"))
    write("harm-notready-stays-down",
          "a node of a 128-node job goes NotReady and never returns, no hardware evidence (the latest checkpoint "
          "failed): the job restarts from the last saved one without blaming the node; the node is isolated after "
          "the 300 s not-ready toleration",
          header("harm-notready-stays-down", nodes, 8, [("prod/llm-400b", nodes)]), s,
          [{"class": "unknown", "node": None, "job": "prod/llm-400b", "actions_include": ["restart_from_checkpoint"],
            "checkpoint_step": 700, "max_decide_s": 61},
           {"class": "unknown", "node": dn, "actions_include": ["isolate_node"],
            "actions_exclude": ["restart_from_checkpoint"], "max_decide_s": 301}])

    # 11. A kubelet restart: NotReady for 150 s while the job's ranks on the
    # node go on reporting steps: nothing of the job was lost.
    rng = random.Random(11)
    nodes = ["worker-%02d" % i for i in range(1, 7)]
    s = steps("ml/whisper-l", nodes, 4, 1, 150, 0, 2.0, rng, every_rank=False)
    s.append(ckpt(10, "ml/whisper-l", 2))
    s.append(kube(100, "worker-04", "node_not_ready", msg="PLEG is not healthy"))
    s.append(kube(250, "worker-04", "node_ready"))
    write("harm-notready-kubelet-pods-alive",
          "a kubelet restart: NotReady for 150 s while the job's ranks on the node keep reporting steps: nothing "
          "was lost, no restart and no isolation",
          header("harm-notready-kubelet-pods-alive", nodes, 4, [("ml/whisper-l", nodes)]), s, [])

    # 12. A job that already finished (its pods succeeded, its controller
    # says Complete); hours later XID 79 on one of its former nodes, now
    # idle, while another job runs elsewhere.
    rng = random.Random(12)
    nodes = ["a100x4-%02d" % i for i in range(1, 25)]
    done_nodes, other = nodes[:12], nodes[12:]
    s = steps("exp/sweep-17", done_nodes, 4, 1, 50, 0, 2.0, rng, every_rank=False)
    s += steps("exp/sweep-18", other, 4, 1, 50, 0, 2.0, rng, every_rank=False)
    s.append(ckpt(101, "exp/sweep-17", 50))
    for i, n in enumerate(done_nodes):
        s.append(kube(110 + i, n, "pod_succeeded", namespace="exp", pod="sweep-17-%d" % i, job="exp/sweep-17"))
    s.append(sig(125, source="kube", kind="job_finished", job="exp/sweep-17", state="complete"))
    s.append(ckpt(100, "exp/sweep-18", 50))
    s.append(sig(3 * 3600, node="a100x4-05", pci="0000:4f:00.0", source="kmsg", kind="xid", code=79,
                 msg="NVRM: GPU at PCI:0000:4f:00: GPU-4b1e0f7e-33aa-11ef-9a57-0242ac120002 has fallen off the bus."))
    write("harm-finished-job-then-xid79",
          "a job finished (pods succeeded, Complete) and three hours later a GPU of one of its former nodes falls "
          "off the bus: the node is taken out, the finished job is not restarted, the other job is untouched",
          header("harm-finished-job-then-xid79", nodes, 4, [("exp/sweep-17", done_nodes), ("exp/sweep-18", other)]), s,
          [{"class": "gpu_hardware", "node": "a100x4-05", "actions_include": ["isolate_node"],
            "actions_exclude": ["restart_from_checkpoint"]}])

    # 13. Finished by telemetry alone: steps to 120, the final checkpoint at
    # step 120, then silence for 5 hours; a double-bit ECC error on one of
    # its nodes.
    rng = random.Random(13)
    nodes = ["n%03d" % i for i in range(40, 44)]
    s = steps("bio/esm-15b", nodes, 8, 1, 120, 0, 1.5, rng, every_rank=False)
    s.append(ckpt(60, "bio/esm-15b", 40))
    s.append(ckpt(181, "bio/esm-15b", 120))
    s.append(sig(5 * 3600, node="n042", gpu=3, source="nvml", kind="ecc", bits="double", count=1, volatile=True))
    write("harm-finished-by-telemetry-then-dbe",
          "a job's telemetry ended with its final checkpoint at its last step, then 5 quiet hours, then a "
          "double-bit ECC error on one of its nodes: the node is taken out, the finished job is not restarted",
          header("harm-finished-by-telemetry-then-dbe", nodes, 8, [("bio/esm-15b", nodes)]), s,
          [{"class": "gpu_memory", "node": "n042", "actions_include": ["isolate_node"],
            "actions_exclude": ["restart_from_checkpoint"]}])

    # 14. An elastic job scaled in: its pods on two nodes completed (the
    # others run on); XID 48 on one of the two: not that job's harm.
    rng = random.Random(14)
    nodes = ["node-%c%d" % (c, i) for c in "xy" for i in range(1, 5)]
    left = ["node-y3", "node-y4"]
    stay = [n for n in nodes if n not in left]
    s = steps("rl/ppo-actor", nodes, 8, 1, 20, 0, 2.0, rng, every_rank=False)
    s += steps("rl/ppo-actor", stay, 8, 21, 120, 40, 2.0, rng, every_rank=False)
    s.append(ckpt(30, "rl/ppo-actor", 15))
    for i, n in enumerate(left):
        s.append(kube(41 + i, n, "pod_succeeded", namespace="rl", pod="ppo-actor-%d" % (6 + i), job="rl/ppo-actor"))
    s.append(sig(200, node="node-y4", gpu=2, source="kmsg", kind="xid", code=48,
                 msg="NVRM: Xid (PCI:0000:3a:00): 48, pid=0, name=, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 1."))
    write("harm-job-left-node-then-xid48",
          "an elastic job scales in (its pods on two nodes complete; it runs on six); XID 48 on one of the two "
          "it left: the node is taken out, the job, not on it any more, is not restarted",
          header("harm-job-left-node-then-xid48", nodes, 8, [("rl/ppo-actor", nodes)]), s,
          [{"class": "gpu_memory", "node": "node-y4", "actions_include": ["isolate_node"],
            "actions_exclude": ["restart_from_checkpoint"]}])

    # 15. A shared cluster with three jobs: XID 94 (contained ECC: the driver
    # killed the process using the bad memory) on a node of the second.
    rng = random.Random(15)
    nodes = ["h100-sxm-%02d" % i for i in range(1, 13)]
    jobs = [("team-a/llm", nodes[0:4]), ("team-b/diffusion", nodes[4:8]), ("team-c/rec", nodes[8:12])]
    s = []
    for j, ns in jobs:
        s += steps(j, ns, 8, 1, 15, 0, 2.0, rng, every_rank=False)
        s.append(ckpt(20, j, 10))
    s.append(sig(40, node="h100-sxm-06", gpu=7, source="kmsg", kind="xid", code=94,
                 msg="NVRM: Xid (PCI:0000:db:00): 94, pid=271828, name=python3, Contained: SM (0x1). RST: No, D-RST: No"))
    s.append(podfail(41, "h100-sxm-06", "team-b/diffusion", "diffusion-worker-1", msg="CUDA error: uncorrectable ECC error encountered"))
    write("harm-shared-cluster-xid94",
          "three jobs share a 12-node cluster; XID 94 (a contained ECC error that killed the process) on a node "
          "of the second: that job, and only it, restarts from its checkpoint",
          header("harm-shared-cluster-xid94", nodes, 8, jobs), s,
          [{"class": "gpu_memory", "node": "h100-sxm-06", "job": "team-b/diffusion",
            "actions_include": ["restart_from_checkpoint"], "checkpoint_step": 10}])

    # 16. NVLink CRC errors climbing by thousands while the node's ranks
    # fall 18% behind their peers (NVLink replays cost bandwidth): measured
    # harm, the node is drained.
    rng = random.Random(16)
    nodes = ["dgx%02d" % i for i in range(1, 9)]
    s = steps("ml/gpt-neox", nodes, 8, 1, 160, 0, 2.0, rng, every_rank=False,
              slow=lambda st, n: 1.18 if n == "dgx03" and st >= 100 else 1.0)
    s.append(ckpt(10, "ml/gpt-neox", 3))
    for k, v in enumerate([50, 51, 52, 53, 55, 56, 58, 3000, 6000, 9000]):
        s.append(sig(30 * k, node="dgx03", gpu=4, source="dcgm", kind="nvlink", link=7, counter="crc_flit", count=v))
    write("harm-nvlink-crc-slowdown",
          "NVLink CRC errors jump by thousands on one node as its ranks fall 18% behind their peers: measured "
          "harm, the node is drained (and a straggler verdict on it may follow)",
          header("harm-nvlink-crc-slowdown", nodes, 8, [("ml/gpt-neox", nodes)]), s,
          [{"class": "interconnect", "node": "dgx03", "actions_include": ["drain_node"]},
           {"class": "straggler", "node": "dgx03", "count_min": 0}])

    # 17. 256 nodes; the latest checkpoint failed to save (BLOOM chronicles:
    # checkpoint save failures); XID 79: resume from the previous saved one.
    nodes = ["cn%04d" % i for i in range(1000, 1256)]
    s = [ckpt(100, "hpc/bloom-176b", 2100), ckpt(10900, "hpc/bloom-176b", 2200),
         ckpt(21700, "hpc/bloom-176b", 2300, state="failed")]
    s.append(sig(22000, node="cn1187", pci="0000:c1:00.0", source="kmsg", kind="xid", code=79,
                 msg="NVRM: Xid (PCI:0000:c1:00): 79, pid=41977, name=python, GPU has fallen off the bus."))
    write("harm-failed-checkpoint-xid79",
          "a 256-node job's latest checkpoint failed to save; then a GPU falls off the bus: isolate the node, "
          "restart the job from the last checkpoint that was saved",
          header("harm-failed-checkpoint-xid79", nodes, 8, [("hpc/bloom-176b", nodes)]), s,
          [{"class": "gpu_hardware", "node": "cn1187", "job": "hpc/bloom-176b",
            "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 2200}])

    # 18. Llama 3 Table 5: GPU system processor 4.1%. XID 119 on a job that
    # never saved a checkpoint: it still must restart (from scratch).
    rng = random.Random(18)
    nodes = ["gpu-%s-%d" % (z, i) for z in ("east", "west") for i in range(2)]
    s = steps("dev/finetune", nodes, 4, 1, 10, 0, 2.0, rng, every_rank=False)
    s.append(sig(30, node="gpu-west-1", gpu=1, source="kmsg", kind="xid", code=119,
                 msg="NVRM: Xid (PCI:0000:41:00): 119, pid=9001, name=python, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL)"))
    write("harm-gsp-timeout-no-checkpoint",
          "XID 119 (GSP timeout) on a job that never saved a checkpoint: the node goes out of service and the job "
          "is still restarted (from scratch)",
          header("harm-gsp-timeout-no-checkpoint", nodes, 4, [("dev/finetune", nodes)]), s,
          [{"class": "gpu_hardware", "node": "gpu-west-1", "job": "dev/finetune",
            "actions_include": ["isolate_node", "restart_from_checkpoint"]}])

    # 19. Three quiet days (hourly steps and checkpoints), then the kernel's
    # XID 64 and NVML's row-remap failure: no spare rows left.
    rng = random.Random(19)
    nodes = ["sc-gpu%02d" % i for i in range(1, 5)]
    s = []
    for h in range(72):
        s += steps("sci/climate", nodes, 8, 10 * h + 1, 10 * h + 1, 3600 * h, 1.0, rng, every_rank=False)
        if h % 6 == 0:
            s.append(ckpt(3600 * h + 30, "sci/climate", 10 * h + 1))
    t = 72 * 3600 + 100
    s.append(sig(t, node="sc-gpu03", source="kmsg", kind="xid", code=64, pci="0000:b1:00.0",
                 msg="NVRM: Xid (PCI:0000:b1:00): 64, pid=7331, name=python, Row Remapper: Failed to remap row."))
    s.append(sig(t + 2, node="sc-gpu03", gpu=6, pci="00000000:B1:00.0", source="nvml", kind="row_remap",
                 pending=False, failure=True, correctable=0, uncorrectable=513))
    write("harm-quiet-days-remap-failure",
          "three quiet days, then XID 64 and a row-remap failure (no spare rows): the node is isolated and the job "
          "restarts from the latest checkpoint before it",
          header("harm-quiet-days-remap-failure", nodes, 8, [("sci/climate", nodes)]), s,
          [{"class": "gpu_memory", "node": "sc-gpu03", "job": "sci/climate",
            "actions_include": ["isolate_node", "restart_from_checkpoint"], "checkpoint_step": 661}])

    # 20. Non-fatal SXids (20009 "RX Short Error Rate", shared/data 1.5) keep
    # coming on one node while its job runs at pace: recorded, no drain.
    rng = random.Random(20)
    nodes = ["hgx-c%02d" % i for i in range(1, 5)]
    s = steps("ml/mamba", nodes, 8, 1, 300, 0, 2.0, rng, every_rank=False)
    s.append(ckpt(10, "ml/mamba", 3))
    for k in range(6):
        s.append(sig(60 + 90 * k, node="hgx-c02", source="kmsg", kind="sxid", code=20009, switch="nvidia-nvswitch0",
                     msg="nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20009, Non-fatal, Link 28 RX Short Error Rate"))
    write("harm-sxid-nonfatal-no-harm",
          "non-fatal NVSwitch SXids (20009) keep coming on one node while its ranks keep pace: recorded for a "
          "check, the node is not drained under the job",
          header("harm-sxid-nonfatal-no-harm", nodes, 8, [("ml/mamba", nodes)]), s,
          [{"class": "interconnect", "node": "hgx-c02", "actions_exclude": NO_OUT + ["restart_from_checkpoint"]}])


if __name__ == "__main__":
    main()
