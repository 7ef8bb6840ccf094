"""Admin APIs (CreateTopics, DeleteTopics, Metadata, CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs, DescribeCluster) through both admin clients."""

from __future__ import annotations

import socket

import pytest
import kwire
from admin_facade import CkAdmin, admin
from helpers import FAMILIES, ConfluentFamily, Msg, ck_admin, create_topic, wait_until

# Kafka's defaults for the topic configs Sluice supports.
KAFKA_DEFAULTS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
}
INHERITED_SOURCES = ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


@pytest.mark.parametrize("fam", FAMILIES)
def test_create_list_delete_topics(broker, fam):
    """Goal: topics can be created, listed with their partition counts, and deleted.
    Method: create two topics (1 and 3 partitions) with the family's admin client, list,
    delete one, list again, and delete it a second time (UNKNOWN_TOPIC_OR_PARTITION)."""
    a = admin(fam, broker.bootstrap)
    assert a.create("alpha", partitions=1) == 0
    assert a.create("beta", partitions=3) == 0
    listed = wait_until(lambda: (lambda t: t if {"alpha", "beta"} <= set(t) else None)(a.list()), 10,
                        what="both topics listed")
    assert listed["alpha"] == 1
    assert listed["beta"] == 3

    assert a.delete(["alpha"]) == {"alpha": 0}
    wait_until(lambda: "alpha" not in a.list(), 10, what="alpha gone from metadata")
    assert a.list().get("beta") == 3
    assert a.delete(["alpha"]) == {"alpha": kwire.UNKNOWN_TOPIC_OR_PARTITION}


@pytest.mark.parametrize("fam", FAMILIES)
def test_create_validate_only(broker, fam):
    """Goal: CreateTopics with validate_only checks the request but creates nothing.
    Method: a valid validate-only create succeeds and the topic stays absent; an invalid
    config in validate-only mode is still rejected with INVALID_CONFIG; a real create after
    that succeeds."""
    a = admin(fam, broker.bootstrap)
    assert a.create("vonly", partitions=2, validate_only=True) == 0
    assert "vonly" not in a.list()
    assert a.create("vonly", configs={"retention.ms": "not-a-number"}, validate_only=True) == kwire.INVALID_CONFIG
    assert "vonly" not in a.list()
    assert a.create("vonly", partitions=2) == 0
    assert wait_until(lambda: a.list().get("vonly"), 10, what="vonly listed") == 2


@pytest.mark.parametrize("fam", FAMILIES)
def test_create_existing_topic_fails(broker, fam):
    """Goal: creating a topic that exists answers TOPIC_ALREADY_EXISTS and leaves it intact.
    Method: create with 2 partitions, create again with 5, check the error and that the topic
    still has 2 partitions."""
    a = admin(fam, broker.bootstrap)
    assert a.create("dup", partitions=2) == 0
    assert a.create("dup", partitions=5) == kwire.TOPIC_ALREADY_EXISTS
    assert a.list()["dup"] == 2


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("bad_name", ["bad/name", "has space", "x" * 250, "..", "."])
def test_create_invalid_topic_name(broker, fam, bad_name):
    """Goal: illegal topic names are refused with INVALID_TOPIC_EXCEPTION.
    Method: CreateTopics with a name that breaks Kafka's rules (characters outside
    [a-zA-Z0-9._-], longer than 249, '.' or '..'); check the code and that nothing was listed."""
    a = admin(fam, broker.bootstrap)
    assert a.create(bad_name) == kwire.INVALID_TOPIC_EXCEPTION
    assert bad_name not in a.list()


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("configs", [
    {"retention.ms": "soon"},
    {"cleanup.policy": "shred"},
    {"max.message.bytes": "-5"},
    {"segment.bytes": "12abc"},
    {"message.timestamp.type": "WallClock"},
    {"no.such.config": "1"},
], ids=lambda c: next(iter(c)))
def test_create_invalid_config(broker, fam, configs):
    """Goal: a bad topic config value (or unknown key) in CreateTopics is refused with
    INVALID_CONFIG and the topic is not created.
    Method: CreateTopics with the bad config, check the code, list topics."""
    a = admin(fam, broker.bootstrap)
    assert a.create("badcfg", configs=configs) == kwire.INVALID_CONFIG
    assert "badcfg" not in a.list()


