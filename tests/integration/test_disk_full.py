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
from helpers import create_topic

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
