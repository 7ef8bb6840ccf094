"""The transaction checker (docs/transactions.md §9, §10): transactional producers run random
committed and aborted transactions across partitions while the broker is SIGKILLed at random
times and restarted; afterwards a read_committed reader must see every committed transaction
whole, nothing of an aborted one, and every transaction whose outcome the client could not
learn (its EndTxn or its connection died with the broker) either whole or not at all; no
record twice. Every client call has a deadline, and every producer thread must have finished
(or given up with an error) once the run stops: nothing hangs.

Each record's value names its producer, transaction, position and the producer's intent
(`p<producer>:<generation>:t<txn>:<i>/<n>:<c|a>`), so the reader can check transactions
without any other record of what was sent.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, TopicPartition

from helpers import ck_consumer, ck_producer, create_topic, wait_until

PRODUCERS = 3
PARTITIONS = 4
KILLS = 4
TXN_TIMEOUT_MS = 4000
CALL_TIMEOUT_S = 8.0
SEED = random.randrange(1 << 30)


@dataclass
class Outcomes:
    """What one producer thread learned about its transactions, by transaction key."""
    committed: set[str] = field(default_factory=set)
    aborted: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    finished: bool = False


def new_producer(bootstrap: str, txn_id: str):
    p = ck_producer(bootstrap, **{
        "transactional.id": txn_id,
        "enable.idempotence": True,
        "transaction.timeout.ms": TXN_TIMEOUT_MS,
        "message.timeout.ms": TXN_TIMEOUT_MS,
        "socket.timeout.ms": 3000,
        "reconnect.backoff.max.ms": 200,
        "linger.ms": 1,
    })
    p.init_transactions(CALL_TIMEOUT_S)
    return p


def run_producer(bootstrap: str, topic: str, idx: int, stop: threading.Event, out: Outcomes,
                 rng: random.Random) -> None:
    """Runs transactions until `stop`; a producer the client declares unusable (fatal, or a
    call that failed in a way it cannot recover from) is replaced by a new instance with the
    same transactional id, which fences the old one."""
    txn_id = f"chk-{idx}-{uuid.uuid4().hex[:6]}"
    generation = 0
    producer = None
    txn = 0
    while not stop.is_set():
        if producer is None:
            try:
                generation += 1
                producer = new_producer(bootstrap, txn_id)
            except KafkaException as e:
                out.errors.append(f"init: {e.args[0]}")
                producer = None
                time.sleep(0.2)
                continue
        txn += 1
        key = f"p{idx}:{generation}:t{txn}"
        commit = rng.random() < 0.6
        n = rng.randint(1, 5)
        try:
            producer.begin_transaction()
            for i in range(n):
                value = f"{key}:{i}/{n}:{'c' if commit else 'a'}".encode()
                producer.produce(topic, value, partition=rng.randrange(PARTITIONS))
            producer.flush(CALL_TIMEOUT_S)
            if commit:
                producer.commit_transaction(CALL_TIMEOUT_S)
                out.committed.add(key)
            else:
                producer.abort_transaction(CALL_TIMEOUT_S)
                out.aborted.add(key)
        except KafkaException as e:
            err = e.args[0]
            out.errors.append(f"{key}: {err}")
            # The broker may have decided either way (commit) or not at all.
            (out.unknown if commit else out.aborted).add(key)
            producer = recover(producer, err)
        except BufferError as e:
            out.errors.append(f"{key}: {e}")
            (out.unknown if commit else out.aborted).add(key)
            producer = None
    out.finished = True


def recover(producer, err):
    """After a failed call: abort when the client allows it, else drop the instance."""
    if err.fatal():
        return None
    try:
        producer.abort_transaction(CALL_TIMEOUT_S)
        return producer
    except KafkaException:
        return None


def read_all(bootstrap: str, topic: str, isolation: str) -> list[str]:
    """Every value the partitions hold for `isolation` (up to the LSO under read_committed):
    read until nothing more arrives for 3 s (markers and aborted records take offsets the
    consumer never returns, so positions cannot tell the end), bounded by 30 s."""
    c = ck_consumer(bootstrap, **{"isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values = []
        deadline = time.monotonic() + 30
        last = time.monotonic()
        while time.monotonic() - last < 3.0:
            assert time.monotonic() < deadline, "the read never went quiet"
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error():
                    continue
                values.append(m.value().decode())
                last = time.monotonic()
        return values
    finally:
        c.close()


def stable(bootstrap: str, topic: str) -> bool:
    """Every partition's LSO has reached its high watermark: no transaction is open."""
    committed = ck_consumer(bootstrap, **{"isolation.level": "read_committed"})
    uncommitted = ck_consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
    try:
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            if committed.get_watermark_offsets(tp, timeout=10)[1] != \
                    uncommitted.get_watermark_offsets(tp, timeout=10)[1]:
                return False
        return True
    finally:
        committed.close()
        uncommitted.close()


