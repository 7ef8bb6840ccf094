"""Transactions V2 (KIP-890 part 2; docs/transactions.md §14) with Apache Kafka's own Java
client 4.x, which turns V2 on by itself once ApiVersions finalizes `transaction.version` 2:
no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5 add their
partitions), EndTxn v5 with the epoch bumped at every end.

The proof that V2 ran is taken from both sides: the client's own request log (its
NetworkClient at debug level names every request it sends, with its version) and the broker's
per-API request counts (`/metrics`). Before this change the broker finalized no
`transaction.version`, the same client sent AddPartitionsToTxn before its first produce to each
partition and EndTxn v4, and every test here failed on that.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections import Counter

from helpers import ck_producer, create_topic
from java_client import JVM_FLAGS, _parse, classpath, java_cp  # noqa: F401 (fixture)
from test_franz import franz, franz_bin  # noqa: F401 (fixtures)
from test_metrics import scrape
from test_txn_admin import table
from test_txn_confluent import consume

# NetworkClient logs "Sending END_TXN request with header RequestHeader(apiKey=END_TXN,
# apiVersion=5, ...)" for every request at debug level.
REQUEST_RE = re.compile(r"Sending \w+ request with header RequestHeader\(apiKey=(\w+), "
                        r"apiVersion=(\d+)")
DEBUG_REQUESTS = "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug"


def run_logged(main_class: str, command: str, *args, timeout: float = 120):
    """Runs a Java client command with its request log on; (result, Counter of (api, version))."""
    cmd = ["java", *JVM_FLAGS, DEBUG_REQUESTS, "-cp", classpath(), main_class, command,
           *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    sent = Counter((m.group(1), int(m.group(2))) for m in REQUEST_RE.finditer(r.stderr))
    return _parse(r.returncode, r.stdout, r.stderr), sent


def versions(sent: Counter, api: str) -> set[int]:
    return {v for (a, v) in sent if a == api}


def requests_total(broker, api: str) -> float:
    return scrape(broker).get("sluice_requests_total", api=api)


def assert_v2(sent: Counter, broker) -> None:
    """The client spoke Transactions V2 only, and the broker saw no V1 add."""
    assert sent, "no request log from the client"
    assert versions(sent, "ADD_PARTITIONS_TO_TXN") == set(), sent
    assert versions(sent, "ADD_OFFSETS_TO_TXN") == set(), sent
    assert versions(sent, "END_TXN") == {5}, sent
    assert min(versions(sent, "PRODUCE")) >= 12, sent
    assert requests_total(broker, "AddPartitionsToTxn") == 0
    assert requests_total(broker, "AddOffsetsToTxn") == 0


def test_java_commits_and_aborts_on_transactions_v2(sluice_factory, topic_name, java_cp):
    """Goal: the Java producer runs commit, abort, commit on V2, kafka-transactions.sh shows the
    epoch bumped at every end, and read_committed consumers see exactly the committed rounds.
    Method: SluiceClient txn-produce (20 records per round over 2 partitions) with the client's
    request log on; then the request log and the broker's counts, `kafka-transactions.sh
    describe / describe-producers / list`, and a read_committed and a read_uncommitted
    consumer."""
    broker = sluice_factory(metrics=True)
    create_topic(broker.bootstrap, topic_name, 2)
    txn_id = f"v2-{uuid.uuid4().hex[:8]}"
    r, sent = run_logged("SluiceClient", "txn-produce", "--bootstrap", broker.bootstrap,
                         "--topic", topic_name, "--transactional-id", txn_id,
                         "--rounds", "commit,abort,commit", "--count", 20, "--partitions", 2)
    assert r.ok, r.summary()
    assert_v2(sent, broker)
    assert sent[("END_TXN", 5)] == 3
    assert requests_total(broker, "EndTxn") == 3
    # kafka-transactions.sh sees the epoch bumped at each of the three ends (InitProducerId
    # gave 0), and the partitions' producer state took it from the last markers.
    [d] = table(broker.bootstrap, "describe", "--transactional-id", txn_id)
    assert (d["TransactionState"], d["ProducerEpoch"]) == ("CompleteCommit", "3"), d
    [p0] = [row for row in table(broker.bootstrap, "describe-producers", "--topic", topic_name,
                                 "--partition", "0") if row["ProducerId"] == d["ProducerId"]]
    assert (p0["ProducerEpoch"], p0["CurrentTransactionStartOffset"]) == ("3", "None"), p0
    listed = {row["TransactionalId"]: row for row in table(broker.bootstrap, "list")}
    assert listed[txn_id]["TransactionState"] == "CompleteCommit"
    committed = sorted(f"r{rnd}-{i:06d}".encode() for rnd in (0, 2) for i in range(20))
    assert consume(broker.bootstrap, topic_name, 2, "read_committed", 40) == committed
    every = sorted(f"r{rnd}-{i:06d}".encode() for rnd in range(3) for i in range(20))
    assert consume(broker.bootstrap, topic_name, 2, "read_uncommitted", 60) == every


def test_a_zombie_producer_is_fenced_on_transactions_v2(sluice_factory, topic_name, java_cp):
    """Goal: a second producer with the same transactional id fences the first: the first's
    open transaction is aborted, its later send and commit fail with a fencing error, and only
    the second's records are ever visible to read_committed.
    Method: TxnV2 zombie (5 records each); then the consumers."""
    broker = sluice_factory(metrics=True)
    create_topic(broker.bootstrap, topic_name, 1)
    r, sent = run_logged("TxnV2", "zombie", "--bootstrap", broker.bootstrap, "--topic", topic_name,
                         "--transactional-id", f"zombie-{uuid.uuid4().hex[:8]}", "--count", 5)
    assert r.ok, r.summary()
    assert_v2(sent, broker)
    assert r["live"] == "committed"
    assert re.search(r"ProducerFenced|InvalidProducerEpoch", r["zombie"]), r["zombie"]
    live = sorted(f"live-{i:03d}".encode() for i in range(5))
    assert consume(broker.bootstrap, topic_name, 1, "read_committed", 5) == live
    seen = consume(broker.bootstrap, topic_name, 1, "read_uncommitted", 10)
    assert b"zombie-late" not in seen, "a fenced producer stored a batch"


def test_offsets_join_the_transaction_on_transactions_v2(sluice_factory, topic_name, java_cp):
    """Goal: consume-transform-produce on V2: sendOffsetsToTransaction sends TxnOffsetCommit v5
    (no AddOffsetsToTxn), the group's offsets move with the commit, and the output is whole.
    Method: 12 records produced to an input topic; TxnV2 copy reads them with a group and copies
    each into an output topic, committing the offsets in each transaction; then the output
    under read_committed and the group's committed offset."""
    from confluent_kafka import Consumer, TopicPartition
    broker = sluice_factory(metrics=True)
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    p = ck_producer(broker.bootstrap)
    for i in range(12):
        p.produce(source, value=f"m{i:02d}".encode(), partition=0)
    assert p.flush(15) == 0
    r, sent = run_logged("TxnV2", "copy", "--bootstrap", broker.bootstrap, "--input", source,
                         "--output", sink, "--group", group,
                         "--transactional-id", f"copy-{uuid.uuid4().hex[:8]}", "--count", 12)
    assert r.ok, r.summary()
    assert_v2(sent, broker)
    assert min(versions(sent, "TXN_OFFSET_COMMIT")) >= 5, sent
    copies = sorted(f"copy-m{i:02d}".encode() for i in range(12))
    assert consume(broker.bootstrap, sink, 1, "read_committed", 12) == copies
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [tp] = c.committed([TopicPartition(source, 0)], timeout=10)
        assert tp.offset == 12
    finally:
        c.close()


def test_franz_go_runs_transactions_v2(sluice_factory, topic_name, franz):  # noqa: F811
    """Goal: franz-go (kgo's GroupTransactSession) switches to V2 by itself too: the broker sees
    EndTxn and TxnOffsetCommit but no AddPartitionsToTxn or AddOffsetsToTxn, with every input
    record copied exactly once under read_committed and the group's offsets at the input's end.
    Method: franz-it transact over 2 input partitions, 60 records in three rounds, every 3rd
    transaction aborted on purpose; the broker's per-API counts; the output."""
    import signal
    from helpers import wait_until
    from test_franz import GROUP_ARGS, librdkafka_committed, produce_values, read_committed_all
    broker = sluice_factory(GROUP_ARGS, metrics=True)
    bs = broker.bootstrap
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, source, 2)
    create_topic(bs, sink)
    group = f"g-v2-{uuid.uuid4().hex[:8]}"
    member = franz.start("transact", bs, "--group", group, "--topic", source, "--out", sink,
                         "--transactional-id", f"{group}-a", "--client-id", "a",
                         "--abort-every", "3")
    # Three rounds of input, each waited for, so the session runs several transactions.
    for round_ in range(3):
        produce_values(bs, source, 20 * round_, 20, 2)
        want = {0: 10 * (round_ + 1), 1: 10 * (round_ + 1)}
        wait_until(lambda: librdkafka_committed(bs, group, source, 2) == want,
                   timeout=90, what=f"the group's offsets after round {round_}")
    result = member.finish(timeout=60, sig=signal.SIGTERM)
    assert result["committed"] >= 1 and result["aborted"] >= 1, result
    assert requests_total(broker, "AddPartitionsToTxn") == 0
    assert requests_total(broker, "AddOffsetsToTxn") == 0
    assert requests_total(broker, "EndTxn") >= 2
    assert requests_total(broker, "TxnOffsetCommit") >= 1
    got = read_committed_all(bs, sink)
    assert sorted(got) == [f"out-v-{i:05d}".encode() for i in range(60)]
