"""Storage and operator hardening (issue 10, items 5, 6, 7, 12, 14, 15), each against a real
`sluice serve` process: over the wire with real clients, or by damaging its data directory
while it is stopped and starting it again.

- a second broker on the same data directory refuses to start (the `.lock` flock);
- a missing `meta/topics.json` refuses the start instead of deleting every partition;
- the data directory is private (directories 0700, files 0600);
- damage to sealed segments (a flipped batchLength in the stored batch bytes, which live
  in the journal; 100 zeroed bytes inside a batch's records, caught by the CRC check of
  the read path; a cut `.extents` file; a deleted `.extents` file) is reported and confined: fetches of the damaged offsets fail with CORRUPT_MESSAGE, every
  intact segment after it is kept and served, nothing is skipped silently;
- running out of file descriptors refuses the requests that need a new file, never poisons
  the log, and the broker keeps serving;
- a full disk fails the round with KAFKA_STORAGE_ERROR, lets DeleteRecords free space, and
  produce resumes by itself, with nothing acknowledged lost or duplicated.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

import kwire
import storage_layout as layout
from conftest import SluiceBroker
from helpers import create_topic

POLICY_VIOLATION = 44
INVALID_CONFIG = 40
KAFKA_STORAGE_ERROR = 56
SEGMENT_BYTES = 4096
BATCHES = 60
RECORDS_PER_BATCH = 10


def produce_batches(bootstrap: str, topic: str, batches: int = BATCHES) -> dict[int, bytes]:
    """Produces `batches` raw batches of RECORDS_PER_BATCH records (acks=all); returns each
    batch's first value by base offset."""
    firsts = {}
    for b in range(batches):
        values = [f"b{b:04d}-r{r:02d}-".encode() + b"v" * 90 for r in range(RECORDS_PER_BATCH)]
        res = kwire.produce_v3(bootstrap, topic, 0, kwire.record_batch([kwire.RawRecord(v) for v in values]))
        assert res.error_code == 0, res
        firsts[res.base_offset] = values[0]
    return firsts


def segments(broker: SluiceBroker, topic: str) -> list[int]:
    """Base offsets of the partition's segments (one `.extents` file each)."""
    return layout.segment_bases(broker.partition_dir(topic))


def segment_batches(broker: SluiceBroker, topic: str, base: int) -> list[layout.Batch]:
    """The batches of a stopped broker's segment, read through its extents from the
    journal (the parse asserts every batch's CRC and that they frame the segment)."""
    return layout.segment_batches(broker.data_dir, broker.partition_dir(topic), base)


def fetch_map(bootstrap: str, topic: str, bases: list[int]) -> dict[int, object]:
    """Fetches at each base offset: the base offset of the first batch returned, or the
    error code."""
    out = {}
    for base in bases:
        part = kwire.fetch_v4(bootstrap, topic, 0, base)
        if part.error_code != 0:
            out[base] = ("error", part.error_code)
        else:
            batches = part.batches()
            out[base] = batches[0].base_offset if batches else None
    return out


def damaged_topic(sluice_factory, topic: str):
    """A broker with a topic of ~20 small sealed segments, stopped cleanly. Checks the
    layout reader on it: the batches read through every segment's extents are exactly
    the acked batches, in order, with the values produced."""
    broker = sluice_factory(["--retention-check-interval-ms", "60000", "--override", "sluice.internal.segment.bytes.enable=true"])
    create_topic(broker.bootstrap, topic, 1, {"internal.segment.bytes": str(SEGMENT_BYTES)})
    firsts = produce_batches(broker.bootstrap, topic)
    broker.stop()
    files = segments(broker, topic)
    assert len(files) >= 8, files
    assert not list(broker.partition_dir(topic).glob("*.log")), "a segment .log file exists"
    read = [b for base in files for b in segment_batches(broker, topic, base)]
    assert [b.base_offset for b in read] == sorted(firsts), "extents do not cover the acked batches"
    assert all(b.last_offset == b.base_offset + RECORDS_PER_BATCH - 1 for b in read)
    for base in files:
        data = layout.segment_bytes(broker.data_dir, broker.partition_dir(topic), base)
        assert len(data) == layout.segment_size(broker.partition_dir(topic), base) <= SEGMENT_BYTES
        for b in layout.parse_batches(data):
            assert firsts[b.base_offset] in data[b.position:b.position + b.length]
    return broker, firsts, files