@pytest.mark.parametrize("fam", FAMILIES)
def test_create_partitions(broker, fam):
    """Goal: CreatePartitions grows a topic, refuses to shrink it or keep the count, and the
    new partitions take data.
    Method: create with 1 partition, grow to 3, check Metadata; ask for 2 and for 3
    (INVALID_PARTITIONS); ask for an unknown topic (UNKNOWN_TOPIC_OR_PARTITION); produce to and
    consume from the new partition 2."""
    a = admin(fam, broker.bootstrap)
    assert a.create("grow", partitions=1) == 0
    assert a.create_partitions("grow", 3, validate_only=True) == 0
    assert a.list()["grow"] == 1, "validate_only CreatePartitions changed the topic"
    assert a.create_partitions("grow", 3) == 0
    assert wait_until(lambda: a.list()["grow"] == 3, 10, what="3 partitions")
    assert a.create_partitions("grow", 2) == kwire.INVALID_PARTITIONS
    assert a.create_partitions("grow", 3) == kwire.INVALID_PARTITIONS
    assert a.create_partitions("no-such-topic", 4) == kwire.UNKNOWN_TOPIC_OR_PARTITION

    ck = ConfluentFamily(broker.bootstrap)
    [off] = ck.produce("grow", [Msg(b"in-new-partition", key=b"k")], partition=2)
    assert off == 0
    [rec] = ck.consume("grow", 2, 0, 1)
    assert (rec.partition, rec.offset, rec.value) == (2, 0, b"in-new-partition")


