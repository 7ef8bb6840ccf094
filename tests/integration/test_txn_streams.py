"""A Kafka Streams application with processing.guarantee=exactly_once_v2 against Sluice
(docs/transactions.md §10): a stateful word count with a repartition topic and a compacted
changelog (tests/integration/java/src/StreamsWordCount.java, kafka-streams at the same
release as kafka-clients). The broker is SIGKILLed while the application runs and is
restarted; under read_committed every word's counts must then read exactly 1, 2, ..., n:
no count lost, none repeated, none from an aborted transaction.

Everything the application needs from the broker is exercised: CreateTopics for its internal
topics (compacted changelog), the classic group protocol, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit v3+ (KIP-447 member checks), EndTxn, read_committed fetches,
OffsetFetch with require_stable, DeleteRecords on the repartition topic.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections import defaultdict

from confluent_kafka import TopicPartition

from helpers import ck_consumer, ck_producer, create_topic
from java_client import JavaProc, classpath

WORDS = [f"w{i}" for i in range(8)]
INPUT_PARTITIONS = 2


def produce_words(bootstrap: str, topic: str, start: int, n: int) -> None:
    """Records start..start+n-1; record i carries the word WORDS[i % len(WORDS)]."""
    p = ck_producer(bootstrap, **{"enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=WORDS[i % len(WORDS)].encode(), partition=i % INPUT_PARTITIONS)
    assert p.flush(30) == 0


def expected_counts(total: int) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i in range(total):
        out[WORDS[i % len(WORDS)]] += 1
    return dict(out)


def read_counts(bootstrap: str, topic: str, isolation: str = "read_committed",
                idle_s: float = 2.0, timeout_s: float = 20.0) -> dict[str, list[int]]:
    """Every (word, count) record of the output topic, in offset order, per word."""
    c = ck_consumer(bootstrap, **{"isolation.level": isolation})
    counts: dict[str, list[int]] = defaultdict(list)
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        last = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < idle_s:
            for m in c.consume(num_messages=1000, timeout=0.25):
                if m.error() is not None:
                    continue
                counts[m.key().decode()].append(struct.unpack(">q", m.value())[0])
                last = time.monotonic()
    finally:
        c.close()
    return dict(counts)


def wait_for_state(app: JavaProc, state: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(e.get("state") == state for e in app.events()):
        if app.exited():
            r = app.wait(5)
            raise AssertionError(f"the Streams application exited: {r.summary()}")
        assert time.monotonic() < deadline, f"never reached {state}: {app.events()}"
        time.sleep(0.2)


def test_streams_exactly_once_v2_survives_a_broker_sigkill(sluice_factory, topic_name, tmp_path):
    """Goal: a Kafka Streams exactly_once_v2 application counts exactly across a broker
    SIGKILL: under read_committed each word's counts are 1..n with nothing missing or
    repeated, and the final counts equal the input.
    Method: 400 input records over 2 partitions; start the application; 800 more while it
    runs; SIGKILL the broker as soon as output appears from that second batch; restart it
    (1 s transaction abort timer); 400 more; wait until every word's last committed count is
    its total; check every word's whole sequence of counts."""
    classpath()  # build the Java pieces before the clock starts
    args = ["--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"]
    broker = sluice_factory(args)
    inp, out = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, inp, partitions=INPUT_PARTITIONS)
    create_topic(broker.bootstrap, out)
    produce_words(broker.bootstrap, inp, 0, 400)
    app_id = f"wc-{uuid.uuid4().hex[:8]}"
    app = JavaProc("--bootstrap", broker.bootstrap, "--app-id", app_id, "--input", inp,
                   "--output", out, "--state-dir", str(tmp_path / "streams-state"),
                   "--conf", "consumer.session.timeout.ms=10000",
                   "--conf", "consumer.heartbeat.interval.ms=1000",
                   main_class="StreamsWordCount")
    try:
        wait_for_state(app, "RUNNING", 90)
        deadline = time.monotonic() + 60
        while sum(len(v) for v in read_counts(broker.bootstrap, out, idle_s=0.5).values()) < 400:
            assert time.monotonic() < deadline, "the application never caught up with the first batch"
        produce_words(broker.bootstrap, inp, 400, 800)
        # Kill while the second batch is being processed: some of it is in the output,
        # committed or not.
        deadline = time.monotonic() + 30
        while sum(len(v) for v in read_counts(broker.bootstrap, out, "read_uncommitted",
                                              idle_s=0.2, timeout_s=2).values()) <= 400:
            assert time.monotonic() < deadline, "no output from the second batch"
        broker.kill9()
        broker.start()
        produce_words(broker.bootstrap, inp, 1200, 400)
        total = 1600
        want = expected_counts(total)
        deadline = time.monotonic() + 150
        while True:
            counts = read_counts(broker.bootstrap, out)
            last = {w: (c[-1] if c else 0) for w, c in counts.items()}
            if last == want:
                break
            if app.exited():
                r = app.wait(5)
                raise AssertionError(f"the Streams application exited: {r.summary()}")
            assert time.monotonic() < deadline, f"counts never reached {want}: {last}"
            time.sleep(1)
        for word, seq in counts.items():
            assert seq == list(range(1, want[word] + 1)), (
                f"{word}: counts under read_committed are not exactly 1..{want[word]}: "
                f"first differences at {[i for i, v in enumerate(seq) if v != i + 1][:5]}")
    finally:
        result = app.stop(60)
    assert result.data.get("ok"), result.summary()
