"""`sluice-bench --transactional-id` (issue 12, transactions slice 6) end to end: the real bench
binary (librdkafka transactional producers, read_committed consumers) against a real
`sluice serve`. A run finishes, reports its committed transactions and the EndTxn latency
percentiles, and every committed record is delivered; with `--txn-abort-ratio` the aborted
records are in the log (a read_uncommitted reader finds them) but never reach the bench's
read_committed consumers; a producer fenced by another instance of its transactional id is
reported as an error and the run still ends.

Before slice 6 the bench had no transactional mode: each test failed on the unknown flag.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

import txnwire as tw
from conftest import sluice_bench_bin

RUN_TIMEOUT_S = 150
FLAG_TXN_ABORTED = 2
PERCENTILES = ["min_ms", "p50_ms", "p90_ms", "p99_ms", "p99_9_ms", "max_ms"]


def run_bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None, float]:
    out = tmp_path / "report.json"
    # No settling between a comparison's runs (test_bench.run_bench says why).
    cmd = [str(sluice_bench_bin()), "--quiet", "--json", str(out), "--no-settle", *args]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report, time.monotonic() - started


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def assert_percentiles(summary: dict, what: str) -> None:
    values = [summary[k] for k in PERCENTILES]
    assert all(v is not None and v > 0 for v in values), (what, summary)
    assert values == sorted(values), (what, values)


def test_transactional_run_commits_and_delivers_everything(tmp_path, broker):
    """Goal: the transactional mode runs 100-message transactions from two producers with
    their own ids (ID-0, ID-1), reports how many it committed and the EndTxn latency
    (p50/p99/p99.9/max) in JSON, text and HTML, and read_committed consumers receive every
    record. Method: a fixed rate, so the number of transactions is known up to the edges;
    ListTransactions on the broker shows both ids CompleteCommit."""
    prefix = f"bt-{uuid.uuid4().hex[:6]}"
    html = tmp_path / "r.html"
    proc, r, _ = run_bench(tmp_path, "--bootstrap", broker.bootstrap, "--transactional-id", prefix,
                           "--txn-messages", "100", "--rate", "2000", "--producers", "2",
                           "--partitions", "4", "--consumers", "2", "--duration", "4s",
                           "--warmup", "1s", "--html", str(html))
    assert proc.returncode == 0, explain(proc)
    assert r is not None
    t = r["transactions"]
    assert t["transactional_id_prefix"] == prefix and t["messages_per_txn"] == 100
    produced = r["audit"]["produced"]
    # Every transaction ending after warmup: ~8000 measured records / 100, give or take the
    # transaction open at each window edge per producer.
    assert produced // 100 - 2 <= t["committed"] <= produced // 100 + 4, (t, produced)
    assert t["aborted"] == 0 and t["commit_failed"] == 0 and t["errors"] == 0, t
    commit = r["latency"]["txn_commit"]
    assert commit["count"] == t["committed"]
    assert_percentiles(commit, "txn_commit")
    assert r["latency"]["txn_abort"]["count"] == 0
    assert r["throughput"]["delivery_pct"] == 100.0
    assert r["audit"]["lost"] == 0 and r["audit"]["duplicates"] == 0
    assert r["scenario"]["acks"] == "all" and r["scenario"]["idempotence"] is True
    # The text and HTML reports show the commit latency beside the ack latency.
    assert "txn commit (EndTxn)" in proc.stdout and "transactions" in proc.stdout, proc.stdout
    assert "txn commit (EndTxn)" in html.read_text()
    # The broker saw real transactions under the per-producer ids.
    _, _, listed = tw.list_transactions(broker.bootstrap, 0)
    ours = {k: v[1] for k, v in listed.items() if k.startswith(prefix)}
    assert ours == {f"{prefix}-0": "CompleteCommit", f"{prefix}-1": "CompleteCommit"}, listed


def aborted_flags_in_topic(bootstrap: str, topic: str, partitions: int, isolation: str) -> int:
    """Records of the topic whose bench header carries FLAG_TXN_ABORTED, read from the
    beginning with the given isolation level."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chk-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    flagged, eof, deadline = 0, set(), time.monotonic() + 60
    while len(eof) < partitions and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
            continue
        v = m.value() or b""
        if len(v) >= 16 and v[:4] == b"SLB1":
            (flags,) = struct.unpack_from("<I", v, 12)
            flagged += bool(flags & FLAG_TXN_ABORTED)
    c.close()
    assert len(eof) == partitions, "did not reach the end of every partition"
    return flagged


