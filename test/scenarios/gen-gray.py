#!/usr/bin/env python3
"""gen-gray.py - writes the gray-* scenarios (issue 14 sections 3 and 4):
silent data corruption against a job's own divergence, checkpoints and
hardware precursors, stragglers against the job's jitter, and InfiniBand
ports that keep retraining. Written from shared/spec/signals.md and the
public reports cited in README.md; each expectation was decided (as an
on-call engineer would) before the engine was run on it. Deterministic:
`python3 test/scenarios/gen-gray.py` rewrites the files.
"""
import json
import math
import os
import random

OUT = os.path.dirname(os.path.abspath(__file__))
T0 = 1796025600.0  # 2026-11-30T08:00:00Z


def ts(t):
    whole = int(math.floor(t))
    frac = int(round((t - whole) * 1e6))
    if frac == 1000000:
        whole, frac = whole + 1, 0
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + whole)) + ".%06dZ" % frac


class Scn:
    def __init__(self, name, nodes, gpus, jobs):
        self.name = name
        self.header = {"scenario": name, "nodes": nodes, "gpus_per_node": gpus, "jobs": jobs}
        self.lines = []

    def add(self, t, **kw):
        o = {"ts": ts(t)}
        o.update(kw)
        self.lines.append((t, len(self.lines), o))

    def write(self, expect, shuffle_seed=None):
        rows = [o for _, _, o in sorted(self.lines, key=lambda x: (x[0], x[1]))]
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(rows)
        with open(os.path.join(OUT, self.name + ".jsonl"), "w") as f:
            f.write(json.dumps(self.header, separators=(",", ":")) + "\n")
            for o in rows:
                f.write(json.dumps(o, separators=(",", ":")) + "\n")
        with open(os.path.join(OUT, self.name + ".expect.json"), "w") as f:
            json.dump(expect, f, indent=1)
            f.write("\n")


def steps(s, rng, job, placement, first, last, t_of, ms_of, comm_of=None, loss_of=None):
    """placement: list of (node, gpu) by rank."""
    for st in range(first, last + 1):
        t = t_of(st)
        for r, (node, gpu) in enumerate(placement):
            o = {"node": node, "gpu": gpu, "source": "telemetry", "kind": "step", "job": job,
                 "rank": r, "step": st}
            ms = ms_of(r, st)
            o["step_ms"] = round(ms, 2)
            if comm_of:
                o["comm_ms"] = round(comm_of(r, st), 2)
            if loss_of:
                v = loss_of(r, st)
                if v is not None:
                    o["loss"] = v if isinstance(v, str) else round(v, 5)
            s.add(t + rng.uniform(0, 0.3), **o)


def ckpt(s, t, job, step, state="saved", path=None):
    s.add(t, source="telemetry", kind="checkpoint", job=job, step=step,
          path=path or "s3://ckpts/%s/step-%08d" % (job.replace("/", "-"), step), state=state)


def place(nodes, per):
    return [(n, g) for n in nodes for g in range(per)]


def healthy_loss(st):
    return 2.1 + 6.0 * math.exp(-st / 400.0)


# 1. NaN from the job's first steps (fp16 overflow, too high a learning
#    rate: byteps#411, nanoGPT#167), replica checksums agreeing, no
#    hardware evidence: the job's own doing.
def nan_first_steps():
    rng = random.Random(1)
    nodes = ["a100-r3-n%02d" % i for i in range(1, 5)]
    job = "research/vit-h-fp16"
    s = Scn("gray-nan-first-steps", nodes, 8, [{"name": job, "nodes": nodes, "ranks_per_node": 8}])
    pl = place(nodes, 8)
    losses = {1: 45.7, 2: 46.0, 3: 45.8, 4: 60.2, 5: 61.2, 6: 70.4}
    steps(s, rng, job, pl, 1, 12, lambda st: 30 + st * 0.9, lambda r, st: 880 * (1 + 0.02 * rng.gauss(0, 1)),
          loss_of=lambda r, st: losses.get(st, "nan"))
    for st in range(1, 13):  # 2 replicas x 16 ranks: checksums of rank 0 and 16 agree
        for rep, rank in ((0, 0), (1, 16)):
            s.add(30 + st * 0.9 + 0.5, node=pl[rank][0], gpu=pl[rank][1], source="telemetry",
                  kind="replica_checksum", job=job, rank=rank, step=st, replica=rep,
                  value="%08x" % (st * 2654435761 % 2**32))
    s.write({"description": "Loss goes NaN at step 7 of a fresh fp16 job (byteps#411), replicas agree, no hardware signal: the job diverged; no node blamed or taken out.",
             "incidents": [{"class": "application", "node": None, "job": job,
                            "actions_exclude": ["isolate_node", "drain_node", "reset_gpu"]}],
             "allow_extra": False})


