"""Kafka's own `kafka-acls.sh` (`org.apache.kafka.tools.AclCommand` from the kafka-tools jar the
tests fetch) against a real `sluice serve` with an authorizer (issue 14): `--add`, `--list` and
`--remove` work unchanged over a SASL_PLAINTEXT listener as the super user, what they add is
enforced on the next request of the user it names (librdkafka), it survives a restart, and a
user who is not allowed to ALTER the cluster gets the tool's authorization error.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from confluent_kafka import KafkaError

from java_client import java_cmd
from test_acls import LISTENER, PASSWORDS, create_topics, produce_error, props
from test_security import secured, started  # noqa: F401  (fixture and helper)

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"


def client_properties(path: Path, user: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{PASSWORDS[user]}";\n')
    return path


def kafka_acls(b, config: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = java_cmd(ACL_COMMAND, ["--bootstrap-server", b.bootstrap, "--command-config", str(config), *args])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_kafka_acls_add_list_remove(secured, tmp_path):
    b = secured(LISTENER, props())
    create_topics(b, "orders")
    admin_conf = client_properties(tmp_path / "admin.properties", "admin")
    # Nothing allowed yet: alice is refused.
    assert produce_error(b, "alice", "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    added = kafka_acls(b, admin_conf, "--add", "--allow-principal", "User:alice",
                       "--operation", "Write", "--operation", "Describe", "--topic", "orders")
    assert added.returncode == 0, added.stderr[-3000:]
    listed = kafka_acls(b, admin_conf, "--list", "--topic", "orders")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "User:alice" in listed.stdout and "WRITE" in listed.stdout.upper(), listed.stdout
    assert produce_error(b, "alice", "orders") is None, "the tool's ACL is enforced"

    # Durable: the ACL is listed and enforced after a restart.
    b.stop()
    started(b, LISTENER, restart=True)
    relisted = kafka_acls(b, admin_conf, "--list", "--topic", "orders")
    assert "User:alice" in relisted.stdout, relisted.stdout + relisted.stderr[-2000:]
    assert produce_error(b, "alice", "orders") is None

    removed = kafka_acls(b, admin_conf, "--remove", "--force", "--allow-principal", "User:alice",
                         "--operation", "Write", "--operation", "Describe", "--topic", "orders")
    assert removed.returncode == 0, removed.stderr[-3000:]
    after = kafka_acls(b, admin_conf, "--list", "--topic", "orders")
    assert "User:alice" not in after.stdout, after.stdout
    assert produce_error(b, "alice", "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # A user without ALTER on the cluster cannot add ACLs: the tool reports the refusal.
    bob_conf = client_properties(tmp_path / "bob.properties", "bob")
    refused = kafka_acls(b, bob_conf, "--add", "--allow-principal", "User:bob",
                         "--operation", "All", "--topic", "orders")
    assert "ClusterAuthorizationException" in refused.stdout + refused.stderr, \
        refused.stdout[-2000:] + refused.stderr[-2000:]
    assert produce_error(b, "bob", "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
