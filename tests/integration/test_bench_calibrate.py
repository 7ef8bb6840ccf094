"""`sluice-bench --calibrate`: the client-ceiling run against the null target (`sluice serve
--storage null`, the broker's own front end over a log that keeps nothing), and the verdict it
puts in every report (client- or broker-bound). Numbers vary with the machine, so the tests check
that a ceiling was measured and that the verdict follows from the numbers reported.
"""

from __future__ import annotations

from test_bench import assert_report_sane, explain, run_bench

SHORT = ["--duration", "2s", "--warmup", "1s"]


def check_verdict(r: dict) -> None:
    c, b = r["client_ceiling"], r["bottleneck"]
    # The null log keeps nothing: the ceiling is the producers' own, consumers receive nothing.
    assert c["produce_msg_s"] > 0 and c["consume_msg_s"] == 0, c
    assert c["measure_s"] > 0
    share = r["throughput"]["acked_msg_s"] / c["produce_msg_s"]
    assert abs(b["share_of_ceiling"] - share) < 1e-6 * max(1.0, share), (b, share)
    if share >= b["share_limit"]:
        assert b["verdict"] == "client"
        assert any(w.startswith("client-bound") for w in r["warnings"]), r["warnings"]
    else:
        assert b["verdict"] in ("broker", "none")
        assert not any(w.startswith("client-bound") for w in r["warnings"])


def test_unthrottled_run_is_judged_against_the_client_ceiling(tmp_path):
    proc, r = run_bench(tmp_path, "--preset", "max-rate", "--calibrate", "--producers", "2",
                        "--consumers", "2", *SHORT)
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, None, 2.0)
    check_verdict(r)
    assert r["bottleneck"]["verdict"] in ("client", "broker")
    assert "client ceiling" in proc.stderr and "client ceiling" in proc.stdout


def test_paced_run_well_below_the_ceiling_is_not_bottlenecked(tmp_path):
    proc, r = run_bench(tmp_path, "--preset", "quick", "--calibrate", "--rate", "500", *SHORT)
    assert proc.returncode == 0, explain(proc)
    assert_report_sane(r, 500, 2.0)
    check_verdict(r)
    # 500 msg/s is far below any client ceiling on any machine this runs on.
    assert r["bottleneck"]["verdict"] == "none", r["bottleneck"]


def test_a_whole_run_against_the_null_target(tmp_path):
    proc, r = run_bench(tmp_path, "--preset", "quick", "--target", "null", *SHORT)
    # Consumers receiving nothing from the null target is not loss: exit 0.
    assert proc.returncode == 0, explain(proc)
    t = r["target"]
    assert t["kind"] == "null"
    # A real `sluice serve --storage null` child, sampled like the embedded broker.
    assert t["broker_pid"] and t["broker_pids"] == [t["broker_pid"]], t
    assert r["throughput"]["acked_msg_s"] > 0.9 * 5000, r["throughput"]
    assert r["throughput"]["received_msg_s"] == 0, r["throughput"]
    assert r["counts"]["ack_errors"] == 0, r["counts"]
    # No drain wait for messages that can never arrive, and no loss line.
    assert r["window"]["drain_s"] < 1.0, r["window"]
    assert r["loss"] is None, r["loss"]
    assert any(w.startswith("null target") for w in r["warnings"]), r["warnings"]
    assert r["client_ceiling"] is None and r["bottleneck"] is None
