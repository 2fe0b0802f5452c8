"""Unit tests of gpuheal_reporter: the lines it writes (spec fields, ts,
non-finite loss), that it never blocks or raises (agent absent, agent not
reading, bad values), reconnection, the resume contract, and the framework
callbacks against stand-in framework modules.

Run: python3 -m unittest discover python/tests
"""

import json
import math
import os
import re
import socket
import sys
import tempfile
import threading
import time
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gpuheal_reporter  # noqa: E402
from gpuheal_reporter import Reporter, resume_checkpoint  # noqa: E402

ENV_KEYS = ("GPUHEAL_SOCKET", "GPUHEAL_NODE", "NODE_NAME", "GPUHEAL_RESUME_DIR", "GPUHEAL_JOB",
            "GPUHEAL_JOB_NAME", "POD_NAMESPACE", "GPUHEAL_GPU", "RANK", "LOCAL_RANK",
            "WORLD_SIZE")
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Server:
    """A Unix socket server collecting lines, on a thread."""

    def __init__(self, path, read=True):
        self.path = path
        self.lines = []
        self.read = read
        self.conns = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self._stop = False
        self._held = []     # every accepted connection, closed by close()
        self._servers = []  # the threads reading them
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop:
            try:
                c, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.conns += 1
                self._held.append(c)
            if not self.read:
                continue
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            self._servers.append(t)
            t.start()

    def _serve(self, c):
        buf = b""
        c.settimeout(0.1)
        while not self._stop:
            try:
                d = c.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            buf += d
            *done, buf = buf.split(b"\n")
            with self._lock:
                self.lines.extend(json.loads(x) for x in done if x)

    def wait(self, n, timeout=30.0):  # returns as soon as n lines came
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if len(self.lines) >= n:
                    return list(self.lines)
            time.sleep(0.01)
        with self._lock:
            return list(self.lines)

    def close(self):
        # Like an agent that exits: by the time close() returns, every
        # connection is shut, so the client's next send fails at once
        # (a reader thread left to notice _stop later let a send succeed
        # into a dead server under load).
        self._stop = True
        self._thread.join(2)
        self._sock.close()
        with self._lock:
            held = list(self._held)
        for c in held:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._servers:
            t.join(2)
        for c in held:
            c.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


class ReporterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gh-rep-")
        self.path = os.path.join(self.dir, "t.sock")
        self._env = dict(os.environ)
        for k in ENV_KEYS:
            os.environ.pop(k, None)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self._env)
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    def test_lines_follow_the_spec(self):
        srv = Server(self.path)
        try:
            r = Reporter("ml/llm-70b", 45, node="gpu-03", socket_path=self.path, gpu=5)
            r.step(1200, 1432.5, loss=2.31, comm_ms=210.1, tokens_per_s=9000)
            r.step(1201, 1400, loss=float("nan"))
            r.step(1202, 1400, loss=float("inf"))
            r.step(1203, 1400, loss=float("-inf"))
            r.checkpoint(1000, "s3://ckpt/llm-70b/step-1000")
            r.checkpoint(1001, "/c/1001", state="failed")
            r.replica_checksum(1000, 2, "deadbeef")
            r.replica_checksum(1000, 3, 0xABC)
            r.close()
            lines = srv.wait(8)
        finally:
            srv.close()
        self.assertEqual(len(lines), 8)
        s = lines[0]
        self.assertRegex(s["ts"], TS_RE)
        self.assertEqual(list(s)[:3], ["ts", "node", "gpu"])
        self.assertEqual(s["source"], "telemetry")
        self.assertEqual(s["kind"], "step")
        self.assertEqual((s["job"], s["rank"], s["step"], s["step_ms"]), ("ml/llm-70b", 45, 1200, 1432.5))
        self.assertEqual((s["loss"], s["comm_ms"], s["tokens_per_s"]), (2.31, 210.1, 9000.0))
        self.assertEqual(s["gpu"], 5)
        self.assertEqual([x.get("loss") for x in lines[1:4]], ["nan", "inf", "-inf"])
        self.assertNotIn("comm_ms", lines[1])
        c = lines[4]
        self.assertEqual((c["kind"], c["step"], c["path"], c["state"]),
                         ("checkpoint", 1000, "s3://ckpt/llm-70b/step-1000", "saved"))
        self.assertNotIn("rank", c)
        self.assertEqual(lines[5]["state"], "failed")
        k = lines[6]
        self.assertEqual((k["kind"], k["step"], k["rank"], k["replica"], k["value"]),
                         ("replica_checksum", 1000, 45, 2, "deadbeef"))
        self.assertEqual(lines[7]["value"], "abc")
        self.assertEqual(r.stats()["sent"], 8)

    def test_env_socket_and_node(self):
        os.environ["GPUHEAL_SOCKET"] = self.path
        os.environ["NODE_NAME"] = "gpu-77"
        srv = Server(self.path)
        try:
            r = Reporter("j", 0)
            r.step(1, 5)
            r.close()
            lines = srv.wait(1)
        finally:
            srv.close()
        self.assertEqual(lines[0]["node"], "gpu-77")

    def test_no_node_is_omitted(self):
        srv = Server(self.path)
        try:
            r = Reporter("j", 0, socket_path=self.path)
            r.step(1, 5)
            r.close()
            lines = srv.wait(1)
        finally:
            srv.close()
        self.assertNotIn("node", lines[0])

    def test_agent_absent_never_blocks_or_raises(self):
        r = Reporter("j", 1, socket_path=self.path, queue_max=100)
        t0 = time.monotonic()
        for i in range(5000):
            r.step(i, 10.0, loss=1.0)
        r.checkpoint(1, "/x")
        elapsed = time.monotonic() - t0
        # bounds far above the ~0.1 s these take, so that a loaded machine
        # never fails them; a send or connect that blocked (a timeout per
        # line) would take minutes
        self.assertLess(elapsed, 30.0)
        st = r.stats()
        self.assertEqual(st["sent"], 0)
        self.assertEqual(st["queued"], 100)
        self.assertEqual(st["dropped"], 4901)
        t0 = time.monotonic()
        r.close(timeout=0.2)
        self.assertLess(time.monotonic() - t0, 10.0)
        self.assertEqual(r.stats()["dropped"], 5001)
        r.step(1, 1)  # after close: dropped, no error
        self.assertEqual(r.stats()["errors"], 0)

    def test_torchrun_and_pod_environment(self):
        # what torchrun and python/README.md's pod spec set
        os.environ.update({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
                           "GPUHEAL_JOB_NAME": "llm-70b", "POD_NAMESPACE": "ml",
                           "GPUHEAL_SOCKET": self.path, "NODE_NAME": "gpu-03"})
        srv = Server(self.path)
        try:
            r = Reporter()
            self.assertEqual((r.job, r.rank, r.world_size, r.local_rank), ("ml/llm-70b", 5, 8, 1))
            r.step(3, 10.0)
            r.replica_checksum(3, 0, 0xab)
            r.close()
            lines = srv.wait(2)
        finally:
            srv.close()
        self.assertEqual([(l["job"], l["rank"], l["node"]) for l in lines],
                         [("ml/llm-70b", 5, "gpu-03")] * 2)
        self.assertNotIn("gpu", lines[0])  # LOCAL_RANK is not the node's GPU index
        # GPUHEAL_JOB wins over the job name; explicit arguments win over both
        os.environ["GPUHEAL_JOB"] = "ml/other"
        self.assertEqual(Reporter().job, "ml/other")
        self.assertEqual((Reporter("x", 2).job, Reporter("x", 2).rank), ("x", 2))
        os.environ["GPUHEAL_GPU"] = "6"
        self.assertEqual(Reporter()._gpu, 6)
        # a job name without a namespace is the name
        for k in ("GPUHEAL_JOB", "POD_NAMESPACE"):
            del os.environ[k]
        self.assertEqual(Reporter().job, "llm-70b")
        # no torchrun: rank 0
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            del os.environ[k]
        self.assertEqual((Reporter().rank, Reporter().world_size), (0, None))

    def test_environment_errors_are_named(self):
        with self.assertRaisesRegex(ValueError, "GPUHEAL_JOB"):
            Reporter()
        os.environ["GPUHEAL_JOB"] = "ml/j"
        os.environ["RANK"] = "one"
        with self.assertRaisesRegex(ValueError, r"\$RANK='one' is not an integer"):
            Reporter()
        os.environ["RANK"] = "8"
        os.environ["WORLD_SIZE"] = "8"
        with self.assertRaisesRegex(ValueError, "rank 8 outside \\$WORLD_SIZE=8"):
            Reporter()

    def test_agent_absent_is_said_once(self):
        r = Reporter("j", 1, socket_path=self.path, queue_max=3, reconnect_interval=0.0)
        with self.assertLogs("gpuheal_reporter", "WARNING") as logs:
            for i in range(5):
                r.step(i, 10.0)
            r.close(timeout=0.1)
        self.assertEqual(r.stats()["dropped"], 5)
        self.assertEqual(len(logs.output), 2, logs.output)
        self.assertIn("cannot reach the gpuheal agent at " + self.path, logs.output[0])
        self.assertIn("No such file or directory", logs.output[0])
        self.assertIn("dropped 1 signal line(s) of job j rank 1", logs.output[1])

    def test_reconnects_and_sends_the_queue(self):
        r = Reporter("j", 1, socket_path=self.path, reconnect_interval=0.0)
        for i in range(10):
            r.step(i, 1.0)
        self.assertEqual(r.stats()["queued"], 10)
        srv = Server(self.path)
        try:
            r.step(10, 1.0)
            lines = srv.wait(11)
            self.assertEqual([x["step"] for x in lines], list(range(11)))
            # the agent restarts: lines queued meanwhile arrive after reconnecting
            srv.close()
            for i in range(11, 20):
                r.step(i, 1.0)
            srv = Server(self.path)
            r.step(20, 1.0)
            r.flush()
            got = srv.wait(1)
            r.close()
            got = srv.wait(9, timeout=3)
        finally:
            srv.close()
        self.assertGreaterEqual(r.stats()["connects"], 2)
        self.assertEqual(r.stats()["errors"], 0)
        # everything reached one of the two servers or was counted as lost on
        # the dead connection; the last step always gets through
        self.assertIn(20, [x["step"] for x in got])

    def test_agent_not_reading_never_blocks(self):
        srv = Server(self.path, read=False)
        try:
            r = Reporter("j", 1, socket_path=self.path, queue_max=50)
            big = "x" * 3000
            t0 = time.monotonic()
            for i in range(3000):
                r.checkpoint(i, "/c/" + big)
            self.assertLess(time.monotonic() - t0, 30.0)  # blocking: forever
            st = r.stats()
            self.assertLessEqual(st["queued"], 50)
            self.assertGreater(st["dropped"], 0)
            t0 = time.monotonic()
            r.close(timeout=0.2)
            self.assertLess(time.monotonic() - t0, 10.0)
        finally:
            srv.close()

    def test_bad_values_are_counted_not_raised(self):
        r = Reporter("j", 1, socket_path=self.path)
        r.step(1, float("nan"))
        r.step("x", 1)
        r.step(1, 1, comm_ms=object())
        r.checkpoint(1, "")
        r.replica_checksum("a", 1, "ff")
        self.assertEqual(r.stats()["errors"], 5)
        self.assertEqual(r.stats()["queued"], 0)
        r.step(1, 1, loss=object())  # loss that is not a number
        self.assertEqual(r.stats()["errors"], 6)

    def _send_all(self, srv, data):
        """Writes data to every connection the server accepted."""
        with srv._lock:
            held = list(srv._held)
        for c in held:
            c.sendall(data)
        return len(held)

    def test_restart_request_reaches_the_handler(self):
        srv = Server(self.path)
        got = []
        try:
            r = Reporter("ml/j", 0, socket_path=self.path, on_restart=got.append)
            r.step(1, 10.0)
            srv.wait(1)
            # not a restart, a bad one, then a good one split over two writes
            self.assertEqual(self._send_all(srv, b'{"kind":"other"}\n{"kind":"restart",'
                                                 b'"exit_code":0}\nnot json\n'), 1)
            self._send_all(srv, b'{"kind":"restart","id":"inc-1","incident":"inc-1",')
            time.sleep(0.05)
            self._send_all(srv, b'"exit_code":88}\n')
            end = time.monotonic() + 5
            while not got and time.monotonic() < end:
                time.sleep(0.01)
            self.assertEqual(got, [{"kind": "restart", "id": "inc-1", "incident": "inc-1",
                                    "exit_code": 88}])
            self.assertEqual(r.stats()["restarts"], 1)
            self.assertGreaterEqual(r.stats()["errors"], 2)  # code 0, not json
            r.close()
        finally:
            srv.close()

    def test_restart_request_exits_with_its_code_while_the_loop_hangs(self):
        # the default handler: the process exits with the request's code,
        # even with its main thread stuck (as in a collective that hangs)
        srv = Server(self.path)
        try:
            prog = ("import sys, time; sys.path.insert(0, %r)\n"
                    "from gpuheal_reporter import Reporter\n"
                    "r = Reporter('ml/j', 0, socket_path=%r)\n"
                    "r.step(1, 10.0); r.flush()\n"
                    "time.sleep(60)\n"
                    % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), self.path))
            import subprocess
            p = subprocess.Popen([sys.executable, "-c", prog], stderr=subprocess.PIPE)
            self.assertTrue(srv.wait(1, timeout=20))
            self._send_all(srv, b'{"kind":"restart","id":"i","incident":"i","exit_code":88}\n')
            rc = p.wait(timeout=20)
            err = p.stderr.read().decode()
            self.assertEqual(rc, 88, err)
            self.assertIn("in place", err)
        finally:
            srv.close()

    def test_restart_listening_off(self):
        srv = Server(self.path)
        try:
            r = Reporter("ml/j", 0, socket_path=self.path, on_restart=None)
            r.step(1, 10.0)
            srv.wait(1)
            self._send_all(srv, b'{"kind":"restart","id":"i","incident":"i","exit_code":88}\n')
            time.sleep(0.3)
            self.assertEqual(r.stats()["restarts"], 0)
            r.close()
            with self.assertRaises(ValueError):
                Reporter("ml/j", 0, socket_path=self.path, on_restart=5)
        finally:
            srv.close()

    def test_context_manager(self):
        srv = Server(self.path)
        try:
            with Reporter("j", 2, socket_path=self.path) as r:
                r.step(1, 2)
            lines = srv.wait(1)
        finally:
            srv.close()
        self.assertEqual(len(lines), 1)


class ResumeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gh-resume-")
        self._env = dict(os.environ)
        os.environ.pop("GPUHEAL_RESUME_DIR", None)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self._env)
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    def put(self, key, value):
        with open(os.path.join(self.dir, key), "w") as f:
            f.write(value)

    def test_reads_step_and_path(self):
        self.put("step", "1000\n")
        self.put("path", "s3://ckpt/llm-70b/step-1000")
        self.assertEqual(resume_checkpoint(path=self.dir),
                         {"step": 1000, "path": "s3://ckpt/llm-70b/step-1000"})
        os.environ["GPUHEAL_RESUME_DIR"] = self.dir
        self.assertEqual(resume_checkpoint()["step"], 1000)

    def test_absent_or_malformed(self):
        self.assertIsNone(resume_checkpoint(path=self.dir))
        self.assertIsNone(resume_checkpoint(path=os.path.join(self.dir, "nope")))
        self.put("step", "12")
        self.assertIsNone(resume_checkpoint(path=self.dir))  # no path
        self.put("path", "/c")
        self.put("step", "-1")
        self.assertIsNone(resume_checkpoint(path=self.dir))
        self.put("step", "1.5")
        self.assertIsNone(resume_checkpoint(path=self.dir))
        self.put("step", "")
        self.assertIsNone(resume_checkpoint(path=self.dir))
        with open(os.path.join(self.dir, "step"), "wb") as f:
            f.write(b"\xff\xfe")
        self.assertIsNone(resume_checkpoint(path=self.dir))

    def test_job_must_match_when_named(self):
        self.put("step", "5")
        self.put("path", "/c/5")
        self.put("job", "ml/a")
        self.assertEqual(resume_checkpoint("ml/a", path=self.dir)["job"], "ml/a")
        self.assertIsNone(resume_checkpoint("ml/b", path=self.dir))
        self.assertIsNotNone(resume_checkpoint(path=self.dir))


