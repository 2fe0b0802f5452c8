"""The training-side reporter: step, checkpoint and replica_checksum signals
(spec/signals.md section 1, source "telemetry") written as JSON lines to the
gpuheal agent's Unix socket.

Never blocks and never raises into the training loop: the socket is
non-blocking, lines wait in a bounded in-memory queue while the agent is
absent or slow (the oldest are dropped and counted when it is full), and a
connection is retried at most every ``reconnect_interval`` seconds. Every
failure is counted in :meth:`Reporter.stats`, never raised.

The other way: gpuheal restarts a job in place (docs/resume-contract.md)
by a line the agent writes to this connection,
``{"kind":"restart","id":...,"incident":...,"exit_code":N}``. A daemon
thread listens for it (also while the training loop hangs, as in a
collective that never returns) and, by default, makes the process exit
with code N, which the pod's container restart rule maps to
``RestartAllContainers``: the kubelet restarts the pod's containers where
they are, and the new process resumes from the resume ConfigMap.
"""

import collections
import json
import sys
import logging
import math
import os
import select
import socket
import threading
import time

DEFAULT_SOCKET = "/run/gpuheal/telemetry.sock"
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)
_log = logging.getLogger("gpuheal_reporter")


def _env_int(name):
    """$name as an int, None when unset or empty; ValueError naming it when
    it is not an integer."""
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError("$%s=%r is not an integer" % (name, v)) from None


def _job_from_env():
    """$GPUHEAL_JOB ("namespace/name" or "name"), else $GPUHEAL_JOB_NAME
    (e.g. the pod's batch.kubernetes.io/job-name label by the downward API)
    in $POD_NAMESPACE when that is set; None when neither is set."""
    job = (os.environ.get("GPUHEAL_JOB") or "").strip()
    if job:
        return job
    name = (os.environ.get("GPUHEAL_JOB_NAME") or "").strip()
    if not name:
        return None
    ns = (os.environ.get("POD_NAMESPACE") or "").strip()
    return "%s/%s" % (ns, name) if ns else name


