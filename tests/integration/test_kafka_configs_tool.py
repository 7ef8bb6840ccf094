"""Kafka's own `kafka-configs.sh` (`org.apache.kafka.tools.ConfigCommand` from kafka-tools 4.4.0,
fetched by scripts/java-deps.sh) against a real `sluice serve` (issue 14), unchanged: SCRAM users (add, describe, delete), client quotas for users,
client ids, defaults and (user, client id) pairs (add, describe, delete), topic configs (alter,
describe, delete) and broker describe. What the tool writes is checked through another client:
a SCRAM user it made logs in over SASL_SSL with librdkafka, also after a restart, and is
refused once the tool deleted its credential.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from java_client import JVM_FLAGS, classpath
from test_security import (addr, auth_error, consume, pki, produce, secured,  # noqa: F401
                           ssl_conf, started, tls_props)

# kafka-configs.sh's class since Kafka 4.x moved it from the broker jars to kafka-tools.
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
LISTENERS = "PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:0"


@pytest.fixture(scope="module")
def kafka_libs() -> str:
    """The classpath with kafka-tools (ConfigCommand) and the Java client."""
    return classpath()


def kafka_configs(libs: str, b, *args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess:
    """Runs ConfigCommand against `bootstrap` (default: b's PLAINTEXT listener)."""
    cmd = ["java", *JVM_FLAGS, "-cp", libs, CONFIG_COMMAND,
           "--bootstrap-server", bootstrap or addr(b, "PLAINTEXT"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def scram_conf(b, pki_dir: Path, user: str, password: str) -> dict:
    return {**ssl_conf(b, pki_dir, "SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def broker_props(pki_dir: Path) -> dict[str, str]:
    return tls_props(pki_dir, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})


# Six JVM tool runs and a restart: more than the suite's 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_scram_users_added_described_deleted_and_durable(secured, pki, kafka_libs):
    b = secured(LISTENERS, broker_props(pki))
    for user in ("alice", "bob"):
        out = ok(kafka_configs(kafka_libs, b, "--alter", "--add-config",
                               f"SCRAM-SHA-512=[iterations=8192,password={user}-secret]",
                               "--entity-type", "users", "--entity-name", user))
        assert f"Completed updating config for user {user}." in out, out
    described = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "users"))
    for user in ("alice", "bob"):
        assert (f"SCRAM credential configs for user-principal '{user}' are "
                "SCRAM-SHA-512=iterations=8192") in described, described
    alice = scram_conf(b, pki, "alice", "alice-secret")
    produce(alice, "scram-tool", [b"one"])
    assert consume(alice, "scram-tool", 1) == [b"one"]
    wrong = auth_error({**alice, "sasl.password": "nope"})
    assert wrong is not None and wrong.code() == KafkaError._AUTHENTICATION, wrong

    # Durable: after a restart the tool lists them and both log in.
    b.stop()
    started(b, LISTENERS, restart=True)
    named = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "users",
                             "--entity-name", "bob"))
    assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192" \
        in named, named
    bob = scram_conf(b, pki, "bob", "bob-secret")
    produce(bob, "scram-tool", [b"two"])
    assert consume(scram_conf(b, pki, "alice", "alice-secret"), "scram-tool", 2) == [b"one", b"two"]

    # --delete-config removes alice's credential: she is refused, bob is not.
    out = ok(kafka_configs(kafka_libs, b, "--alter", "--delete-config", "SCRAM-SHA-512",
                           "--entity-type", "users", "--entity-name", "alice"))
    assert "Completed updating config for user alice." in out, out
    after = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "users"))
    assert "user-principal 'alice'" not in after and "user-principal 'bob'" in after, after
    refused = auth_error(scram_conf(b, pki, "alice", "alice-secret"))
    assert refused is not None and refused.code() == KafkaError._AUTHENTICATION, refused
    assert consume(bob, "scram-tool", 2) == [b"one", b"two"]


QUOTA_ENTITIES = [
    (["--entity-type", "users", "--entity-name", "alice"], "user-principal 'alice'"),
    (["--entity-type", "users", "--entity-default"], "the default user-principal"),
    (["--entity-type", "clients", "--entity-name", "app-1"], "client-id 'app-1'"),
    (["--entity-type", "clients", "--entity-default"], "the default client-id"),
    (["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
      "--entity-name", "app-1"], "user-principal 'alice', client-id 'app-1'"),
]


