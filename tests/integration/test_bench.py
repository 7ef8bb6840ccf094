"""`sluice-bench` end to end: short runs of the real binary against its embedded broker and
against a separately started `sluice serve`, checking the JSON report's invariants rather than
particular numbers (the machine is shared; latencies vary), the exit codes of gates and bad
input, and that Ctrl-C still writes a report and stops the embedded broker.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import sluice_bench_bin

RUN_TIMEOUT_S = 120
LATENCY_KINDS = ["ack", "ack_intended", "send_delay", "e2e", "e2e_intended"]
PERCENTILE_ORDER = ["min_ms", "p50_ms", "p75_ms", "p90_ms", "p95_ms", "p99_ms", "p99_5_ms", "p99_9_ms",
                    "p99_99_ms", "max_ms"]


def run_bench(tmp_path: Path, *args: str, timeout: float = RUN_TIMEOUT_S,
              settle: bool = False) -> tuple[subprocess.CompletedProcess, dict | None]:
    # A comparison settles the disks before each run (up to 30 s each), which only adds time
    # here, and with test files side by side (SLUICE_IT_WORKERS) the disks are seldom idle.
    # Only the test of settling itself asks for it.
    out = tmp_path / "report.json"
    cmd = [str(sluice_bench_bin()), "--quiet", "--json", str(out), *([] if settle else ["--no-settle"]), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def assert_report_sane(r: dict, rate: int | None, duration_s: float) -> None:
    """Invariants every finished run must satisfy, whatever the machine's speed."""
    assert r["schema"] == "sluice-bench/1"
    a, c = r["audit"], r["counts"]
    # Conservation: every measured message either arrived or is counted lost.
    assert a["produced"] == a["received"] + a["lost"], a
    assert a["produced"] > 0
    # A healthy broker loses nothing it acknowledged and delivers nothing twice.
    assert a["lost_acked"] == 0, a
    assert a["duplicates"] == 0, a
    assert c["acked"] + c["ack_errors"] <= c["produced"]
    # Warmup messages are tagged and excluded: delivery can never exceed 100 %.
    assert r["throughput"]["delivery_pct"] <= 100.0
    if rate:
        # The open-loop schedule sends every slot, late or not, so the count is exact up to
        # the slot at each window edge per producer.
        expected = rate * duration_s
        slack = r["scenario"]["producers"] * 2
        assert abs(a["produced"] - expected) <= slack, (a["produced"], expected)
    # Every latency distribution: counts match the events, percentiles are monotonic.
    lat = r["latency"]
    assert lat["ack"]["count"] == c["acked"]
    assert lat["send_delay"]["count"] == c["produced"]
    assert lat["e2e"]["count"] == a["received"]
    for kind in LATENCY_KINDS:
        s = lat[kind]
        if s["count"] == 0:
            continue
        values = [s[k] for k in PERCENTILE_ORDER]
        assert all(v is not None for v in values), (kind, s)
        assert values == sorted(values), (kind, values)
        assert sum(s["cdf_buckets"]) == s["count"], kind
        assert len(s["cdf_buckets"]) == len(r["cdf_edges_ms"]) + 1
    # From-intended latency can only be longer than from-send latency.
    assert lat["ack_intended"]["p50_ms"] >= lat["ack"]["p50_ms"]
    # The 1 s time series: present, ordered, with a client-view lag reading.
    iv = r["intervals"]
    assert len(iv) >= int(duration_s), len(iv)
    assert [i["elapsed_s"] for i in iv] == sorted(i["elapsed_s"] for i in iv)
    assert "measure" in {i["phase"] for i in iv}
    lags = [i["lag_total"] for i in iv if i["lag_total"] is not None]
    assert lags, "no lag sample"
    assert all(x >= 0 for x in lags)
    assert r["lag"]["samples"] == len(lags)
    assert r["lag"]["peak_total"] == max(lags)


