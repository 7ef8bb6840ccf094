"""`sluice-bench` producer shaping end to end: message keys and hot-key skew, OMB's
max-sustainable rate search, OMB's backlog build-and-drain mode and teranode's stacked linger
(an application batcher in front of the client). Short runs of the real binary against its
embedded broker; assertions are about the shape of the results, not particular numbers.
"""

from __future__ import annotations

import pytest

from test_bench import assert_report_sane, explain, run_bench

SMALL = ["--producers", "2", "--consumers", "2", "--duration", "2s", "--warmup", "0s"]


def test_hot_key_puts_its_share_on_one_partition(tmp_path):
    proc, r = run_bench(tmp_path, "--keys", "hot", "--hot-key-pct", "80", "--rate", "2000",
                        "--partitions", "4", *SMALL)
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=2000, duration_s=2.0)
    assert r["scenario"]["keys"] == "hot" and r["scenario"]["hot_key_pct"] == 80
    b = r["partition_balance"]
    assert len(b["per_partition"]) == 4
    assert sum(b["per_partition"]) == r["counts"]["acked"]
    # The hot key hashes to one partition: it gets at least the hot share, the rest spreads.
    assert b["max_share_pct"] >= 80.0, b
    assert b["per_partition"][b["max_partition"]] == max(b["per_partition"])
    assert b["max_over_mean"] >= 3.2, b
    assert "largest" in proc.stdout


@pytest.mark.parametrize("keys", ["round-robin", "random"])
def test_keyed_messages_spread_over_every_partition(tmp_path, keys):
    proc, r = run_bench(tmp_path, "--keys", keys, "--rate", "2000", "--partitions", "6", *SMALL)
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=2000, duration_s=2.0)
    b = r["partition_balance"]
    assert b["partitions_used"] == 6, b
    assert sum(b["per_partition"]) == r["counts"]["acked"]
    # 4000 messages over 10000 keys hashed to 6 partitions: roughly even, nothing hot.
    assert b["max_over_mean"] < 1.5, b


def test_rate_search_converges_with_a_trajectory(tmp_path):
    proc, r = run_bench(tmp_path, "--rate", "search", "--search-start-rate", "2000", "--search-period", "500ms",
                        "--duration", "3s", "--warmup", "0s", "--producers", "2", "--consumers", "2")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=None, duration_s=3.0)
    assert r["scenario"]["rate_search"] is True
    # No fixed target: the trajectory is the target.
    assert r["throughput"]["target_msg_s"] is None
    rs = r["rate_search"]
    steps = rs["steps"]
    assert len(steps) >= 2, rs
    assert rs["ready_at_s"] is not None and rs["ready_at_s"] < 3.0
    assert steps[0]["target_msg_s"] == 2000
    for a, b in zip(steps, steps[1:]):
        # Each period runs at the rate the previous one chose, and periods are ordered.
        assert b["target_msg_s"] == pytest.approx(a["next_target_msg_s"])
        assert b["elapsed_s"] > a["elapsed_s"]
    factor = 1.0
    for s in steps:
        if s["verdict"] == "up":
            factor = min(factor * 2, 1.0)
            assert s["next_target_msg_s"] == pytest.approx(s["target_msg_s"] * (1 + factor))
        else:
            factor = max(factor / 2, 0.01)
            assert s["next_target_msg_s"] <= max(s["published_msg_s"], 10.0) + 1e-6
        assert s["ramp_factor"] == pytest.approx(factor)
    assert rs["sustainable_msg_s"] is not None and rs["sustainable_msg_s"] > 0
    assert rs["final_target_msg_s"] == pytest.approx(steps[-1]["next_target_msg_s"])
    # What the periods report as published was really produced (warmup is 0).
    published = sum(s["published_msg_s"] * rs["period_s"] for s in steps)
    assert published <= r["counts"]["produced"] * 1.05
    assert "rate search" in proc.stdout


def test_backlog_builds_then_drains(tmp_path):
    proc, r = run_bench(tmp_path, "--preset", "omb-backlog", "--backlog", "2MiB", "--duration", "3s")
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, rate=10_000, duration_s=3.0)
    assert r["scenario"]["backlog_bytes"] == 2 << 20
    b = r["backlog"]
    assert b["reached"] is True and b["built_bytes"] >= 2 << 20, b
    assert b["built_msgs"] * 1024 == b["built_bytes"]
    # About 0.2 s of the 10k msg/s feed of 1 KiB messages.
    assert 0 < b["build_s"] < 2.0, b
    assert b["drained"] is True and b["drain_s"] > 0, b
    assert b["drain_target_msgs"] == 1000  # OMB's floor: ratio 1.0 drains to max(1000, 0)
    # While draining, the consumers caught up faster than the producers fed.
    assert b["drain_msg_s"] > 10_000 and b["net_drain_msg_s"] > 0, b
    assert r["audit"]["lost"] == 0
    assert r["lag"]["final_total"] == 0
    assert "backlog" in proc.stdout