@pytest.mark.parametrize("fam", FAMILIES)
def test_describe_configs_defaults_and_sources(broker, fam):
    """Goal: DescribeConfigs lists every supported topic config, with Kafka's default values
    and a default source for inherited keys and DYNAMIC_TOPIC_CONFIG for overrides.
    Method: create a topic overriding retention.ms and message.timestamp.type, describe it, check each
    key's value and source; describing an unknown topic fails with UNKNOWN_TOPIC_OR_PARTITION."""
    a = admin(fam, broker.bootstrap)
    assert a.create("desc", configs={"retention.ms": "123456", "message.timestamp.type": "LogAppendTime"}) == 0
    cfg = a.describe_configs("desc")
    missing = set(KAFKA_DEFAULTS) - set(cfg)
    assert not missing, f"DescribeConfigs lacks {missing}; got {sorted(cfg)}"
    assert cfg["retention.ms"].value == "123456"
    assert cfg["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
    assert cfg["message.timestamp.type"].value == "LogAppendTime"
    assert cfg["message.timestamp.type"].source == "DYNAMIC_TOPIC_CONFIG"
    for key, default in KAFKA_DEFAULTS.items():
        if key in ("retention.ms", "message.timestamp.type"):
            continue
        assert cfg[key].value == default, f"{key}: {cfg[key]}"
        assert cfg[key].source in INHERITED_SOURCES, f"{key}: {cfg[key]}"
        assert not cfg[key].read_only, f"{key} should be alterable"
    assert CkAdmin(broker.bootstrap).describe_configs_error("no-such-topic") == kwire.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("fam", FAMILIES)
def test_incremental_alter_configs(broker, fam):
    """Goal: IncrementalAlterConfigs SET and DELETE change a topic's configs and the change
    reads back; validate_only changes nothing; bad values and unknown topics are refused.
    Method: SET two keys, describe; validate-only SET, describe; SET a bad value
    (INVALID_CONFIG), describe; DELETE one key (back to default), describe; unknown topic."""
    a = admin(fam, broker.bootstrap)
    assert a.create("inc") == 0
    assert a.incremental_alter("inc", set_={"retention.ms": 98765, "max.message.bytes": 2000000}) == 0
    cfg = a.describe_configs("inc")
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == ("98765", "DYNAMIC_TOPIC_CONFIG")
    assert (cfg["max.message.bytes"].value, cfg["max.message.bytes"].source) == ("2000000", "DYNAMIC_TOPIC_CONFIG")

    assert a.incremental_alter("inc", set_={"retention.ms": 5555}, validate_only=True) == 0
    assert a.describe_configs("inc")["retention.ms"].value == "98765"

    assert a.incremental_alter("inc", set_={"retention.ms": "tomorrow"}) == kwire.INVALID_CONFIG
    assert a.describe_configs("inc")["retention.ms"].value == "98765"

    assert a.incremental_alter("inc", delete=["retention.ms"]) == 0
    cfg = a.describe_configs("inc")
    assert cfg["retention.ms"].value == KAFKA_DEFAULTS["retention.ms"]
    assert cfg["retention.ms"].source in INHERITED_SOURCES
    assert cfg["max.message.bytes"].value == "2000000", "DELETE of one key touched another"

    assert a.incremental_alter("no-such-topic", set_={"retention.ms": 1000}) == kwire.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("fam", FAMILIES)
def test_legacy_alter_configs(broker, fam):
    """Goal: the legacy AlterConfigs request sets topic configs, and (Kafka semantics) keys
    absent from the request revert to their defaults.
    Method: create with retention.ms overridden, AlterConfigs with only segment.ms, describe.
    confluent sends exactly that key, so retention.ms must be back at its default; kafka-python
    re-sends the other overrides itself, so retention.ms must keep its value there."""
    a = admin(fam, broker.bootstrap)
    assert a.create("legacy", configs={"retention.ms": "4444"}) == 0
    assert a.legacy_alter("legacy", {"segment.ms": "3600000"}) == 0
    cfg = a.describe_configs("legacy")
    assert (cfg["segment.ms"].value, cfg["segment.ms"].source) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    if fam == "confluent":
        assert cfg["retention.ms"].value == KAFKA_DEFAULTS["retention.ms"], cfg["retention.ms"]
        assert cfg["retention.ms"].source in INHERITED_SOURCES
    else:
        assert cfg["retention.ms"].value == "4444"
    assert a.legacy_alter("legacy", {"cleanup.policy": "bogus"}) == kwire.INVALID_CONFIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_describe_cluster_confluent(sluice_factory):
    """Goal: DescribeCluster reports exactly one broker with the configured node id and the
    bound address, which is also the controller.
    Method: start with --node-id 7, call confluent-kafka's describe_cluster()."""
    b = sluice_factory(["--node-id", "7"])
    a = ck_admin(b.bootstrap)
    res = a.describe_cluster(request_timeout=15).result(timeout=20)
    assert len(res.nodes) == 1, res.nodes
    node = res.nodes[0]
    assert (node.id, node.host, node.port) == (7, "127.0.0.1", b.port)
    assert res.controller is not None and res.controller.id == 7
    assert res.cluster_id, "cluster id is empty"


def test_describe_cluster_kafka_python(sluice_factory):
    """Goal: kafka-python's describe_cluster sees one broker with the configured node id.
    Method: start with --node-id 3, describe, check brokers, controller and cluster id."""
    from kafka.admin import KafkaAdminClient
    b = sluice_factory(["--node-id", "3"])
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
    try:
        res = a.describe_cluster()
    finally:
        a.close()
    brokers = res["brokers"]
    assert len(brokers) == 1, brokers
    assert (brokers[0]["broker_id"], brokers[0]["host"], brokers[0]["port"]) == (3, "127.0.0.1", b.port)
    assert res["controller_id"] == 3
    assert res["cluster_id"]


def test_cluster_id_stable_across_restart(broker):
    """Goal: the cluster id is a property of the data dir, stable across restarts.
    Method: read it with describe_cluster, restart on the same data dir, read it again."""
    a = ck_admin(broker.bootstrap)
    first = a.describe_cluster(request_timeout=15).result(timeout=20).cluster_id
    broker.restart()
    a = ck_admin(broker.bootstrap)
    second = a.describe_cluster(request_timeout=15).result(timeout=20).cluster_id
    assert first and first == second


def test_advertised_listener(sluice_factory):
    """Goal: --advertised-listener changes the address Metadata hands to clients.
    Method: listen on 127.0.0.1:P, advertise localhost:P, read Metadata v1 over a raw socket;
    then a confluent client bootstrapping there can still create and use a topic."""
    port = _free_port()
    b = sluice_factory(["--node-id", "2", "--advertised-listener", f"localhost:{port}"], port=port)
    assert b.port == port
    md = kwire.parse_metadata(kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(11, [])), 1)
    assert md.correlation_id == 11
    assert md.brokers == [(2, "localhost", port)]
    assert md.controller_id == 2
    create_topic(b.bootstrap, "adv")
    [off] = ConfluentFamily(b.bootstrap).produce("adv", [Msg(b"v")])
    assert off == 0