def test_quick_preset_against_embedded_broker(tmp_path):
    html = tmp_path / "report.html"
    proc, r = run_bench(tmp_path, "--preset", "quick", "--duration", "3s", "--warmup", "1s", "--html", str(html))
    assert proc.returncode == 0, explain(proc)
    assert r is not None, explain(proc)
    assert_report_sane(r, rate=5000, duration_s=3.0)
    assert r["target"]["kind"] == "embedded"
    assert r["counts"]["warmup_produced"] > 0
    assert r["scenario"]["preset"] == "quick"
    # A single run waits for no earlier run's writeback.
    assert r["settle"] is None and "settle:" not in proc.stdout
    # The embedded broker is a local process: its CPU, memory and disk were sampled.
    b = r["broker_process"]
    assert b is not None and b["cpu_s"] > 0 and b["peak_rss_mib"] > 0
    assert b["data_dir_bytes"] > r["counts"]["produced_bytes"] / 10
    # The embedded broker was stopped (and reaped) before the bench exited.
    assert not Path(f"/proc/{b['pid']}").exists()
    # librdkafka statistics gave the producer latency split for the measured window.
    sp = r["latency_split"]
    assert sp is not None and sp["queue_avg_ms"] > 0 and sp["rtt_avg_ms"] > 0
    assert sp["batch_msgs_avg"] >= 1 and sp["wire_bytes"] > 0 and sp["msg_bytes"] > 0
    assert any(i["split"] for i in r["intervals"])
    # The human summary went to stdout.
    assert "latency (ms)" in proc.stdout and "end-to-end" in proc.stdout
    # The HTML report renders offline: charts inline, no script, nothing fetched.
    page = html.read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert page.count("<svg") >= 6 and page.count("</svg>") == page.count("<svg")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert r["topic"] in page and "no data" not in page.split("Throughput")[1].split("</svg>")[0]


