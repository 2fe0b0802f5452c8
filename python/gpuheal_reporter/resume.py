"""The resume contract: which checkpoint gpuheal chose for a restarted job.

The controller writes a ConfigMap named ``<job>-gpuheal-resume`` with the
keys ``step`` and ``path`` (and optionally ``job``); the job's pods mount it
as files, by default in /etc/gpuheal/resume (``$GPUHEAL_RESUME_DIR``).
"""

import os

DEFAULT_RESUME_DIR = "/etc/gpuheal/resume"
_MAX_VALUE = 4096


def _read_key(directory, key):
    try:
        with open(os.path.join(directory, key), "rb") as f:
            data = f.read(_MAX_VALUE + 1)
    except OSError:
        return None
    if len(data) > _MAX_VALUE:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def resume_checkpoint(job=None, path=None):
    """Returns ``{"step": int, "path": str}`` (plus ``"job"`` when the
    ConfigMap names it) for the checkpoint to resume from, or None when
    there is none, it is malformed, or it names a different job. Never
    raises."""
    try:
        directory = path or os.environ.get("GPUHEAL_RESUME_DIR") or DEFAULT_RESUME_DIR
        step = _read_key(directory, "step")
        ckpt = _read_key(directory, "path")
        if not step or not ckpt:
            return None
        if not step.isdigit():
            return None
        out = {"step": int(step), "path": ckpt}
        named = _read_key(directory, "job")
        if named:
            if job is not None and named != str(job):
                return None
            out["job"] = named
        return out
    except Exception:
        return None
