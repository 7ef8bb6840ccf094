"""The journal written with O_DIRECT (`sluice.journal.direct.io=true`, issue 11), observed on a
real `sluice serve` process with real clients.

With the setting on, the committer writes each commit round from one page-aligned buffer
through a second, O_DIRECT descriptor of the current journal file; readers still read (and
`sendfile`) through the buffered one. What a client must see is unchanged: a consumer tailing
the log while records are produced gets every record, in order, exactly as produced, and so
does a consumer that starts from the beginning after the producer is done (those bytes then
come back from disk: nothing written with O_DIRECT is in the page cache). A tailing consumer is
served from the journal's in-memory tail (the newest 16 MiB of aligned round memory), so the
broker reads next to nothing from the disk for it, while the replay of older records does."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import TopicPartition

from helpers import O_DIRECT, ck_consumer, ck_poll, ck_producer, create_topic, journal_fd_flags

DIRECT_IO = ["--override", "sluice.journal.direct.io=true"]
PARTITIONS = 2
RECORDS = 24_000
VALUE_BYTES = 1500  # 36 MB in all: more than the 16 MiB in-memory tail


def _value(partition: int, i: int) -> bytes:
    head = f"p{partition}-{i:08d}-".encode()
    return head + bytes((i * 7 + k) % 251 for k in range(VALUE_BYTES - len(head)))


class Tailer(threading.Thread):
    """Consumes both partitions from offset 0 while the producer runs, until it has
    `expected` records or `deadline_s` passed."""

    def __init__(self, bootstrap: str, topic: str, expected: int, deadline_s: float):
        super().__init__(daemon=True)
        self.consumer = ck_consumer(bootstrap)
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.expected = expected
        self.deadline = time.monotonic() + deadline_s
        self.seen: list[tuple[int, int, bytes]] = []

    def run(self):
        try:
            while len(self.seen) < self.expected and time.monotonic() < self.deadline:
                for m in ck_poll(self.consumer, 2000, timeout=0.5):
                    self.seen.append((m.partition(), m.offset(), m.value()))
        finally:
            self.consumer.close()


def _read_bytes(pid: int) -> int:
    """Bytes the broker process made the block layer read (`/proc/<pid>/io` read_bytes)."""
    line = next(l for l in Path(f"/proc/{pid}/io").read_text().splitlines() if l.startswith("read_bytes"))
    return int(line.split()[1])


def _check(seen: list[tuple[int, int, bytes]], acked: dict[tuple[int, int], bytes], who: str) -> None:
    assert len(seen) == len(acked), f"{who}: {len(seen)} records, {len(acked)} acknowledged"
    got = {(p, o): v for p, o, v in seen}
    assert len(got) == len(seen), f"{who}: some offsets came twice"
    wrong = [k for k, v in acked.items() if got.get(k) != v]
    assert not wrong, f"{who}: {len(wrong)} records differ from what was produced, e.g. {sorted(wrong)[:3]}"
    for p in range(PARTITIONS):
        offsets = [o for q, o, _ in seen if q == p]
        assert offsets == sorted(offsets), f"{who}: partition {p} out of order"


def test_tailing_and_replaying_consumers_get_every_record(sluice_factory):
    """Goal: with the journal written by O_DIRECT, a tailing consumer and a consumer from the
    beginning (after the producer moved 36 MB past the first records) both get every
    acknowledged record, byte for byte, in offset order; and the broker really writes the
    journal through an O_DIRECT descriptor next to the buffered one.
    Method: a broker with `sluice.journal.direct.io=true`, a 2-partition topic, a consumer
    polling both partitions from offset 0 while librdkafka produces 24 000 records of 1500 B
    (acks=all); the acknowledged (partition, offset) -> value map is compared with what each
    consumer got; /proc/<pid>/fdinfo shows the descriptors on journal files and their flags.
    The producer flushes every 1000 records so the tailer keeps within the in-memory tail; the
    broker's read_bytes must stay under a quarter of what the tailer consumed (without the
    tail every byte comes back from the disk) and grow by at least a third of the data during
    the replay from the beginning (most of it is older than the tail)."""
    b = sluice_factory(DIRECT_IO, name="direct")
    topic = "direct"
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    tailer = Tailer(b.bootstrap, topic, RECORDS, deadline_s=120)
    read_before_tailing = _read_bytes(b.proc.pid)
    tailer.start()

    acked: dict[tuple[int, int], bytes] = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()

    p = ck_producer(b.bootstrap, **{"linger.ms": 5, "queue.buffering.max.kbytes": 64 * 1024,
                                     "message.timeout.ms": 60000})
    for i in range(RECORDS):
        partition = i % PARTITIONS
        while True:
            try:
                p.produce(topic, value=_value(partition, i), partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if i % 1000 == 999:
            assert p.flush(60) == 0
            while len(tailer.seen) < i - 2000 and tailer.is_alive():
                time.sleep(0.01)
    assert p.flush(60) == 0, "records still unacknowledged"
    assert not errors, errors[:3]
    assert len(acked) == RECORDS

    flags = journal_fd_flags(b.proc.pid)
    assert any(f & O_DIRECT for _, f in flags), f"no O_DIRECT descriptor on a journal file: {flags}"
    assert any(not f & O_DIRECT for _, f in flags), f"no buffered descriptor for readers: {flags}"

    tailer.join(timeout=130)
    _check(tailer.seen, acked, "tailing consumer")
    total_bytes = RECORDS * VALUE_BYTES
    read_tailing = _read_bytes(b.proc.pid) - read_before_tailing
    print(f"read from disk: {read_tailing} B while tailing {total_bytes} B")
    assert read_tailing < total_bytes // 4, f"tailing read {read_tailing} B from disk"

    c = ck_consumer(b.bootstrap)
    c.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
    read_before_replay = _read_bytes(b.proc.pid)
    seen = [(m.partition(), m.offset(), m.value()) for m in ck_poll(c, RECORDS, timeout=60)]
    c.close()
    _check(seen, acked, "consumer from the beginning")
    read_replay = _read_bytes(b.proc.pid) - read_before_replay
    print(f"read from disk: {read_replay} B during the replay")
    assert read_replay > total_bytes // 3, f"replay read only {read_replay} B from disk"