# 2. A job restarted from its checkpoint (by its owners, new learning rate)
#    blows up two steps after the restart: the job's doing, not corruption.
def nan_after_restart():
    rng = random.Random(2)
    nodes = ["trn-%04d" % i for i in range(101, 109)]
    job = "llm/pretrain-13b"
    s = Scn("gray-inf-after-restart", nodes, 8, [{"name": job, "nodes": nodes, "ranks_per_node": 8}])
    pl = place(nodes, 8)
    steps(s, rng, job, pl, 150, 260, lambda st: 60 + st * 2.0, lambda r, st: 1950 * (1 + 0.01 * rng.gauss(0, 1)),
          loss_of=lambda r, st: healthy_loss(st) if r % 8 == 0 else None)
    for k in (150, 200):
        ckpt(s, 60 + k * 2.0 + 1.2, job, k)
    # the owners stop it and start again from 200 an hour later
    for i, n in enumerate(nodes):
        s.add(60 + 261 * 2 + 3600 + i * 0.1, node=n, source="kube", kind="pod_started", job=job,
              namespace="llm", pod="pretrain-13b-w%d" % i)
    t1 = 60 + 261 * 2 + 3700

    def loss2(r, st):
        if r % 8:
            return None
        return healthy_loss(st) if st < 203 else ("inf" if st == 203 else "nan")
    steps(s, rng, job, pl, 201, 206, lambda st: t1 + (st - 200) * 2.0,
          lambda r, st: 1950 * (1 + 0.01 * rng.gauss(0, 1)), loss_of=loss2)
    s.write({"description": "After a restart from step 200 the loss is inf at step 203 and NaN after: the restarted job diverged (a new learning rate), not silent corruption; no node blamed.",
             "incidents": [{"class": "application", "node": None, "job": job,
                            "actions_exclude": ["isolate_node", "drain_node", "restart_from_checkpoint"]}],
             "allow_extra": False})


# 3. A correctable-ECC storm on one GPU precedes the loss spike; the
#    checkpoint at 450 was written after the storm began: resume from 400.
def ecc_precursor():
    rng = random.Random(3)
    nodes = ["node-a%02d" % i for i in range(1, 9)]
    job = "prod/moe-8x22b"
    s = Scn("gray-sdc-ecc-precursor", nodes, 8, [{"name": job, "nodes": nodes, "ranks_per_node": 8}])
    pl = place(nodes, 8)
    t_of = lambda st: 100 + st * 1.5

    def loss(r, st):
        if r % 8:
            return None
        return healthy_loss(st) * (9.0 if st >= 480 else 1.0)
    steps(s, rng, job, pl, 380, 485, t_of, lambda r, st: 1400 * (1 + 0.015 * rng.gauss(0, 1)), loss_of=loss)
    for k in (300, 350, 400, 450):
        ckpt(s, t_of(k) + 1.0, job, k)
    # nvml readings every 30 s on every GPU of node-a05 ... GPU 2's count climbs from step ~420
    count = 3
    t = t_of(380)
    while t < t_of(485):
        for g in range(8):
            c = 0
            if g == 2:
                if t >= t_of(420):
                    count += rng.randint(60, 90)
                c = count
            s.add(t + g * 0.01, node="node-a05", gpu=g, source="nvml", kind="ecc", bits="single",
                  count=c, volatile=True)
        t += 30
    s.write({"description": "Single-bit ECC counts on node-a05 GPU 2 start climbing near step 420 (below the drain threshold), then the loss jumps 9x at step 480; the step-450 checkpoint was saved during the storm: resume from 400 and probe.",
             "incidents": [{"class": "silent_data_corruption", "job": job, "checkpoint_step": 400,
                            "actions_include": ["restart_from_checkpoint", "run_diagnostics"]}],
             "allow_extra": False})