def test_auto_create_via_metadata(sluice_factory):
    """Goal: Metadata for an unknown topic auto-creates it with --default-partitions
    partitions, and the broker's flag defaults show up in DescribeConfigs as broker-level
    (STATIC_BROKER_CONFIG) values.
    Method: start with --default-partitions 3 --retention-ms 86400000, send a Metadata v1
    request naming a new topic over a raw socket, then check the topic's partition count and
    configs with the admin client."""
    b = sluice_factory(["--default-partitions", "3", "--retention-ms", "86400000"])
    kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(5, ["auto-made"]))

    def created():
        md = kwire.parse_metadata(kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(6, ["auto-made"])), 1)
        err, parts = md.topics.get("auto-made", (-1, []))
        return err == 0 and len(parts) == 3 and all(e == 0 and leader >= 0 for _, e, leader in parts)

    wait_until(created, 10, what="auto-created topic with 3 partitions")
    cfg = CkAdmin(b.bootstrap).describe_configs("auto-made")
    assert cfg["retention.ms"].value == "86400000"
    assert cfg["retention.ms"].source == "STATIC_BROKER_CONFIG", cfg["retention.ms"]
    assert cfg["segment.bytes"].value == KAFKA_DEFAULTS["segment.bytes"]


def test_config_file(sluice_factory, tmp_path):
    """Goal: --config reads Kafka server.properties keys (num.partitions, log.retention.ms,
    auto.create.topics.enable).
    Method: write a properties file with comments, start with --config, auto-create a topic
    through Metadata and check its partition count and retention; a second broker with
    auto.create.topics.enable=false must not create topics through Metadata."""
    props = tmp_path / "server.properties"
    props.write_text("# test config\nnum.partitions=2\n\nlog.retention.ms=7200000\n")
    b = sluice_factory(["--config", str(props)])
    kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(1, ["from-file"]))
    a = CkAdmin(b.bootstrap)
    assert wait_until(lambda: a.list().get("from-file"), 10, what="auto-created topic") == 2
    assert a.describe_configs("from-file")["retention.ms"].value == "7200000"

    props2 = tmp_path / "noauto.properties"
    props2.write_text("auto.create.topics.enable=false\n")
    b2 = sluice_factory(["--config", str(props2)], name="noauto")
    md = kwire.parse_metadata(kwire.roundtrip(b2.bootstrap, kwire.metadata_request_v1(2, ["nope"])), 1)
    assert md.topics["nope"][0] == kwire.UNKNOWN_TOPIC_OR_PARTITION
    assert "nope" not in CkAdmin(b2.bootstrap).list()


def test_delete_and_recreate_topic_is_empty(broker):
    """Goal: a topic deleted and re-created under the same name starts empty at offset 0.
    Method: create, produce 5 records, delete, re-create, check watermarks (0, 0), produce one
    record (offset 0) and consume it back as the only record."""
    ck = ConfluentFamily(broker.bootstrap)
    create_topic(broker.bootstrap, "again")
    assert ck.produce("again", [Msg(f"old-{i}".encode()) for i in range(5)]) == [0, 1, 2, 3, 4]
    a = CkAdmin(broker.bootstrap)
    assert a.delete(["again"]) == {"again": 0}
    wait_until(lambda: "again" not in a.list(), 10, what="topic deleted")
    create_topic(broker.bootstrap, "again")
    assert ck.watermarks("again") == (0, 0)
    assert ck.produce("again", [Msg(b"new")]) == [0]
    recs = ck.consume("again", 0, 0, 5, timeout=3)
    assert [(r.offset, r.value) for r in recs] == [(0, b"new")]
