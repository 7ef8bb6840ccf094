"""Transactions, slice 5 (docs/transactions.md §7.6, §8): the admin APIs of KIP-664 through
Apache Kafka's own `kafka-transactions.sh` (org.apache.kafka.tools.TransactionsCommand) and
through raw requests for the exact codes (DescribeTransactions 65, ListTransactions 66 v0-2,
DescribeProducers 61, AddPartitionsToTxn v4-5 with `verify_only`), and the coordinator's two
timers seen from clients: `transaction.timeout.ms` aborts a stalled transaction and fences its
producer (INVALID_PRODUCER_EPOCH before KIP-588's versions, PRODUCER_FENCED from them, on the
coordinator path and on the data path), and `transactional.id.expiration.ms` forgets an idle
id durably (its producer gets INVALID_PRODUCER_ID_MAPPING) but never an ongoing one.

Before this slice the three admin APIs were not advertised (the tool failed with
UnsupportedVersionException), AddPartitionsToTxn stopped at v3, and nothing could observe an
expiry or a timeout's epoch bump: every test here failed.
"""

from __future__ import annotations

import subprocess
import time
import uuid

from confluent_kafka import KafkaException

import kwire
import txnwire as tw
from helpers import ck_producer, create_topic, wait_until
from java_client import java_cmd, java_cp  # noqa: F401 (fixture)

TOOL = "org.apache.kafka.tools.TransactionsCommand"


def tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(java_cmd(TOOL, ["--bootstrap-server", bootstrap, *args]),
                          capture_output=True, text=True, timeout=120)


def table(bootstrap: str, *args: str) -> list[dict[str, str]]:
    """Runs a tool command that prints a table; its rows as dicts by column name."""
    r = tool(bootstrap, *args)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip()]
    assert lines, f"{args}: no output"
    header = lines[0]
    return [dict(zip(header, row)) for row in lines[1:]]


def txn_producer(bootstrap: str, txn_id: str):
    p = ck_producer(bootstrap, **{"transactional.id": txn_id, "enable.idempotence": True,
                                  "transaction.timeout.ms": 60000, "linger.ms": 2})
    p.init_transactions(30)
    return p