def _ts_now():
    """RFC 3339 UTC with microseconds: 2026-11-29T07:00:00.123456Z."""
    ns = time.time_ns()
    sec, rem = divmod(ns, 1_000_000_000)
    t = time.gmtime(sec)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (
        t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, rem // 1000)


def _number(x):
    """A finite float for step_ms-like fields; ValueError otherwise."""
    v = float(x)
    if not math.isfinite(v):
        raise ValueError("not finite")
    return v


def _loss(x):
    """loss: a number, or "nan"/"inf"/"-inf" when not finite (spec)."""
    v = float(x)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


class Reporter:
    """Reports one rank's progress to the node's gpuheal agent.

    ``Reporter(job=None, rank=None, node=None, socket_path=None)``, every
    argument read from the pod's environment when not given:

    - job: "namespace/name" or "name"; default $GPUHEAL_JOB, else
      $GPUHEAL_JOB_NAME in $POD_NAMESPACE (python/README.md sets both from
      the downward API). ValueError when there is none.
    - rank: default $RANK (torchrun, torch.distributed), else 0. $WORLD_SIZE
      and $LOCAL_RANK are read too (``world_size``, ``local_rank``): a rank
      outside the world size is a ValueError. LOCAL_RANK is not sent as the
      GPU: a container's CUDA index is not the node's GPU index.
    - node: $GPUHEAL_NODE or $NODE_NAME (the agent fills it in when absent).
    - gpu: $GPUHEAL_GPU, the node's GPU index (as the agent numbers them),
      else none.
    - socket_path: $GPUHEAL_SOCKET, then /run/gpuheal/telemetry.sock.
    - on_restart: what a restart request from gpuheal does: "exit" (the
      default: a last flush of at most 0.5 s, then ``os._exit(exit_code)``
      from the listening thread, so a hung training loop exits too), a
      callable given the request (a dict with id, incident, exit_code), or
      None (not listened for).

    When the agent's socket cannot be reached, one warning says so (logger
    "gpuheal_reporter"), and one more when lines are first dropped.
    """

    def __init__(self, job=None, rank=None, node=None, socket_path=None, gpu=None,
                 queue_max=10000, reconnect_interval=1.0, on_restart="exit"):
        if job is None:
            job = _job_from_env()
        if job is None or str(job).strip() == "":
            raise ValueError("Reporter: no job: pass job=, or set $GPUHEAL_JOB, or "
                             "$GPUHEAL_JOB_NAME (and $POD_NAMESPACE) in the pod")
        self.world_size = _env_int("WORLD_SIZE")
        self.local_rank = _env_int("LOCAL_RANK")
        if rank is None:
            rank = _env_int("RANK")
        if rank is None:
            rank = 0
        if gpu is None:
            gpu = _env_int("GPUHEAL_GPU")
        self._job = str(job)
        self._rank = int(rank)
        if self._rank < 0 or (self.world_size is not None and self._rank >= self.world_size):
            raise ValueError("Reporter: rank %d outside $WORLD_SIZE=%s"
                             % (self._rank, self.world_size))
        self._node = node or os.environ.get("GPUHEAL_NODE") or os.environ.get("NODE_NAME")
        self._gpu = None if gpu is None else int(gpu)
        self._path = socket_path or os.environ.get("GPUHEAL_SOCKET") or DEFAULT_SOCKET
        self._queue_max = max(1, int(queue_max))
        self._reconnect_interval = float(reconnect_interval)
        self._lock = threading.Lock()
        self._queue = collections.deque()
        self._offset = 0          # bytes of _queue[0] already sent
        self._sock = None
        self._next_connect = 0.0
        self._closed = False
        self._stats = {"sent": 0, "dropped": 0, "errors": 0, "connects": 0,
                       "disconnects": 0}
        self._warned_connect = False
        self._warned_drop = False
        self._stats["restarts"] = 0
        if on_restart is not None and on_restart != "exit" and not callable(on_restart):
            raise ValueError("Reporter: on_restart must be \"exit\", a callable or None")
        self._on_restart = on_restart
        self._listener = None
        if on_restart is not None:
            self._listener = threading.Thread(target=self._listen, name="gpuheal-restart",
                                              daemon=True)
            self._listener.start()

    @property
    def job(self):
        return self._job

    @property
    def rank(self):
        return self._rank

    # ---- the three signals ----

    def step(self, step, step_ms, loss=None, comm_ms=None, tokens_per_s=None):
        """One training step: its number and duration in milliseconds."""
        try:
            obj = self._common("step")
            obj["rank"] = self._rank
            obj["step"] = int(step)
            obj["step_ms"] = _number(step_ms)
            if comm_ms is not None:
                obj["comm_ms"] = _number(comm_ms)
            if loss is not None:
                obj["loss"] = _loss(loss)
            if tokens_per_s is not None:
                obj["tokens_per_s"] = _number(tokens_per_s)
        except Exception:  # a bad value must not stop training
            self._count("errors")
            return
        self._put(obj)

    def checkpoint(self, step, path, state="saved"):
        """A checkpoint written (state "saved") or one that failed ("failed")."""
        try:
            obj = self._common("checkpoint")
            obj["step"] = int(step)
            obj["path"] = str(path)
            obj["state"] = "failed" if state == "failed" else "saved"
            if not obj["path"]:
                raise ValueError("empty path")
        except Exception:
            self._count("errors")
            return
        self._put(obj)

    def replica_checksum(self, step, replica, value):
        """A hex checksum of state that must match across data-parallel replicas."""
        try:
            obj = self._common("replica_checksum")
            obj["step"] = int(step)
            obj["rank"] = self._rank
            obj["replica"] = int(replica)
            if isinstance(value, int):
                value = "%x" % value
            obj["value"] = str(value)
        except Exception:
            self._count("errors")
            return
        self._put(obj)

    # ---- control ----

    def flush(self):
        """Sends what the socket takes now, without waiting."""
        try:
            with self._lock:
                self._send_locked(time.monotonic())
        except Exception:
            self._count("errors")

    def close(self, timeout=1.0):
        """Tries for at most ``timeout`` seconds to send what is queued, then
        closes the connection. Later calls are ignored."""
        try:
            deadline = time.monotonic() + max(0.0, float(timeout))
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                while self._queue:
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    if self._sock is None:
                        self._next_connect = 0.0
                    self._send_locked(now)
                    if not self._queue:
                        break
                    if self._sock is None:
                        time.sleep(min(0.05, max(0.0, deadline - now)))
                    else:
                        select.select([], [self._sock], [], max(0.0, min(0.05, deadline - now)))
                self._dropped_locked(len(self._queue))
                self._queue.clear()
                self._disconnect_locked(count=False)
        except Exception:
            self._count("errors")

    def stats(self):
        """Counters: sent, dropped, errors, connects, disconnects, queued."""
        with self._lock:
            out = dict(self._stats)
            out["queued"] = len(self._queue)
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- restart requests (agent -> reporter) ----

    def _listen(self):
        """Waits for lines from the agent on the connection (connecting again
        when it broke); hands each restart request on."""
        buf = b""
        while True:
            try:
                with self._lock:
                    if self._closed:
                        return
                    if self._sock is None and self._stats["connects"] > 0:
                        # reconnect (an agent restarted) even while the
                        # training loop sends nothing; the first connection
                        # is the first send's
                        self._connect_locked(time.monotonic())
                        buf = b""
                    s = self._sock
                if s is None:
                    time.sleep(0.2)
                    continue
                try:
                    ready, _, _ = select.select([s], [], [], 0.5)
                except (OSError, ValueError):
                    continue  # closed by the training thread meanwhile
                if not ready:
                    continue
                with self._lock:
                    if self._sock is not s:
                        continue
                    try:
                        data = s.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        self._disconnect_locked()
                        self._next_connect = time.monotonic() + self._reconnect_interval
                        continue
                buf += data
                if len(buf) > 65536 and b"\n" not in buf:
                    buf = b""  # no line of ours is this long
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self._agent_line(line)
            except Exception:
                self._count("errors")
                time.sleep(0.2)

    def _agent_line(self, line):
        try:
            obj = json.loads(line.decode("utf-8"))
        except Exception:
            self._count("errors")
            return
        if not isinstance(obj, dict) or obj.get("kind") != "restart":
            return
        code = obj.get("exit_code")
        if not isinstance(code, int) or isinstance(code, bool) or not 1 <= code <= 255:
            self._count("errors")
            return
        self._count("restarts")
        if callable(self._on_restart):
            try:
                self._on_restart(dict(obj))
            except Exception:
                self._count("errors")
            return
        _log.warning("gpuheal_reporter: gpuheal restarts job %s in place (incident %s): "
                     "rank %d exits with code %d for the pod's RestartAllContainers rule",
                     self._job, obj.get("incident"), self._rank, code)
        try:
            self.close(timeout=0.5)
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)

    # ---- internals ----

    def _common(self, kind):
        obj = {"ts": _ts_now()}
        if self._node:
            obj["node"] = self._node
        if self._gpu is not None:
            obj["gpu"] = self._gpu
        obj["source"] = "telemetry"
        obj["kind"] = kind
        obj["job"] = self._job
        return obj

    def _count(self, key):
        try:
            with self._lock:
                self._stats[key] += 1
        except Exception:
            pass

    def _put(self, obj):
        try:
            line = (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()
        except Exception:
            self._count("errors")
            return
        try:
            with self._lock:
                if self._closed:
                    self._dropped_locked(1)
                    return
                if len(self._queue) >= self._queue_max:
                    # Keep the newest, but never cut a line half sent.
                    self._dropped_locked(1)
                    if not self._offset:
                        self._queue.popleft()
                    elif len(self._queue) > 1:
                        del self._queue[1]
                    else:
                        return
                self._queue.append(line)
                self._send_locked(time.monotonic())
        except Exception:
            self._count("errors")

    def _dropped_locked(self, n):
        if n <= 0:
            return
        self._stats["dropped"] += n
        if not self._warned_drop:
            self._warned_drop = True
            _log.warning("gpuheal_reporter: dropped %d signal line(s) of job %s rank %d: the "
                         "gpuheal agent at %s did not take them (queue of %d full, or closed); "
                         "this is said once, stats() counts them", n, self._job, self._rank,
                         self._path, self._queue_max)

    def _connect_locked(self, now):
        if now < self._next_connect:
            return False
        s = None
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect(self._path)
        except OSError as e:
            # Absent, refused, or its backlog full: Unix sockets connect at
            # once or not at all, so all of these mean "try again later".
            if s is not None:
                s.close()
            self._next_connect = now + self._reconnect_interval
            if not self._warned_connect:
                self._warned_connect = True
                _log.warning("gpuheal_reporter: cannot reach the gpuheal agent at %s (%s): is "
                             "the agent's socket directory mounted in this pod (python/README.md)? "
                             "Up to %d signal lines wait in memory and are retried; this is said "
                             "once", self._path, e.strerror or e, self._queue_max)
            return False
        self._sock = s
        self._offset = 0  # a line cut by a broken connection is sent whole again
        self._stats["connects"] += 1
        return True

    def _disconnect_locked(self, count=True):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
            if count:
                self._stats["disconnects"] += 1
        self._offset = 0

    def _send_locked(self, now):
        if not self._queue:
            return
        if self._sock is None and not self._connect_locked(now):
            return
        while self._queue:
            data = self._queue[0]
            try:
                n = self._sock.send(memoryview(data)[self._offset:], _SEND_FLAGS)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._disconnect_locked()
                self._next_connect = now + self._reconnect_interval
                return
            self._offset += n
            if self._offset < len(data):
                return
            self._queue.popleft()
            self._offset = 0
            self._stats["sent"] += 1
