"""ACLs, second security slice (issue 14): the authorizer (`authorizer.class.name`,
`super.users`, `allow.everyone.if.no.acl.found`), CreateAcls/DescribeAcls/DeleteAcls through
confluent-kafka's AdminClient, and the checks in Produce, Fetch and Metadata, against a real
`sluice serve` with a SASL_PLAINTEXT listener and PLAIN users. Each test fails on a broker
without ACLs: that broker refuses `authorizer.class.name` at startup.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)

from test_security import secured, started  # noqa: F401  (fixture and helper)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-pw" user_admin="admin-pw" '
        'user_alice="alice-pw" user_bob="bob-pw";')
PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
LISTENER = "SASL_PLAINTEXT://127.0.0.1:{port}"


def props(allow_everyone: bool = False) -> dict[str, str]:
    return {"sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "allow.everyone.if.no.acl.found": "true" if allow_everyone else "false"}


def conf(b, user: str) -> dict:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user]}


def admin(b, user: str = "admin") -> AdminClient:
    return AdminClient(conf(b, user))


def create_topics(b, *names: str) -> None:
    a = admin(b)  # kept alive until the futures resolve
    fs = a.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=10)
    for f in fs.values():
        f.result(timeout=15)


def allow(user: str, topic: str, op: AclOperation, pattern=ResourcePatternType.LITERAL,
          perm=AclPermissionType.ALLOW, rtype=ResourceType.TOPIC) -> AclBinding:
    return AclBinding(rtype, topic, pattern, f"User:{user}", "*", op, perm)


def add_acls(b, *bindings: AclBinding, user: str = "admin") -> None:
    a = admin(b, user)
    for f in a.create_acls(list(bindings), request_timeout=10).values():
        f.result(timeout=15)


def produce_error(b, user: str, topic: str):
    """Produces one record as `user`; returns the delivery error (None when it was written)."""
    return delivery_error(conf(b, user), topic)


def delivery_error(client_conf: dict, topic: str):
    """Produces one record with `client_conf`; returns the delivery error (None when it was
    written)."""
    out = []
    p = Producer({**client_conf, "message.timeout.ms": 8000, "retries": 0})
    p.produce(topic, b"v", on_delivery=lambda e, m: out.append(e))
    p.flush(15)
    assert out, "no delivery report"
    return out[0]


def describe(b, user: str = "admin", flt=None) -> list:
    a = admin(b, user)
    return a.describe_acls(flt or ALL_FILTER, request_timeout=10).result(timeout=15)


def topic_names(b, user: str) -> set[str]:
    return set(admin(b, user).list_topics(timeout=10).topics)


ALL_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)


def test_write_needed_to_produce_and_metadata_hides_topics(secured):
    b = secured(LISTENER, props())
    create_topics(b, "granted", "described", "hidden")
    add_acls(b, allow("alice", "granted", AclOperation.WRITE),
             allow("alice", "described", AclOperation.DESCRIBE))
    assert produce_error(b, "alice", "granted") is None
    # DESCRIBE but no WRITE: metadata answers, the produce request itself is refused.
    err = produce_error(b, "alice", "described")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    err = produce_error(b, "alice", "hidden")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # WRITE implies DESCRIBE; a topic without any ACL for alice is not listed.
    assert topic_names(b, "alice") & {"granted", "described", "hidden"} == {"granted", "described"}
    assert {"granted", "described", "hidden"} <= topic_names(b, "admin")
    # Fetch needs READ on the topic: alice (who may use group g) may not read what she wrote.
    add_acls(b, allow("alice", "g", AclOperation.READ, rtype=ResourceType.GROUP))
    c = Consumer({**conf(b, "alice"), "group.id": "g", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("granted", 0, 0)])
    got = None
    for _ in range(20):
        m = c.poll(0.5)
        if m is not None and m.error():
            got = m.error()
            break
    c.close()
    assert got is not None and got.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, got


def test_acl_apis_need_cluster_alter_and_describe(secured):
    b = secured(LISTENER, props())
    with pytest.raises(KafkaException) as e:
        add_acls(b, allow("bob", "x", AclOperation.READ), user="alice")
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    add_acls(b, allow("bob", "y", AclOperation.READ))
    # Without DESCRIBE on the cluster the broker answers CLUSTER_AUTHORIZATION_FAILED;
    # confluent-kafka's describe_acls drops that top-level code and returns no bindings.
    assert describe(b, "alice") == []
    assert describe(b) == [allow("bob", "y", AclOperation.READ)]
    add_acls(b, allow("alice", "kafka-cluster", AclOperation.ALTER, rtype=ResourceType.BROKER))
    add_acls(b, allow("bob", "x", AclOperation.READ), user="alice")
    listed = describe(b, "alice")
    assert allow("bob", "x", AclOperation.READ) in listed


def test_deny_wins_over_allow(secured):
    b = secured(LISTENER, props())
    create_topics(b, "t-ok", "t-deny")
    add_acls(b, allow("alice", "t-", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
             allow("alice", "t-deny", AclOperation.WRITE, perm=AclPermissionType.DENY))
    assert produce_error(b, "alice", "t-ok") is None
    err = produce_error(b, "alice", "t-deny")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_super_users_bypass_acls(secured):
    b = secured(LISTENER, props())
    create_topics(b, "locked")
    add_acls(b, allow("*", "locked", AclOperation.ALL, perm=AclPermissionType.DENY))
    assert produce_error(b, "admin", "locked") is None
    err = produce_error(b, "alice", "locked")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_acls_survive_restart_and_delete(secured):
    b = secured(LISTENER, props())
    create_topics(b, "kept")
    add_acls(b, allow("alice", "kept", AclOperation.WRITE))
    b.stop()
    started(b, LISTENER, restart=True)
    listed = describe(b)
    assert listed == [allow("alice", "kept", AclOperation.WRITE)]
    assert produce_error(b, "alice", "kept") is None
    flt = AclBindingFilter(ResourceType.TOPIC, "kept", ResourcePatternType.MATCH, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    a = admin(b)
    deleted = list(a.delete_acls([flt], request_timeout=10).values())[0].result(timeout=15)
    assert deleted == [allow("alice", "kept", AclOperation.WRITE)]
    b.stop()
    started(b, LISTENER, restart=True)
    assert describe(b) == []
    err = produce_error(b, "alice", "kept")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_allow_everyone_if_no_acl_found(secured, allow_everyone):
    b = secured(LISTENER, props(allow_everyone))
    create_topics(b, "open", "guarded")
    # An ACL on `guarded` for someone else: the default no longer applies to it.
    add_acls(b, allow("bob", "guarded", AclOperation.WRITE))
    err = produce_error(b, "alice", "open")
    if allow_everyone:
        assert err is None, err
    else:
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    err = produce_error(b, "alice", "guarded")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert produce_error(b, "bob", "guarded") is None


def test_admin_and_group_apis_are_checked(secured):
    b = secured(LISTENER, props())
    # CreateTopics needs CREATE (cluster or topic), DeleteTopics needs DELETE.
    a = admin(b, "alice")
    f = a.create_topics([NewTopic("mine", 1, 1)], operation_timeout=10)["mine"]
    with pytest.raises(KafkaException) as e:
        f.result(timeout=15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(b, allow("alice", "mine", AclOperation.CREATE))
    a.create_topics([NewTopic("mine", 1, 1)], operation_timeout=10)["mine"].result(timeout=15)
    f = a.delete_topics(["mine"], operation_timeout=10)["mine"]
    with pytest.raises(KafkaException) as e:
        f.result(timeout=15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A consumer group needs READ on the group (and READ on the topic to fetch).
    add_acls(b, allow("alice", "mine", AclOperation.READ))
    c = Consumer({**conf(b, "alice"), "group.id": "g-denied", "auto.offset.reset": "earliest"})
    c.subscribe(["mine"])
    got = None
    for _ in range(20):
        m = c.poll(0.5)
        if m is not None and m.error():
            got = m.error()
            break
    c.close()
    assert got is not None and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, got
    # SCRAM credentials need ALTER on the cluster.
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    up = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                      b"pw")
    f = a.alter_user_scram_credentials([up], request_timeout=10)["carol"]
    with pytest.raises(KafkaException) as e:
        f.result(timeout=15)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


# -- the rest of the APIs (third security slice) ------------------------------------------
import time  # noqa: E402

from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource)

import kwire  # noqa: E402
from test_security import on, sasl_authenticate_v0, sasl_handshake  # noqa: E402

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OFFSET_DELETE, END_TXN, ADD_PARTITIONS_TO_TXN = 47, 26, 24
OPERATION_NOT_ATTEMPTED = 55


def raw_session(b, user: str):
    """A raw connection authenticated as `user` (SaslHandshake v1 + SaslAuthenticate v0)."""
    s = kwire.connect(b.bootstrap)
    assert sasl_handshake(s, 1, "PLAIN")[0] == 0
    code, message, _ = sasl_authenticate_v0(s, f"\0{user}\0{PASSWORDS[user]}".encode())
    assert code == 0, message
    return s


def offset_delete(s, group: str, topic: str) -> tuple[int, int]:
    """OffsetDelete v0 for partition 0: (top-level error, partition error or -1)."""
    body = (kwire.string(group) + kwire.i32(1) + kwire.string(topic) + kwire.i32(1)
            + kwire.i32(0))
    r = kwire.Reader(on(s, kwire.frame(kwire.header_v1(OFFSET_DELETE, 0, 11) + body)))
    assert r.i32() == 11
    top = r.i16()
    r.i32()  # throttle_time_ms
    part = -1
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            r.i32()
            part = r.i16()
    return top, part


def end_txn(s, transactional_id: str) -> int:
    """EndTxn v1 (commit) for a made-up producer id: the error code."""
    body = kwire.string(transactional_id) + kwire.i64(0) + kwire.i16(0) + kwire.i8(1)
    r = kwire.Reader(on(s, kwire.frame(kwire.header_v1(END_TXN, 1, 12) + body)))
    assert r.i32() == 12
    r.i32()  # throttle_time_ms
    return r.i16()


def add_partitions(s, transactional_id: str, topics: list[str]) -> dict[str, int]:
    """AddPartitionsToTxn v1 (partition 0 of each topic, a made-up producer id): the error
    code per topic."""
    body = (kwire.string(transactional_id) + kwire.i64(0) + kwire.i16(0) + kwire.i32(len(topics))
            + b"".join(kwire.string(t) + kwire.i32(1) + kwire.i32(0) for t in topics))
    r = kwire.Reader(on(s, kwire.frame(kwire.header_v1(ADD_PARTITIONS_TO_TXN, 1, 13) + body)))
    assert r.i32() == 13
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.array_len()):
        name = r.string()
        for _ in range(r.array_len()):
            r.i32()
            out[name] = r.i16()
    return out


def config_error(fs: dict):
    """The KafkaError of the one future of a config call, None when it succeeded."""
    (f,) = fs.values()
    try:
        f.result(timeout=15)
        return None
    except KafkaException as e:
        return e.args[0]


def test_config_apis_need_describe_configs_and_alter_configs(secured):
    b = secured(LISTENER, props())
    create_topics(b, "cfg")
    a = admin(b, "alice")
    topic = ConfigResource(ResourceType.TOPIC, "cfg")
    node = str(next(iter(admin(b).list_topics(timeout=10).brokers)))
    broker = ConfigResource(ResourceType.BROKER, node)
    err = config_error(a.describe_configs([topic], request_timeout=10))
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    err = config_error(a.describe_configs([broker], request_timeout=10))
    assert err is not None and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, err
    add_acls(b, allow("alice", "cfg", AclOperation.DESCRIBE_CONFIGS))
    assert config_error(a.describe_configs([topic], request_timeout=10)) is None
    change = ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    err = config_error(a.incremental_alter_configs([change], request_timeout=10))
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    legacy = ConfigResource(ResourceType.TOPIC, "cfg", set_config={"retention.ms": "60000"})
    with pytest.warns(DeprecationWarning):
        err = config_error(a.alter_configs([legacy], request_timeout=10))
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    add_acls(b, allow("alice", "cfg", AclOperation.ALTER_CONFIGS))
    assert config_error(a.incremental_alter_configs([change], request_timeout=10)) is None
    sup = admin(b)
    got = sup.describe_configs([topic], request_timeout=10)[topic].result(timeout=15)
    assert got["retention.ms"].value == "60000"
    add_acls(b, allow("alice", "kafka-cluster", AclOperation.DESCRIBE_CONFIGS,
                      rtype=ResourceType.BROKER))
    assert config_error(a.describe_configs([broker], request_timeout=10)) is None


def init_errors(b, user: str, **extra) -> list[int]:
    """Starts a producer (idempotent or transactional) and returns the error codes it reports
    while getting a producer id (init_transactions, the fatal error, delivery reports)."""
    p = Producer({**conf(b, user), "enable.idempotence": True, "message.timeout.ms": 6000,
                  **extra})
    if "transactional.id" in extra:
        try:
            p.init_transactions(15)
        except KafkaException as e:
            return [e.args[0].code()]
        return []
    delivered = []
    p.produce("idem", b"v", on_delivery=lambda e, m: delivered.append(e))
    try:
        p.flush(10)
    except Exception as e:  # noqa: BLE001  the fatal error, maybe wrapped by the callback's
        while e is not None and not isinstance(e, KafkaException):
            e = e.__cause__ or e.__context__
        assert e is not None, "an error that is not Kafka's"
        return [e.args[0].code()]
    return [e.code() for e in delivered if e is not None]


def test_init_producer_id_needs_idempotent_write_or_transactional_id_write(secured):
    b = secured(LISTENER, props())
    create_topics(b, "idem", "other")
    # Idempotent: IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka 3.0+).
    add_acls(b, allow("alice", "idem", AclOperation.DESCRIBE))
    codes = init_errors(b, "alice")
    assert KafkaError.CLUSTER_AUTHORIZATION_FAILED in codes, codes
    add_acls(b, allow("alice", "other", AclOperation.WRITE))
    codes = init_errors(b, "alice")
    # A producer id now; the record itself still needs WRITE on `idem`.
    assert codes and set(codes) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}, codes
    add_acls(b, allow("bob", "kafka-cluster", AclOperation.IDEMPOTENT_WRITE,
                      rtype=ResourceType.BROKER), allow("bob", "idem", AclOperation.WRITE))
    assert init_errors(b, "bob") == []
    # Transactional: WRITE on the transactional id (DESCRIBE only finds the coordinator).
    add_acls(b, allow("alice", "tx", AclOperation.DESCRIBE, rtype=ResourceType.TRANSACTIONAL_ID))
    codes = init_errors(b, "alice", **{"transactional.id": "tx"})
    assert codes == [KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED], codes
    add_acls(b, allow("alice", "tx", AclOperation.WRITE, rtype=ResourceType.TRANSACTIONAL_ID))
    assert init_errors(b, "alice", **{"transactional.id": "tx"}) == []


def txn_producer(b, user: str, tid: str) -> Producer:
    p = Producer({**conf(b, user), "transactional.id": tid, "message.timeout.ms": 8000})
    p.init_transactions(15)
    return p


def test_transaction_apis_check_transactional_id_topic_and_group(secured):
    b = secured(LISTENER, props())
    create_topics(b, "tw", "tro")
    add_acls(b, allow("alice", "tx", AclOperation.WRITE, rtype=ResourceType.TRANSACTIONAL_ID),
             allow("alice", "tw", AclOperation.WRITE),
             allow("alice", "tro", AclOperation.DESCRIBE))
    # AddPartitionsToTxn: WRITE on the transactional id, then on each topic.
    s = raw_session(b, "bob")
    assert add_partitions(s, "tx", ["tw", "tro"]) == {
        "tw": TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "tro": TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    s.close()
    s = raw_session(b, "alice")
    assert add_partitions(s, "tx", ["tw", "tro"]) == {
        "tw": OPERATION_NOT_ATTEMPTED, "tro": TOPIC_AUTHORIZATION_FAILED}
    s.close()
    # AddOffsetsToTxn: READ on the group.
    p = txn_producer(b, "alice", "tx")
    p.begin_transaction()
    c = Consumer({**conf(b, "alice"), "group.id": "g-closed"})
    with pytest.raises(KafkaException) as e:
        p.send_offsets_to_transaction([TopicPartition("tw", 0, 1)], c.consumer_group_metadata(),
                                      15)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e.value.args[0]
    c.close()
    # EndTxn and transactional Produce: WRITE on the transactional id (bob has none).
    s = raw_session(b, "bob")
    assert end_txn(s, "tx") == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    s.close()
    s = raw_session(b, "alice")
    assert end_txn(s, "tx-other") == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    s.close()
    batch = kwire.record_batch([kwire.RawRecord(b"v", b"k")])
    txn = bytearray(batch)
    txn[22] |= 0x10  # the transactional attribute (CRC no longer matters: refused first)
    s = raw_session(b, "alice")
    body = on(s, kwire.produce_request_v3(13, "tw", 0, bytes(txn), transactional_id="tx-none"))
    _, parts = kwire.parse_produce_v3(body)
    assert parts[("tw", 0)].error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    s.close()


def test_offset_delete_and_offset_for_leader_epoch_are_checked(secured):
    b = secured(LISTENER, props())
    create_topics(b, "od")
    add_acls(b, allow("alice", "od", AclOperation.DESCRIBE))
    sup = Consumer({**conf(b, "admin"), "group.id": "g-od"})
    sup.commit(offsets=[TopicPartition("od", 0, 0)], asynchronous=False)
    sup.close()
    s = raw_session(b, "alice")
    # OffsetDelete: DELETE on the group, then READ on the topic.
    assert offset_delete(s, "g-od", "od")[0] == GROUP_AUTHORIZATION_FAILED
    add_acls(b, allow("alice", "g-od", AclOperation.DELETE, rtype=ResourceType.GROUP))
    assert offset_delete(s, "g-od", "od") == (0, TOPIC_AUTHORIZATION_FAILED)
    add_acls(b, allow("alice", "od", AclOperation.READ))
    assert offset_delete(s, "g-od", "od") == (0, 0)
    # OffsetForLeaderEpoch: DESCRIBE on the topic.
    req = kwire.offset_for_leader_epoch_request(4, 21, {"od": [(0, -1, 0)], "hidden": [(0, -1, 0)]})
    _, parts = kwire.parse_offset_for_leader_epoch(on(s, req), 4)
    assert parts[("od", 0)][0] == 0
    assert parts[("hidden", 0)][0] == TOPIC_AUTHORIZATION_FAILED
    s.close()


def test_kip848_group_apis_and_describe_cluster_are_checked(secured):
    b = secured(LISTENER, props())
    create_topics(b, "k8")
    add_acls(b, allow("alice", "k8", AclOperation.READ))
    cconf = {**conf(b, "alice"), "group.protocol": "consumer", "group.id": "g848",
             "auto.offset.reset": "earliest"}
    # ConsumerGroupHeartbeat: READ on the group.
    c = Consumer(cconf)
    c.subscribe(["k8"])
    got = None
    for _ in range(20):
        m = c.poll(0.5)
        if m is not None and m.error():
            got = m.error()
            break
    c.close()
    assert got is not None and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, got
    add_acls(b, allow("alice", "g848", AclOperation.READ, rtype=ResourceType.GROUP))
    c = Consumer(cconf)
    c.subscribe(["k8"])
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment(), "alice did not join with READ on the group"
    # ConsumerGroupDescribe: DESCRIBE on the group, and on every assigned topic.
    bob = admin(b, "bob")
    (f,) = bob.describe_consumer_groups(["g848"], request_timeout=10).values()
    with pytest.raises(KafkaException) as e:
        f.result(timeout=15)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e.value.args[0]
    add_acls(b, allow("bob", "g848", AclOperation.DESCRIBE, rtype=ResourceType.GROUP))
    (f,) = bob.describe_consumer_groups(["g848"], request_timeout=10).values()
    with pytest.raises(KafkaException) as e:
        f.result(timeout=15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value.args[0]
    ali = admin(b, "alice")
    (f,) = ali.describe_consumer_groups(
        ["g848"], include_authorized_operations=True, request_timeout=10).values()
    g = f.result(timeout=15)
    assert len(g.members) == 1
    c.close()
    # DescribeCluster answers everyone; authorized operations say what the client may do.
    res = ali.describe_cluster(include_authorized_operations=True,
                               request_timeout=10).result(timeout=15)
    assert not res.authorized_operations
    add_acls(b, allow("alice", "kafka-cluster", AclOperation.ALTER, rtype=ResourceType.BROKER))
    res = ali.describe_cluster(include_authorized_operations=True,
                               request_timeout=10).result(timeout=15)
    assert set(res.authorized_operations) == {AclOperation.ALTER, AclOperation.DESCRIBE}


def test_client_quota_apis_need_cluster_alter_and_describe_configs(secured):
    from test_quotas import (alter_quotas_frame, describe_quotas_frame, parse_alter_quotas,
                             parse_describe_quotas)
    b = secured(LISTENER, props())
    entry = ([("user", "bob")], [("producer_byte_rate", 1024.0, False)])
    s = raw_session(b, "alice")
    assert parse_alter_quotas(on(s, alter_quotas_frame([entry])))[0][0] == \
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert parse_describe_quotas(on(s, describe_quotas_frame()))[0] == \
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    add_acls(b, allow("alice", "kafka-cluster", AclOperation.ALTER_CONFIGS,
                      rtype=ResourceType.BROKER))
    assert parse_alter_quotas(on(s, alter_quotas_frame([entry]))) == [(0, None)]
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    assert parse_describe_quotas(on(s, describe_quotas_frame())) == \
        (0, {(("user", "bob"),): {"producer_byte_rate": 1024.0}})
    s.close()