def assert_confined(broker: SluiceBroker, topic: str, firsts: dict[int, bytes], lost: set[int]) -> None:
    """Every batch not in `lost` is served at its offset; every batch in `lost` gets
    CORRUPT_MESSAGE (never a later batch: no silent skip)."""
    got = fetch_map(broker.bootstrap, topic, sorted(firsts))
    for base in sorted(firsts):
        if base in lost:
            assert got[base] == ("error", kwire.CORRUPT_MESSAGE), f"damaged batch {base}: {got[base]}"
        else:
            assert got[base] == base, f"intact batch {base}: {got[base]}"
    hw = kwire.fetch_v4(broker.bootstrap, topic, 0, 0).high_watermark
    assert hw == BATCHES * RECORDS_PER_BATCH, "the log end did not move"


# ---------------------------------------------------------------------------------------
# Item 6: data directory lock
# ---------------------------------------------------------------------------------------
def test_second_broker_on_same_data_dir_refuses_to_start(sluice_factory, tmp_path, topic_name):
    """Goal: two brokers never share a data directory (Kafka's log.dir .lock). Method: start a
    broker, acknowledge 200 records, start a second `sluice serve` on the same directory: it
    must exit non-zero naming the lock; the first keeps serving and, after a restart, every
    acknowledged record is there."""
    first = sluice_factory(["--retention-check-interval-ms", "60000"])
    create_topic(first.bootstrap, topic_name, 1)
    firsts = produce_batches(first.bootstrap, topic_name, 20)
    second = SluiceBroker(tmp_path / "second", name="second")
    second.data_dir = first.data_dir
    with pytest.raises(AssertionError) as refused:
        second.start()
    assert ".lock is locked by another process" in str(refused.value), refused.value
    assert first.alive()
    produce_batches(first.bootstrap, topic_name, 1)
    first.restart()
    part = kwire.fetch_v4(first.bootstrap, topic_name, 0, 0)
    assert part.high_watermark == 21 * RECORDS_PER_BATCH
    assert fetch_map(first.bootstrap, topic_name, sorted(firsts)) == {b: b for b in firsts}


# ---------------------------------------------------------------------------------------
# Item 7: missing topics.json
# ---------------------------------------------------------------------------------------
def test_missing_topics_json_refuses_to_start_and_deletes_nothing(sluice_factory, topic_name):
    """Goal: a missing meta/topics.json never deletes partitions. Method: acknowledge records,
    stop, remove the file, start: the broker must refuse with a message naming the file, and
    the partition directory must still hold its segments; restoring the file brings every
    record back."""
    broker = sluice_factory(["--retention-check-interval-ms", "60000"])
    create_topic(broker.bootstrap, topic_name, 2)
    firsts = produce_batches(broker.bootstrap, topic_name, 10)
    broker.stop()
    meta = broker.data_dir / "meta" / "topics.json"
    saved = meta.read_bytes()
    meta.unlink()
    before = sorted(p.name for p in broker.partition_dir(topic_name).iterdir())
    with pytest.raises(AssertionError) as refused:
        broker.start()
    assert "topics.json is missing" in str(refused.value), refused.value
    assert sorted(p.name for p in broker.partition_dir(topic_name).iterdir()) == before
    meta.write_bytes(saved)
    broker.start()
    assert fetch_map(broker.bootstrap, topic_name, sorted(firsts)) == {b: b for b in firsts}