# 4. Checksums localise corruption to one GPU (4-GPU nodes, 8 replicas);
#    diagnostics then fail on a second node of the job. Both restarts
#    resume before the corruption (800), never from 1000.
def checksum_then_probe():
    rng = random.Random(4)
    nodes = ["gpu4x-%03d" % i for i in range(1, 33)]
    job = "team-b/dense-34b"
    s = Scn("gray-sdc-checksum-followup", nodes, 4, [{"name": job, "nodes": nodes, "ranks_per_node": 4}])
    pl = place(nodes, 4)  # 128 ranks: 8 replicas of 16
    t_of = lambda st: 500 + (st - 700) * 3.0
    for k in (700, 800, 1000):
        ckpt(s, t_of(k) + 2.0, job, k)
    for st in range(700, 1061, 20):
        for rep in range(8):
            rank = rep * 16 + 5
            v = "%016x" % (st * 0x9E3779B97F4A7C15 % 2**64)
            if rep == 3 and st >= 900:
                v = "%016x" % (st * 0x9E3779B97F4A7C15 % 2**64 ^ 0x40)
            s.add(t_of(st) + rng.uniform(0, 1), node=pl[rank][0], gpu=pl[rank][1], source="telemetry",
                  kind="replica_checksum", job=job, rank=rank, step=st, replica=rep, value=v)
    bad = pl[3 * 16 + 5]
    s.add(t_of(1060) + 900, node="gpu4x-022", gpu=1, source="probe", kind="probe_result",
          check="dcgm_diag_sdc_checksum", passed=False, detail="1 mismatching tile in 4096")
    s.write({"description": "Replica 3's checksum differs from step 900 on %s GPU %d (checkpoint 800 before, 1000 after); later the SDC probe also fails on gpu4x-022: both restarts resume from 800." % bad,
             "incidents": [{"class": "silent_data_corruption", "node": bad[0], "gpu": bad[1], "job": job,
                            "checkpoint_step": 800, "actions_include": ["isolate_node", "restart_from_checkpoint"]},
                           {"class": "silent_data_corruption", "node": "gpu4x-022", "job": job,
                            "checkpoint_step": 800, "actions_include": ["restart_from_checkpoint"]}],
             "allow_extra": False})


def straggler_run(name, nodes, per, job, jitter, slow_rank, factor, n_steps, desc, expect_incidents,
                  offsets=0.0, hiccup_every=0, seed=5, remaining=None, checkpoints=()):
    rng = random.Random(seed)
    hdr = {"name": job, "nodes": nodes, "ranks_per_node": per}
    if remaining is not None:
        hdr["remaining_s"] = remaining
    s = Scn(name, nodes, per, [hdr])
    pl = place(nodes, per)
    off = [offsets * rng.uniform(-1, 1) for _ in pl]
    t_of = lambda st: 20 + st * 1.25

    def ms(r, st):
        m = 1000 * (1 + off[r]) * (1 + jitter * rng.gauss(0, 1))
        if hiccup_every and st % hiccup_every == 0:
            m *= 1.25
        if r == slow_rank and st >= 60:
            m *= factor
        return m + 180

    steps(s, rng, job, pl, 1, n_steps, t_of, ms, comm_of=lambda r, st: 180 * (1 + 0.03 * rng.gauss(0, 1)))
    for k in checkpoints:
        ckpt(s, t_of(k) + 0.5, job, k)
    s.write({"description": desc, "incidents": expect_incidents, "allow_extra": False})
    return pl


# 5. One GPU about 6% slower than its node-mates, a quiet job (0.7% jitter):
#    a fail-slow GPU (Guard, OpenReview JFEwQ821MS; ByteDance's stragglers).
def straggler_6pct():
    nodes = ["h100-sj2-%03d" % i for i in range(41, 49)]
    pl = [(n, g) for n in nodes for g in range(8)]
    r = 8 * 5 + 6
    straggler_run("gray-straggler-6pct-gpu", nodes, 8, "ml/llama-70b-ft", 0.007, r, 1.06, 120,
                  "%s GPU %d computes about 6%% slower than the 63 other GPUs (jitter 0.7%%): a fail-slow GPU, flagged at GPU granularity; resume from the latest checkpoint." % pl[r],
                  [{"class": "straggler", "node": pl[r][0], "gpu": pl[r][1], "job": "ml/llama-70b-ft",
                    "checkpoint_step": 55, "actions_include": ["restart_from_checkpoint"]}],
                  checkpoints=(30, 55))


