"""Durability across restarts: clean SIGTERM shutdowns and SIGKILL after acknowledged writes."""

from __future__ import annotations

import time

import pytest

from admin_facade import CkAdmin
from helpers import ConfluentFamily, Msg, create_topic


def _snapshot(c: ConfluentFamily, topic: str, partitions: int):
    out = {}
    for p in range(partitions):
        lo, hi = c.watermarks(topic, p)
        recs = c.consume(topic, p, lo, hi - lo) if hi > lo else []
        out[p] = (lo, hi, [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in recs])
    return out


def test_restart_preserves_everything(broker):
    """Goal: after a clean shutdown (SIGTERM, exit 0) and a restart on the same data dir,
    topics, partition counts, topic configs, deleted topics, log start offsets and every record
    (offset, key, value, headers, timestamp) are exactly as before, and appends continue at
    the next offset.
    Method: build that state with confluent-kafka (3-partition topic with config overrides,
    a second topic with DeleteRecords applied, a third topic deleted), snapshot it, restart,
    compare; append, restart a second time, compare again."""
    bs = broker.bootstrap
    a = CkAdmin(bs)
    c = ConfluentFamily(bs)
    overrides = {"retention.ms": "3600000", "max.message.bytes": "2000000", "segment.bytes": "2097152"}
    create_topic(bs, "keep", partitions=3, config=overrides)
    create_topic(bs, "trimmed")
    create_topic(bs, "doomed")
    ts0 = int(time.time() * 1000) - 10_000
    for p, n in {0: 25, 1: 3, 2: 0}.items():
        if n:
            msgs = [Msg(f"p{p}-{i}".encode() * 10, key=f"k{i}".encode(), headers=[("i", str(i).encode()), ("i", b"x")],
                        timestamp=ts0 + i) for i in range(n)]
            assert c.produce("keep", msgs, partition=p) == list(range(n))
    assert c.produce("trimmed", [Msg(f"t{i}".encode()) for i in range(6)]) == list(range(6))
    assert a.delete_records("trimmed", 0, 2) == (0, 2)
    assert c.produce("doomed", [Msg(b"bye")]) == [0]
    assert a.delete(["doomed"]) == {"doomed": 0}

    cfg_before = {k: v.value for k, v in a.describe_configs("keep").items()}
    snap_keep = _snapshot(c, "keep", 3)
    snap_trim = _snapshot(c, "trimmed", 1)
    assert snap_trim[0][0] == 2 and snap_keep[0][1] == 25

    broker.restart()
    bs = broker.bootstrap
    a, c = CkAdmin(bs), ConfluentFamily(bs)
    topics = a.list()
    assert topics.get("keep") == 3 and topics.get("trimmed") == 1, topics
    assert "doomed" not in topics, "a deleted topic came back after restart"
    cfg_after = {k: v.value for k, v in a.describe_configs("keep").items()}
    for k, v in overrides.items():
        assert cfg_after.get(k) == v, f"{k} lost on restart: {cfg_after.get(k)}"
    assert cfg_after == cfg_before
    assert _snapshot(c, "keep", 3) == snap_keep
    assert _snapshot(c, "trimmed", 1) == snap_trim

    assert c.produce("keep", [Msg(b"post-restart")], partition=0) == [25]
    assert c.produce("keep", [Msg(b"first-in-p2")], partition=2) == [0]
    snap_keep2 = _snapshot(c, "keep", 3)
    broker.restart()
    assert _snapshot(ConfluentFamily(broker.bootstrap), "keep", 3) == snap_keep2


