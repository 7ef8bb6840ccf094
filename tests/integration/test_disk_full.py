"""A full disk: produce gets KAFKA_STORAGE_ERROR, the broker keeps serving other requests,
and after a restart with space again every acknowledged record is present exactly once.

The data dir is a real tmpfs with a small size cap, so ENOSPC comes from the kernel, not
from a mock. Mounting needs root (CI runs as root); elsewhere the test is skipped.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import SluiceBroker
from helpers import create_topic, wait_until

TMPFS_MB = 12
RECORD_BYTES = 64 * 1024


def mount_tmpfs(path: Path, size_mb: int) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                       capture_output=True)
    return r.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    if not mount_tmpfs(mnt, TMPFS_MB):
        pytest.skip("cannot mount tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_gives_storage_error_and_loses_nothing(small_disk, tmp_path, request):
    """Goal: ENOSPC turns into KAFKA_STORAGE_ERROR, not a crash, and nothing acknowledged is lost.
    Method: fill a 12 MiB tmpfs with 64 KiB acks=all records (no client retries) until a
    delivery fails; check the error code and that Metadata still works; grow the tmpfs, restart,
    and read everything back by offset."""
    (tmp_path / "b").mkdir()
    broker = SluiceBroker(tmp_path / "b", ["--retention-check-interval-ms", "60000"])
    broker.data_dir = small_disk / "data"
    request.node._sluice_brokers = [broker]
    broker.start()
    try:
        topic = "disk-full"
        create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": str(2 * RECORD_BYTES)})
        acked: dict[int, int] = {}  # sequence -> offset
        errors: list[KafkaError] = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked[int(msg.key())] = msg.offset()

        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0,
                      "linger.ms": 0, "message.timeout.ms": 10000, "batch.size": RECORD_BYTES + 1024})
        payload = b"x" * RECORD_BYTES
        seq = 0
        deadline = time.monotonic() + 60
        while not errors and time.monotonic() < deadline:
            p.produce(topic, key=str(seq).encode(), value=payload, on_delivery=on_delivery)
            seq += 1
            p.flush(10)
        assert errors, f"no produce error after {seq} records on a {TMPFS_MB} MiB disk"
        assert errors[0].code() == KafkaError.KAFKA_STORAGE_ERROR, f"got {errors[0]!r}"
        assert len(acked) > 10, "the disk filled before anything was acknowledged"
        assert broker.alive(), "broker died on a full disk"

        # Other requests keep working: Metadata answers, and while the disk is still full a
        # record of the same size is refused again (the refused round was undone, so the log
        # is not poisoned: test_hardening_storage.py shows it resuming once space is freed).
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert topic in md.topics
        p.produce(topic, key=str(seq).encode(), value=payload, on_delivery=on_delivery)
        p.flush(10)
        assert len(errors) >= 2 and errors[-1].code() == KafkaError.KAFKA_STORAGE_ERROR, errors[-1]

        # Give the disk room, restart, and read everything back.
        broker.kill9()
        subprocess.run(["mount", "-o", "remount,size=128m", str(small_disk)], check=True)
        broker.start()
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                      "fetch.max.bytes": 2 * 1024 * 1024, "max.partition.fetch.bytes": 4 * RECORD_BYTES})
        c.assign([TopicPartition(topic, 0, 0)])
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 30
        last = max(acked.values())
        while time.monotonic() < deadline and (not seen or max(seen.values()) < last):
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            k = int(m.key())
            assert k not in seen, f"sequence {k} delivered twice (offsets {seen[k]} and {m.offset()})"
            seen[k] = m.offset()
        c.close()
        for k, off in acked.items():
            assert seen.get(k) == off, f"acknowledged sequence {k} at offset {off} read back as {seen.get(k)}"
    finally:
        if broker.alive():
            broker.kill9()


# ---------------------------------------------------------------------------
# Issue 32: a full disk recovers without a restart. Both setups of the re-attack: a 64 MiB
# tmpfs filled with 16 KB records, and a 16 MiB one with 64 KiB records. Space comes back
# through the API (DeleteRecords, deleting the topic, retention) or by growing the file
# system; produce must resume by itself, and every acknowledged record still in the log
# must be read back exactly once at its offset, while running and after a clean restart.
# ---------------------------------------------------------------------------

SETUPS = [pytest.param(64, 16_000, id="64MiB-16KB"), pytest.param(16, 64 * 1024, id="16MiB-64KiB")]
# Bounds: filling takes a few seconds here; resuming must follow within this.
FILL_S = 40
RESUME_S = 20
RESUMED_RECORDS = 5


@pytest.fixture
def sized_disk(tmp_path):
    """A tmpfs whose size the test chooses (`mount(size_mb)`), unmounted at the end."""
    mnt = tmp_path / "small"
    mounted = []

    def mount(size_mb: int) -> Path:
        if not mount_tmpfs(mnt, size_mb):
            pytest.skip("cannot mount tmpfs here (needs root)")
        mounted.append(mnt)
        return mnt

    yield mount
    for m in mounted:
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


class Filler:
    """One acks=all producer without client retries, one record per request, recording
    what was acknowledged (topic, key) -> offset and every error it got."""

    def __init__(self, broker: SluiceBroker, record_bytes: int):
        self.broker = broker
        self.record_bytes = record_bytes
        self.acked: dict[tuple[str, str], int] = {}
        self.errors: list[KafkaError] = []
        self.p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0,
                           "linger.ms": 0, "message.timeout.ms": 10000,
                           "batch.size": record_bytes + 1024, "message.max.bytes": 2 * record_bytes})

    def produce_one(self, topic: str, key: str) -> KafkaError | None:
        """Produces one record and waits for its answer: None when acknowledged."""
        got: list = []

        def on_delivery(err, msg):
            got.append(err)
            if err is None:
                self.acked[(topic, key)] = msg.offset()
            else:
                self.errors.append(err)

        self.p.produce(topic, key=key.encode(), value=b"v" * self.record_bytes, on_delivery=on_delivery)
        self.p.flush(15)
        assert got, f"no answer for {topic}/{key} within 15 s (a silent timeout)"
        return got[0]

    def fill(self, topic: str, size_mb: int) -> int:
        """Produces until the disk is full; returns the number of records acknowledged."""
        deadline = time.monotonic() + FILL_S
        seq = 0
        while time.monotonic() < deadline:
            err = self.produce_one(topic, f"fill{seq}")
            seq += 1
            if err is not None:
                break
        assert self.errors, f"no produce error after {seq} records on a {size_mb} MiB disk"
        assert self.errors[0].code() == KafkaError.KAFKA_STORAGE_ERROR, f"got {self.errors[0]!r}"
        acked = seq - 1
        assert acked * self.record_bytes > size_mb * 2**20 // 2, (
            f"only {acked} records acknowledged before the {size_mb} MiB disk was full")
        print(f"{size_mb} MiB disk: {acked} records of {self.record_bytes} B acknowledged "
              f"({acked * self.record_bytes / 2**20:.1f} MiB), then {self.errors[0].name()}")
        return acked

    def resume(self, topic: str, prefix: str) -> list[int]:
        """Produces RESUMED_RECORDS records, each retried (KAFKA_STORAGE_ERROR only) until
        acknowledged or RESUME_S runs out. Returns their offsets."""
        started = time.monotonic()
        deadline = started + RESUME_S
        offsets = []
        refused = 0
        for i in range(RESUMED_RECORDS):
            while True:
                err = self.produce_one(topic, f"{prefix}{i}")
                if err is None:
                    offsets.append(self.acked[(topic, f"{prefix}{i}")])
                    break
                refused += 1
                assert err.code() == KafkaError.KAFKA_STORAGE_ERROR, f"resuming: got {err!r}"
                assert time.monotonic() < deadline, (
                    f"produce did not resume within {RESUME_S} s of freeing space: {err!r}\n"
                    + self.broker.stderr_tail())
                time.sleep(0.2)
        print(f"resumed: {RESUMED_RECORDS} records acknowledged {time.monotonic() - started:.2f} s after "
              f"space was freed, {refused} refused first")
        return offsets


def read_back(broker: SluiceBroker, topic: str, expected: dict[str, int], start: int) -> None:
    """Reads `topic` from `start` to its end and checks every key of `expected` is there
    exactly once at its offset (and nothing unexpected is)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "fetch.max.bytes": 4 * 1024 * 1024, "max.partition.fetch.bytes": 1024 * 1024})
    try:
        c.assign([TopicPartition(topic, 0, start)])
        seen: dict[str, int] = {}
        deadline = time.monotonic() + 30
        last = max(expected.values())
        while time.monotonic() < deadline and (not seen or max(seen.values()) < last):
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            k = m.key().decode()
            assert k not in seen, f"{k} delivered twice (offsets {seen[k]} and {m.offset()})"
            seen[k] = m.offset()
    finally:
        c.close()
    assert seen == expected, {k: (v, seen.get(k)) for k, v in expected.items() if seen.get(k) != v} or seen