def test_stacked_linger_deadline_and_debounce(tmp_path):
    # teranode T2 on a 3 s feed (120 messages, one every 25 ms over 32 partitions), client
    # linger 1 s behind an application batcher of 1 s (stacked) or 10 ms (decoupled).
    proc, doc = run_bench(tmp_path, "--preset", "sparse-fanout-stacked", "--duration", "3s", "--warmup", "0s",
                          "--gate", "mean_e2e_intended_ms@stacked-deadline > 1.3 * mean_e2e_intended_ms@decoupled-deadline")
    assert proc.returncode == 0, explain(proc)
    runs = {r["label"]: r for r in doc["runs"]}
    assert set(runs) == {"stacked-deadline", "decoupled-deadline", "stacked-debounce", "decoupled-debounce"}
    for r in runs.values():
        assert_report_sane(r, rate=40, duration_s=3.0)
        assert r["scenario"]["linger_ms"] == 1000
        assert r["app_batcher"]["flushes"] >= 1
    lat = {k: r["latency"]["e2e_intended"] for k, r in runs.items()}
    wait = {k: r["latency"]["send_delay"]["p50_ms"] for k, r in runs.items()}
    # Debounce (teranode's batcher): stacking holds the whole feed, teranode's p50 gate holds
    # with a wide margin.
    assert lat["stacked-debounce"]["p50_ms"] > lat["decoupled-debounce"]["p50_ms"] + 300, lat
    # Deadline: stacking adds the application's wait (uniform 0..1 s) to every message. The
    # p50s sit near a mode boundary (a partition's client batch takes the next message 0.8 s
    # later, and an app flush every 1 s races the 1 s client linger), so the mean and the p99
    # carry the comparison.
    assert lat["stacked-deadline"]["mean_ms"] > lat["decoupled-deadline"]["mean_ms"] + 300, lat
    assert lat["stacked-deadline"]["p99_ms"] > lat["decoupled-deadline"]["p99_ms"] + 300, lat
    assert lat["stacked-deadline"]["p50_ms"] >= lat["decoupled-deadline"]["p50_ms"], lat
    for mode in ("deadline", "debounce"):
        # The decoupled batcher hands each message on after about 10 ms, mostly alone (a late
        # wakeup on a busy machine may catch two).
        assert wait[f"decoupled-{mode}"] < 100, wait
        assert runs[f"decoupled-{mode}"]["app_batcher"]["flushes"] >= 100
    # Deadline: a message waits until the oldest in its batch is 1 s old (uniform 0..1 s).
    assert 250 < wait["stacked-deadline"] < 1000, wait
    # Debounce: a message every 25 ms re-arms the 1 s timer, so nothing leaves before the feed
    # stops: one flush of everything, and the median message waits about half the feed + 1 s.
    deb = runs["stacked-debounce"]["app_batcher"]
    assert deb["flushes"] == 1 and deb["msgs_per_flush_avg"] == 120, deb
    assert wait["stacked-debounce"] > 1500, wait
    assert lat["stacked-debounce"]["p50_ms"] > lat["stacked-deadline"]["p50_ms"], lat
    # The e2e from send() starts after the application wait: it shows only the client's part.
    assert runs["stacked-debounce"]["latency"]["e2e"]["p50_ms"] < lat["stacked-debounce"]["p50_ms"] - 1000
    (gate,) = doc["gates"]
    assert gate["passed"] is True


@pytest.mark.parametrize("args,needle", [
    (["--keys", "hot", "--partitioning", "round-robin"], "partitioning client"),
    (["--rate", "search", "--burst-rate", "5000", "--burst-duration", "1s", "--burst-period", "2s"], "burst"),
    (["--rate", "search", "--backlog", "1MiB"], "backlog"),
    (["--rate", "search", "--search-period", "1ms"], "search-period"),
    (["--backlog", "lots"], "not a size"),
    (["--backlog-drain-ratio", "2"], "ratio"),
    (["--hot-key-pct", "101"], "hot-key-pct"),
    (["--app-batch-mode", "sometimes"], "app-batch-mode"),
])
def test_bad_shaping_input_is_a_usage_error(tmp_path, args, needle):
    proc, r = run_bench(tmp_path, *args, timeout=30)
    assert proc.returncode == 2, explain(proc)
    assert needle in proc.stderr
    assert r is None
