"""Segment rolling and retention (time and size) observed from outside: watermarks through
clients, segment files on disk (one `.extents` file per segment; a segment's size is its
logical size, the end of its last extent: its bytes live in the journal)."""

from __future__ import annotations

import time

import pytest

import storage_layout as layout
from admin_facade import CkAdmin
from helpers import ConfluentFamily, Msg, create_topic, wait_until


@pytest.fixture
def broker(sluice_factory):
    """conftest's `broker` (retention checked every 200 ms) that also lets topics set
    internal.segment.bytes, Kafka's test-only config for segments below segment.bytes'
    1 MiB floor, so a few KB of records roll several segments."""
    return sluice_factory(["--retention-check-interval-ms", "200",
                           "--override", "sluice.internal.segment.bytes.enable=true"])


def _segment_files(broker, topic):
    """{segment base offset: logical size} of partition 0, read from the `.extents` files
    (the broker may be running: a file caught mid-write or just deleted is read again)."""
    d = broker.partition_dir(topic, 0)
    for _ in range(20):
        try:
            assert not list(d.glob("*.log")), "a segment .log file exists"
            return {b: layout.segment_size(d, b) for b in layout.segment_bases(d)} if d.exists() else {}
        except (FileNotFoundError, AssertionError) as e:
            if "segment .log" in str(e):
                raise
            time.sleep(0.05)
    raise AssertionError(f"cannot read the segments of {d}")


def _produce_in_batches(c, topic, batches, per_batch, size=120):
    offsets = []
    for b in range(batches):
        offsets += c.produce(topic, [Msg(f"{b:03d}-{i:03d}-".encode() + b"r" * size) for i in range(per_batch)],
                             **{"linger.ms": 0})
    return offsets


def test_segments_roll_at_segment_bytes(broker, topic_name):
    """Goal: the segment size makes the log roll into several segment files.
    Method: topic with internal.segment.bytes=1024; produce 30 batches of ~2 records of ~140 bytes;
    wait for the partition directory to hold several segments (`.extents` files, written by
    the background checkpoint, so allow a few seconds), none larger than segment.bytes; all
    records read back."""
    create_topic(broker.bootstrap, topic_name, config={"internal.segment.bytes": 1024})
    c = ConfluentFamily(broker.bootstrap)
    offsets = _produce_in_batches(c, topic_name, 30, 2)
    assert offsets == list(range(60))
    files = wait_until(lambda: (lambda f: f if len(f) >= 3 else None)(_segment_files(broker, topic_name)), 10,
                       what="at least 3 segment files")
    assert all(sz <= 1024 for sz in files.values()), f"a segment grew past segment.bytes: {files}"
    recs = c.consume(topic_name, 0, 0, 60)
    assert [r.offset for r in recs] == list(range(60))


def test_time_retention_deletes_old_segments(broker, topic_name):
    """Goal: time retention deletes whole old segments, moving the low watermark up, and
    removes their files; what remains is intact and readable.
    Method: topic with internal.segment.bytes=1024 and the default (7 day) retention; produce 40
    batches so several segments exist and nothing expires; note the segments; lower
    retention.ms to 1000 through IncrementalAlterConfigs (broker checks every 200 ms); wait
    until the low watermark rises; check that the first segment files are gone and the
    remaining records read back from the new low watermark to the end."""
    create_topic(broker.bootstrap, topic_name, config={"internal.segment.bytes": 1024})
    c = ConfluentFamily(broker.bootstrap)
    assert _produce_in_batches(c, topic_name, 40, 2) == list(range(80))
    before = wait_until(lambda: (lambda f: f if len(f) >= 3 else None)(_segment_files(broker, topic_name)), 10,
                        what="at least 3 segment files")
    time.sleep(0.6)
    assert c.watermarks(topic_name) == (0, 80), "records expired under the default 7-day retention"

    time.sleep(1.2)  # make every record older than the new retention
    assert CkAdmin(broker.bootstrap).incremental_alter(topic_name, set_={"retention.ms": 1000}) == 0
    low, high = wait_until(lambda: (lambda w: w if w[0] > 0 else None)(c.watermarks(topic_name)), 15,
                           what="low watermark above 0 after retention")
    assert high == 80
    after = _segment_files(broker, topic_name)
    gone = set(before) - set(after)
    assert gone, f"no segment file removed: before {sorted(before)} after {sorted(after)}"
    assert min(before) in gone, "the oldest segment survived retention"
    recs = c.consume(topic_name, 0, low, 80 - low)
    assert [r.offset for r in recs] == list(range(low, 80))


def test_size_retention(broker, topic_name):
    """Goal: retention.bytes deletes oldest segments while the partition is larger than the
    limit, never the active one.
    Method: topic with internal.segment.bytes=1024 and retention.bytes=3072; produce 50 batches (~14 KB);
    wait until the low watermark rises and the segments' logical sizes add up to at most
    retention.bytes + one segment; the tail is still readable."""
    create_topic(broker.bootstrap, topic_name, config={"internal.segment.bytes": 1024, "retention.bytes": 3072})
    c = ConfluentFamily(broker.bootstrap)
    assert _produce_in_batches(c, topic_name, 50, 2) == list(range(100))

    def shrunk():
        lo, hi = c.watermarks(topic_name)
        total = sum(_segment_files(broker, topic_name).values())
        return (lo, hi, total) if lo > 0 and total <= 3072 + 1024 else None

    lo, hi, total = wait_until(shrunk, 15, what="size retention to delete old segments")
    assert hi == 100
    recs = c.consume(topic_name, 0, lo, 100 - lo)
    assert [r.offset for r in recs] == list(range(lo, 100))
    assert recs[-1].value.startswith(b"049-001-")


def test_segment_ms_rolls_by_time(broker, topic_name):
    """Goal: segment.ms rolls the active segment once it is older than the setting.
    Method: topic with segment.ms=300; produce one record, wait 1 s, produce another, wait
    until the partition directory holds at least 2 segments; both records read back."""
    create_topic(broker.bootstrap, topic_name, config={"segment.ms": 300})
    c = ConfluentFamily(broker.bootstrap)
    assert c.produce(topic_name, [Msg(b"first")]) == [0]
    time.sleep(1.0)
    assert c.produce(topic_name, [Msg(b"second")]) == [1]
    wait_until(lambda: len(_segment_files(broker, topic_name)) >= 2, 10, what="a time-based segment roll")
    recs = c.consume(topic_name, 0, 0, 2)
    assert [r.value for r in recs] == [b"first", b"second"]