# ---------------------------------------------------------------------------------------
# Item 15: permissions
# ---------------------------------------------------------------------------------------
def test_data_dir_is_private(sluice_factory, tmp_path, topic_name):
    """Goal: a data store is private: every directory the broker creates is 0700 and every
    file 0600, whatever the umask. Method: a broker on a not-yet-existing directory with a
    permissive umask, a topic, records, a group commit and a restart; then stat everything."""
    old = os.umask(0o000)
    try:
        broker = SluiceBroker(tmp_path / "private", ["--retention-check-interval-ms", "60000", "--override", "sluice.internal.segment.bytes.enable=true"],
                              name="private")
        broker.data_dir = tmp_path / "private" / "fresh" / "data"
        broker.data_dir.parent.mkdir(parents=True)
        broker.start()
    finally:
        os.umask(old)
    try:
        create_topic(broker.bootstrap, topic_name, 2, {"internal.segment.bytes": "1024"})
        produce_batches(broker.bootstrap, topic_name, 5)
        broker.restart()
        wrong = []
        for path in [broker.data_dir, *broker.data_dir.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            want = 0o700 if path.is_dir() else 0o600
            if path == broker.data_dir:
                continue  # created by the test fixture, not by the broker
            if mode != want:
                wrong.append(f"{oct(mode)} {path}")
        assert not wrong, "\n".join(wrong)
    finally:
        broker.teardown()


# ---------------------------------------------------------------------------------------
# Item 12: damage to sealed segments
# ---------------------------------------------------------------------------------------
def test_flipped_batch_length_in_sealed_segment_is_reported_and_confined(sluice_factory, topic_name):
    """Goal: a flipped batchLength in a sealed segment's stored bytes costs that batch only:
    its offsets get CORRUPT_MESSAGE, every other batch (the rest of that segment and every
    later segment) is served, nothing is skipped silently and no file is deleted. Method: 60
    acked batches over ~20 segments, stop, flip a bit of the length of the 2nd batch of the
    4th segment (in the journal file its extents map that byte to), start, fetch at every
    batch's base offset over the wire; the broker log reports the damage."""
    broker, firsts, files = damaged_topic(sluice_factory, topic_name)
    pdir = broker.partition_dir(topic_name)
    batch = segment_batches(broker, topic_name, files[3])[1]
    base = batch.base_offset
    length_byte = layout.segment_bytes(broker.data_dir, pdir, files[3])[batch.position + 10]
    layout.write_segment_bytes(broker.data_dir, pdir, files[3], batch.position + 10, bytes([length_byte ^ 0x01]))
    assert layout.segment_bytes(broker.data_dir, pdir, files[3])[batch.position + 10] == length_byte ^ 0x01
    broker.start()
    assert segments(broker, topic_name) == files, "no segment file deleted"
    assert_confined(broker, topic_name, firsts, {base})
    assert "is damaged at byte" in broker.stderr_text()
    # A librdkafka consumer reading from the start stops at the damage with an error the
    # application sees; it never delivers a record past it as if nothing were missing.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic_name, 0, 0)])
    seen, errors = [], []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not errors:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error())
        else:
            seen.append(m.offset())
    c.close()
    assert errors, "the consumer never reported the damaged batch"
    assert seen == list(range(base)), "records delivered past the damage, or missing before it"


def record_value(offset: int) -> bytes:
    """The value produce_batches gave the record at `offset` (batches of RECORDS_PER_BATCH
    from offset 0)."""
    b, r = divmod(offset, RECORDS_PER_BATCH)
    return f"b{b:04d}-r{r:02d}-".encode() + b"v" * 90