def acked_in(filler: Filler, topic: str, start: int = 0) -> dict[str, int]:
    return {k: off for (t, k), off in filler.acked.items() if t == topic and off >= start}


def start_full(sized_disk, tmp_path, request, size_mb: int, retention_check_ms: int = 60000) -> SluiceBroker:
    disk = sized_disk(size_mb)
    broker = SluiceBroker(tmp_path / "b", ["--retention-check-interval-ms", str(retention_check_ms)])
    broker.data_dir = disk / "data"
    request.node._sluice_brokers = [broker]
    broker.start()
    return broker


def check_full_but_serving(broker: SluiceBroker, filler: Filler, topic: str) -> None:
    """While full: produce is refused with KAFKA_STORAGE_ERROR again (no timeout), the broker
    is alive, Metadata and Fetch answer."""
    err = filler.produce_one(topic, "refused-while-full")
    assert err is not None and err.code() == KafkaError.KAFKA_STORAGE_ERROR, err
    assert broker.alive(), "broker died on a full disk"
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert topic in md.topics and md.topics[topic].error is None
    first = min(acked_in(filler, topic).values())
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, first)])
        deadline = time.monotonic() + 10
        m = None
        while time.monotonic() < deadline and (m is None or m.error()):
            m = c.poll(0.5)
        assert m is not None and not m.error() and m.offset() == first, m
    finally:
        c.close()