# Sixteen JVM tool runs: more than the suite's 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_client_quotas_for_users_clients_and_defaults(secured, pki, kafka_libs):
    b = secured(LISTENERS, broker_props(pki))
    for i, (entity, _) in enumerate(QUOTA_ENTITIES):
        out = ok(kafka_configs(kafka_libs, b, "--alter", "--add-config",
                               f"producer_byte_rate={1048576 * (i + 1)},consumer_byte_rate={1500000 * (i + 1)}",
                               *entity))
        assert "Completed updating " in out, out
    for i, (entity, label) in enumerate(QUOTA_ENTITIES):
        out = ok(kafka_configs(kafka_libs, b, "--describe", *entity))
        assert f"Quota configs for {label} are" in out, out
        assert f"producer_byte_rate={1048576 * (i + 1)}.0" in out, out
        assert f"consumer_byte_rate={1500000 * (i + 1)}.0" in out, out
    everyone = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "users"))
    assert "user-principal 'alice'" in everyone and "the default user-principal" in everyone, everyone
    assert "app-1" in (b.data_dir / "meta" / "client_quotas.json").read_text()

    ok(kafka_configs(kafka_libs, b, "--alter", "--delete-config", "producer_byte_rate",
                     *QUOTA_ENTITIES[0][0]))
    out = ok(kafka_configs(kafka_libs, b, "--describe", *QUOTA_ENTITIES[0][0]))
    assert "producer_byte_rate" not in out and "consumer_byte_rate=1500000.0" in out, out
    # Deleting a quota that is not set is the tool's own error, as against Kafka.
    gone = kafka_configs(kafka_libs, b, "--alter", "--delete-config", "producer_byte_rate",
                         *QUOTA_ENTITIES[0][0])
    assert gone.returncode != 0 and "producer_byte_rate" in gone.stdout + gone.stderr

    # Refused quota types are refused with the broker's message, not applied.
    refused = kafka_configs(kafka_libs, b, "--alter", "--add-config", "request_percentage=50",
                            *QUOTA_ENTITIES[2][0])
    assert refused.returncode != 0 and "request_percentage" in refused.stdout + refused.stderr
    assert "request_percentage" not in ok(kafka_configs(kafka_libs, b, "--describe", *QUOTA_ENTITIES[2][0]))


# Nine JVM tool runs: more than the suite's 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_topic_configs_and_broker_describe(secured, pki, kafka_libs):
    b = secured(LISTENERS, broker_props(pki))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    admin.create_topics([NewTopic("orders", 2, 1)], operation_timeout=10)["orders"].result(timeout=15)
    topic = ["--entity-type", "topics", "--entity-name", "orders"]
    out = ok(kafka_configs(kafka_libs, b, "--alter", *topic, "--add-config",
                           "retention.ms=86400000,cleanup.policy=[compact,delete],max.message.bytes=65536"))
    assert "Completed updating config for topic orders." in out, out
    described = ok(kafka_configs(kafka_libs, b, "--describe", *topic))
    assert "Dynamic configs for topic orders are:" in described, described
    for entry in ("retention.ms=86400000", "cleanup.policy=compact,delete", "max.message.bytes=65536"):
        assert f"  {entry} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:{entry}" in described, described
    assert "segment.bytes" not in described, "only overrides are dynamic"
    every = ok(kafka_configs(kafka_libs, b, "--describe", *topic, "--all"))
    assert "All configs for topic orders are:" in every and "segment.bytes=" in every, every
    # Seen by another client.
    cfg = admin.describe_configs([ConfigResource("topic", "orders")])
    (entries,) = [f.result(timeout=10) for f in cfg.values()]
    assert entries["retention.ms"].value == "86400000"

    ok(kafka_configs(kafka_libs, b, "--alter", *topic, "--delete-config", "retention.ms,max.message.bytes"))
    after = ok(kafka_configs(kafka_libs, b, "--describe", *topic))
    assert "retention.ms" not in after and "max.message.bytes" not in after, after
    assert "cleanup.policy=compact,delete" in after, after
    unknown = kafka_configs(kafka_libs, b, "--alter", *topic, "--add-config", "no.such.config=1")
    assert unknown.returncode != 0 and "no.such.config" in unknown.stdout + unknown.stderr
    all_topics = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "topics"))
    assert "Dynamic configs for topic orders are:" in all_topics, all_topics

    (node,) = admin.list_topics(timeout=10).brokers
    brokers = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "brokers"))
    assert f"Dynamic configs for broker {node} are:" in brokers, brokers
    assert "Default configs for brokers in the cluster are:" in brokers, brokers
    full = ok(kafka_configs(kafka_libs, b, "--describe", "--entity-type", "brokers",
                            "--entity-name", str(node), "--all"))
    assert f"All configs for broker {node} are:" in full, full
    assert f"log.dirs={b.data_dir}" in full, full