def consume_skipping_errors(bootstrap: str, topic: str, end: int, extra: dict) -> tuple[dict[int, bytes], list[int]]:
    """A librdkafka consumer from offset 0 to `end`: every record delivered (offset ->
    value) and every offset at which it got an error, after which it seeks one past it
    (what an application that skips damage does). Bounded by a deadline."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crc", "enable.auto.commit": False,
                  "fetch.error.backoff.ms": 10, **extra})
    c.assign([TopicPartition(topic, 0, 0)])
    got, errors, position = {}, [], 0
    deadline = time.monotonic() + 60
    try:
        while position < end and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                errors.append(position)
                position += 1
                c.seek(TopicPartition(topic, 0, position))
                continue
            assert m.offset() not in got, f"offset {m.offset()} delivered twice"
            got[m.offset()] = m.value()
            position = m.offset() + 1
    finally:
        c.close()
    return got, errors


def test_zeroed_bytes_in_a_stored_batch_are_corrupt_message_for_that_batch_only(sluice_factory, topic_name):
    """Goal (issue 32): 100 zeroed bytes inside a stored batch's records are caught on read
    (the batch CRC-32C is checked before the bytes are served), and cost that batch only:
    fetches of its offsets get CORRUPT_MESSAGE, a fetch that reaches it from before ends
    before it, every other batch (before and after it in the segment, and in later
    segments) is served. A librdkafka consumer with check.crcs=true and one with the
    default both get every other acked record with its value, and an error for each offset
    of the damaged batch (no wrong value, no stall). Method: 60 acked batches over ~20
    segments, clean stop (so the open trusts the segments and checks no CRC), zero 100
    bytes in the middle of the records of the 2nd batch of the 4th segment (in the journal
    file its extents map them to), start, fetch every batch over the wire, then consume."""
    broker, firsts, files = damaged_topic(sluice_factory, topic_name)
    pdir = broker.partition_dir(topic_name)
    batch = segment_batches(broker, topic_name, files[3])[1]
    base = batch.base_offset
    assert batch.length > 400, batch
    layout.write_segment_bytes(broker.data_dir, pdir, files[3], batch.position + 200, b"\0" * 100)
    broker.start()
    assert segments(broker, topic_name) == files, "no segment file deleted"
    assert_confined(broker, topic_name, firsts, {base})
    # A fetch from the segment's first batch, with room for all of it, stops before the damage.
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 0, files[3])
    assert part.error_code == 0
    assert [b.base_offset for b in part.batches()] == list(range(files[3], base, RECORDS_PER_BATCH))
    assert "stored data is damaged" in broker.stderr_text()
    end = BATCHES * RECORDS_PER_BATCH
    lost = set(range(base, base + RECORDS_PER_BATCH))
    for extra in ({"check.crcs": True}, {}):
        got, errors = consume_skipping_errors(broker.bootstrap, topic_name, end, extra)
        assert sorted(errors) == sorted(lost), f"{extra}: errors at {errors}"
        assert sorted(got) == [o for o in range(end) if o not in lost], f"{extra}: offsets delivered"
        wrong = [o for o, v in got.items() if v != record_value(o)]
        assert not wrong, f"{extra}: wrong values at {wrong[:5]}"
    # Fetches of the damaged batch log one ERROR line per interval, not one per fetch.
    for _ in range(20):
        assert kwire.fetch_v4(broker.bootstrap, topic_name, 0, base).error_code == kwire.CORRUPT_MESSAGE
    lines = [l for l in broker.stderr_text().splitlines() if "stored data is damaged" in l]
    assert len(lines) <= 4, f"{len(lines)} damage lines for ~60 damaged reads"


def test_cut_extents_file_keeps_every_later_segment(sluice_factory, topic_name):
    """Goal: a sealed segment whose `.extents` file was cut (its last records lost, one
    of them torn mid-record) loses only the batch(es) the cut records described; every
    later segment is kept and served. Method: cut the 3rd segment's `.extents` file by one
    and a half records (or half a record if it has one), start, fetch every batch's base
    offset."""
    broker, firsts, files = damaged_topic(sluice_factory, topic_name)
    pdir = broker.partition_dir(topic_name)
    path = layout.extents_path(pdir, files[2])
    size = path.stat().st_size
    cut = 48 if size >= 2 * layout.RECORD_LEN else 16
    kept = layout.parse_extents(path.read_bytes()[:(size - cut) // layout.RECORD_LEN * layout.RECORD_LEN])
    kept_end = kept[-1].end if kept else 0
    lost = {b.base_offset for b in segment_batches(broker, topic_name, files[2]) if b.position + b.length > kept_end}
    assert lost, "the cut describes no batch"
    with open(path, "r+b") as f:
        f.truncate(size - cut)
    broker.start()
    assert segments(broker, topic_name) == files, "no segment file deleted"
    assert_confined(broker, topic_name, firsts, lost)


def test_deleted_extents_file_keeps_every_later_segment(sluice_factory, topic_name):
    """Goal: a sealed segment whose `.extents` file (the index of where its data lies) was
    deleted loses only its own offsets: later segments are kept, the missing offsets get
    CORRUPT_MESSAGE. Method: delete the 3rd segment's `.extents` file, start, fetch."""
    broker, firsts, files = damaged_topic(sluice_factory, topic_name)
    lost = {b.base_offset for b in segment_batches(broker, topic_name, files[2])}
    layout.extents_path(broker.partition_dir(topic_name), files[2]).unlink()
    broker.start()
    assert segments(broker, topic_name) == files[:2] + files[3:]
    assert_confined(broker, topic_name, firsts, lost)
    assert "are missing" in broker.stderr_text()


