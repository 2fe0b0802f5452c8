#!/usr/bin/env python3
"""demo-ranks.py: one simulated training rank of the `make demo` job.

    demo-ranks.py --job ml/llm-pretrain --rank R --ctl out/demo/ctl --nodes out/demo/nodes

Reports step / checkpoint / replica_checksum telemetry through
gpuheal_reporter to the agent socket of the node its pod runs on. The demo
script steers it with small files under --ctl:
  placement/R   the node of rank R's pod (empty: pod not running, pause)
  epoch         "GEN START_STEP T0": the job (re)started at START_STEP at time T0;
                on a new GEN the rank resumes from resume_checkpoint(ctl/resume)
  slow          a node name: ranks there report 12% slower steps (straggler)
  sdc           "RANK FROM_STEP": that rank's replica checksum differs from then on
Ranks step in lockstep off the wall clock (PERIOD s per step).
"""
import argparse
import hashlib
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from gpuheal_reporter import Reporter, resume_checkpoint  # noqa: E402

PERIOD = 0.1          # wall seconds per simulated step
STEP_MS = 1000.0      # nominal step time reported
CKPT_EVERY = 50
CK_EVERY = 10


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--nodes", required=True)
    a = ap.parse_args()
    rnd = random.Random(a.rank * 7919)
    rep, node, gen, last = None, None, None, -1
    base = t0 = 0.0
    while True:
        ep = read(os.path.join(a.ctl, "epoch")).split()
        if len(ep) == 3 and ep[0] != gen:
            gen, base, t0 = ep[0], int(ep[1]), float(ep[2])
            rc = resume_checkpoint(path=os.path.join(a.ctl, "resume"))
            if rc and gen != "0":
                print("rank %d: resumed from %s (step %d)" % (a.rank, rc["path"], rc["step"]), flush=True)
            last = base - 1
        want = read(os.path.join(a.ctl, "placement", str(a.rank)))
        if want != node:
            if rep:
                rep.close(timeout=0.5)
            rep, node = None, want
            if want:
                rep = Reporter(a.job, a.rank, node=want, gpu=0,
                               socket_path=os.path.join(a.nodes, want, "telemetry.sock"),
                               reconnect_interval=0.2)
        if rep is None or gen is None or os.path.exists(os.path.join(a.ctl, "paused")):
            time.sleep(PERIOD / 2)
            continue
        step = base + int((time.time() - t0) / PERIOD)
        slow = read(os.path.join(a.ctl, "slow")) == node
        sdc = read(os.path.join(a.ctl, "sdc")).split()
        while last < step:
            last += 1
            ms = STEP_MS * (1.0 + rnd.gauss(0, 0.01)) * (1.12 if slow else 1.0)
            loss = 2.0 + 1.5 * math.exp(-last / 2000.0) + rnd.gauss(0, 0.01)
            rep.step(last, round(ms, 2), loss=round(loss, 4), tokens_per_s=round(4.0e6 / ms, 1))
            if last % CK_EVERY == 0:
                h = hashlib.sha256(b"weights@%d" % last).hexdigest()[:16]
                if len(sdc) == 2 and int(sdc[0]) == a.rank and last >= int(sdc[1]):
                    h = hashlib.sha256(b"flipped@%d" % last).hexdigest()[:16]
                rep.replica_checksum(last, a.rank, h)
            if a.rank == 0 and last % CKPT_EVERY == 0 and last > 0:
                rep.checkpoint(last, "s3://ckpt/llm-pretrain/step-%d" % last)
        rep.flush()
        time.sleep(PERIOD / 2)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
