"""The journal-only storage layout (issue 11), observed on a real `sluice serve` process.

Record batches are written once, to the journal (`<data>/journal/<seq:020>.wal`); a segment
is an `.extents` file of 32-byte records pointing into journal files. These tests check what
that promises from outside: the bytes the broker writes to disk are about the bytes produced
(not twice that), partition directories hold no `.log` copy of the data, a deleted topic
gives its journal files back, and a data directory of the previous format is refused with a
message naming the file instead of being misread.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

import kwire
import storage_layout as layout
from admin_facade import CkAdmin
from conftest import SluiceBroker
from helpers import create_topic, wait_until

MIB = 1 << 20
RECORD_BYTES = 1024
PRODUCED_BYTES = 64 * MIB
PARTITIONS = 12
WRITE_AMPLIFICATION_MAX = 1.15
# An extent record is 32 bytes for at least one produced batch (librdkafka batches of 1 KiB
# records hold many records), so a partition's extents are far below 1% of its data.
EXTENTS_FRACTION_MAX = 0.01
CHECKPOINT_INTERVAL_S = 5
JOURNAL_FILE_BYTES = 128 * MIB  # journal_file_bytes_max, the default in sluice-log config.rs


def write_bytes(pid: int) -> int:
    """Bytes the process caused to be sent to the storage layer (/proc/<pid>/io)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise AssertionError(f"no write_bytes in /proc/{pid}/io")


def produce(bootstrap: str, topic: str, total_bytes: int, record_bytes: int, partitions: int) -> int:
    """Produces `total_bytes` of values in `record_bytes` records round-robin over the
    partitions with acks=all; asserts every record was acknowledged; returns the count."""
    count = total_bytes // record_bytes
    acked, errors = [0], []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)
        else:
            acked[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.kbytes": 256 * 1024, "message.timeout.ms": 120000})
    value = b"v" * (record_bytes - 8)
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=f"{i:08d}".encode() + value, partition=i % partitions,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0, "records still unacknowledged"
    assert not errors, errors[:3]
    assert acked[0] == count
    return count


def wal_files(broker: SluiceBroker) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in layout.journal_files(broker.data_dir)}