@pytest.mark.parametrize("fsync", ["always", "never"])
def test_clean_shutdown_flushes(sluice_factory, fsync):
    """Goal: with either fsync policy, everything acknowledged before a SIGTERM is there after
    the restart (a clean shutdown flushes).
    Method: start with --fsync <policy>, produce 200 records in several batches, SIGTERM
    (exit 0), restart with the same flags, read all 200 back."""
    b = sluice_factory(["--fsync", fsync])
    create_topic(b.bootstrap, "flush")
    c = ConfluentFamily(b.bootstrap)
    vals = [f"r{i:04d}".encode() for i in range(200)]
    offs = []
    for i in range(0, 200, 40):
        offs += c.produce("flush", [Msg(v) for v in vals[i:i + 40]])
    assert offs == list(range(200))
    b.restart()
    c = ConfluentFamily(b.bootstrap)
    assert c.watermarks("flush") == (0, 200)
    recs = c.consume("flush", 0, 0, 200)
    assert [r.value for r in recs] == vals


def test_kill9_after_acks_keeps_acked_records(broker):
    """Goal: with the default fsync=always, records acknowledged with acks=all survive a
    SIGKILL right after the acknowledgement.
    Method: produce 50 records (waiting for every delivery report), SIGKILL immediately,
    restart on the same data dir, and read the 50 records back at the same offsets; the
    topic and its config survive too."""
    create_topic(broker.bootstrap, "k9", config={"retention.ms": "7200000"})
    c = ConfluentFamily(broker.bootstrap)
    vals = [f"k9-{i}".encode() for i in range(50)]
    assert c.produce("k9", [Msg(v, key=b"k") for v in vals]) == list(range(50))
    broker.kill9()
    broker.start()
    c = ConfluentFamily(broker.bootstrap)
    assert c.watermarks("k9") == (0, 50)
    recs = c.consume("k9", 0, 0, 50)
    assert [(r.offset, r.value) for r in recs] == list(enumerate(vals))
    assert CkAdmin(broker.bootstrap).describe_configs("k9")["retention.ms"].value == "7200000"
    assert c.produce("k9", [Msg(b"next")]) == [50]


def test_sigint_is_a_clean_shutdown(broker):
    """Goal: SIGINT shuts down as cleanly as SIGTERM (exit 0, data kept).
    Method: produce 10 records, SIGINT, expect exit code 0, start again and read them."""
    import signal
    create_topic(broker.bootstrap, "int")
    c = ConfluentFamily(broker.bootstrap)
    assert c.produce("int", [Msg(f"i{i}".encode()) for i in range(10)]) == list(range(10))
    broker.stop(sig=signal.SIGINT)
    broker.start()
    recs = ConfluentFamily(broker.bootstrap).consume("int", 0, 0, 10)
    assert [r.value for r in recs] == [f"i{i}".encode() for i in range(10)]


def test_shutdown_with_parked_fetch_and_open_clients(broker):
    """Goal: a shutdown is not held hostage by clients: with a Fetch parked for 30 s and idle
    client connections open, SIGTERM still ends the process promptly with exit code 0.
    Method: park a raw Fetch v4 (max_wait 30000 ms) on an empty partition, keep a confluent
    producer connected, SIGTERM and require exit 0 within 5 s."""
    import kwire
    create_topic(broker.bootstrap, "parked")
    p = ConfluentFamily(broker.bootstrap)
    assert p.produce("parked", [Msg(b"x")]) == [0]
    s = kwire.connect(broker.bootstrap)
    try:
        s.sendall(kwire.fetch_request_v4(1, "parked", 0, 1, max_wait_ms=30000))
        time.sleep(0.5)
        t0 = time.monotonic()
        broker.stop(timeout=5)
        assert time.monotonic() - t0 < 5
    finally:
        s.close()


def test_sigterm_right_after_listening_line(broker):
    """Goal: once the broker has announced `sluice listening on ...`, it is ready for
    everything, including a SIGTERM: shutting down right away still exits with code 0 (the
    signal handlers must be in place before the announcement).
    Method: 20 times in a row, start on the same data dir and send SIGTERM the moment the
    listening line is read; every exit code must be 0."""
    broker.stop()
    codes = []
    for _ in range(50):
        broker.start()
        broker._expected_exit = True
        broker.proc.send_signal(__import__("signal").SIGTERM)
        codes.append(broker.proc.wait(timeout=10))
    assert codes == [0] * 50, f"exit codes after an immediate SIGTERM: {codes}"