# ---------------------------------------------------------------------------------------
# Item 5: file descriptors
# ---------------------------------------------------------------------------------------
OPEN_FILES = 600
MAX_CONNECTIONS = 40


@pytest.fixture
def low_fd_broker(sluice_factory, tmp_path, monkeypatch):
    """A broker whose RLIMIT_NOFILE is OPEN_FILES (soft and hard), through prlimit."""
    import conftest
    real = conftest.sluice_bin()
    wrapper = tmp_path / "sluice-low-fd"
    wrapper.write_text(f"#!/bin/sh\nexec prlimit --nofile={OPEN_FILES}:{OPEN_FILES} {real} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "sluice_bin", lambda: wrapper)
    return sluice_factory(["--retention-check-interval-ms", "60000", "--max-connections", str(MAX_CONNECTIONS),
                           "--override", "sluice.internal.segment.bytes.enable=true"])


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_segment_bytes_has_kafkas_minimum_and_no_client_can_lower_it(sluice_factory, topic_name):
    """Goal (issue 32): segment.bytes=1024 let one client fill the broker-wide segment-file
    budget in seconds; segment.bytes now has Kafka 4.x's minimum, 1 MiB, so one segment file
    costs a MiB of writes, and Kafka's test-only internal.segment.bytes (no minimum) is
    refused unless the broker enables it.
    Method: CreateTopics and IncrementalAlterConfigs (confluent-kafka admin) against a broker
    at the defaults: 1 MiB - 1 and internal.segment.bytes are INVALID_CONFIG and create
    nothing, 1 MiB is accepted; a broker with sluice.internal.segment.bytes.enable=true takes
    internal.segment.bytes=1024 and rolls a segment per ~1 KiB batch."""
    from admin_facade import CkAdmin
    b = sluice_factory(["--retention-check-interval-ms", "60000"])
    admin = CkAdmin(b.bootstrap)
    assert admin.create(f"{topic_name}-a", 1, {"segment.bytes": 1024 * 1024 - 1}) == INVALID_CONFIG
    assert admin.create(f"{topic_name}-b", 1, {"internal.segment.bytes": 1024}) == INVALID_CONFIG
    assert not b.partition_dir(f"{topic_name}-a", 0).exists()
    assert not b.partition_dir(f"{topic_name}-b", 0).exists()
    assert admin.create(topic_name, 1, {"segment.bytes": 1024 * 1024}) == 0
    assert admin.incremental_alter(topic_name, set_={"segment.bytes": 4096}) == INVALID_CONFIG
    assert admin.incremental_alter(topic_name, set_={"internal.segment.bytes": 4096}) == INVALID_CONFIG
    for i in range(5):
        batch = kwire.record_batch([kwire.RawRecord(f"{i:05d}".encode() + b"z" * 900)])
        assert kwire.produce_v3(b.bootstrap, topic_name, 0, batch).error_code == 0
    assert len(segments(b, topic_name)) == 1, "1 KiB batches rolled a 1 MiB segment"
    allowed = sluice_factory(["--retention-check-interval-ms", "60000",
                              "--override", "sluice.internal.segment.bytes.enable=true"])
    assert CkAdmin(allowed.bootstrap).create(topic_name, 1, {"internal.segment.bytes": 1024}) == 0
    for i in range(5):
        batch = kwire.record_batch([kwire.RawRecord(f"{i:05d}".encode() + b"z" * 900)])
        assert kwire.produce_v3(allowed.bootstrap, topic_name, 0, batch).error_code == 0
    assert len(segments(allowed, topic_name)) == 5


def test_one_topic_holds_at_most_its_share_of_the_segment_files(low_fd_broker, topic_name):
    """Goal (issue 32): one topic rolling small segments can take at most its share of the
    segment-file budget (sluice.segment.files.per.topic.percent, 25 %), so other topics can
    still be created and written and still roll. Before, it took the whole budget and the
    next CreateTopics was refused (POLICY_VIOLATION: no files left).
    Method: the 600-descriptor broker (budget 304, share 76); a topic with the test-only
    internal.segment.bytes=1024 fed ~1 KiB batches until a produce is refused
    (KAFKA_STORAGE_ERROR) holds at most 76 segment files; then a 200-partition topic is
    created and takes a record on every partition, a third topic rolls 10 segments, and
    the refused topic still serves fetches."""
    from admin_facade import CkAdmin
    b = low_fd_broker
    admin = CkAdmin(b.bootstrap)
    hog = f"{topic_name}-hog"
    assert admin.create(hog, 1, {"internal.segment.bytes": 1024}) == 0
    acked, refused = 0, None
    for i in range(400):
        batch = kwire.record_batch([kwire.RawRecord(f"{i:05d}".encode() + b"z" * 900)])
        res = kwire.produce_v3(b.bootstrap, hog, 0, batch)
        if res.error_code != 0:
            refused = res.error_code
            break
        acked += 1
    files = len(segments(b, hog))
    print(f"the rolling topic was refused after {acked} batches holding {files} segment files (share 76 of 304)")
    assert refused == KAFKA_STORAGE_ERROR, f"no refusal after {acked} batches (got {refused})"
    assert 70 <= files <= 76, files
    wide = f"{topic_name}-wide"
    assert admin.create(wide, 200) == 0, "no files left for a new topic"
    for p in range(200):
        ok = kwire.produce_v3(b.bootstrap, wide, p, kwire.record_batch([kwire.RawRecord(b"fine")]))
        assert ok.error_code == 0, (p, ok)
    third = f"{topic_name}-third"
    assert admin.create(third, 1, {"internal.segment.bytes": 1024}) == 0
    for i in range(10):
        batch = kwire.record_batch([kwire.RawRecord(f"{i:05d}".encode() + b"y" * 900)])
        assert kwire.produce_v3(b.bootstrap, third, 0, batch).error_code == 0
    assert len(segments(b, third)) == 10
    part = kwire.fetch_v4(b.bootstrap, hog, 0, 0)
    assert part.error_code == 0 and part.batches()[0].base_offset == 0


def test_file_descriptor_exhaustion_refuses_requests_not_the_log(low_fd_broker, topic_name):
    """Goal: running out of file descriptors never poisons the log or starves accept().
    Method: a broker limited to 600 descriptors with max.connections 40 (segment budget
    600 - 40 - 256 = 304). CreateTopics of 250 partitions succeeds; a second one of 250 is
    refused cleanly (POLICY_VIOLATION) before any partition is made. segment.bytes=1024 is
    refused (INVALID_CONFIG: Kafka's 1 MiB minimum, which makes filling the budget take
    gigabytes); with the test-only internal.segment.bytes=1024 (the broker allows it here)
    a topic fed ~1 KiB batches rolls until the budget is used up: that produce
    gets KAFKA_STORAGE_ERROR, while produce to other partitions, new connections and
    Metadata keep working, and the descriptors in use stay below the limit. DeleteRecords
    frees segments and the refused partition takes writes again; a restart works."""
    from admin_facade import CkAdmin
    b = low_fd_broker
    admin = CkAdmin(b.bootstrap)
    assert admin.create(f"{topic_name}-a", 250) == 0
    assert admin.create(f"{topic_name}-b", 250) == POLICY_VIOLATION
    assert not b.partition_dir(f"{topic_name}-b", 0).exists(), "a refused create made partitions"
    small = f"{topic_name}-c"
    assert admin.create(small, 1, {"segment.bytes": 1024}) == INVALID_CONFIG
    assert admin.create(small, 1, {"internal.segment.bytes": 1024}) == 0
    refused = None
    acked = 0
    for i in range(400):
        batch = kwire.record_batch([kwire.RawRecord(f"{i:05d}".encode() + b"z" * 900)])
        res = kwire.produce_v3(b.bootstrap, small, 0, batch)
        if res.error_code != 0:
            refused = res.error_code
            break
        acked += 1
    assert refused == KAFKA_STORAGE_ERROR, f"no refusal after {acked} rolls (got {refused})"
    assert open_fds(b.proc.pid) < OPEN_FILES - MAX_CONNECTIONS, open_fds(b.proc.pid)
    # The log is not poisoned: other partitions take writes; new connections are served.
    ok = kwire.produce_v3(b.bootstrap, f"{topic_name}-a", 7, kwire.record_batch([kwire.RawRecord(b"fine")]))
    assert ok.error_code == 0, ok
    for _ in range(20):
        md = kwire.parse_metadata(kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(1, [small])), 1)
        assert md.topics[small][0] == 0
    # Freeing segments through the API lets the refused partition go on.
    code, low = admin.delete_records(small, 0, acked)
    assert (code, low) == (0, acked), (code, low)
    again = kwire.produce_v3(b.bootstrap, small, 0, kwire.record_batch([kwire.RawRecord(b"again")]))
    assert again.error_code == 0 and again.base_offset == acked, again
    b.restart()
    part = kwire.fetch_v4(b.bootstrap, small, 0, acked)
    assert part.error_code == 0 and part.batches()[0].base_offset == acked


