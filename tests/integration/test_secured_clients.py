"""franz-go over SASL_SSL with SCRAM and PLAIN and over mTLS (issue 14: every client family over
the secured listeners), through `franz-it`'s security flags (tests/integration/franz/security.go):
the right user gets in and its records are read back by librdkafka, a wrong password is an
authentication error within seconds (not a hang), and a client certificate is the principal
the ACLs see; and kcat (librdkafka's command-line client) the same ways. The test command
installs kcat (scripts/test-integration.sh); run alone without it, the kcat tests skip, saying so.
The Java client over SASL_SSL with PLAIN and over mTLS with a PEM key store is here too (its
SCRAM run is in test_security.py).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

from helpers import create_topic
from test_franz import Franz, franz_bin  # noqa: F401  (fixture)
from test_security import (addr, consume, pki, secured, ssl_conf,  # noqa: F401  (fixtures)
                           tls_props)

SCRAM_LISTENERS = "SASL_SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0"


def test_franz_go_over_sasl_ssl_with_scram(secured, pki, franz_bin, tmp_path):
    b = secured(SCRAM_LISTENERS, tls_props(pki, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"}))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    up = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                      b"erin-secret")
    admin.alter_user_scram_credentials([up])["erin"].result(timeout=10)
    create_topic(addr(b, "PLAINTEXT"), "fz", 1)
    franz = Franz(franz_bin, tmp_path)
    sec = ["--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "erin", "--tls-ca", str(pki / "ca.pem")]
    out = franz.run("produce", addr(b, "SASL_SSL"), "--topic", "fz", "--count", "50",
                    "--partition", "0", "--sasl-password", "erin-secret", *sec)
    assert out["acked"] == 50, out
    erin = {**ssl_conf(b, pki, "SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "erin",
            "sasl.password": "erin-secret"}
    assert len(consume(erin, "fz", 50)) == 50
    # A wrong password: the broker answers SASL_AUTHENTICATION_FAILED at once and closes;
    # franz-go reports it and retries until its deadline (its choice), nothing is written.
    run = franz.start("produce", addr(b, "SASL_SSL"), "--topic", "fz", "--count", "1",
                      "--partition", "0", "--sasl-password", "wrong", "--timeout", "8s",
                      "--log", "info", *sec)
    run.proc.wait(timeout=30)
    assert run.proc.returncode != 0
    assert "SASL_AUTHENTICATION_FAILED" in run.stderr(), run.stderr()[-2000:]
    assert len(consume(erin, "fz", 50)) == 50


def test_franz_go_over_mtls_is_the_certificate_principal(secured, pki, franz_bin, tmp_path):
    props = tls_props(pki, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    b = secured("SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0", props)
    franz = Franz(franz_bin, tmp_path)
    sec = ["--tls-ca", str(pki / "ca.pem"), "--tls-cert", str(pki / "client.pem"),
           "--tls-key", str(pki / "client.key")]
    # No ACL for the certificate's subject yet: its produce is refused.
    create_topic(addr(b, "PLAINTEXT"), "mt", 1)
    out = franz.run("produce", addr(b, "SSL"), "--topic", "mt", "--count", "1", "--partition", "0",
                    "--timeout", "20s", *sec, check=False)
    assert out.get("acked", 0) == 0, out
    assert "AUTHORIZATION" in " ".join(out.get("errors") or []) + (out.get("error") or ""), out
    principal = "User:CN=alice-client,O=Sluice Test"
    a = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    acls = [AclBinding(ResourceType.TOPIC, "mt", ResourcePatternType.LITERAL, principal, "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)]
    for f in a.create_acls(acls, request_timeout=10).values():
        f.result(timeout=15)
    out = franz.run("produce", addr(b, "SSL"), "--topic", "mt", "--count", "20", "--partition", "0",
                    *sec)
    assert out["acked"] == 20, out
    # Without a certificate the handshake fails: an error, not a hang.
    out = franz.run("produce", addr(b, "SSL"), "--topic", "mt", "--count", "1", "--partition", "0",
                    "--timeout", "15s", "--tls-ca", str(pki / "ca.pem"), check=False)
    assert out.get("acked", 0) == 0, out


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return subprocess.run([path, *args], input=stdin, capture_output=True, timeout=timeout)


def test_kcat_over_sasl_ssl_with_scram_and_over_mtls(secured, pki):
    b = secured(SCRAM_LISTENERS, tls_props(pki, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256"}))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    up = UserScramCredentialUpsertion("kc", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                      b"kc-secret")
    admin.alter_user_scram_credentials([up])["kc"].result(timeout=10)
    create_topic(addr(b, "PLAINTEXT"), "kc", 1)
    sasl = ["-b", addr(b, "SASL_SSL"), "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=kc",
            "-X", f"ssl.ca.location={pki / 'ca.pem'}"]
    r = kcat("-P", *sasl, "-X", "sasl.password=kc-secret", "-t", "kc", "-p", "0",
             stdin=b"one\ntwo\nthree\n")
    assert r.returncode == 0, r.stderr.decode()
    r = kcat("-C", *sasl, "-X", "sasl.password=kc-secret", "-t", "kc", "-p", "0", "-o", "beginning",
             "-c", "3", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == [b"one", b"two", b"three"], r
    r = kcat("-L", *sasl, "-X", "sasl.password=wrong", "-m", "10", timeout=30)
    assert r.returncode != 0 and b"uthentication" in r.stderr, r

    m = secured("SSL://127.0.0.1:{port}", tls_props(pki, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem")}), name="mtls")
    tls = ["-b", addr(m, "SSL"), "-X", "security.protocol=SSL",
           "-X", f"ssl.ca.location={pki / 'ca.pem'}"]
    cert = ["-X", f"ssl.certificate.location={pki / 'client.pem'}",
            "-X", f"ssl.key.location={pki / 'client.key'}"]
    r = kcat("-P", *tls, *cert, "-t", "km", "-p", "0", stdin=b"a\nb\n")
    assert r.returncode == 0, r.stderr.decode()
    r = kcat("-C", *tls, *cert, "-t", "km", "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == [b"a", b"b"], r
    r = kcat("-L", *tls, "-m", "10", timeout=30)
    assert r.returncode != 0, r


PLAIN_JAAS_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'user_pat="pat-secret";')


def test_plain_over_sasl_ssl_with_franz_go_kcat_and_the_java_client(secured, pki, franz_bin,
                                                                  tmp_path):
    """SASL_SSL with PLAIN, the mechanism the SCRAM tests above leave out, for the three
    clients that are not librdkafka's Python binding: each writes with the right password and
    fails at once, with an authentication error, with a wrong one."""
    from java_client import run
    b = secured(SCRAM_LISTENERS, tls_props(pki, **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS_USERS}))
    create_topic(addr(b, "PLAINTEXT"), "pl", 1)
    pat = {**ssl_conf(b, pki, "SASL_SSL"), "security.protocol": "SASL_SSL",
           "sasl.mechanism": "PLAIN", "sasl.username": "pat", "sasl.password": "pat-secret"}

    franz = Franz(franz_bin, tmp_path)
    sec = ["--sasl-mechanism", "PLAIN", "--sasl-user", "pat", "--tls-ca", str(pki / "ca.pem")]
    out = franz.run("produce", addr(b, "SASL_SSL"), "--topic", "pl", "--count", "10",
                    "--partition", "0", "--sasl-password", "pat-secret", *sec)
    assert out["acked"] == 10, out
    out = franz.run("produce", addr(b, "SASL_SSL"), "--topic", "pl", "--count", "1",
                    "--partition", "0", "--sasl-password", "wrong", "--timeout", "8s", *sec,
                    check=False)
    assert out.get("acked", 0) == 0, out

    sasl = ["-b", addr(b, "SASL_SSL"), "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=pat",
            "-X", f"ssl.ca.location={pki / 'ca.pem'}"]
    r = kcat("-P", *sasl, "-X", "sasl.password=pat-secret", "-t", "pl", "-p", "0",
             stdin=b"k1\nk2\n")
    assert r.returncode == 0, r.stderr.decode()
    r = kcat("-L", *sasl, "-X", "sasl.password=wrong", "-m", "10", timeout=30)
    assert r.returncode != 0 and b"uthentication" in r.stderr, r

    def java_produce(password: str, count: int):
        jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                f'username="pat" password="{password}";')
        return run("produce", "--bootstrap", addr(b, "SASL_SSL"), "--topic", "pl", "--count",
                   str(count), "--partition", "0", "--conf", "security.protocol=SASL_SSL",
                   "--conf", "sasl.mechanism=PLAIN", "--conf", f"sasl.jaas.config={jaas}",
                   "--conf", "ssl.truststore.type=PEM",
                   "--conf", f"ssl.truststore.location={pki / 'ca.pem'}")
    ok = java_produce("pat-secret", 20)
    assert ok.ok, ok.summary()
    refused = java_produce("wrong", 1)
    assert not refused.ok and "uthentication" in refused.summary(), refused.summary()

    # 10 from franz-go, 2 from kcat, 20 from the Java client; nothing from the wrong passwords.
    assert len(consume(pat, "pl", 33, timeout=10)) == 32


def test_the_java_client_over_mtls(secured, pki):
    """The Java client with a PEM key store (its key and certificate in one file, Kafka's
    `ssl.keystore.type=PEM`) against a listener that requires client certificates; without a
    key store its handshake fails and the producer reports it instead of hanging."""
    from java_client import run
    m = secured("SSL://127.0.0.1:{port}", tls_props(pki, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem")}), name="mtls")
    keystore = pki / "client.keystore.pem"
    keystore.write_text((pki / "client.key").read_text() + (pki / "client.pem").read_text())
    trust = ["--conf", "security.protocol=SSL", "--conf", "ssl.truststore.type=PEM",
             "--conf", f"ssl.truststore.location={pki / 'ca.pem'}"]
    r = run("produce", "--bootstrap", addr(m, "SSL"), "--topic", "jm", "--count", "20",
            "--partition", "0", *trust, "--conf", "ssl.keystore.type=PEM",
            "--conf", f"ssl.keystore.location={keystore}")
    assert r.ok, r.summary()
    cert = {**ssl_conf(m, pki), "ssl.certificate.location": str(pki / "client.pem"),
            "ssl.key.location": str(pki / "client.key")}
    assert len(consume(cert, "jm", 20)) == 20
    refused = run("produce", "--bootstrap", addr(m, "SSL"), "--topic", "jm", "--count", "1",
                  "--partition", "0", *trust, "--conf", "max.block.ms=10000",
                  "--conf", "delivery.timeout.ms=10000", "--conf", "request.timeout.ms=5000",
                  timeout=90)
    assert not refused.ok, refused.summary()