# 6. Quiet job, GPUs a little unequal (+-1.2% fixed), an evaluation hiccup
#    every 50 steps: healthy.
def straggler_quiet_healthy():
    nodes = ["dgx%02d" % i for i in range(1, 9)]
    straggler_run("gray-straggler-quiet-healthy", nodes, 8, "ml/healthy-quiet", 0.006, -1, 1.0, 160,
                  "64 GPUs with 0.6% jitter, fixed offsets up to 1.2% and a whole-job hiccup every 50 steps: healthy, nothing to report.",
                  [], offsets=0.012, hiccup_every=50, seed=6)


# 7. A noisy job (3% jitter, 4-GPU nodes): a GPU 6% slower is two sigmas,
#    not distinguishable from noise: nothing.
def straggler_noisy():
    nodes = ["worker-%d" % i for i in range(4)]
    straggler_run("gray-straggler-noisy-6pct", nodes, 4, "ml/noisy", 0.03, 5, 1.06, 200,
                  "16 GPUs with 3% jitter, one GPU 6% slower: two sigmas, not a straggler the data can show; nothing.",
                  [], seed=7)


def comm_run(name, nodes, per, job, bad_node, comm_factor, counters, desc, expect, remaining=None,
             n_steps=140, seed=8, checkpoints=(60, 110)):
    rng = random.Random(seed)
    hdr = {"name": job, "nodes": nodes, "ranks_per_node": per}
    if remaining is not None:
        hdr["remaining_s"] = remaining
    s = Scn(name, nodes, per, [hdr])
    pl = place(nodes, per)
    t_of = lambda st: 10 + st * 2.5

    def comm(r, st):
        c = 240 * (1 + 0.025 * rng.gauss(0, 1))
        if pl[r][0] == bad_node and st >= 80:
            c *= comm_factor
        return c

    cache = {}

    def cm(r, st):
        cache[(r, st)] = comm(r, st)
        return cache[(r, st)]
    steps(s, rng, job, pl, 1, n_steps, t_of,
          lambda r, st: 780 * (1 + 0.004 * rng.gauss(0, 1)) + cm(r, st),
          comm_of=lambda r, st: cache[(r, st)])
    for k in checkpoints:
        ckpt(s, t_of(k) + 0.7, job, k)
    # host counters read every 60 s on every node; the bad port's counters rise
    t = t_of(1)
    vals = {}
    while t < t_of(n_steps):
        for i, n in enumerate(nodes):
            for ctr, rate in counters:
                key = (n, ctr)
                v = vals.get(key, 0)
                if n == bad_node and t >= t_of(80):
                    v += rate(rng)
                elif ctr == "symbol_error" and rng.random() < 0.05:
                    v += 1  # PAM4 links count a few raw errors on healthy ports too
                vals[key] = v
                s.add(t + i * 0.01, node=n, source="host", kind="nic", device="mlx5_3", port=1,
                      counter=ctr, count=v, state="up")
        t += 60
    s.write({"description": desc, "incidents": expect, "allow_extra": False})


RETRAIN = [("link_error_recovery", lambda rng: rng.randint(1, 2)), ("symbol_error", lambda rng: rng.randint(20, 60)),
           ("link_downed", lambda rng: 0)]


# 8. An IB port that keeps retraining (LinkErrorRecoveryCounter: IBTA;
#    NVSentinel's grey-failure monitor; NCCL#905 "port error" events)
#    under ~12% slower communication: network, that node, worth a move.
def ib_retrain_slow():
    nodes = ["ib-pod2-n%02d" % i for i in range(1, 13)]
    job = "ml/gpt-moe"
    comm_run("gray-ib-retrain-slow-comm", nodes, 8, job, "ib-pod2-n11", 1.12, RETRAIN,
             "mlx5_3 port 1 on ib-pod2-n11 keeps retraining (link_error_recovery and symbol errors rising, link up) while its ranks' comm_ms is ~12% above the other nodes': a network gray failure blaming that node; drain it and restart from the latest checkpoint.",
             [{"class": "network", "node": "ib-pod2-n11", "job": job, "checkpoint_step": 75,
               "actions_include": ["drain_node", "restart_from_checkpoint"], "actions_exclude": ["isolate_node"]}],
             checkpoints=(60, 75))