def test_aborted_transactions_are_never_delivered(tmp_path, broker):
    """Goal: with `--txn-abort-ratio`, a share of the transactions is aborted; their records
    are acknowledged and in the log, but the bench's read_committed consumers never receive
    one, and delivery of the committed ones is 100 %. Method: ratio 0.4, 50-message
    transactions; the topic is kept and read afterwards read_uncommitted (the aborted records
    are there) and read_committed (none)."""
    prefix = f"ba-{uuid.uuid4().hex[:6]}"
    proc, r, _ = run_bench(tmp_path, "--bootstrap", broker.bootstrap, "--transactional-id", prefix,
                           "--txn-messages", "50", "--txn-abort-ratio", "0.4", "--rate", "2000",
                           "--producers", "2", "--partitions", "3", "--duration", "3s",
                           "--warmup", "0s", "--keep-topic")
    assert proc.returncode == 0, explain(proc)
    t = r["transactions"]
    assert t["committed"] > 0 and t["aborted"] > 0, t
    assert t["aborted_records"] >= 50 * (t["aborted"] - 2), t
    assert t["aborted_records_delivered"] == 0, t
    assert r["latency"]["txn_abort"]["count"] == t["aborted"]
    a = r["audit"]
    # The audit expects exactly the records of committed transactions.
    assert a["produced"] == r["counts"]["produced"] - t["aborted_records"], (a, t)
    assert a["lost"] == 0 and a["received"] == a["produced"], a
    assert r["throughput"]["delivery_pct"] == 100.0
    topic = r["topic"]
    assert aborted_flags_in_topic(broker.bootstrap, topic, 3, "read_uncommitted") >= t["aborted_records"]
    assert aborted_flags_in_topic(broker.bootstrap, topic, 3, "read_committed") == 0


def test_fenced_producer_is_reported_and_the_run_ends(tmp_path, broker):
    """Goal: a bench producer fenced by another instance of its transactional id (a second
    InitProducerId for `ID-0` in mid-run) does not hang the run: the fatal error is counted
    in `transactions.errors` and listed among the client errors, the other producer goes on
    committing, and the report is written. Method: a `--fault-cmd` runs a confluent-kafka
    producer that calls init_transactions for ID-0 one second into the measured window."""
    prefix = f"bf-{uuid.uuid4().hex[:6]}"
    fence = (f"{sys.executable} -c \"import os; from confluent_kafka import Producer; "
             f"p = Producer({{'bootstrap.servers': os.environ['SLUICE_BENCH_BOOTSTRAP'], "
             f"'transactional.id': '{prefix}-0'}}); p.init_transactions(30)\"")
    proc, r, took = run_bench(tmp_path, "--bootstrap", broker.bootstrap, "--transactional-id", prefix,
                              "--txn-messages", "200", "--rate", "1000", "--producers", "2",
                              "--partitions", "2", "--duration", "4s", "--warmup", "0s",
                              "--fault-cmd", f"1s:{fence}", "--allow-loss")
    assert r is not None, explain(proc)
    assert proc.returncode in (0, 3), explain(proc)
    assert took < RUN_TIMEOUT_S - 30
    t = r["transactions"]
    assert t["errors"] >= 1, t
    assert t["committed"] >= 5, t
    kinds = " ".join(k["example"] for k in r["error_kinds"]).lower()
    assert "fenc" in kinds, r["error_kinds"]
    assert r["faults"][0]["exit_code"] == 0, r["faults"]


def test_bad_transactional_settings_are_refused(tmp_path):
    """Goal: a transactional mode with nothing to end a transaction, or an abort ratio out of
    range, is bad usage (exit 2), before any broker is started."""
    for args in (["--txn-messages", "0"], ["--txn-abort-ratio", "1.5"]):
        proc, _, _ = run_bench(tmp_path, "--transactional-id", "x", *args)
        assert proc.returncode == 2, (args, explain(proc))