@pytest.mark.parametrize("args", [
    ["--preset", "acks-all"],
    ["--preset", "no-linger", "--compression", "zstd", "--payload", "json"],
    ["--compression", "lz4", "--partitioning", "round-robin", "--payload", "random"],
    ["--compression", "gzip", "--payload", "text", "--message-size", "2048"],
    ["--compression", "none", "--payload", "zeros", "--message-size", "40"],
], ids=["acks-all", "zstd-json-nolinger", "lz4-roundrobin", "gzip-text-2k", "none-zeros-min"])
def test_preset_families(tmp_path, args):
    proc, r = run_bench(tmp_path, *args, "--rate", "2000", "--producers", "2", "--consumers", "2",
                        "--duration", "2s", "--warmup", "1s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=2000, duration_s=2.0)


def test_unthrottled_run(tmp_path):
    proc, r = run_bench(tmp_path, "--rate", "max", "--producers", "2", "--consumers", "2",
                        "--duration", "2s", "--warmup", "1s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=None, duration_s=2.0)
    assert r["throughput"]["target_msg_s"] is None
    assert r["throughput"]["rate_accuracy_pct"] is None


def test_against_bootstrap_broker(tmp_path, broker):
    proc, r = run_bench(tmp_path, "--bootstrap", broker.bootstrap, "--rate", "1000", "--producers", "2",
                        "--consumers", "1", "--partitions", "3", "--duration", "2s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=1000, duration_s=2.0)
    assert r["target"]["kind"] == "bootstrap"
    assert r["target"]["bootstrap"] == broker.bootstrap
    # No warmup: nothing is excluded. No pid given: no broker process section.
    assert r["counts"]["warmup_produced"] == 0
    assert r["broker_process"] is None
    # The fresh topic was removed again from the external broker.
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert r["topic"] not in md.topics


def test_sweep_runs_every_variant(tmp_path):
    html = tmp_path / "sweep.html"
    csv_path = tmp_path / "sweep.csv"
    proc, doc = run_bench(tmp_path, "--preset", "sweep-acks", "--rate", "1000", "--producers", "1", "--consumers", "1",
                          "--duration", "1s", "--warmup", "0s", "--html", str(html), "--csv", str(csv_path))
    assert proc.returncode == 0, explain(proc)
    assert doc["schema"] == "sluice-bench-set/1"
    labels = [r["label"] for r in doc["runs"]]
    assert labels == ["acks=0", "acks=1", "acks=all"]
    assert [r["scenario"]["acks"] for r in doc["runs"]] == ["0", "1", "all"]
    for r in doc["runs"]:
        assert_report_sane(r, rate=1000, duration_s=1.0)
    assert [row["label"] for row in doc["rows"]] == labels
    assert doc["ratios"] == []
    page = html.read_text()
    assert page.count("<details>") == 3 and "<script" not in page
    # The CSV holds every interval of every run, labelled.
    import csv
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == sum(len(r["intervals"]) for r in doc["runs"])
    assert [row["label"] for row in rows if row["run"] == "2"][0] == "acks=1"
    first = doc["runs"][0]["intervals"][0]
    assert float(rows[0]["produced_msg_s"]) == pytest.approx(first["produced_msg_s"])


def test_sparse_fanout_linger_regression(tmp_path):
    # teranode's linger regression: 32 partitions, one message every 25 ms, so batches never
    # fill. Same relational gate shape as teranode's. The preset's full 5 s feed is needed: the
    # final flush sends the last linger's worth at once. A partition gets a message every
    # 800 ms, so under a 1 s linger a batch's first record waits about 1 s and a second one
    # about 0.2 s: the p50 sits between those two modes (277 ms in one CI run, beside another
    # test), so the absolute bound is on the mean.
    proc, doc = run_bench(tmp_path, "--preset", "sparse-fanout",
                          "--gate", "mean_e2e_ms@linger-1s>300",
                          "--gate", "p50_e2e_ms@linger-1s > 3 * p50_e2e_ms@linger-10ms",
                          "--gate", "p50_e2e_ms@linger-10ms > p50_e2e_ms@linger-1s")
    # The third cross-run gate is false by construction, so the run exits 3.
    assert proc.returncode == 3, explain(proc)
    gates = {g["expr"]: g for g in doc["gates"]}
    assert gates["mean_e2e_ms@linger-1s>300"]["passed"] is True
    rel = gates["p50_e2e_ms@linger-1s > 3 * p50_e2e_ms@linger-10ms"]
    assert rel["passed"] is True and rel["against"] == pytest.approx(
        3 * [r for r in doc["runs"] if r["label"] == "linger-10ms"][0]["latency"]["e2e"]["p50_ms"])
    assert gates["p50_e2e_ms@linger-10ms > p50_e2e_ms@linger-1s"]["passed"] is False
    # Cross-run gates are judged once over the set, not inside each run.
    assert all(r["gates"] == [] for r in doc["runs"])
    runs = {r["label"]: r for r in doc["runs"]}
    assert set(runs) == {"linger-1s", "linger-10ms"}
    for r in runs.values():
        assert_report_sane(r, rate=40, duration_s=5.0)
        assert r["scenario"]["partitions"] == 32
    slow = runs["linger-1s"]["latency"]["e2e"]["p50_ms"]
    fast = runs["linger-10ms"]["latency"]["e2e"]["p50_ms"]
    assert runs["linger-1s"]["latency"]["e2e"]["mean_ms"] > 300, runs["linger-1s"]["latency"]["e2e"]
    assert slow > 3 * fast, (slow, fast)


def test_packed_txmeta_records(tmp_path):
    proc, doc = run_bench(tmp_path, "--preset", "packed", "--duration", "2s", "--warmup", "1s")
    assert proc.returncode == 0, explain(proc)
    for r in doc["runs"]:
        sc = r["scenario"]
        assert sc["payload"] == "txmeta"
        assert sc["message_bytes"] == 40 + 8 + sc["entries_per_record"] * 301
        assert_report_sane(r, rate=sc["rate_msg_s"], duration_s=2.0)
        # The consumers parsed every record: each holds its entry count, each entry's key hash
        # lies in the hash range of the partition it was read from, nothing failed to parse.
        tx = r["txmeta"]
        assert tx["bad_records"] == 0 and tx["misrouted_entries"] == 0, tx
        assert tx["entries_received"] == r["audit"]["received"] * sc["entries_per_record"], tx
        assert tx["ns_per_entry"] > 0 and tx["window_ns_per_entry"] > 0
        entries = r["throughput"]["received_entries_s"]
        assert entries == pytest.approx(r["throughput"]["received_msg_s"] * sc["entries_per_record"])
    assert [r["scenario"]["entries_per_record"] for r in doc["runs"]] == [100, 1000]


def test_ab_targets_alternate_and_compare(tmp_path, broker):
    proc, doc = run_bench(tmp_path, "--target", "embedded", "--target", broker.bootstrap, "--rate", "1000",
                          "--producers", "1", "--consumers", "1", "--duration", "1s", "--warmup", "0s", settle=True)
    assert proc.returncode == 0, explain(proc)
    assert doc["targets"] == ["embedded", broker.bootstrap]
    # A B B A, each on a fresh topic.
    assert [k["target"] for k in doc["order"]] == ["embedded", broker.bootstrap, broker.bootstrap, "embedded"]
    assert [r["target"]["spec"] for r in doc["runs"]] == [k["target"] for k in doc["order"]]
    assert len({r["topic"] for r in doc["runs"]}) == 4
    for r in doc["runs"]:
        assert_report_sane(r, rate=1000, duration_s=1.0)
        # Each run of a comparison starts after the earlier runs' dirty pages are written back
        # and the disks went idle (or the bounded wait gave up, and the report says so).
        s = r["settle"]
        assert s is not None and s["sync_ms"] >= 0 and s["idle_ms"] >= 0
        assert s["idle_ms"] <= 30_000 + 1_000 and isinstance(s["idle"], bool)
    assert proc.stdout.count("settle: sync ") == 4
    rows = {row["target"]: row for row in doc["rows"]}
    assert rows["embedded"]["runs"] == 2 and rows[broker.bootstrap]["runs"] == 2
    (ratio,) = doc["ratios"]
    assert ratio["baseline_target"] == "embedded" and ratio["target"] == broker.bootstrap
    got = ratio["ratios"]["p99_ack_ms"]
    want = rows[broker.bootstrap]["metrics"]["p99_ack_ms"]["mean"] / rows["embedded"]["metrics"]["p99_ack_ms"]["mean"]
    assert abs(got - want) < 1e-9
    assert "ratio to embedded" in proc.stdout


def test_bursty_schedule_sends_the_square_wave(tmp_path):
    # Base 1000 msg/s with 1 s bursts of 4000 msg/s every 2 s, for 4 s: 2 x (4000 + 1000).
    proc, r = run_bench(tmp_path, "--rate", "1000", "--burst-rate", "4000", "--burst-duration", "1s",
                        "--burst-period", "2s", "--producers", "2", "--consumers", "2",
                        "--duration", "4s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=None, duration_s=4.0)
    assert abs(r["audit"]["produced"] - 10_000) <= 8, r["audit"]
    rates = [i["produced_msg_s"] for i in r["intervals"] if i["phase"] == "measure"]
    assert max(rates) > 2.5 * min(rates), rates


def test_slow_consumer_backlog_then_recovery(tmp_path):
    # 4 consumers at 4 ms per message (capacity 1000 msg/s) under 2000 msg/s for 2.5 s, then
    # the delay drops to 0 and the backlog drains within milliseconds. The switch falls between
    # two 1-second lag samples, so the one at 2 s sees the backlog (about 2000 messages).
    proc, r = run_bench(tmp_path, "--rate", "2000", "--producers", "2", "--consumers", "4", "--partitions", "4",
                        "--consumer-delay", "4ms", "--phase-after", "2500ms", "--duration", "5s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=2000, duration_s=5.0)
    cm = r["consumer_model"]
    assert cm["consumers"] == 4 and abs(cm["capacity_msg_s"] - 1000) < 1
    assert any("capacity" in w for w in r["warnings"])
    assert r["lag"]["peak_total"] >= 1000
    assert r["lag"]["final_total"] == 0
    assert r["audit"]["lost"] == 0
    assert r["latency"]["e2e"]["p99_ms"] > 500


def test_backpressure_pauses_producers(tmp_path):
    proc, r = run_bench(tmp_path, "--rate", "3000", "--producers", "2", "--consumers", "2", "--partitions", "2",
                        "--consumer-delay", "2ms", "--bp-max-lag", "500", "--bp-resume-lag", "100",
                        "--bp-poll", "50ms", "--duration", "4s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    # Pauses shift the schedule, so the count is below rate x duration: no exact-count check.
    assert_report_sane(r, rate=None, duration_s=4.0)
    bp = r["backpressure"]
    assert bp["events"] >= 1 and bp["paused_s"] > 0.5
    assert r["audit"]["produced"] < 3000 * 4
    assert any("backpressure paused" in w for w in r["warnings"])
    # The controller bounds the lag near its threshold (plus what arrives within a poll).
    assert r["lag"]["peak_total"] < 500 + 3000


def test_backpressure_preset_compares_with_and_without(tmp_path):
    """SSP's headline comparison in one invocation: the same overloaded consumers without and
    with the credit controller; with it the lag peaks lower, at the price of paused producers."""
    proc, doc = run_bench(tmp_path, "--preset", "backpressure", "--rate", "4000", "--producers", "2",
                          "--consumers", "2", "--partitions", "2", "--consumer-delay", "1ms",
                          "--consumer-jitter", "0", "--duration", "5s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    runs = {r["label"]: r for r in doc["runs"]}
    assert list(runs) == ["bp-off", "bp-loose", "bp-tight"]
    for r in runs.values():
        assert_report_sane(r, rate=None, duration_s=5.0)
    off, tight = runs["bp-off"], runs["bp-tight"]
    assert off["backpressure"] is None
    assert tight["backpressure"]["events"] >= 1 and tight["backpressure"]["paused_s"] > 0
    # Consumers take ~2000 msg/s of the 4000 offered: without backpressure the lag keeps growing.
    assert off["lag"]["peak_total"] > tight["lag"]["peak_total"], (off["lag"], tight["lag"])
    assert tight["audit"]["produced"] < off["audit"]["produced"]


def test_repeats_give_min_mean_max(tmp_path):
    proc, doc = run_bench(tmp_path, "--repeats", "2", "--rate", "1000", "--producers", "1", "--consumers", "1",
                          "--duration", "1s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    assert doc["schema"] == "sluice-bench-set/1" and len(doc["runs"]) == 2
    (row,) = doc["rows"]
    assert row["runs"] == 2
    values = [r["latency"]["ack"]["p99_ms"] for r in doc["runs"]]
    st = row["metrics"]["p99_ack_ms"]
    assert st["min"] == min(values) and st["max"] == max(values)
    assert st["mean"] == pytest.approx(sum(values) / 2)


def test_violated_gate_exits_nonzero(tmp_path):
    proc, r = run_bench(tmp_path, "--rate", "1000", "--producers", "2", "--consumers", "1",
                        "--duration", "2s", "--warmup", "0s",
                        "--gate", "p99_ack_ms<=0.001", "--gate", "lost==0")
    assert proc.returncode == 3, explain(proc)
    gates = {g["expr"]: g for g in r["gates"]}
    assert gates["p99_ack_ms<=0.001"]["passed"] is False
    assert gates["p99_ack_ms<=0.001"]["value"] == r["latency"]["ack"]["p99_ms"]
    assert gates["lost==0"]["passed"] is True
    assert "FAIL" in proc.stdout


def test_passing_gates_exit_zero(tmp_path):
    proc, r = run_bench(tmp_path, "--rate", "1000", "--producers", "1", "--consumers", "1",
                        "--duration", "2s", "--warmup", "0s",
                        "--gate", "lost==0", "--gate", "delivery_pct>=100", "--gate", "p99_ack_ms<=60000")
    assert proc.returncode == 0, explain(proc)
    assert all(g["passed"] for g in r["gates"])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_bootstrap_fails_within_seconds(tmp_path):
    t0 = time.monotonic()
    proc, r = run_bench(tmp_path, "--bootstrap", f"127.0.0.1:{closed_port()}", timeout=30)
    assert proc.returncode == 1, explain(proc)
    assert time.monotonic() - t0 < 10
    assert "cannot reach" in proc.stderr
    assert r is None


@pytest.mark.parametrize("args,needle", [
    (["--preset", "no-such-preset"], "baseline"),
    (["--gate", "p99_nonsense<=1"], "unknown metric"),
    (["--rate", "fast"], "not a rate"),
    (["--message-size", "8"], "message size"),
    (["--duration", "0s"], "duration"),
    (["--burst-rate", "5000"], "burst"),
    (["--bp-max-lag", "10", "--bp-resume-lag", "20"], "resume"),
])
def test_bad_input_is_a_usage_error(tmp_path, args, needle):
    proc, r = run_bench(tmp_path, *args, timeout=30)
    assert proc.returncode == 2, explain(proc)
    assert needle in proc.stderr
    assert r is None


def test_list_presets(tmp_path):
    proc = subprocess.run([str(sluice_bench_bin()), "--list-presets"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert "baseline" in names and "quick" in names and len(names) == len(set(names))


def test_ctrl_c_writes_partial_report_and_stops_broker(tmp_path):
    out = tmp_path / "partial.json"
    proc = subprocess.Popen([str(sluice_bench_bin()), "--quiet", "--json", str(out), "--rate", "1000",
                             "--producers", "2", "--consumers", "1", "--duration", "60s", "--warmup", "1s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        time.sleep(5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, f"{proc.returncode}\n{stdout}\n{stderr}"
    r = json.loads(out.read_text())
    assert r["window"]["interrupted"] is True
    assert 0 < r["window"]["measure_s"] < 30
    a = r["audit"]
    assert a["produced"] > 0 and a["produced"] == a["received"] + a["lost"]
    pid = r["broker_process"]["pid"]
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()
