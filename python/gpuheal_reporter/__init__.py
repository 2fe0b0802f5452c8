"""gpuheal_reporter: training ranks report steps, checkpoints and replica
checksums to the node's gpuheal agent, and learn which checkpoint to resume
from after gpuheal restarted the job. Standard library only, Python >= 3.9.

    from gpuheal_reporter import Reporter, resume_checkpoint
    r = Reporter("ml/llm-70b", rank)
    r.step(step, step_ms, loss=loss)

LightningCallback and HFCallback exist when PyTorch Lightning or
transformers can be imported (loaded on first use).
"""

from .reporter import DEFAULT_SOCKET, Reporter
from .resume import DEFAULT_RESUME_DIR, resume_checkpoint

__all__ = ["Reporter", "resume_checkpoint", "DEFAULT_SOCKET", "DEFAULT_RESUME_DIR"]
__version__ = "0.1.0"

_CALLBACKS = ("LightningCallback", "HFCallback")


def __getattr__(name):
    if name in _CALLBACKS:
        from . import callbacks
        if hasattr(callbacks, name):
            return getattr(callbacks, name)
        raise AttributeError("%s: its framework is not importable" % name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