# 9. The same counters rising, communication as fast as everywhere else:
#    a port to watch, no harm to act on.
def ib_retrain_no_harm():
    nodes = ["ib-pod3-n%02d" % i for i in range(1, 9)]
    comm_run("gray-ib-retrain-no-slowdown", nodes, 8, "ml/bert-xl", "ib-pod3-n04", 1.0, RETRAIN,
             "ib-pod3-n04's port retrains and counts symbol errors, but its ranks communicate as fast as the others: no measured harm, no incident.",
             [], seed=9)


# 10. Retraining and slower, but the job ends in 15 minutes: the slowdown
#     costs less than a restart: recorded, nothing taken out.
def ib_retrain_ending():
    nodes = ["c%03d" % i for i in range(200, 204)]
    job = "eval/short-run"
    comm_run("gray-ib-retrain-job-ending", nodes, 8, job, "c202", 1.12, RETRAIN,
             "c202's port retrains under ~12% slower communication, but the job has 15 minutes left: the slowdown costs less than a restart; record it, take nothing out.",
             [{"class": "network", "node": "c202", "job": job, "actions_include": ["none"],
               "actions_exclude": ["drain_node", "isolate_node", "restart_from_checkpoint"]}],
             remaining=900, seed=10)


# 11. Two jobs, one finished days ago (its final checkpoint, no pods); after
#     a two-day quiet period the other's checksums disagree on one GPU.
def finished_then_checksum():
    rng = random.Random(11)
    nodes = ["gpu-east-%02d" % i for i in range(1, 7)]
    ja, jb = "ana/finetune-7b", "ana/pretrain-3b"
    s = Scn("gray-sdc-after-quiet-days", nodes, 8,
            [{"name": ja, "nodes": nodes[:3], "ranks_per_node": 8}, {"name": jb, "nodes": nodes[3:], "ranks_per_node": 8}])
    pa, pb = place(nodes[:3], 8), place(nodes[3:], 8)
    steps(s, rng, ja, pa, 1, 40, lambda st: 10 + st * 2, lambda r, st: 1500 * (1 + 0.01 * rng.gauss(0, 1)))
    ckpt(s, 95, ja, 40, path="/mnt/ckpt/finetune-7b/final")
    for i, n in enumerate(nodes[:3]):
        s.add(100 + i, node=n, source="kube", kind="pod_succeeded", job=ja, namespace="ana",
              pod="finetune-7b-w%d" % i)
    base = 2 * 86400.0
    t_of = lambda st: base + (st - 5000) * 2.5
    for k in (5000, 5100, 5200):
        ckpt(s, t_of(k) + 1, jb, k)
    for st in range(5000, 5241, 10):
        for rep in range(3):
            rank = rep * 8 + 2
            v = "%08x" % (st * 40503 % 2**32)
            if rep == 1 and st >= 5150:
                v = "%08x" % ((st * 40503 % 2**32) ^ 0x1000)
            s.add(t_of(st) + rng.uniform(0, 0.5), node=pb[rank][0], gpu=pb[rank][1], source="telemetry",
                  kind="replica_checksum", job=jb, rank=rank, step=st, replica=rep, value=v)
    bad = pb[1 * 8 + 2]
    s.write({"description": "ana/finetune-7b finished two days earlier; then ana/pretrain-3b's replica 1 disagrees from step 5150 on %s GPU %d: isolate it and resume from 5100; the finished job is not touched." % bad,
             "incidents": [{"class": "silent_data_corruption", "node": bad[0], "gpu": bad[1], "job": jb,
                            "checkpoint_step": 5100, "actions_include": ["isolate_node", "restart_from_checkpoint"]}],
             "allow_extra": False})