def test_transactions_survive_random_sigkills(sluice_factory, topic_name):
    """Goal: committed transactions are visible whole, aborted ones never, and undecided ones
    all or nothing, across broker SIGKILLs at random times (docs/transactions.md §5.2, §9).
    Method: 3 confluent-kafka transactional producers (60 % commits, 1-5 records over 4
    partitions) while the broker is SIGKILLed 4 times 1.5-4 s apart and restarted on the
    same port after 0.2-3 s (long enough, sometimes, for client calls to time out); then, once every open transaction was decided (the timer aborts orphans after
    4 s), one read_committed read checks every transaction and one read_uncommitted read shows
    aborted records were written (so the check could fail)."""
    rng = random.Random(SEED)
    b = sluice_factory(["--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"])
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    stop = threading.Event()
    outcomes = [Outcomes() for _ in range(PRODUCERS)]
    threads = [threading.Thread(target=run_producer, daemon=True,
                                args=(b.bootstrap, topic_name, i, stop, outcomes[i],
                                      random.Random(rng.random())))
               for i in range(PRODUCERS)]
    for t in threads:
        t.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.5, 4.0))
            b.kill9()
            time.sleep(rng.uniform(0.2, 3.0))
            b.start()
        time.sleep(2.0)
    finally:
        stop.set()
    deadline = time.monotonic() + 4 * CALL_TIMEOUT_S
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"producers {hung} never returned (seed {SEED})"
    assert all(o.finished for o in outcomes)

    wait_until(lambda: stable(b.bootstrap, topic_name), timeout=30,
               what="every open transaction decided")
    seen = read_all(b.bootstrap, topic_name, "read_committed")
    by_txn: dict[str, list[str]] = defaultdict(list)
    for v in seen:
        key, pos, intent = v.rsplit(":", 2)
        by_txn[key].append(pos)
        assert intent == "c", f"a record of an aborted transaction is visible: {v} (seed {SEED})"
    for key, positions in by_txn.items():
        n = int(positions[0].split("/")[1])
        assert sorted(positions) == sorted(f"{i}/{n}" for i in range(n)), \
            f"transaction {key} seen partly or twice: {sorted(positions)} (seed {SEED})"
    committed = set().union(*(o.committed for o in outcomes))
    aborted = set().union(*(o.aborted for o in outcomes))
    unknown = set().union(*(o.unknown for o in outcomes))
    assert committed <= set(by_txn), f"committed but not visible: {sorted(committed - set(by_txn))}"
    assert not aborted & set(by_txn), f"aborted but visible: {sorted(aborted & set(by_txn))}"
    assert set(by_txn) <= committed | unknown
    assert len(committed) >= 10 and len(aborted) >= 5, (len(committed), len(aborted))

    written = read_all(b.bootstrap, topic_name, "read_uncommitted")
    assert any(v.endswith(":a") for v in written), "no aborted record reached the log"
    print(f"checker seed {SEED}: {len(committed)} committed, {len(aborted)} aborted, "
          f"{len(unknown)} unknown ({len(unknown & set(by_txn))} visible), "
          f"{sum(len(o.errors) for o in outcomes)} client errors, {len(seen)} records read")
