"""Thin training-framework callbacks around Reporter. Each class is defined
only when its framework can be imported; import this module lazily (the
package's __getattr__ does) because importing the frameworks is slow.

- LightningCallback: PyTorch Lightning (``lightning.pytorch`` or
  ``pytorch_lightning``). Reports a step after each training batch (wall
  time since the previous one, loss from the step's outputs) and a
  checkpoint after each save.
- HFCallback: Hugging Face ``transformers.TrainerCallback``. Reports a step
  after each optimizer step, with the loss only on a step the Trainer logged
  it (every ``logging_steps``), else none: a loss is never carried to later
  steps. A checkpoint after each save (``<output_dir>/checkpoint-<step>``,
  the Trainer's naming).

job defaults to the pod's environment and rank to the framework's rank
(Reporter says how).
"""

import logging
import os
import time

from .reporter import Reporter, _job_from_env

_log = logging.getLogger("gpuheal_reporter")


class _Off:
    """Stands in for a Reporter that could not be made: reports nothing."""

    def step(self, *a, **k):
        pass

    def checkpoint(self, *a, **k):
        pass

    def close(self, *a, **k):
        pass


def _check_job(job):
    """At construction (set-up, not the training loop): a job must be known."""
    if job is None and _job_from_env() is None:
        raise ValueError("no job: pass job=, or set $GPUHEAL_JOB, or $GPUHEAL_JOB_NAME "
                         "(and $POD_NAMESPACE) in the pod (python/README.md)")


def _make(job, rank, kw):
    """A Reporter, or (said once, never raised into the training loop) none."""
    try:
        return Reporter(job, rank, **kw)
    except Exception as e:
        _log.warning("gpuheal_reporter: not reporting: %s", e)
        return _Off()


def _loss_of(x):
    try:
        if x is None:
            return None
        if hasattr(x, "detach"):
            x = x.detach()
        if hasattr(x, "item"):
            x = x.item()
        return float(x)
    except Exception:
        return None


class _Timer:
    def __init__(self):
        self.last = None

    def lap_ms(self):
        now = time.perf_counter()
        prev, self.last = self.last, now
        return None if prev is None else (now - prev) * 1000.0


try:
    try:
        from lightning.pytorch.callbacks import Callback as _PLCallback
    except ImportError:
        from pytorch_lightning.callbacks import Callback as _PLCallback
except ImportError:
    _PLCallback = None

if _PLCallback is not None:

    class LightningCallback(_PLCallback):
        """``trainer = Trainer(callbacks=[LightningCallback("ml/llm", rank)])``.
        rank defaults to the trainer's global_rank."""

        def __init__(self, job=None, rank=None, reporter=None, **reporter_kw):
            super().__init__()
            if reporter is None:
                _check_job(job)
            self._job, self._rank, self._kw = job, rank, reporter_kw
            self.reporter = reporter
            self._timer = _Timer()

        def _rep(self, trainer):
            if self.reporter is None:
                rank = self._rank if self._rank is not None else getattr(trainer, "global_rank", 0)
                self.reporter = _make(self._job, rank, self._kw)
            return self.reporter

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
            ms = self._timer.lap_ms()
            if ms is None:
                return
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            self._rep(trainer).step(getattr(trainer, "global_step", batch_idx), ms,
                                    loss=_loss_of(loss))

        def on_save_checkpoint(self, trainer, pl_module, checkpoint):
            cb = getattr(trainer, "checkpoint_callback", None)
            path = (getattr(cb, "last_model_path", "") or getattr(cb, "dirpath", "")
                    or getattr(trainer, "default_root_dir", "") or "unknown")
            self._rep(trainer).checkpoint(getattr(trainer, "global_step", 0), path)

        def on_fit_end(self, trainer, pl_module):
            if self.reporter is not None:
                self.reporter.close()


try:
    from transformers import TrainerCallback as _HFCallback
except ImportError:
    _HFCallback = None

if _HFCallback is not None:

    class HFCallback(_HFCallback):
        """``Trainer(..., callbacks=[HFCallback("ml/llm")])``. rank defaults to
        args.process_index."""

        def __init__(self, job=None, rank=None, reporter=None, **reporter_kw):
            if reporter is None:
                _check_job(job)
            self._job, self._rank, self._kw = job, rank, reporter_kw
            self.reporter = reporter
            self._t0 = None
            self._pending = None  # (args, step, step_ms): ended, not yet reported

        def _rep(self, args):
            if self.reporter is None:
                rank = self._rank if self._rank is not None else getattr(args, "process_index", 0)
                self.reporter = _make(self._job, rank, self._kw)
            return self.reporter

        # The Trainer calls on_step_end, then on_log (on a logging step), then
        # on_save: a step is reported when its log comes, with that loss, or,
        # without a loss, at the next step, save or the end of training.
        def _flush(self, loss=None):
            if self._pending is not None:
                args, step, ms = self._pending
                self._pending = None
                self._rep(args).step(step, ms, loss=loss)

        def on_step_begin(self, args, state, control, **kwargs):
            self._flush()
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self._t0 is None:
                return
            self._flush()
            ms = (time.perf_counter() - self._t0) * 1000.0
            self._t0 = None
            self._pending = (args, state.global_step, ms)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs or self._pending is None:
                return
            if self._pending[1] == state.global_step:
                self._flush(loss=_loss_of(logs["loss"]))

        def on_save(self, args, state, control, **kwargs):
            self._flush()
            path = os.path.join(getattr(args, "output_dir", "") or ".",
                                "checkpoint-%d" % state.global_step)
            self._rep(args).checkpoint(state.global_step, path)

        def on_train_end(self, args, state, control, **kwargs):
            self._flush()
            if self.reporter is not None:
                self.reporter.close()
