"""trainer.py - a stand-in training rank for the real-node test: reports a
step every 0.2 s and a checkpoint every 10 steps to the node's gpuheal agent
through the Python reporter (python/gpuheal_reporter), and on SIGTERM (the
kubelet stopping its pod) saves a last checkpoint and writes a marker file
"<pod>.sigterm" (with the step) into $TRAINER_OUT, a hostPath the test reads.
At start it writes "<pod>.start" with the resume checkpoint it was given.
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
while not stopping:
    time.sleep(0.2)
    step += 1
    rep.step(step, 200.0, loss=1.0 / step)
    if step % 10 == 0:
        rep.checkpoint(step, "%s/step-%d" % (ckpt_dir, step))
    rep.flush()
# Stopped by the kubelet: a last checkpoint, then the marker.
rep.checkpoint(step, "%s/step-%d" % (ckpt_dir, step))
rep.close(timeout=2.0)
write(pod + ".sigterm", {"rank": rank, "step": step, "time": time.time(), "stats": rep.stats()})
print("trainer %s rank %d: SIGTERM at step %d" % (job, rank, step), flush=True)
sys.exit(0)
