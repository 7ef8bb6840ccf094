"""Fetch responses sent with sendfile from journal file ranges (issue 11, fetch part),
observed on a real `sluice serve` process.

A fetch response names ranges of journal files and pins those files until it is written.
The test here holds one large response in flight (the client does not read) while
DeleteRecords and a checkpoint would retire the journal file it is sent from, and while
more produce would recycle and rewrite that file: the response must still carry exactly the
records produced, and the file must be retired once the response is done."""

from __future__ import annotations

import select
import socket
import struct
import time

from confluent_kafka import Producer

import kwire
import storage_layout as layout
from admin_facade import CkAdmin
from helpers import create_topic, wait_until

MIB = 1024 * 1024
JOURNAL_FILE_BYTES = 128 * MIB  # journal_file_bytes_max, the default in sluice-log config.rs
RECORD_BYTES = 64 * 1024
FETCH_BYTES = 48 * MIB


def _value(phase: bytes, offset: int) -> bytes:
    head = phase + f"{offset:010d}".encode()
    return head + bytes((offset + i) % 251 for i in range(RECORD_BYTES - len(head)))


def _produce(bootstrap: str, topic: str, phase: bytes, first: int, count: int) -> None:
    """Produces `count` records to partition 0, acks=all and idempotent (so offsets follow
    the send order); record i carries `_value(phase, first + i)`."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "queue.buffering.max.kbytes": 256 * 1024,
                  "message.timeout.ms": 120000})
    for i in range(first, first + count):
        while True:
            try:
                p.produce(topic, value=_value(phase, i), partition=0,
                          on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0, "records still unacknowledged"
    assert not errors, errors[:3]


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    v, pos = _uvarint(data, pos)
    return (v >> 1) ^ -(v & 1), pos


def _records(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole uncompressed v2 batches."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        base, length = struct.unpack(">qi", records[pos:pos + 12])
        end = pos + 12 + length
        assert end <= len(records), "a partial batch: Sluice sends whole batches"
        assert records[pos + 16] == 2, f"magic of the batch at {base}"
        attributes = struct.unpack(">h", records[pos + 21:pos + 23])[0]
        assert attributes & 0x7 == 0, "uncompressed"
        count = struct.unpack(">i", records[pos + 57:pos + 61])[0]
        r = pos + 61
        for _ in range(count):
            size, r = _varint(records, r)
            rec_end = r + size
            r += 1  # attributes
            _, r = _varint(records, r)  # timestamp delta
            delta, r = _varint(records, r)
            klen, r = _varint(records, r)
            r += max(klen, 0)
            vlen, r = _varint(records, r)
            out.append((base + delta, records[r:r + vlen]))
            r = rec_end
        assert r == end, f"records of the batch at {base} do not fill it"
        pos = end
    assert pos == len(records)
    return out


def _wal_seqs(broker) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in layout.journal_files(broker.data_dir))


def test_an_inflight_response_keeps_its_journal_file(sluice_factory, topic_name):
    """Goal: a fetch response being sent from a journal file pins it: DeleteRecords, the
    checkpoint that would retire the file and produce that would recycle and rewrite it do
    not change what the response carries; once written, the file is retired.
    Method: one partition (64 MiB segments: a read stays in one segment); produce ~1.25
    journal files (128 MiB each) of 64 KiB records whose values carry their offset ("A"
    phase). A raw client with a small receive buffer sends Fetch v4 for 48 MiB from offset
    0 and does not read: the broker is stuck mid-response, sending from the first journal
    file. DeleteRecords to the high
    watermark (the first file's segments go), wait past the 5 s checkpoint: the first file
    is still there (without the pin, as with the old read-into-memory path, it is retired here). Produce ~1 more journal file ("B"
    phase): the writer moves to a new file, which would be the recycled first file. Then read
    the response: records 0.. contiguous, every value exactly as produced in phase A, at
    least 40 MiB of them. After the response, the first file is retired within 15 s."""
    b = sluice_factory(["--retention-check-interval-ms", "60000"])
    create_topic(b.bootstrap, topic_name, 1, config={"segment.bytes": str(64 * MIB)})
    first_count = (JOURNAL_FILE_BYTES + JOURNAL_FILE_BYTES // 4) // RECORD_BYTES
    _produce(b.bootstrap, topic_name, b"A", 0, first_count)
    seqs = _wal_seqs(b)
    assert len(seqs) >= 2, f"the log spans two journal files: {seqs}"
    first_file = seqs[0]

    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.settimeout(60)
    s.connect((b.host, b.port))
    try:
        s.sendall(kwire.fetch_request_v4(777, topic_name, 0, 0, max_bytes=FETCH_BYTES,
                                         partition_max_bytes=FETCH_BYTES))
        readable, _, _ = select.select([s], [], [], 10)
        assert readable, "the response started"
        time.sleep(0.5)

        code, low = CkAdmin(b.bootstrap).delete_records(topic_name, 0, first_count)
        assert code == 0 and low == first_count, (code, low)
        # A checkpoint runs every 5 s: it would retire the first file now that no segment
        # points into it. The response still pins it.
        time.sleep(7)
        assert first_file in _wal_seqs(b), f"the file being sent was retired: {_wal_seqs(b)}"
        _produce(b.bootstrap, topic_name, b"B", first_count, JOURNAL_FILE_BYTES // RECORD_BYTES)
        assert max(_wal_seqs(b)) > seqs[-1], f"the writer moved on to a new file: {_wal_seqs(b)}"

        size = struct.unpack(">i", kwire.recv_exact(s, 4))[0]
        body = kwire.recv_exact(s, size)
    finally:
        s.close()
    corr, parts = kwire.parse_fetch_v4(body)
    assert corr == 777
    part = parts[(topic_name, 0)]
    assert part.error_code == 0, part.error_code
    records = _records(part.records)
    assert len(part.records) >= 40 * MIB, len(part.records)
    assert [o for o, _ in records] == list(range(len(records))), "offsets contiguous from 0"
    for offset, value in records:
        assert value == _value(b"A", offset), f"record {offset} is not what was produced"

    wait_until(lambda: first_file not in _wal_seqs(b), 15,
               what=f"journal file {first_file} retired once the response was written")
    got = kwire.fetch_v4(b.bootstrap, topic_name, 0, first_count)
    assert got.error_code == 0 and got.batches()[0].base_offset == first_count