# 12. Corruption found by checksums, every checkpoint since the job's start
#     failed to save: restart from scratch (no checkpoint), still isolate.
def checksum_no_checkpoint():
    rng = random.Random(12)
    nodes = ["sxm-%c" % c for c in "abcdef"]
    job = "lab/diffusion-xl"
    s = Scn("gray-sdc-checkpoints-failed", nodes, 8, [{"name": job, "nodes": nodes, "ranks_per_node": 8}])
    pl = place(nodes, 8)
    t_of = lambda st: 40 + st * 4.0
    for k in (100, 200):
        ckpt(s, t_of(k) + 3, job, k, state="failed")
    for st in range(50, 241, 10):
        for rep in range(4):
            rank = rep * 12
            v = "0x%08X" % (st * 2246822519 % 2**32)
            if rep == 2 and st >= 230:
                v = "0x%08X" % ((st * 2246822519 % 2**32) ^ 0x80000)
            s.add(t_of(st) + rng.uniform(0, 0.2), node=pl[rank][0], gpu=pl[rank][1], source="telemetry",
                  kind="replica_checksum", job=job, rank=rank, step=st, replica=rep, value=v)
    bad = pl[24]
    s.write({"description": "Replica 2 (%s GPU %d) disagrees from step 230; both checkpoints failed to save: isolate the GPU's node and restart the job from the start." % bad,
             "incidents": [{"class": "silent_data_corruption", "node": bad[0], "gpu": bad[1], "job": job,
                            "actions_include": ["isolate_node", "restart_from_checkpoint"]}],
             "allow_extra": False})


# 13. Mid-run NaN after thousands of good steps, no checksums, no hardware
#     evidence, another job on the fleet fine: suspected corruption (the
#     Llama 3 report's SDC interruptions), probe the job's nodes, no node
#     taken out yet.
def nan_midrun_two_jobs():
    rng = random.Random(13)
    nodes = ["p5-%02d" % i for i in range(1, 9)]
    ja, jb = "rl/policy-8b", "rl/reward-2b"
    s = Scn("gray-nan-midrun-two-jobs", nodes, 8,
            [{"name": ja, "nodes": nodes[:6], "ranks_per_node": 8}, {"name": jb, "nodes": nodes[6:], "ranks_per_node": 8}])
    pa, pb = place(nodes[:6], 8), place(nodes[6:], 8)
    t_of = lambda st: 5 + (st - 4000) * 3.0

    def la(r, st):
        if r % 8:
            return None
        return "nan" if st >= 4090 else healthy_loss(st) + 0.01 * rng.gauss(0, 1)
    steps(s, rng, ja, pa, 4000, 4095, t_of, lambda r, st: 2900 * (1 + 0.01 * rng.gauss(0, 1)), loss_of=la)
    steps(s, rng, jb, pb, 4000, 4095, t_of, lambda r, st: 900 * (1 + 0.01 * rng.gauss(0, 1)),
          loss_of=lambda r, st: (healthy_loss(st) if r % 8 == 0 else None))
    for k in (4000, 4050):
        ckpt(s, t_of(k) + 2, ja, k)
    s.write({"description": "rl/policy-8b's loss turns NaN at step 4090 after 90 good steps since its checkpoint (thousands since its start), nothing else wrong: suspected silent corruption, probe its nodes and resume from 4050; rl/reward-2b untouched.",
             "incidents": [{"class": "silent_data_corruption", "job": ja, "node": None, "checkpoint_step": 4050,
                            "actions_include": ["run_diagnostics", "restart_from_checkpoint"]}],
             "allow_extra": False})


