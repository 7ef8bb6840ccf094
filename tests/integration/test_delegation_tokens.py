"""Delegation tokens (issue 33) against a real `sluice serve` over SASL_SSL, with Kafka's own
tool and client: `kafka-delegation-tokens.sh` (org.apache.kafka.tools.DelegationTokenCommand
from kafka-tools in target/java-deps) creates, describes, renews and expires tokens as alice
(PLAIN); the Java client then produces and consumes with a token (SCRAM-SHA-256,
`ScramLoginModule ... tokenauth="true"`, the extension librdkafka has no setting for), as
alice: only alice's ACLs let it in. Tokens survive a restart; an expired or expired-by-time
token is refused at login. The in-process tier (`tests/api/delegation_tokens.rs`) checks every
error code; this file checks that Kafka's tools and clients work unchanged.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from java_client import JVM_FLAGS, classpath, run
from test_security import addr, pki, secured, started, tls_props  # noqa: F401

TOKEN_COMMAND = "org.apache.kafka.tools.DelegationTokenCommand"
LISTENERS = "SASL_SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret" user_alice="alice-secret";')
TOPIC, GROUP = "tokens-topic", "tokens-group"


def broker_props(pki_dir) -> dict[str, str]:
    # PLAINTEXT (loopback) is the setup listener: ANONYMOUS is a super user there.
    return tls_props(pki_dir, **{
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "delegation.token.secret.key": "integration-secret-key",
        "delegation.token.expiry.check.interval.ms": "1000",
    })


def client_conf(pki_dir, tmp_path, name: str, jaas: str, mechanism: str) -> list[str]:
    """The SASL_SSL client settings as key=value lines (also written to `name`.properties)."""
    lines = ["security.protocol=SASL_SSL", f"sasl.mechanism={mechanism}",
             f"sasl.jaas.config={jaas}", "ssl.truststore.type=PEM",
             f"ssl.truststore.location={pki_dir / 'ca.pem'}"]
    (tmp_path / f"{name}.properties").write_text("\n".join(lines) + "\n")
    return lines


def tokens_tool(b, tmp_path, *args: str) -> subprocess.CompletedProcess:
    cmd = ["java", *JVM_FLAGS, "-cp", classpath(), TOKEN_COMMAND,
           "--bootstrap-server", addr(b, "SASL_SSL"),
           "--command-config", str(tmp_path / "alice.properties"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def token_rows(out: str) -> dict[str, list[str]]:
    """The tool's token table: token id -> [hmac, owner, requester, ...]."""
    rows, header = {}, False
    for line in out.splitlines():
        cells = line.split()
        if cells[:2] == ["TOKENID", "HMAC"]:
            header = True
        elif header and len(cells) >= 4:
            rows[cells[0]] = cells[1:]
    return rows


def token_jaas(token_id: str, hmac: str) -> str:
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{token_id}" password="{hmac}" tokenauth="true";')


def with_token(b, pki_dir, tmp_path, token_id: str, hmac: str, command: str, *args: str):
    conf = client_conf(pki_dir, tmp_path, "token", token_jaas(token_id, hmac), "SCRAM-SHA-256")
    extra = [x for kv in conf for x in ("--conf", kv)]
    return run(command, "--bootstrap", addr(b, "SASL_SSL"), "--topic", TOPIC, *args, *extra,
               "--conf", "max.block.ms=15000", timeout=180)


def create_token(b, tmp_path, *args: str) -> tuple[str, str]:
    out = ok(tokens_tool(b, tmp_path, "--create", *args))
    rows = token_rows(out)
    assert len(rows) == 1, out
    (token_id, cells), = rows.items()
    assert cells[1] == "User:alice" and cells[2] == "User:alice", out
    return token_id, cells[0]


# About fifteen JVM runs and a restart.
@pytest.mark.timeout(600)
def test_tokens_with_kafka_tool_and_java_client(secured, pki, tmp_path):
    b = secured(LISTENERS, broker_props(pki))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=15)
    acls = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                       op, AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    acls.append(AclBinding(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, "User:alice",
                           "*", AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(acls).values():
        f.result(timeout=15)
    client_conf(pki, tmp_path, "alice", 'org.apache.kafka.common.security.plain.PlainLoginModule '
                'required username="alice" password="alice-secret";', "PLAIN")

    token_id, hmac = create_token(b, tmp_path, "--max-life-time-period", "-1",
                                  "--renewer-principal", "User:admin")
    short_id, short_hmac = create_token(b, tmp_path, "--max-life-time-period", "3000")
    # Without --owner-principal the tool sends an empty owner list, which Kafka answers with
    # no tokens (`ownersListEmpty`); Sluice answers the same.
    assert token_rows(ok(tokens_tool(b, tmp_path, "--describe"))) == {}
    described = token_rows(ok(tokens_tool(b, tmp_path, "--describe", "--owner-principal",
                                          "User:alice")))
    assert set(described) == {token_id, short_id}, described
    assert "User:admin" in described[token_id][3], described
    assert "Completed renew operation" in ok(tokens_tool(
        b, tmp_path, "--renew", "--hmac", hmac, "--renew-time-period", "600000"))

    # The Java client with the token is alice: her ACLs let it produce and consume.
    produced = with_token(b, pki, tmp_path, token_id, hmac, "produce", "--count", "5",
                          "--partition", "0")
    assert produced.ok, produced.summary()
    consumed = with_token(b, pki, tmp_path, token_id, hmac, "consume-group", "--group", GROUP,
                          "--count", "5", "--timeout-ms", "60000")
    assert consumed.ok and len(consumed["records"]) == 5, consumed.summary()

    # Durable: after a restart the tool lists the token and it still logs in.
    b.stop()
    started(b, LISTENERS, restart=True)
    again = token_rows(ok(tokens_tool(b, tmp_path, "--describe", "--owner-principal",
                                      "User:alice")))
    assert token_id in again, again
    stored = (b.data_dir / "meta" / "delegation_tokens.json").read_text()
    assert token_id in stored and "integration-secret-key" not in stored
    assert oct((b.data_dir / "meta" / "delegation_tokens.json").stat().st_mode & 0o777) == "0o600"
    produced = with_token(b, pki, tmp_path, token_id, hmac, "produce", "--count", "1",
                          "--partition", "0")
    assert produced.ok, produced.summary()

    # The short token's max lifetime (3 s) is long over: refused at login, then purged.
    time.sleep(3.5)
    refused = with_token(b, pki, tmp_path, short_id, short_hmac, "produce", "--count", "1",
                         "--partition", "0")
    assert not refused.ok and "SaslAuthenticationException" in refused.summary(), \
        refused.summary()
    # Expired with the tool: refused from then on.
    assert "Completed expire operation" in ok(tokens_tool(
        b, tmp_path, "--expire", "--hmac", hmac, "--expiry-time-period", "-1"))
    refused = with_token(b, pki, tmp_path, token_id, hmac, "produce", "--count", "1",
                         "--partition", "0")
    assert not refused.ok and "SaslAuthenticationException" in refused.summary(), \
        refused.summary()
    assert token_rows(ok(tokens_tool(b, tmp_path, "--describe", "--owner-principal",
                                     "User:alice"))) == {}