def test_produce_writes_each_byte_once_and_no_log_files(sluice_factory, topic_name):
    """Goal: a produced byte is written to disk once (the journal is the only copy), and the
    partition directories hold only small `.extents` files, no `.log` copy. Method: 64 MiB of
    1 KiB records with confluent-kafka (acks=all) over 12 partitions; the broker's
    /proc/<pid>/io write_bytes, read before producing and after the next checkpoint (so the
    extents and index writes count too), grows by at most 1.15x the bytes produced (the
    previous layout wrote ~2x: journal and segment). Then every partition directory: no
    `.log` file, `.extents` files below 1% of the partition's data; and, stopped, the
    batches read through the extents from the journal hold every record produced."""
    b = sluice_factory(["--retention-check-interval-ms", "60000"])
    create_topic(b.bootstrap, topic_name, PARTITIONS)
    before = write_bytes(b.proc.pid)
    count = produce(b.bootstrap, topic_name, PRODUCED_BYTES, RECORD_BYTES, PARTITIONS)
    time.sleep(CHECKPOINT_INTERVAL_S + 1.5)
    written = write_bytes(b.proc.pid) - before
    ratio = written / PRODUCED_BYTES
    print(f"produced {PRODUCED_BYTES} bytes, broker write_bytes grew {written} ({ratio:.3f}x)")
    assert ratio <= WRITE_AMPLIFICATION_MAX, f"wrote {ratio:.3f}x the bytes produced"

    b.stop()
    records = 0
    for part in range(PARTITIONS):
        pdir = b.partition_dir(topic_name, part)
        assert not list(pdir.glob("*.log")), f"{pdir} holds .log files"
        bases = layout.segment_bases(pdir)
        assert bases, f"{pdir} has no segment"
        data_bytes = sum(layout.segment_size(pdir, base) for base in bases)
        extents_bytes = sum(layout.extents_path(pdir, base).stat().st_size for base in bases)
        print(f"partition {part}: {len(bases)} segments, {data_bytes} bytes of batches, "
              f"{extents_bytes} bytes of extents")
        assert data_bytes >= (count // PARTITIONS) * RECORD_BYTES
        assert extents_bytes <= EXTENTS_FRACTION_MAX * data_bytes, (extents_bytes, data_bytes)
        batches = [bt for base in bases for bt in layout.segment_batches(b.data_dir, pdir, base)]
        assert batches[0].base_offset == 0
        assert all(n.base_offset == p.last_offset + 1 for p, n in zip(batches, batches[1:])), "offset gap"
        records += batches[-1].last_offset + 1
    assert records == count, "the extents do not cover every acknowledged record"


def test_deleted_topic_gives_its_journal_files_back(sluice_factory, topic_name):
    """Goal: the journal files that held only a deleted topic's data are retired soon after
    the delete, so its disk space comes back. Method: produce ~2.2 journal files (128 MiB
    each) of 64 KiB records to one topic, then a few records to a second topic (in the
    current journal file); delete the first topic; within 15 s the `.wal` count and their
    total size drop (the files that held only its data are gone), and the second topic still
    reads back."""
    b = sluice_factory(["--retention-check-interval-ms", "60000"])
    other = f"{topic_name}-kept"
    create_topic(b.bootstrap, topic_name, 4)
    create_topic(b.bootstrap, other, 1)
    produce(b.bootstrap, topic_name, int(2.2 * JOURNAL_FILE_BYTES), 64 * 1024, 4)
    kept = kwire.produce_v3(b.bootstrap, other, 0, kwire.record_batch([kwire.RawRecord(b"kept")]))
    assert kept.error_code == 0, kept
    before = wal_files(b)
    print(f"before delete: {before}")
    assert len(before) >= 3, f"expected at least 3 journal files: {before}"
    assert CkAdmin(b.bootstrap).delete([topic_name]) == {topic_name: 0}

    def retired():
        now = wal_files(b)
        return now if len(now) < len(before) and sum(now.values()) < sum(before.values()) else None

    after = wait_until(retired, 15, what="the deleted topic's journal files retired")
    print(f"after delete: {after}")
    # Every file before the current one (which holds `kept`) held only the deleted topic's
    # data: all of them are retired, only the current one is left.
    last = max(before)
    assert list(after) == [last], f"files holding only the deleted topic's data remain: {after}"
    freed = sum(before.values()) - sum(after.values())
    assert freed >= sum(size for name, size in before.items() if name != last), (before, after)
    part = kwire.fetch_v4(b.bootstrap, other, 0, 0)
    assert part.error_code == 0 and part.batches()[0].base_offset == 0
    b.restart()
    part = kwire.fetch_v4(b.bootstrap, other, 0, 0)
    assert part.error_code == 0 and part.high_watermark == 1


def put_old_segment(b: SluiceBroker, topic: str) -> Path:
    path = b.partition_dir(topic) / f"{0:020}.log"
    path.write_bytes(kwire.record_batch([kwire.RawRecord(b"old")]))
    return path


def put_old_journal_magic(b: SluiceBroker, _topic: str) -> Path:
    path = layout.journal_files(b.data_dir)[0]
    with open(path, "r+b") as f:
        assert f.read(8) == layout.JOURNAL_MAGIC
        f.seek(0)
        f.write(b"SLUICEJ1")
    return path


@pytest.mark.parametrize("make_old", [put_old_segment, put_old_journal_magic], ids=["segment-log", "journal-v1"])
def test_previous_format_data_dir_is_refused_naming_the_file(sluice_factory, topic_name, make_old):
    """Goal: a data directory of the previous format (segments held the data in
    `<base:020>.log`; journal magic `SLUICEJ1`) is never misread as empty or damaged: `sluice
    serve` exits non-zero with a message naming the file, and touches nothing. Method: a
    broker with acked records, stopped; put a `.log` segment file into the partition
    directory, or give the journal file the old magic; start: refused, the message names the
    file; every file in the data directory is unchanged."""
    b = sluice_factory(["--retention-check-interval-ms", "60000"])
    create_topic(b.bootstrap, topic_name, 1)
    assert kwire.produce_v3(b.bootstrap, topic_name, 0, kwire.record_batch([kwire.RawRecord(b"x")])).error_code == 0
    b.stop()
    old = make_old(b, topic_name)
    files = {p: p.read_bytes() for p in b.data_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    with pytest.raises(AssertionError) as refused:
        b.start()
    assert b.proc.returncode not in (None, 0), b.proc.returncode
    assert "exited with code" in str(refused.value), refused.value
    assert str(old) in str(refused.value), refused.value
    assert "older Sluice storage format" in str(refused.value), refused.value
    now = {p: p.read_bytes() for p in b.data_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    assert now == files, "the refused start changed the data directory"


def resident_bytes(path: Path) -> int:
    """Bytes of `path` in the page cache, by `mincore(2)` over a read-only mapping (mapping
    a file reads nothing of it)."""
    import ctypes
    import mmap
    import os
    size = path.stat().st_size
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        try:
            assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec.raw) * mmap.PAGESIZE


@pytest.mark.parametrize("fsync", ["always", "never"])
def test_the_journal_skips_the_page_cache_only_when_acks_wait_for_fdatasync(sluice_factory, topic_name, fsync):
    """Goal: with the default `sluice.journal.direct.io=true`, journal rounds are written with
    O_DIRECT under `--fsync always` (nothing of them stays in the page cache) and through the
    page cache under `--fsync never`, where a direct write would make every ack wait for the
    device (docs/transactions.md §13.5). Method: 16 MiB of 1 KiB records, acks=all, nothing
    read back; then the share of the journal files' bytes resident in the page cache
    (`mincore`): under 10 % with direct writes, over 90 % through the page cache."""
    b = sluice_factory(["--fsync", fsync])
    create_topic(b.bootstrap, topic_name, PARTITIONS)
    produce(b.bootstrap, topic_name, 16 * MIB, RECORD_BYTES, PARTITIONS)
    files = layout.journal_files(b.data_dir)
    size = sum(p.stat().st_size for p in files)
    resident = sum(resident_bytes(p) for p in files)
    print(f"--fsync {fsync}: {resident} of {size} journal bytes in the page cache")
    assert size >= 16 * MIB, size
    if fsync == "always":
        assert resident < 0.1 * size, (resident, size)
    else:
        assert resident > 0.9 * size, (resident, size)