def test_kafka_transactions_tool_lists_describes_and_describes_producers(broker, topic_name, java_cp):
    """Goal: `kafka-transactions.sh list / describe / describe-producers` work against Sluice
    and show what the clients did. Method: confluent-kafka producers leave one id with an
    ongoing transaction over 2 partitions, one with a committed transaction, one only
    initialized; the tool lists the three with their states (and with a pattern only the
    one it matches, with a duration filter not the young ongoing one), describes the ongoing
    one (producer id, epoch, partitions) and an unknown id (TransactionalIdNotFound), and
    describes partition 0's producers (the open transaction's start offset, the committed
    producer's last sequence)."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=2)
    prefix = f"adm-{uuid.uuid4().hex[:6]}"
    ongoing, committed, empty = f"{prefix}-ongoing", f"{prefix}-committed", f"{prefix}-empty"
    a = txn_producer(bs, ongoing)
    a.begin_transaction()
    a.produce(topic_name, b"a0", partition=0)
    a.produce(topic_name, b"a1", partition=1)
    a.flush(30)
    b = txn_producer(bs, committed)
    b.begin_transaction()
    b.produce(topic_name, b"b0", partition=0)
    b.commit_transaction(30)
    txn_producer(bs, empty)

    listed = {r["TransactionalId"]: r for r in table(bs, "list")}
    ours = {k: v["TransactionState"] for k, v in listed.items() if k.startswith(prefix)}
    assert ours == {ongoing: "Ongoing", committed: "CompleteCommit", empty: "Empty"}, listed
    pids = {k: int(listed[k]["ProducerId"]) for k in ours}
    assert len(set(pids.values())) == 3

    matched = table(bs, "list", "--transactional-id-pattern", f"{prefix}-ong.*")
    assert [r["TransactionalId"] for r in matched] == [ongoing]
    old = {r["TransactionalId"] for r in table(bs, "list", "--duration-filter", "3600000")}
    assert ongoing not in old

    [d] = table(bs, "describe", "--transactional-id", ongoing)
    assert d["TransactionState"] == "Ongoing"
    assert int(d["ProducerId"]) == pids[ongoing] and int(d["ProducerEpoch"]) == 0
    assert set(d["TopicPartitions"].split(",")) == {f"{topic_name}-0", f"{topic_name}-1"}
    missing = tool(bs, "describe", "--transactional-id", f"{prefix}-missing")
    assert missing.returncode != 0
    # TransactionalIdNotFoundException's message, as the tool prints it.
    assert "could not be found" in missing.stderr, missing.stderr[-2000:]

    producers = {int(r["ProducerId"]): r for r in
                 table(bs, "describe-producers", "--topic", topic_name, "--partition", "0")}
    assert producers[pids[ongoing]]["CurrentTransactionStartOffset"] == "0"
    assert producers[pids[committed]]["CurrentTransactionStartOffset"] == "None"  # -1 on the wire
    assert producers[pids[committed]]["LastSequence"] == "0"
    assert producers[pids[ongoing]]["ProducerEpoch"] == "0"
    a.abort_transaction(30)
    [d] = table(bs, "describe", "--transactional-id", ongoing)
    assert d["TransactionState"] == "CompleteAbort"


def test_list_and_describe_transactions_filters_and_codes(broker, topic_name):
    """Goal: ListTransactions filters as Kafka (state names with unknown ones echoed, producer
    ids, v2's pattern matching whole ids only, an invalid pattern INVALID_REGULAR_EXPRESSION)
    and DescribeTransactions answers each id (an empty one INVALID_REQUEST, an unknown one
    TRANSACTIONAL_ID_NOT_FOUND). Method: raw requests over two ids, one Empty, one Ongoing."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    prefix = f"lst-{uuid.uuid4().hex[:6]}"
    x, y = f"{prefix}-x", f"{prefix}-y"
    err, xpid, _ = tw.init_producer_id(bs, x)
    assert err == tw.NONE
    err, ypid, yepoch = tw.init_producer_id(bs, y)
    assert err == tw.NONE
    assert tw.add_partitions(bs, y, ypid, yepoch, topic_name, [0]) == {0: tw.NONE}

    def ours(listed):
        return {k: v for k, v in listed.items() if k.startswith(prefix)}

    err, unknown, listed = tw.list_transactions(bs, 0)
    assert err == tw.NONE and unknown == []
    assert ours(listed) == {x: (xpid, "Empty"), y: (ypid, "Ongoing")}
    err, unknown, listed = tw.list_transactions(bs, 0, states=["Ongoing", "Bogus"])
    assert (err, unknown) == (tw.NONE, ["Bogus"]) and ours(listed) == {y: (ypid, "Ongoing")}
    _, unknown, listed = tw.list_transactions(bs, 1, states=["Bogus"])
    assert unknown == ["Bogus"] and ours(listed) == {}
    _, _, listed = tw.list_transactions(bs, 1, pids=[xpid])
    assert listed == {x: (xpid, "Empty")}
    _, _, listed = tw.list_transactions(bs, 2, pattern=x)
    assert listed == {x: (xpid, "Empty")}
    _, _, listed = tw.list_transactions(bs, 2, pattern=prefix)
    assert listed == {}, "a pattern must match the whole id"
    _, _, listed = tw.list_transactions(bs, 2, pattern=f"{prefix}-[xy]")
    assert set(listed) == {x, y}
    _, _, listed = tw.list_transactions(bs, 2, pattern="")
    assert set(ours(listed)) == {x, y}, "an empty pattern filters nothing"
    err, _, listed = tw.list_transactions(bs, 2, pattern="(")
    assert (err, listed) == (tw.INVALID_REGULAR_EXPRESSION, {})

    dx, dempty, dmissing, dy = tw.describe_transactions(bs, [x, "", f"{prefix}-none", y])
    assert (dx.error, dx.txn_id, dx.state, dx.pid, dx.epoch) == (tw.NONE, x, "Empty", xpid, 0)
    assert dx.timeout_ms == 60000 and dx.partitions == set()
    assert dempty.error == tw.INVALID_REQUEST
    assert (dmissing.error, dmissing.txn_id) == (tw.TRANSACTIONAL_ID_NOT_FOUND, f"{prefix}-none")
    assert (dy.state, dy.partitions) == ("Ongoing", {(topic_name, 0)})
    assert abs(dy.start_ms - time.time() * 1000) < 60_000


def test_add_partitions_batched_and_verify_only(broker, topic_name):
    """Goal: AddPartitionsToTxn v4-5, the batched form: several transactions per request, a
    plain entry adds, a `verify_only` entry adds nothing and answers NONE for a partition in
    the transaction and TRANSACTION_ABORTABLE (v5) / INVALID_TXN_STATE (v4) for one outside
    it; a stale epoch PRODUCER_FENCED, an unknown partition UNKNOWN_TOPIC_OR_PARTITION with
    OPERATION_NOT_ATTEMPTED for its siblings. Method: raw requests, then DescribeTransactions
    shows the transaction holds only what the plain entry added."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    t1, t2 = (f"bat-{uuid.uuid4().hex[:6]}-{i}" for i in (1, 2))
    _, p1, e1 = tw.init_producer_id(bs, t1)
    _, p2, e2 = tw.init_producer_id(bs, t2)
    top, res = tw.add_partitions_batched(bs, [
        tw.BatchedTxn(t1, p1, e1, False, {topic_name: [0]}),
        tw.BatchedTxn(t2, p2, e2, False, {topic_name: [1]}),
    ], version=4)
    assert top == tw.NONE
    assert res == {t1: {(topic_name, 0): tw.NONE}, t2: {(topic_name, 1): tw.NONE}}
    for version, outside in ((5, tw.TRANSACTION_ABORTABLE), (4, tw.INVALID_TXN_STATE)):
        top, res = tw.add_partitions_batched(bs, [
            tw.BatchedTxn(t1, p1, e1, True, {topic_name: [0, 1]}),
            tw.BatchedTxn(t2, p2, e2 - 1, True, {topic_name: [1]}),
            tw.BatchedTxn(t2, p2, e2, False, {topic_name: [0], "no-such-topic": [0]}),
        ], version=version)
        assert top == tw.NONE
        assert res[t1] == {(topic_name, 0): tw.NONE, (topic_name, 1): outside}, version
    # The last two entries share an id: the response holds one entry per id, merged.
    assert res[t2] == {(topic_name, 1): tw.PRODUCER_FENCED,
                       (topic_name, 0): tw.OPERATION_NOT_ATTEMPTED,
                       ("no-such-topic", 0): tw.UNKNOWN_TOPIC_OR_PARTITION}
    d1, d2 = tw.describe_transactions(bs, [t1, t2])
    assert d1.partitions == {(topic_name, 0)} and d2.partitions == {(topic_name, 1)}


def produce_txn(bs: str, txn_id: str, topic: str, pid: int, epoch: int, seq: int) -> int:
    batch = kwire.record_batch([kwire.RawRecord(key=None, value=f"s{seq}".encode())],
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                               transactional=True)
    req = kwire.produce_request_flexible(11, 9, topic, 0, batch, transactional_id=txn_id)
    corr, code = kwire.parse_produce_flexible_error(kwire.roundtrip(bs, req))
    assert corr == 9
    return code


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(sluice_factory, topic_name):
    """Goal: `transaction.timeout.ms` is enforced as Kafka does: the timer aborts a stalled
    transaction at a bumped epoch, not before its timeout; the old producer's next EndTxn
    and AddPartitionsToTxn get INVALID_PRODUCER_EPOCH before v2 and PRODUCER_FENCED from v2
    (KIP-588), its next produce INVALID_PRODUCER_EPOCH, its InitProducerId from the old
    epoch (a KIP-360 re-initialization) the same per version; a new InitProducerId gets the
    next epoch. Method: a broker with a 200 ms abort interval; raw requests with a 1.5 s timeout;
    a confluent-kafka producer with a 1 s timeout fails its commit after the abort."""
    b = sluice_factory(["--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"])
    bs = b.bootstrap
    create_topic(bs, topic_name, 1)
    txn_id = f"tmo-{uuid.uuid4().hex[:6]}"
    err, pid, epoch = tw.init_producer_id(bs, txn_id, timeout_ms=1500)
    assert err == tw.NONE
    started = time.monotonic()
    assert tw.add_partitions(bs, txn_id, pid, epoch, topic_name, [0]) == {0: tw.NONE}
    assert produce_txn(bs, txn_id, topic_name, pid, epoch, 0) == tw.NONE
    [d] = tw.describe_transactions(bs, [txn_id])
    assert (d.state, d.epoch) == ("Ongoing", epoch)
    wait_until(lambda: tw.describe_transactions(bs, [txn_id])[0].state == "CompleteAbort",
               timeout=15, what="the timed-out transaction aborted")
    assert time.monotonic() - started >= 1.2, "aborted before its timeout"
    [d] = tw.describe_transactions(bs, [txn_id])
    assert (d.pid, d.epoch, d.partitions) == (pid, epoch + 1, set())
    assert tw.end_txn(bs, txn_id, pid, epoch, True, version=1) == tw.INVALID_PRODUCER_EPOCH
    assert tw.end_txn(bs, txn_id, pid, epoch, True, version=2) == tw.PRODUCER_FENCED
    assert tw.add_partitions(bs, txn_id, pid, epoch, topic_name, [0], version=1) == \
        {0: tw.INVALID_PRODUCER_EPOCH}
    assert tw.add_partitions(bs, txn_id, pid, epoch, topic_name, [0], version=2) == \
        {0: tw.PRODUCER_FENCED}
    assert produce_txn(bs, txn_id, topic_name, pid, epoch, 1) == tw.INVALID_PRODUCER_EPOCH
    # Re-initializing from the fenced epoch (KIP-360) is fenced too, as in Kafka.
    assert tw.init_producer_id_expecting(bs, txn_id, pid, epoch, version=3)[0] == \
        tw.INVALID_PRODUCER_EPOCH
    assert tw.init_producer_id_expecting(bs, txn_id, pid, epoch, version=4)[0] == tw.PRODUCER_FENCED
    err, pid2, epoch2 = tw.init_producer_id(bs, txn_id, timeout_ms=1500)
    assert (err, pid2, epoch2) == (tw.NONE, pid, epoch + 2)

    p = ck_producer(bs, **{"transactional.id": f"{txn_id}-ck", "enable.idempotence": True,
                           "transaction.timeout.ms": 1000, "socket.timeout.ms": 1000,
                           "message.timeout.ms": 1000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"stalled")
    p.flush(30)
    wait_until(lambda: tw.describe_transactions(bs, [f"{txn_id}-ck"])[0].state == "CompleteAbort",
               timeout=15, what="the client's transaction aborted")
    try:
        p.commit_transaction(10)
        raise AssertionError("the fenced producer committed")
    except KafkaException as e:
        assert e.args[0].fatal() or e.args[0].txn_requires_abort(), e


def test_idle_transactional_id_expires_durably_but_an_ongoing_one_stays(sluice_factory, topic_name):
    """Goal: `transactional.id.expiration.ms` removes an id idle that long (Empty or Complete*)
    with a durable tombstone: DescribeTransactions then says TRANSACTIONAL_ID_NOT_FOUND, its
    old producer gets INVALID_PRODUCER_ID_MAPPING, a restart does not bring it back, and a new
    InitProducerId starts it afresh with a new producer id; an ongoing transaction's id is
    never expired. Method: expiry 1.5 s checked every 200 ms; raw requests; a clean restart."""
    b = sluice_factory(["--override", "transactional.id.expiration.ms=1500",
                        "--override", "transaction.remove.expired.transaction.cleanup.interval.ms=200",
                        "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"])
    bs = b.bootstrap
    create_topic(bs, topic_name, 1)
    prefix = f"exp-{uuid.uuid4().hex[:6]}"
    idle, busy = f"{prefix}-idle", f"{prefix}-busy"
    _, ipid, iepoch = tw.init_producer_id(bs, idle)
    _, bpid, bepoch = tw.init_producer_id(bs, busy, timeout_ms=120000)
    assert tw.add_partitions(bs, busy, bpid, bepoch, topic_name, [0]) == {0: tw.NONE}
    started = time.monotonic()
    wait_until(lambda: tw.describe_transactions(bs, [idle])[0].error == tw.TRANSACTIONAL_ID_NOT_FOUND,
               timeout=15, what="the idle id expired")
    assert time.monotonic() - started >= 1.2, "expired before transactional.id.expiration.ms"
    time.sleep(1.0)
    [d] = tw.describe_transactions(bs, [busy])
    assert (d.error, d.state) == (tw.NONE, "Ongoing"), "an ongoing transaction's id expired"
    assert tw.add_partitions(bs, idle, ipid, iepoch, topic_name, [0]) == {0: tw.INVALID_PRODUCER_ID_MAPPING}
    _, _, listed = tw.list_transactions(bs, 0)
    assert idle not in listed and busy in listed

    b.stop()
    b.start(extra_args=["--override", "transactional.id.expiration.ms=3600000"])
    d_idle, d_busy = tw.describe_transactions(b.bootstrap, [idle, busy])
    assert d_idle.error == tw.TRANSACTIONAL_ID_NOT_FOUND, "the expiry was not durable"
    assert (d_busy.state, d_busy.pid) == ("Ongoing", bpid)
    err, pid, epoch = tw.init_producer_id(b.bootstrap, idle)
    assert err == tw.NONE and pid != ipid and epoch == 0


def test_describe_producers_reports_the_markers_coordinator_epoch(sluice_factory, topic_name):
    """Goal: DescribeProducers reports a producer's coordinator epoch as Kafka does: -1 while
    it has written no marker in the partition (an open first transaction), the marker's
    coordinator epoch (0: Sluice's one coordinator) once a transaction of it ended there, and
    still 0 after a clean restart (from the producer snapshot) and after a SIGKILL (from the
    recovery walk). Before the fix it was -1 always. Method: confluent-kafka transactional
    producers, raw DescribeProducers v0."""
    b = sluice_factory([])
    bs = b.bootstrap
    create_topic(bs, topic_name, 1)
    prefix = f"ce-{uuid.uuid4().hex[:6]}"
    done = txn_producer(bs, f"{prefix}-done")
    done.begin_transaction()
    done.produce(topic_name, b"d0", partition=0)
    done.commit_transaction(30)
    aborted = txn_producer(bs, f"{prefix}-aborted")
    aborted.begin_transaction()
    aborted.produce(topic_name, b"x0", partition=0)
    aborted.flush(30)
    aborted.abort_transaction(30)
    open_ = txn_producer(bs, f"{prefix}-open")
    open_.begin_transaction()
    open_.produce(topic_name, b"o0", partition=0)
    open_.flush(30)

    def epochs(bootstrap):
        err, producers = tw.describe_producers(bootstrap, topic_name, [0])[0]
        assert err == tw.NONE
        # (producer id, epoch, last sequence, last timestamp, coordinator epoch, txn start)
        return {p[0]: (p[4], p[5]) for p in producers}

    seen = epochs(bs)
    assert len(seen) == 3, seen
    by_start = {start: ce for ce, start in seen.values()}
    # The open transaction started at offset 4 (d0, its marker, x0, its marker).
    assert by_start == {-1: 0, 4: -1} and sorted(ce for ce, _ in seen.values()) == [-1, 0, 0], seen
    open_.abort_transaction(30)
    for p in (done, aborted, open_):
        p.flush(5)
    after = epochs(bs)
    assert sorted(ce for ce, _ in after.values()) == [0, 0, 0], after

    b.stop()  # clean: the producer snapshot holds the state
    b.start()
    assert epochs(b.bootstrap) == after, "the coordinator epoch was not kept in the snapshot"
    b.kill9()  # SIGKILL: the recovery walk finds the markers again
    b.start()
    assert epochs(b.bootstrap) == after


def test_admin_apis_check_acls(sluice_factory, topic_name):
    """Goal: with an authorizer, the admin APIs check what Kafka's `KafkaApis` checks:
    DESCRIBE on the transactional id (DescribeTransactions answers
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ListTransactions leaves the id out), READ on the
    topic (DescribeProducers TOPIC_AUTHORIZATION_FAILED), CLUSTER_ACTION for the batched
    AddPartitionsToTxn (CLUSTER_AUTHORIZATION_FAILED), and WRITE on the id for InitProducerId
    itself; a broker that lets everyone in when no ACL is set answers all of them. Method: plaintext clients (User:ANONYMOUS) against
    StandardAuthorizer brokers without ACLs."""
    authorizer = ["--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
    for allow_everyone in (False, True):
        b = sluice_factory([*authorizer, "--override",
                            f"allow.everyone.if.no.acl.found={str(allow_everyone).lower()}"],
                           name=f"acl-{allow_everyone}")
        bs = b.bootstrap
        txn_id = f"acl-{uuid.uuid4().hex[:6]}"
        err, pid, epoch = tw.init_producer_id(bs, txn_id)
        # InitProducerId itself needs WRITE on the transactional id (issue 14's checks).
        assert err == (tw.NONE if allow_everyone else tw.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        [d] = tw.describe_transactions(bs, [txn_id])
        _, _, listed = tw.list_transactions(bs, 0)
        producers = tw.describe_producers(bs, topic_name, [0])
        top, _ = tw.add_partitions_batched(
            bs, [tw.BatchedTxn(txn_id, pid, epoch, True, {topic_name: [0]})], version=5)
        if allow_everyone:
            assert (d.error, d.state) == (tw.NONE, "Empty")
            assert listed == {txn_id: (pid, "Empty")}
            assert producers[0][0] == tw.UNKNOWN_TOPIC_OR_PARTITION
            assert top == tw.NONE
        else:
            assert d.error == tw.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert listed == {}
            assert producers == {0: (tw.TOPIC_AUTHORIZATION_FAILED, [])}
            assert top == tw.CLUSTER_AUTHORIZATION_FAILED


def test_add_partitions_with_very_many_partitions_is_answered_in_linear_time(broker, topic_name):
    """Goal: bad input never hangs: an AddPartitionsToTxn naming 100 000 partitions (all but
    one unknown) is answered at once, each partition with its code (UNKNOWN_TOPIC_OR_PARTITION,
    OPERATION_NOT_ATTEMPTED for the one that exists). Before, each answer was looked up by a
    scan of all codes: 10^10 comparisons, minutes of one runtime thread."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    txn_id = f"many-{uuid.uuid4().hex[:6]}"
    _, pid, epoch = tw.init_producer_id(bs, txn_id)
    started = time.monotonic()
    codes = tw.add_partitions(bs, txn_id, pid, epoch, topic_name, list(range(100_000)), timeout=60)
    elapsed = time.monotonic() - started
    assert codes[0] == tw.OPERATION_NOT_ATTEMPTED
    assert all(codes[p] == tw.UNKNOWN_TOPIC_OR_PARTITION for p in range(1, 100_000))
    assert elapsed < 10, f"{elapsed:.1f} s"