# ---------------------------------------------------------------------------------------
# Item 14: disk full
# ---------------------------------------------------------------------------------------
TMPFS_MB = 16
RECORD_BYTES = 64 * 1024


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_recovers_by_itself_after_delete_records(small_disk, tmp_path, request):
    """Goal: a full disk fails produce with KAFKA_STORAGE_ERROR but does not poison the log:
    DeleteRecords frees space through the API, produce resumes by itself (no restart) at the
    next offset, and after a restart every acknowledged record is there exactly once.
    Method: a 16 MiB tmpfs (real ENOSPC from the kernel), 64 KiB records, acks=all, no
    client retries, 1 MiB segments; fill until a delivery fails; DeleteRecords up to the
    last acked offset; produce 5 more records; restart; read everything back by key."""
    from confluent_kafka import Producer
    from admin_facade import CkAdmin
    broker = SluiceBroker(tmp_path / "b", ["--retention-check-interval-ms", "60000"])
    broker.data_dir = small_disk / "data"
    request.node._sluice_brokers = [broker]
    broker.start()
    try:
        topic = "disk-full-recovers"
        create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": str(2 * RECORD_BYTES),
                                                  "segment.bytes": str(1 << 20)})
        acked: dict[str, int] = {}
        errors: list[KafkaError] = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked[msg.key().decode()] = msg.offset()

        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0, "linger.ms": 0,
                      "message.timeout.ms": 10000, "batch.size": RECORD_BYTES + 1024})
        seq = 0
        deadline = time.monotonic() + 60
        while not errors and time.monotonic() < deadline:
            p.produce(topic, key=f"a{seq}".encode(), value=b"x" * RECORD_BYTES, on_delivery=on_delivery)
            seq += 1
            p.flush(10)
        assert errors and errors[0].code() == KafkaError.KAFKA_STORAGE_ERROR, errors
        assert len(acked) > 10
        last = max(acked.values())
        # Still full: still refused, and the broker is alive.
        p.produce(topic, key=b"refused", value=b"x" * RECORD_BYTES, on_delivery=on_delivery)
        p.flush(10)
        assert errors[-1].code() == KafkaError.KAFKA_STORAGE_ERROR
        assert broker.alive()
        code, low = CkAdmin(broker.bootstrap).delete_records(topic, 0, last + 1)
        assert (code, low) == (0, last + 1), (code, low)
        for i in range(5):
            p.produce(topic, key=f"b{i}".encode(), value=b"y" * RECORD_BYTES, on_delivery=on_delivery)
            p.flush(10)
        assert [acked.get(f"b{i}") for i in range(5)] == [last + 1 + i for i in range(5)], (acked, errors[-3:])
        broker.restart()
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                      "max.partition.fetch.bytes": 4 * RECORD_BYTES})
        c.assign([TopicPartition(topic, 0, last + 1)])
        seen: dict[str, int] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen) < 5:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            k = m.key().decode()
            assert k not in seen, f"{k} delivered twice"
            seen[k] = m.offset()
        c.close()
        assert seen == {f"b{i}": last + 1 + i for i in range(5)}, seen
        assert "refused" not in acked
    finally:
        # Started outside sluice_factory: stop it here, or it outlives the test.
        broker.teardown()
