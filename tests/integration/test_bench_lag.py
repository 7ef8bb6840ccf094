"""`sluice-bench` lag views and multi-topic runs: the real binary against its embedded broker or
a separately started `sluice serve`, checking the report's lag series against each other (the
broker view reads committed offsets, so it can only trail the consumer position) and the
multi-topic audit, rather than particular numbers.
"""

from __future__ import annotations

from pathlib import Path

from test_bench import assert_report_sane, explain, run_bench


def lag_series(r: dict, key: str) -> list:
    return [i[key] for i in r["intervals"]]


def test_broker_view_trails_client_view_and_time_lag_grows_with_a_slow_consumer(tmp_path: Path):
    # 2 consumers at 2 ms per message (capacity 1000 msg/s) under 2000 msg/s: a backlog builds
    # and drains after load. Commits every 500 ms.
    csv_path = tmp_path / "lag.csv"
    html = tmp_path / "lag.html"
    proc, r = run_bench(tmp_path, "--rate", "2000", "--producers", "2", "--consumers", "2", "--partitions", "4",
                        "--consumer-delay", "2ms", "--commit-interval-ms", "500", "--duration", "2s",
                        "--warmup", "0s", "--csv", str(csv_path), "--html", str(html))
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=2000, duration_s=2.0)
    assert r["scenario"]["commit_interval_ms"] == 500 and r["scenario"]["topics"] == 1
    iv = r["intervals"]
    client, broker, age = lag_series(r, "lag_total"), lag_series(r, "broker_lag_total"), lag_series(r, "time_lag_ms")
    pairs = [(c, b) for c, b in zip(client, broker) if c is not None and b is not None]
    assert len(pairs) >= 3, iv
    # Committed offsets are read before positions, so every sample has broker >= client ...
    assert all(b >= c for c, b in pairs), pairs
    # ... and while the load runs the commit interval makes the broker view strictly behind.
    load = [(c, b) for (c, b), i in zip(zip(client, broker), iv) if i["phase"] == "measure" and b is not None]
    assert load and sum(b for _, b in load) > sum(c for c, _ in load), load
    # After the drain and the final synchronous commit nothing is left in either view.
    lag = r["lag"]
    assert lag["final_total"] == 0 and lag["broker_final_total"] == 0, lag
    # Sluice took the standalone commits (generation -1) and answered the offset fetches.
    assert not [e for e in r["errors"] if "commit" in e.lower() or "offset" in e.lower()], r["errors"]
    assert not [w for w in r["warnings"] if "commit" in w], r["warnings"]
    assert lag["broker_view"] == 0 and lag["broker_samples"] == len([b for b in broker if b is not None])
    assert lag["broker_peak_total"] == max(b for b in broker if b is not None)
    assert lag["broker_peak_total"] >= lag["peak_total"] > 0
    # Time lag: present every sample, never negative, large while backlogged, 0 once caught up.
    assert all(a is not None and a >= 0 for a in age), age
    assert lag["time_lag_peak_ms"] == max(age) and lag["time_lag_final_ms"] == 0
    # The backlog is over 1000 messages at 1000 msg/s of capacity: its oldest message waits
    # for well over 200 ms; and the age cannot exceed how long the run has been going.
    assert lag["time_lag_peak_ms"] > 200, age
    # (The age is taken when the positions are read, after the sample's queries, which end
    # before the next sample starts.)
    assert all(a <= nxt["elapsed_s"] * 1000 for a, nxt in zip(age, iv[1:])), (age, iv)
    # The oldest unconsumed message is consumed later, so its end-to-end latency is at least
    # the age it had at the sample: the time lag is never above the worst e2e latency (plus
    # the 1 ms checkpoint spacing and histogram rounding).
    assert lag["time_lag_peak_ms"] <= r["latency"]["e2e"]["max_ms"] * 1.01 + 2
    # The CSV and HTML carry the new views.
    import csv
    rows = list(csv.DictReader(csv_path.open()))
    assert [int(x["broker_lag_total"]) for x in rows if x["broker_lag_total"]] == [b for b in broker if b is not None]
    assert max(float(x["time_lag_ms"]) for x in rows) == max(age)
    page = html.read_text()
    assert "broker view total" in page and "Time lag" in page
    assert "lag (broker view)" in proc.stdout and "time lag" in proc.stdout


def test_three_topics_all_receive_and_are_deleted(tmp_path: Path, broker):
    proc, r = run_bench(tmp_path, "--bootstrap", broker.bootstrap, "--topics", "3", "--partitions", "2",
                        "--partitioning", "round-robin", "--rate", "1500", "--producers", "2",
                        "--consumers", "2", "--duration", "2s", "--warmup", "0s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=1500, duration_s=2.0)
    a = r["audit"]
    assert a["lost"] == 0 and a["duplicates"] == 0 and a["reordered"] == 0, a
    assert a["produced"] == a["received"] + a["lost"]
    topics = r["topics"]
    assert len(topics) == 3 and len(set(topics)) == 3 and r["topic"] == topics[0]
    per = r["per_topic"]
    assert [t["topic"] for t in per] == topics
    # Producers rotate over the topics: each gets a third of the messages, and all arrive.
    assert sum(t["received"] for t in per) == a["received"]
    for t in per:
        assert abs(t["received"] - a["received"] / 3) <= 2, per
        assert t["end_offset_sum"] == t["received"], per
    # Lag covers every topic-partition (3 x 2), and both views end at 0.
    assert max(len(i["lag_per_partition"]) for i in r["intervals"]) == 6
    assert r["lag"]["final_total"] == 0 and r["lag"]["broker_final_total"] == 0, r["lag"]
    # Every topic was removed again from the external broker.
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert not set(topics) & set(md.topics), sorted(md.topics)


def test_too_many_topic_partitions_is_a_usage_error(tmp_path: Path):
    proc, r = run_bench(tmp_path, "--topics", "100", "--partitions", "100", timeout=30)
    assert proc.returncode == 2, explain(proc)
    assert "topic-partitions" in proc.stderr and r is None