# 15/16. A GPU whose rank's loss spiked (harmful silent corruption shows as
#    short-lived loss spikes: Altenbernd et al., arXiv:2604.00726; Ma et al.,
#    ACL 2025) is kept in the job (a spike alone isolates nothing), the job
#    resumes from before it; 50 min later the same GPU's replica diverges.
#    The same bad GPU computed wrong all along (faulty units compute wrong
#    again and again: Dixit et al., arXiv:2102.11245): resume from before the
#    first spike, not from the checkpoint the agreeing checksums verified.
#    When another node's replica diverges instead, that is a new fault: the
#    verified checkpoint.
def suspect_kept(name, diverge_rank, desc, expect_second):
    rng = random.Random(15)
    nodes = ["a100-r7-%02d" % i for i in range(1, 17)]
    job = "llm/pretrain-13b"
    s = Scn(name, nodes, 8, [{"name": job, "nodes": nodes, "ranks_per_node": 8}])
    pl = place(nodes, 8)  # 128 ranks: 8 replicas of 16
    bad = 37  # a100-r7-05 GPU 5, replica 2
    sample = [rep * 16 + 5 for rep in range(8)]  # one rank per replica reports loss
    t_of = lambda st: 100 + st * 6.0

    def rep_steps(first, last, t_of, spike_at=None):
        for st in range(first, last + 1):
            for r in sample:
                node, gpu = pl[r]
                v = healthy_loss(st) * (1 + 0.01 * rng.gauss(0, 1))
                if st == spike_at and r == bad:
                    v = 41.7
                s.add(t_of(st) + rng.uniform(0, 0.3), node=node, gpu=gpu, source="telemetry", kind="step",
                      job=job, rank=r, step=st, step_ms=round(6000 * (1 + 0.01 * rng.gauss(0, 1)), 2),
                      loss=round(v, 5))

    rep_steps(150, 250, t_of, spike_at=250)
    for k in (100, 200):
        ckpt(s, t_of(k) + 2.0, job, k)
    # restarted from 200 two minutes after the spike; runs on for an hour
    t1 = t_of(250) + 120
    t2 = lambda st: t1 + (st - 200) * 6.0
    rep_steps(201, 700, t2)
    for k in (300, 400, 500, 600):
        ckpt(s, t2(k) + 2.0, job, k)
    for st in range(250, 701, 50):
        for rep in range(8):
            rank = rep * 16 + 5
            v = "%016x" % (st * 0x9E3779B97F4A7C15 % 2**64)
            if st == 650 and rank == diverge_rank:
                v = "%016x" % (st * 0x9E3779B97F4A7C15 % 2**64 ^ 0x800)
            if st > 650 and rank == diverge_rank:
                continue  # the job stopped comparing: it is being restarted
            s.add(t2(st) + 3.0 + rng.uniform(0, 0.5), node=pl[rank][0], gpu=pl[rank][1], source="telemetry",
                  kind="replica_checksum", job=job, rank=rank, step=st, replica=rep, value=v)
    s.write({"description": desc,
             "incidents": [{"class": "silent_data_corruption", "node": pl[bad][0], "job": job,
                            "checkpoint_step": 200, "actions_include": ["restart_from_checkpoint"],
                            "actions_exclude": ["isolate_node", "drain_node"]},
                           expect_second],
             "allow_extra": False})


def suspect_kept_diverges():
    suspect_kept("gray-sdc-suspect-kept-diverges", 37,
                 "Rank 37 (a100-r7-05 GPU 5) alone reports loss 41.7 at step 250: suspected corruption, resume from 200, node kept; 50 min later that GPU's replica diverges at step 650: the same bad GPU, so isolate it and resume from 200 again, not from 600.",
                 {"class": "silent_data_corruption", "node": "a100-r7-05", "gpu": 5, "job": "llm/pretrain-13b",
                  "checkpoint_step": 200, "actions_include": ["isolate_node", "restart_from_checkpoint"]})


def suspect_kept_other_diverges():
    suspect_kept("gray-sdc-suspect-kept-other-diverges", 6 * 16 + 5,
                 "Rank 37 (a100-r7-05) alone reports loss 41.7 at step 250: suspected corruption, resume from 200, node kept; 50 min later another node's replica (a100-r7-13) diverges at step 650: a new fault, isolate a100-r7-13 and resume from 600, which the agreement at step 600 verified.",
                 {"class": "silent_data_corruption", "node": "a100-r7-13", "gpu": 5, "job": "llm/pretrain-13b",
                  "checkpoint_step": 600, "actions_include": ["isolate_node", "restart_from_checkpoint"]})


if __name__ == "__main__":
    nan_first_steps()
    nan_after_restart()
    ecc_precursor()
    checksum_then_probe()
    straggler_6pct()
    straggler_quiet_healthy()
    straggler_noisy()
    ib_retrain_slow()
    ib_retrain_no_harm()
    ib_retrain_ending()
    finished_then_checksum()
    checksum_no_checkpoint()
    nan_midrun_two_jobs()
    suspect_kept_diverges()
    suspect_kept_other_diverges()
