"""trainer.py - a stand-in training rank for the real-node test: reports a
step every 0.2 s and a checkpoint every 10 steps to the node's gpuheal agent
through the Python reporter (python/gpuheal_reporter), and on SIGTERM (the
kubelet stopping its pod) saves a last checkpoint and writes a marker file
"<pod>.sigterm" (with the step) into $TRAINER_OUT, a hostPath the test reads.
At start it writes "<pod>.start" with the resume checkpoint it was given.

For the recovery-ladder benchmark (test/node/e2e, bench/real-node-ladder.sh):
at its first step each process appends "rank time resume_step pod" to
"<job name>.firststeps" (the time of the first training step after a
restart), and when "<job name>.hang" appears (or changes) after it started,
the process stops stepping as a rank stuck in a collective would, until it
is stopped or restarted (its reporter's restart request still works: the
listening thread exits the process, in place).
"""

import json
import os
import signal
import sys
import time

from gpuheal_reporter import Reporter, resume_checkpoint

job = os.environ["TRAINER_JOB"]
rank = int(os.environ.get("JOB_COMPLETION_INDEX", "0"))
pod = os.environ.get("POD_NAME", "pod")
out = os.environ.get("TRAINER_OUT", "/out")
ckpt_dir = "/ckpt"
rep = Reporter(job, rank)
resume = resume_checkpoint()
step = resume["step"] if resume else 0
stopping = False
jname = job.split("/")[-1]
hang_path = os.path.join(out, jname + ".hang")


def read_hang():
    try:
        with open(hang_path) as f:
            return f.read()
    except OSError:
        return None


hang_seen = read_hang()  # a hang asked for before this process started is not its own


def write(name, obj):
    tmp = os.path.join(out, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, os.path.join(out, name))


def on_term(sig, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_term)
write(pod + ".start", {"rank": rank, "resume": resume, "time": time.time()})
print("trainer %s rank %d starting at step %d" % (job, rank, step), flush=True)
first = True
while not stopping:
    time.sleep(0.2)
    h = read_hang()
    if h is not None and h != hang_seen:
        continue  # stuck: no step, no checkpoint
    step += 1
    rep.step(step, 200.0, loss=1.0 / step)
    if first:
        first = False
        with open(os.path.join(out, jname + ".firststeps"), "a") as f:
            f.write("%d %d %s %s\n" % (rank, int(time.time() * 1000),
                                        resume["step"] if resume else "-", pod))
    if step % 10 == 0:
        rep.checkpoint(step, "%s/step-%d" % (ckpt_dir, step))
    rep.flush()
# Stopped by the kubelet: a last checkpoint, then the marker.
rep.checkpoint(step, "%s/step-%d" % (ckpt_dir, step))
rep.close(timeout=2.0)
write(pod + ".sigterm", {"rank": rank, "step": step, "time": time.time(), "stats": rep.stats()})
print("trainer %s rank %d: SIGTERM at step %d" % (job, rank, step), flush=True)
sys.exit(0)
