"""The two binaries: `sluice` is the broker only (no librdkafka linked in), `sluice-bench` is the
lab and runs the `sluice` beside it (or `--broker-bin`) for its embedded target; `sluice bench`
still works by running the `sluice-bench` beside it. Both print their version and git revision.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from conftest import sluice_bench_bin, sluice_bin

VERSION_RE = re.compile(r"^(sluice|sluice-bench) (\d+\.\d+\.\d+) \(git ([0-9a-f]{7,}(-dirty)?|unknown)\)$")


def run(*cmd, timeout: float = 60, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_both_binaries_print_version_and_git_revision():
    versions = {}
    for binary in (sluice_bin(), sluice_bench_bin()):
        proc = run(binary, "--version")
        assert proc.returncode == 0, proc
        m = VERSION_RE.match(proc.stdout.strip())
        assert m, proc.stdout
        versions[m.group(1)] = (m.group(2), m.group(3))
    # Built from one workspace at one revision.
    assert versions["sluice"] == versions["sluice-bench"], versions


def test_the_broker_binary_links_no_librdkafka():
    data = sluice_bin().read_bytes()
    assert b"rd_kafka_new" not in data
    assert b"rd_kafka_" in sluice_bench_bin().read_bytes()


def test_sluice_bench_runs_the_bench_beside_it(tmp_path):
    direct = run(sluice_bench_bin(), "--list-presets")
    via = run(sluice_bin(), "bench", "--list-presets")
    assert direct.returncode == 0 and via.returncode == 0, (direct, via)
    assert via.stdout == direct.stdout and "baseline" in via.stdout
    # Flags and exit codes pass through unchanged (2: bad usage).
    bad = run(sluice_bin(), "bench", "--rate", "nonsense")
    assert bad.returncode == 2, bad
    # Alone in a directory, `sluice bench` says what is missing and how to get it.
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy2(sluice_bin(), lone / "sluice")
    proc = run(lone / "sluice", "bench", "--list-presets")
    assert proc.returncode == 1, proc
    assert "sluice-bench" in proc.stderr and "cargo build --release -p sluice-bench" in proc.stderr


def test_the_bench_finds_its_broker_beside_it_or_by_broker_bin(tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    bench = lone / "sluice-bench"
    shutil.copy2(sluice_bench_bin(), bench)
    short = ["--quiet", "--preset", "quick", "--duration", "1s", "--warmup", "0", "--rate", "500"]
    proc = run(bench, *short, "--json", tmp_path / "none.json", cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert f"no broker binary at {lone / 'sluice'}" in proc.stderr and "--broker-bin" in proc.stderr
    out = tmp_path / "r.json"
    proc = run(bench, *short, "--broker-bin", sluice_bin(), "--json", out, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["target"]["kind"] == "embedded" and r["target"]["broker_pid"]
    assert r["audit"]["lost"] == 0 and r["counts"]["acked"] > 0