class CallbacksTest(unittest.TestCase):
    """The callbacks against stand-in framework modules."""

    def setUp(self):
        self._saved = {k: sys.modules.get(k) for k in
                       ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks",
                        "transformers", "gpuheal_reporter.callbacks")}

    def tearDown(self):
        for k, v in self._saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v

    def _fake_frameworks(self):
        for k in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks",
                  "transformers"):
            sys.modules[k] = types.ModuleType(k)
        sys.modules["lightning.pytorch.callbacks"].Callback = type("Callback", (), {})
        sys.modules["transformers"].TrainerCallback = type("TrainerCallback", (), {})
        sys.modules.pop("gpuheal_reporter.callbacks", None)
        if hasattr(gpuheal_reporter, "callbacks"):
            delattr(gpuheal_reporter, "callbacks")

    def test_missing_frameworks(self):
        for k in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks",
                  "transformers", "pytorch_lightning"):
            sys.modules[k] = None  # makes the import fail
        sys.modules.pop("gpuheal_reporter.callbacks", None)
        if hasattr(gpuheal_reporter, "callbacks"):
            delattr(gpuheal_reporter, "callbacks")
        try:
            with self.assertRaises(AttributeError):
                gpuheal_reporter.HFCallback
            with self.assertRaises(AttributeError):
                gpuheal_reporter.LightningCallback
        finally:
            sys.modules.pop("pytorch_lightning", None)

    def test_hf_callback(self):
        self._fake_frameworks()
        cls = gpuheal_reporter.HFCallback
        rep = Reporter("ml/hf", 0, socket_path="/nonexistent/x.sock")
        got = []
        rep._put = got.append
        cb = cls("ml/hf", reporter=rep)
        args = types.SimpleNamespace(process_index=3, output_dir="/out")
        st = types.SimpleNamespace(global_step=7)
        # the Trainer's order: on_step_end, then on_log, then on_save
        cb.on_step_begin(args, st, None)
        cb.on_step_end(args, st, None)
        cb.on_log(args, st, None, logs={"loss": 1.25})
        cb.on_save(args, st, None)
        self.assertEqual(got[0]["kind"], "step")
        self.assertEqual((got[0]["step"], got[0]["loss"]), (7, 1.25))
        self.assertGreaterEqual(got[0]["step_ms"], 0)
        self.assertEqual(got[1]["path"], "/out/checkpoint-7")
        cb.on_train_end(args, st, None)

    def test_callbacks_never_raise_into_training(self):
        self._fake_frameworks()
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        # no job anywhere: refused at construction, before training
        with self.assertRaisesRegex(ValueError, "GPUHEAL_JOB"):
            gpuheal_reporter.HFCallback()
        with self.assertRaisesRegex(ValueError, "GPUHEAL_JOB"):
            gpuheal_reporter.LightningCallback()
        # a bad WORLD_SIZE found only when the first step comes: said once, not raised
        os.environ["GPUHEAL_JOB"] = "ml/hf"
        os.environ["WORLD_SIZE"] = "x"
        try:
            cb = gpuheal_reporter.HFCallback(rank=None)
            args = types.SimpleNamespace(output_dir="/out")  # no process_index
            st = types.SimpleNamespace(global_step=1)
            with self.assertLogs("gpuheal_reporter", "WARNING") as logs:
                cb.on_step_begin(args, st, None)
                cb.on_step_end(args, st, None)
                cb.on_save(args, st, None)
                cb.on_train_end(args, st, None)
            self.assertEqual(len(logs.output), 1, logs.output)
            self.assertIn("not reporting", logs.output[0])
        finally:
            for k in ("GPUHEAL_JOB", "WORLD_SIZE"):
                os.environ.pop(k, None)

    def test_hf_loss_only_on_logged_steps(self):
        self._fake_frameworks()
        rep = Reporter("ml/hf", 0, socket_path="/nonexistent/x.sock")
        got = []
        rep._put = got.append
        cb = gpuheal_reporter.HFCallback(reporter=rep)
        args = types.SimpleNamespace(process_index=0, output_dir="/out")
        st = types.SimpleNamespace(global_step=0)
        for step in range(1, 6):  # logging_steps=2: the Trainer logs steps 2 and 4
            st.global_step = step
            cb.on_step_begin(args, st, None)
            cb.on_step_end(args, st, None)
            if step % 2 == 0:
                cb.on_log(args, st, None, logs={"loss": float(step), "learning_rate": 1e-4})
            else:
                cb.on_log(args, st, None, logs={"eval_loss": 9.0})  # no train loss
        cb.on_train_end(args, st, None)
        self.assertEqual([(g["step"], g.get("loss")) for g in got],
                         [(1, None), (2, 2.0), (3, None), (4, 4.0), (5, None)])

    def test_lightning_callback(self):
        self._fake_frameworks()
        cls = gpuheal_reporter.LightningCallback
        rep = Reporter("ml/pl", 0, socket_path="/nonexistent/x.sock")
        got = []
        rep._put = got.append
        cb = cls("ml/pl", reporter=rep)
        trainer = types.SimpleNamespace(global_step=3, global_rank=1, default_root_dir="/r",
                                        checkpoint_callback=types.SimpleNamespace(
                                            last_model_path="/r/last.ckpt"))

        class T:  # a tensor stand-in
            def detach(self):
                return self

            def item(self):
                return 0.5

        cb.on_train_batch_end(trainer, None, {"loss": T()}, None, 0)  # first: no lap yet
        cb.on_train_batch_end(trainer, None, {"loss": T()}, None, 1)
        cb.on_save_checkpoint(trainer, None, {})
        self.assertEqual(len(got), 2)
        self.assertEqual((got[0]["step"], got[0]["loss"]), (3, 0.5))
        self.assertEqual(got[1]["path"], "/r/last.ckpt")


class TsTest(unittest.TestCase):
    def test_ts_format(self):
        from gpuheal_reporter.reporter import _ts_now
        for _ in range(100):
            self.assertRegex(_ts_now(), TS_RE)

    def test_loss_encoding(self):
        from gpuheal_reporter.reporter import _loss
        self.assertEqual(_loss(math.nan), "nan")
        self.assertEqual(_loss(2), 2.0)


if __name__ == "__main__":
    unittest.main()