@pytest.mark.parametrize("size_mb,record_bytes", SETUPS)
def test_full_disk_resumes_after_delete_records(sized_disk, tmp_path, request, size_mb, record_bytes):
    """Goal: after a full disk, DeleteRecords frees space and produce resumes by itself at
    the next offset, no restart; what is acknowledged afterwards survives a restart.
    Method: fill with acks=all records until KAFKA_STORAGE_ERROR; check the broker serves;
    DeleteRecords up to the high watermark; produce 5 (retrying only storage errors for up
    to 20 s); read back; clean restart; read back again."""
    from admin_facade import CkAdmin
    broker = start_full(sized_disk, tmp_path, request, size_mb)
    try:
        topic = "full-dr"
        create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": str(2 * record_bytes)})
        filler = Filler(broker, record_bytes)
        filler.fill(topic, size_mb)
        check_full_but_serving(broker, filler, topic)
        end = max(acked_in(filler, topic).values()) + 1
        code, low = CkAdmin(broker.bootstrap).delete_records(topic, 0, end)
        assert (code, low) == (0, end), (code, low, broker.stderr_tail())
        offsets = filler.resume(topic, "after")
        assert offsets == list(range(end, end + RESUMED_RECORDS)), offsets
        read_back(broker, topic, acked_in(filler, topic, end), end)
        broker.restart()
        read_back(broker, topic, acked_in(filler, topic, end), end)
    finally:
        broker.teardown()


