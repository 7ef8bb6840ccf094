"""The fetch data path's cost (issue 11, fetch part): a consumer draining a backlog must not
make the broker fault in fresh memory for every byte it sends.

Each fetch reads its partitions' records into buffers and frees them once the response is
written. With glibc's dynamic malloc thresholds those frees returned the heap to the kernel
after every fetch, so every 4 KiB sent cost a page fault and a page clear
(`alloc_guard::tune_system_allocator` pins the thresholds). The broker's minor faults are read
from /proc/<pid>/stat while a real librdkafka consumer drains a 12-partition backlog."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from helpers import ck_consumer, ck_producer, create_topic

MIB = 1024 * 1024
RECORD_BYTES = 1024
PARTITIONS = 12
BACKLOG_BYTES = 96 * MIB
# Warm-up share: the first fetches grow the heap; faults after it are what the test counts.
WARM_RECORDS = BACKLOG_BYTES // RECORD_BYTES // 8


def minor_faults(pid: int) -> int:
    """minflt of the whole process (field 10 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def drain(consumer, n: int) -> int:
    got = 0
    while got < n:
        msgs = consumer.consume(num_messages=10_000, timeout=10.0)
        assert msgs, f"no records after {got} of {n}"
        for m in msgs:
            assert m.error() is None, m.error()
        got += len(msgs)
    return got


# Goal: draining a backlog costs the broker fewer than one page fault per 16 KiB sent
# (before the allocator thresholds were pinned: about one per 4 KiB, 253k per GiB).
def test_draining_a_backlog_does_not_fault_in_every_page(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    producer = ck_producer(broker.bootstrap, **{"linger.ms": 5, "batch.size": 262144})
    payload = b"x" * RECORD_BYTES
    records = BACKLOG_BYTES // RECORD_BYTES
    for i in range(records):
        while True:
            try:
                producer.produce(topic_name, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0

    consumer = ck_consumer(broker.bootstrap, **{"enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(PARTITIONS)])
    warm = drain(consumer, WARM_RECORDS)
    pid = broker.proc.pid
    faults_before = minor_faults(pid)
    rest = drain(consumer, records - warm)
    faults = minor_faults(pid) - faults_before
    consumer.close()

    sent_pages = rest * RECORD_BYTES // 4096
    print(f"broker minor faults: {faults} while sending {rest * RECORD_BYTES / MIB:.0f} MiB ({sent_pages} pages)")
    assert faults < sent_pages // 4, f"{faults} page faults for {sent_pages} pages sent"
