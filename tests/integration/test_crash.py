"""Crash consistency: SIGKILL the broker under a continuous acks=all producer and check that
every acknowledged record survives exactly once at its acknowledged offset.

The randomness (kill moment, record sizes) is seeded; the seed is printed and can be fixed
with SLUICE_CRASH_SEED. SLUICE_CRASH_TRIALS sets the number of trials (default 5).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from confluent_kafka import TopicPartition

from helpers import O_DIRECT, ck_consumer, ck_poll, ck_producer, create_topic, journal_fd_flags

PARTITIONS = 2
TRIALS = int(os.environ.get("SLUICE_CRASH_TRIALS", "5"))


class AckingProducer(threading.Thread):
    """Produces unique, sequence-numbered values round-robin over the partitions until told
    to stop; records (partition, offset) for every value the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, trial: int, rng: random.Random):
        super().__init__(daemon=True)
        self.topic = topic
        self.trial = trial
        self.rng = rng
        self.producer = ck_producer(bootstrap, **{
            "acks": "all", "linger.ms": 2, "message.timeout.ms": 4000, "retries": 0,
            "queue.buffering.max.messages": 20000, "socket.timeout.ms": 3000,
            "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 200, "log_level": 3,
        })
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.double_acks: list[bytes] = []
        self.failed = 0
        self.sent = 0
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()

    def _on_delivery(self, err, msg):
        with self.lock:
            if err is None:
                v = msg.value()
                if v in self.acked:
                    self.double_acks.append(v)
                self.acked[v] = (msg.partition(), msg.offset())
            else:
                self.failed += 1

    def run(self):
        seq = 0
        while not self.stop_flag.is_set():
            pad = b"." * self.rng.randint(0, 300)
            value = f"trial{self.trial}-seq{seq:09d}-".encode() + pad
            try:
                self.producer.produce(self.topic, value, partition=seq % PARTITIONS, on_delivery=self._on_delivery)
                seq += 1
                self.sent = seq
            except BufferError:
                pass
            self.producer.poll(0 if seq % 50 else 0.001)

    def finish(self):
        """Stops producing and resolves every outstanding message (acked or failed)."""
        self.stop_flag.set()
        self.join(10)
        # The broker is dead: nothing in flight can be acknowledged any more. Purge so every
        # outstanding message fails now instead of at message.timeout.ms.
        self.producer.purge(in_queue=True, in_flight=True, blocking=True)
        self.producer.flush(10)
        self.producer = None  # destroys the librdkafka handle (no reconnect attempts later)


def _read_all(bootstrap: str, topic: str) -> dict[int, list]:
    out = {}
    c = ck_consumer(bootstrap)
    try:
        for p in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            assert lo == 0, f"partition {p} lost its head: low watermark {lo}"
            c.assign([TopicPartition(topic, p, 0)])
            msgs = ck_poll(c, hi, timeout=20)
            c.unassign()
            out[p] = [(m.offset(), m.value()) for m in msgs]
            assert [o for o, _ in out[p]] == list(range(hi)), \
                f"partition {p}: offsets read {len(out[p])} of {hi}, not contiguous from 0"
    finally:
        c.close()
    return out


# The journal written with O_DIRECT from aligned round buffers (the default) and through the
# page cache (`sluice.journal.direct.io`): the same durability is owed either way. Both are
# named, so neither run depends on the default.
JOURNAL_MODES = {
    "direct": ["--override", "sluice.journal.direct.io=true"],
    "page_cache": ["--override", "sluice.journal.direct.io=false"],
}


def _check_journal_mode(pid: int, journal: str) -> None:
    """The broker writes its journal the way the test's label says: an O_DIRECT descriptor
    on a journal file for `direct`, none for `page_cache` (seen in /proc/<pid>/fdinfo)."""
    flags = journal_fd_flags(pid)
    assert flags, "no descriptor on a journal file"
    direct = [target for target, f in flags if f & O_DIRECT]
    if journal == "direct":
        assert direct, f"journal mode {journal}: no O_DIRECT descriptor on a journal file: {flags}"
    else:
        assert not direct, f"journal mode {journal}: journal files written with O_DIRECT: {direct}"


@pytest.mark.parametrize("journal", sorted(JOURNAL_MODES))
def test_sigkill_under_acks_all_load(sluice_factory, journal):
    """Goal: acks=all means durable. Every record the broker acknowledged before a SIGKILL is
    present after recovery exactly once, at the offset it was acknowledged with; the log is
    contiguous from 0 to the high watermark, and the broker accepts new writes after.
    Method: for each of several trials, a fresh broker with a 2-partition topic; a producer
    thread (acks=all, no retries, unique sequence-numbered values, random padding) produces
    flat out; after a random 0.3-1.5 s the broker is SIGKILLed; the producer is purged and
    closed (so no acknowledgement can come from the restarted broker); the broker restarts on
    the same data dir and port; both partitions are read from offset 0 to the high watermark
    and compared with the acknowledgements. Before each kill, the broker's descriptors on its
    journal files show it writes the journal the way the test's label says."""
    seed = int(os.environ.get("SLUICE_CRASH_SEED", str(int(time.time()))))
    print(f"crash test seed: {seed} (set SLUICE_CRASH_SEED={seed} to replay)")
    rng = random.Random(seed)
    summary = []
    for trial in range(TRIALS):
        b = sluice_factory(JOURNAL_MODES[journal], name=f"crash{trial}")
        topic = "crash"
        create_topic(b.bootstrap, topic, partitions=PARTITIONS)
        prod = AckingProducer(b.bootstrap, topic, trial, random.Random(rng.random()))
        prod.start()
        kill_after = rng.uniform(0.3, 1.5)
        time.sleep(kill_after)
        _check_journal_mode(b.proc.pid, journal)
        b.kill9()
        prod.finish()
        acked = dict(prod.acked)
        assert not prod.double_acks, f"trial {trial}: the client saw values acknowledged twice"
        assert acked, f"trial {trial}: nothing was acknowledged in {kill_after:.2f}s; the test proves nothing"

        b.start()
        data = _read_all(b.bootstrap, topic)
        found: dict[bytes, list[tuple[int, int]]] = {}
        for p, recs in data.items():
            for off, v in recs:
                found.setdefault(v, []).append((p, off))
        missing = [v for v in acked if v not in found]
        dupes = [v for v in acked if len(found.get(v, [])) > 1]
        moved = [(v, acked[v], found[v]) for v in acked if v in found and found[v] != [acked[v]]]
        assert not missing, (f"trial {trial} (seed {seed}): {len(missing)} of {len(acked)} acknowledged records "
                             f"lost, e.g. {sorted(missing)[:3]}")
        assert not dupes, f"trial {trial} (seed {seed}): acknowledged records duplicated: {dupes[:3]}"
        assert not moved, f"trial {trial} (seed {seed}): records not at their acknowledged offsets: {moved[:3]}"

        # Writes continue after the recovered tail.
        p = ck_producer(b.bootstrap, **{"linger.ms": 0})
        res = []
        p.produce(topic, b"after-crash", partition=0, on_delivery=lambda err, m: res.append((err, m.offset())))
        assert p.flush(10) == 0
        assert res and res[0][0] is None, res
        assert res[0][1] == len(data[0]), f"append after recovery got offset {res[0][1]}, log end was {len(data[0])}"
        del p

        total = sum(len(r) for r in data.values())
        summary.append(f"trial {trial}: kill at {kill_after:.2f}s, sent {prod.sent}, acked {len(acked)}, "
                       f"failed {prod.failed}, recovered {total}")
        b.stop()
    print("\n".join(summary))
