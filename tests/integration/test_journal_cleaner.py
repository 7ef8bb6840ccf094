"""Disk space that follows retention (issue 32's re-attack, scaled down): a topic with a short
`retention.ms` takes most of the load while (a) a consumer group commits its offset every
50 ms and (b) a week-retained topic receives one record per 200. Every journal file then holds
a few bytes of `__consumer_offsets` and of the week's topic. Without the journal cleaner those
bytes keep every expired file on disk; with it the data dir falls back to about what a run
without them (the control) keeps.

Real broker process, real files, librdkafka clients. Journal files of 4 MiB
(`sluice.journal.file.bytes`) so about 64 MiB spans many of them; retention checked every
second.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from helpers import create_topic, wait_until

JOURNAL_FILE_BYTES = 4 << 20
RECORD_BYTES = 1024
DATA_BYTES = 64 << 20
TRICKLE_EVERY = 200
RETENTION_MS = 3000


def _args(cleaner: bool) -> list[str]:
    return [
        "--retention-check-interval-ms", "1000",
        "--override", f"sluice.journal.file.bytes={JOURNAL_FILE_BYTES}",
        "--override", "sluice.journal.cleaner.backoff.ms=500",
        "--override", f"sluice.journal.cleaner.enable={'true' if cleaner else 'false'}",
    ]


def data_file_bytes(data_dir: Path) -> int:
    """Bytes of the journal and cleaned files: what the records take on disk (the recycled
    `.free` files, at most four, are counted apart)."""
    j = data_dir / "journal"
    return sum(p.stat().st_size for p in j.iterdir() if p.suffix in (".wal", ".cleaned"))


def metrics(broker) -> str:
    with urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10) as r:
        return r.read().decode()


def gauge(body: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", body, re.M)
    assert m, f"no {name}{labels} in /metrics"
    return float(m.group(1))


def _committer(bootstrap: str, topic: str, stop: threading.Event, commits: list[int]) -> None:
    """A consumer group member committing its position every 50 ms."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "committer", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        while not stop.is_set():
            msg = c.poll(0.05)
            if msg is not None and not msg.error():
                c.commit(message=msg, asynchronous=False)
                commits.append(msg.offset())
    finally:
        c.close()


def _load(broker, mixed: bool) -> dict:
    """Produces DATA_BYTES to the short-retained topic (and, when `mixed`, the trickle and the
    committing group beside it); returns what the trickle was sent."""
    create_topic(broker.bootstrap, "busy", 2, {"retention.ms": str(RETENTION_MS), "segment.bytes": str(1 << 20)})
    create_topic(broker.bootstrap, "week", 1, {"retention.ms": str(7 * 86_400_000)})
    stop, commits = threading.Event(), []
    t = None
    if mixed:
        t = threading.Thread(target=_committer, args=(broker.bootstrap, "busy", stop, commits), daemon=True)
        t.start()
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    sent, value = {}, b"x" * RECORD_BYTES
    for i in range(DATA_BYTES // RECORD_BYTES):
        p.produce("busy", value=value, partition=i % 2)
        if mixed and i % TRICKLE_EVERY == 0:
            p.produce("week", key=str(i).encode(), value=f"trickle-{i}".encode())
            sent[str(i)] = f"trickle-{i}"
        if i % 10_000 == 0:
            p.poll(0)
        while len(p) > 50_000:
            p.poll(0.01)
    assert p.flush(60) == 0, "undelivered records"
    if t is not None:
        time.sleep(0.5)
        stop.set()
        t.join(10)
        assert len(commits) > 10, "the group committed"
    return sent


def _settled_size(broker) -> int:
    """Waits until retention (and the cleaner) stop freeing space; returns the data files'
    bytes then."""
    # The retention window, a retention check and a checkpoint (which retires files, every
    # 5 s) first: before them nothing can have been freed, and the size looks steady.
    time.sleep(RETENTION_MS / 1000 + 7)
    sizes: list[int] = []

    def steady():
        sizes.append(data_file_bytes(broker.data_dir))
        return len(sizes) >= 6 and max(sizes[-6:]) - min(sizes[-6:]) < JOURNAL_FILE_BYTES // 2 or None

    wait_until(steady, 60, interval=1, what="data files settle")
    return sizes[-1]


def _read_week(bootstrap: str) -> dict:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    c.assign([TopicPartition("week", 0, 0)])
    got, deadline = {}, time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                if got:
                    break
                continue
            assert not msg.error(), msg.error()
            got[msg.key().decode()] = msg.value().decode()
    finally:
        c.close()
    return got


@pytest.mark.timeout(300)
def test_mixed_retention_keeps_the_data_dir_near_the_control(sluice_factory):
    """Goal: with a committing group and a week-retained trickle beside a 3 s topic, the data
    files settle within 1.3x of the control run's (the same load without them), every trickle
    record reads back, and /metrics shows the space amplification and no pinned files; with
    the journal cleaner off the same run keeps several times more (so the test can fail).
    Method: three brokers in turn (control, mixed without the cleaner, mixed with it), 64 MiB
    each over 4 MiB journal files, sizes taken once retention has settled."""
    control = sluice_factory(_args(cleaner=True), name="control", metrics=True)
    _load(control, mixed=False)
    control_bytes = _settled_size(control)
    control.stop()

    off = sluice_factory(_args(cleaner=False), name="off", metrics=True)
    _load(off, mixed=True)
    off_bytes = _settled_size(off)
    off.stop()

    on = sluice_factory(_args(cleaner=True), name="on", metrics=True)
    sent = _load(on, mixed=True)
    on_bytes = _settled_size(on)
    body = metrics(on)
    amplification = gauge(body, "sluice_log_space_amplification")
    retained = gauge(body, "sluice_log_retained_bytes")
    moved = gauge(body, "sluice_log_journal_cleaner_moved_bytes_total")
    print(f"data files: control {control_bytes >> 20} MiB, mixed without the cleaner {off_bytes >> 20} MiB, "
          f"mixed with it {on_bytes >> 20} MiB; retained {int(retained) >> 10} KiB, amplification "
          f"{amplification:.2f}, moved {int(moved) >> 10} KiB")
    assert off_bytes > 3 * control_bytes, "without the cleaner the expired files stay (the re-attack)"
    assert on_bytes <= 1.3 * control_bytes + JOURNAL_FILE_BYTES, (on_bytes, control_bytes)
    assert gauge(body, "sluice_log_pinned_files") <= 1
    assert moved < DATA_BYTES / 10, "only the outliving bytes move"
    assert on_bytes <= 1.3 * retained + 3 * JOURNAL_FILE_BYTES
    assert _read_week(on.bootstrap) == sent, "the moved trickle reads back"
    c = Consumer({"bootstrap.servers": on.bootstrap, "group.id": "committer"})
    committed = c.committed([TopicPartition("busy", 0)], timeout=10)[0].offset
    c.close()
    assert committed > 0, "the group's moved offsets are still there"
    on.restart()
    assert _read_week(on.bootstrap) == sent, "and after a restart"