@pytest.mark.parametrize("size_mb,record_bytes", SETUPS)
def test_full_disk_resumes_after_deleting_the_topic(sized_disk, tmp_path, request, size_mb, record_bytes):
    """Goal: deleting the topic that filled the disk frees its space while the disk is full,
    and produce to another topic resumes by itself. Method: fill topic A until
    KAFKA_STORAGE_ERROR; delete A; create B and produce 5 records to it (retrying only
    storage errors); read B back, restart, read it back again."""
    from admin_facade import CkAdmin
    broker = start_full(sized_disk, tmp_path, request, size_mb)
    try:
        filled, other = "full-del-a", "full-del-b"
        create_topic(broker.bootstrap, filled, 1, {"max.message.bytes": str(2 * record_bytes)})
        filler = Filler(broker, record_bytes)
        filler.fill(filled, size_mb)
        check_full_but_serving(broker, filler, filled)
        assert CkAdmin(broker.bootstrap).delete([filled]) == {filled: 0}, broker.stderr_tail()
        create_topic(broker.bootstrap, other, 1, {"max.message.bytes": str(2 * record_bytes)})
        offsets = filler.resume(other, "after")
        assert offsets == list(range(RESUMED_RECORDS)), offsets
        read_back(broker, other, acked_in(filler, other), 0)
        broker.restart()
        read_back(broker, other, acked_in(filler, other), 0)
    finally:
        broker.teardown()


@pytest.mark.parametrize("size_mb,record_bytes", SETUPS)
def test_full_disk_resumes_after_retention(sized_disk, tmp_path, request, size_mb, record_bytes):
    """Goal: time retention deletes segments while the disk is full, and produce resumes by
    itself. Method: fill until KAFKA_STORAGE_ERROR (retention checked every 500 ms, the
    topic at retention.ms=-1); set retention.ms=1; wait for the log start to reach the end;
    set retention.ms=-1 again; produce 5 (retrying only storage errors); read back; restart;
    read back again."""
    from admin_facade import CkAdmin
    broker = start_full(sized_disk, tmp_path, request, size_mb, retention_check_ms=500)
    try:
        topic = "full-ret"
        create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": str(2 * record_bytes),
                                                  "retention.ms": "-1"})
        filler = Filler(broker, record_bytes)
        filler.fill(topic, size_mb)
        check_full_but_serving(broker, filler, topic)
        end = max(acked_in(filler, topic).values()) + 1
        admin = CkAdmin(broker.bootstrap)
        assert admin.incremental_alter(topic, {"retention.ms": "1"}) == 0
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
        try:
            wait_until(lambda: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0] == end,
                       RESUME_S, interval=0.2, what="retention to delete every acknowledged record")
        finally:
            c.close()
        assert admin.incremental_alter(topic, {"retention.ms": "-1"}) == 0
        offsets = filler.resume(topic, "after")
        assert offsets == list(range(end, end + RESUMED_RECORDS)), offsets
        read_back(broker, topic, acked_in(filler, topic, end), end)
        broker.restart()
        read_back(broker, topic, acked_in(filler, topic, end), end)
    finally:
        broker.teardown()


@pytest.mark.parametrize("size_mb,record_bytes", SETUPS)
def test_full_disk_resumes_after_the_file_system_grows(sized_disk, tmp_path, request, size_mb, record_bytes):
    """Goal: growing the full file system (nothing deleted) is enough: produce resumes by
    itself and every acknowledged record is kept. Method: fill until KAFKA_STORAGE_ERROR;
    `mount -o remount,size=4x`; produce 5 (retrying only storage errors); read every
    acknowledged record back by offset; clean restart; read back again."""
    broker = start_full(sized_disk, tmp_path, request, size_mb)
    try:
        topic = "full-grow"
        create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": str(2 * record_bytes)})
        filler = Filler(broker, record_bytes)
        acked = filler.fill(topic, size_mb)
        assert acked > 10, "the disk filled before anything was acknowledged"
        check_full_but_serving(broker, filler, topic)
        end = max(acked_in(filler, topic).values()) + 1
        mnt = broker.data_dir.parent
        subprocess.run(["mount", "-o", f"remount,size={4 * size_mb}m", str(mnt)], check=True)
        offsets = filler.resume(topic, "after")
        assert offsets == list(range(end, end + RESUMED_RECORDS)), offsets
        read_back(broker, topic, acked_in(filler, topic), 0)
        broker.restart()
        read_back(broker, topic, acked_in(filler, topic), 0)
    finally:
        broker.teardown()
