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
    """Produces one record; returns the delivery error (None when it was written)."""
    out = []
    p = Producer({**conf(b, user), "message.timeout.ms": 8000, "retries": 0})
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
