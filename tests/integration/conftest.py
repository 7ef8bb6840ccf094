"""Fixtures that run a real `sluice serve` process for each test.

Every broker gets a fresh data dir under the test's tmp_path, listens on an ephemeral port
(the port is read from the single stdout line `sluice listening on 127.0.0.1:PORT`), and
writes its stderr (tracing logs) to a file beside the data dir. When a test fails, the tail
of that file is attached to the failure report. At teardown the broker is killed; a broker
that died on its own, or that logged a Rust panic, fails the test.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The build scripts/test-integration.sh makes (the `ci` profile: assertions on).
DEFAULT_BIN = REPO_ROOT / "target" / "ci" / "sluice"
LISTEN_RE = re.compile(r"^sluice listening on (\S+):(\d+)\s*$")
# Printed after the listening line when `--metrics-listen` is given (the admin listener).
METRICS_LISTEN_RE = re.compile(r"^sluice metrics listening on (\S+):(\d+)\s*$")
# A stand-in broker (tests/integration/java/reference/kafka_as_sluice.py) needs longer.
STARTUP_TIMEOUT_S = float(os.environ.get("SLUICE_STARTUP_TIMEOUT_S", "10"))
STOP_TIMEOUT_S = 10.0
TAIL_LINES = 60


def sluice_bin() -> Path:
    return Path(os.environ.get("SLUICE_BIN", str(DEFAULT_BIN)))


def sluice_bench_bin() -> Path:
    """The benchmark lab, a binary of its own (`cargo build --profile ci -p sluice-bench`):
    SLUICE_BENCH_BIN, else `sluice-bench` beside the broker binary. Its embedded target runs
    the `sluice` beside it."""
    given = os.environ.get("SLUICE_BENCH_BIN")
    return Path(given) if given else sluice_bin().with_name("sluice-bench")


class BrokerStartError(AssertionError):
    pass


class SluiceBroker:
    """One broker on one data dir, which can be stopped, killed and started again.

    Attributes: `bootstrap` ("127.0.0.1:PORT"), `host`, `port`, `data_dir`, `log_path`,
    `proc` (the live subprocess.Popen, or None).
    """

    def __init__(self, workdir: Path, extra_args: list[str] | None = None, name: str = "broker"):
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.log_path = workdir / f"{name}-stderr.log"
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen | None = None
        # `http://host:port` of the admin listener when started with `--metrics-listen`.
        self.metrics_url: str | None = None
        self.host = "127.0.0.1"
        self.port: int | None = None
        # The --listen value; `{port}` becomes the first listener's port. Kafka's listener
        # syntax works here (`SASL_SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0`).
        self.listen = "127.0.0.1:{port}"
        self._stdout_lines: queue.Queue = queue.Queue()
        self._expected_exit = False
        self.exit_codes: list[int] = []
        self.starts = 0

    # -- properties ---------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker was never started"
        return f"{self.host}:{self.port}"

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- lifecycle ----------------------------------------------------------
    def start(self, extra_args: list[str] | None = None, same_port: bool = True) -> "SluiceBroker":
        """Starts the broker. `extra_args` replaces the stored extra flags when given. A broker
        that ran before listens on the same port again (so clients can find it) unless
        `same_port` is False."""
        assert not self.alive(), "broker already running"
        binary = sluice_bin()
        if not binary.exists():
            raise BrokerStartError(
                f"sluice binary not found at {binary}; build it with `cargo build --release -p sluice` "
                "or set SLUICE_BIN")
        if extra_args is not None:
            self.extra_args = list(extra_args)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port = self.port if (same_port and self.port is not None) else 0
        cmd = [str(binary), "serve", "--listen", self.listen.format(port=port), "--data-dir", str(self.data_dir),
               *self.extra_args]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         env=env)
        self._expected_exit = False
        self._stdout_lines = queue.Queue()
        threading.Thread(target=self._pump_stdout, args=(self.proc, self._stdout_lines), daemon=True).start()
        self._await_listening(port)
        return self

    def _pump_stdout(self, proc: subprocess.Popen, lines: queue.Queue) -> None:
        # Reads stdout until EOF so the pipe never fills; every line is also kept in the log.
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode(errors="replace")
            lines.put(line)
            with open(self.log_path, "ab") as log:
                log.write(f"[stdout] {line}".encode())
        lines.put(None)

    def _await_listening(self, requested_port: int) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._abort_start(f"no 'sluice listening on' line on stdout within {STARTUP_TIMEOUT_S}s")
            try:
                line = self._stdout_lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(timeout=5)
                self._abort_start(f"broker exited with code {self.proc.returncode} before listening")
            m = LISTEN_RE.match(line.strip())
            if m:
                host, port = m.group(1), int(m.group(2))
                if port == 0:
                    self._abort_start(f"broker printed port 0: {line!r}")
                if requested_port and port != requested_port:
                    self._abort_start(f"asked for port {requested_port}, broker printed {line!r}")
                self.host, self.port = host, port
                if any(a == "--metrics-listen" or a.startswith("metrics.listen=") for a in self.extra_args):
                    self._await_metrics_line(deadline)
                return
            # Any other stdout line before the listening line breaks the contract.
            self._abort_start(f"unexpected stdout line before the listening line: {line!r}")

    def _await_metrics_line(self, deadline: float) -> None:
        """Reads the admin listener's line, which follows the listening line."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._abort_start("no 'sluice metrics listening on' line after the listening line")
            try:
                line = self._stdout_lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if line is None:
                self._abort_start("broker closed stdout before the metrics line")
            m = METRICS_LISTEN_RE.match(line.strip())
            if not m:
                self._abort_start(f"unexpected stdout line instead of the metrics line: {line!r}")
            self.metrics_url = f"http://{m.group(1)}:{int(m.group(2))}"
            return

    def _abort_start(self, why: str) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=5)
        self._expected_exit = True
        raise BrokerStartError(f"{why}\n--- sluice stderr tail ---\n{self.stderr_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S, sig: int = signal.SIGTERM) -> int:
        """SIGTERM (or `sig`), wait, and assert a clean exit (code 0)."""
        assert self.alive(), f"broker not running (exit code {self.proc and self.proc.returncode})"
        self._expected_exit = True
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise AssertionError(f"broker did not exit within {timeout}s of signal {sig}\n{self.stderr_tail()}")
        self.exit_codes.append(code)
        assert code == 0, f"broker exited with {code} after signal {sig}\n{self.stderr_tail()}"
        return code

    def kill9(self) -> None:
        """SIGKILL: no chance to flush or clean up."""
        assert self.alive(), "broker not running"
        self._expected_exit = True
        self.proc.send_signal(signal.SIGKILL)
        self.exit_codes.append(self.proc.wait(timeout=10))

    def restart(self, extra_args: list[str] | None = None) -> "SluiceBroker":
        """Clean stop (asserting exit 0), then start on the same data dir and port."""
        self.stop()
        return self.start(extra_args)

    def teardown(self) -> str | None:
        """Kills the broker; returns a problem description when the broker died on its own."""
        problem = None
        if self.proc is not None:
            code = self.proc.poll()
            if code is not None and not self._expected_exit:
                problem = f"broker exited unexpectedly during the test with code {code}"
            if code is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return problem

    # -- logs ---------------------------------------------------------------
    def stderr_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stderr_tail(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.stderr_text().splitlines()[-lines:])

    def panics(self) -> list[str]:
        return [ln for ln in self.stderr_text().splitlines() if "panicked at" in ln]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
    if rep.failed:
        for b in getattr(item, "_sluice_brokers", []):
            rep.sections.append((f"sluice stderr tail ({b.log_path})", b.stderr_tail()))


@pytest.fixture
def sluice_factory(request, tmp_path):
    """Returns start(extra_args=None, name=None, port=None, metrics=False) -> SluiceBroker; each
    call is a separate broker with its own data dir (`metrics=True` adds the admin listener on
    an ephemeral port, at `b.metrics_url`). All are killed at teardown."""
    brokers: list[SluiceBroker] = []
    request.node._sluice_brokers = brokers

    def start(extra_args: list[str] | None = None, name: str | None = None, port: int | None = None,
              metrics: bool = False) -> SluiceBroker:
        name = name or f"broker{len(brokers)}"
        if metrics:
            # The admin listener on an ephemeral port; its URL is then `b.metrics_url`.
            extra_args = [*(extra_args or []), "--metrics-listen", "127.0.0.1:0"]
        b = SluiceBroker(tmp_path / name, extra_args, name=name)
        b.port = port  # None: an ephemeral port
        brokers.append(b)
        return b.start()

    yield start

    from admin_facade import close_kafka_python_clients
    close_kafka_python_clients()
    problems = []
    for b in brokers:
        p = b.teardown()
        if p:
            problems.append(f"{b.log_path}: {p}\n{b.stderr_tail()}")
        panics = b.panics()
        if panics:
            problems.append(f"{b.log_path}: broker panicked:\n" + "\n".join(panics[:5]) + "\n" + b.stderr_tail())
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def broker(sluice_factory) -> SluiceBroker:
    """A broker with default flags and a short retention check interval."""
    return sluice_factory(["--retention-check-interval-ms", "200"])


@pytest.fixture
def topic_name(request) -> str:
    """A topic name derived from the test's name (legal characters only)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")
    return f"t-{base}"[:200]
