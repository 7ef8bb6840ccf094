"""Kafka's own `kafka-acls.sh` (`org.apache.kafka.tools.AclCommand` from the kafka-tools jar the
tests fetch) against a real `sluice serve` with an authorizer (issue 14): `--add`, `--list` and
`--remove` work unchanged over a SASL_PLAINTEXT listener as the super user, what they add is
enforced on the next request of the user it names (librdkafka), it survives a restart, and a
user who is not allowed to ALTER the cluster gets the tool's authorization error. Both
`kafka-acls.sh` and `kafka-configs.sh` also run with a `--command-config` over SASL_SSL
(PLAIN and SCRAM, a PEM trust store) and over mTLS (a PEM key store).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from java_client import java_cmd
from test_acls import (JAAS, LISTENER, PASSWORDS, create_topics, delivery_error, produce_error,
                       props)
from test_kafka_configs_tool import kafka_configs, kafka_libs, ok  # noqa: F401  (fixture)
from test_security import (CLIENT_PRINCIPAL, addr, pki, produce, secured,  # noqa: F401
                           ssl_conf, started, tls_props)

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"


def client_properties(path: Path, user: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{PASSWORDS[user]}";\n')
    return path


def kafka_acls(b, config: Path, *args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess:
    cmd = java_cmd(ACL_COMMAND, ["--bootstrap-server", bootstrap or b.bootstrap,
                                 "--command-config", str(config), *args])
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


def tls_client_properties(path: Path, pki: Path, lines: str) -> Path:
    """A --command-config file: `lines` plus the PEM trust store of the test CA."""
    path.write_text(f"{lines}ssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    return path


# Six JVM tool runs: more than the suite's 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_both_tools_over_sasl_ssl_with_plain_and_scram_and_over_mtls(secured, pki, kafka_libs,
                                                                    tmp_path):
    """kafka-configs.sh makes a SCRAM user while logged in with PLAIN over SASL_SSL, then
    describes users logged in as that SCRAM user and over mTLS; kafka-acls.sh adds an ACL over
    SCRAM, lists it over mTLS and removes it over PLAIN; what it adds and removes is enforced
    on alice's next produce (librdkafka over SASL_SSL)."""
    b = secured("SASL_SSL://127.0.0.1:{port},SSL://127.0.0.1:0", tls_props(pki, **{
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.truststore.location": str(pki / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:admin;User:root;User:{CLIENT_PRINCIPAL}"}))
    sasl_ssl, mtls = addr(b, "SASL_SSL"), addr(b, "SSL")
    plain = tls_client_properties(tmp_path / "plain.properties", pki, (
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{PASSWORDS["admin"]}";\n'))
    scram = tls_client_properties(tmp_path / "scram.properties", pki, (
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="root" password="root-secret";\n'))
    keystore = tmp_path / "client.keystore.pem"
    keystore.write_text((pki / "client.key").read_text() + (pki / "client.pem").read_text())
    cert = tls_client_properties(tmp_path / "mtls.properties", pki, (
        f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"))

    out = ok(kafka_configs(kafka_libs, b, "--command-config", str(plain), "--alter",
                           "--add-config", "SCRAM-SHA-512=[iterations=4096,password=root-secret]",
                           "--entity-type", "users", "--entity-name", "root", bootstrap=sasl_ssl))
    assert "Completed updating config for user root." in out, out
    described = "SCRAM credential configs for user-principal 'root' are SCRAM-SHA-512=iterations=4096"
    out = ok(kafka_configs(kafka_libs, b, "--command-config", str(scram), "--describe",
                           "--entity-type", "users", "--entity-name", "root", bootstrap=sasl_ssl))
    assert described in out, out
    out = ok(kafka_configs(kafka_libs, b, "--command-config", str(cert), "--describe",
                           "--entity-type", "users", bootstrap=mtls))
    assert described in out, out

    alice = {**ssl_conf(b, pki, "SASL_SSL"), "security.protocol": "SASL_SSL",
             "sasl.mechanism": "PLAIN", "sasl.username": "alice",
             "sasl.password": PASSWORDS["alice"]}
    produce({**ssl_conf(b, pki), "ssl.certificate.location": str(pki / "client.pem"),
             "ssl.key.location": str(pki / "client.key")}, "orders", [b"by-the-certificate"])
    grant = ["--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
             "--topic", "orders"]
    ok(kafka_acls(b, scram, "--add", *grant, bootstrap=sasl_ssl))
    listed = ok(kafka_acls(b, cert, "--list", "--topic", "orders", bootstrap=mtls))
    assert "User:alice" in listed and "WRITE" in listed.upper(), listed
    assert delivery_error(alice, "orders") is None
    ok(kafka_acls(b, plain, "--remove", "--force", *grant, bootstrap=sasl_ssl))
    err = delivery_error(alice, "orders")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

