"""franz-go over SASL_SSL with SCRAM and PLAIN and over mTLS (issue 14: every client family over
the secured listeners), through `franz-it`'s security flags (tests/integration/franz/security.go):
the right user gets in and its records are read back by librdkafka, a wrong password is an
authentication error within seconds (not a hang), and a client certificate is the principal
the ACLs see; and kcat (librdkafka's command-line client) the same ways. The test command
installs kcat (scripts/test-integration.sh); run alone without it, the kcat tests skip, saying so.
The Java client over SASL_SSL with PLAIN and over mTLS with a PEM key store is here too (its
SCRAM run is in test_security.py). Across the clients: a refused certificate (none, or another
CA's) is reported within seconds, and a user without ACLs gets the topic authorization error
in each client's own words. "Within seconds" is timed from the client's start to its report,
since franz-go and kcat keep retrying until their own deadlines after reporting.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from confluent_kafka import KafkaError
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

from helpers import create_topic
from test_acls import delivery_error
from test_franz import Franz, franz, franz_bin  # noqa: F401  (fixtures)
from test_security import (addr, auth_error, consume, foreign_pki, pki,  # noqa: F401  (fixtures)
                           secured, ssl_conf, tls_props)

SCRAM_LISTENERS = "SASL_SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0"


def test_franz_go_over_sasl_ssl_with_scram(secured, pki, franz):
    b = secured(SCRAM_LISTENERS, tls_props(pki, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"}))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    up = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                      b"erin-secret")
    admin.alter_user_scram_credentials([up])["erin"].result(timeout=10)
    create_topic(addr(b, "PLAINTEXT"), "fz", 1)
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
    assert franz_reports(franz, addr(b, "SASL_SSL"), "SASL_AUTHENTICATION_FAILED",
                         "--topic", "fz", "--sasl-password", "wrong", *sec) < FAST_S
    assert len(consume(erin, "fz", 51, timeout=5)) == 50


# A refusal (bad credentials, a bad certificate) must reach the client within this many
# seconds; the clients' own deadlines in these tests are 30 s and more, so a client waiting
# for an answer that never comes (a hang) cannot pass.
FAST_S = 10.0
FRANZ_DEADLINE = "60s"
# The Java producer's deadline for metadata and delivery in the refusal tests, and the bound
# its refusal must stay under: a JVM on a loaded machine takes seconds just to build its
# producer (the time is measured from before that), so the bound is looser than FAST_S, and
# still a quarter of the deadline a hang would take.
JAVA_DEADLINE = ["--conf", "max.block.ms=120000", "--conf", "delivery.timeout.ms=120000"]
JAVA_FAST_MS = 30_000


def franz_reports(franz: Franz, bootstrap: str, text: str, *args: str) -> float:
    """Starts a franz-it produce of one record (franz-go's log on stderr, a 60 s deadline)
    and returns the seconds until `text` shows in its log. franz-go retries a refused
    connection until its deadline (its choice), so what is timed is how soon the refusal
    reached it, not how soon it gave up."""
    t0 = time.monotonic()
    run = franz.start("produce", bootstrap, "--count", "1", "--partition", "0",
                      "--timeout", FRANZ_DEADLINE, "--log", "info", *args)
    return time_to_report(run.proc, run.stderr, text, t0)


def time_to_report(proc: subprocess.Popen, stderr, text: str, t0: float) -> float:
    """Seconds from `t0` until `text` shows in `stderr()` of `proc`, which is then killed;
    fails if `proc` exits without it or it takes longer than 3 * FAST_S."""
    try:
        while text not in stderr():
            assert proc.poll() is None or text in stderr(), \
                f"exited without reporting {text!r}:\n{stderr()[-3000:]}"
            assert time.monotonic() - t0 < 3 * FAST_S, \
                f"{text!r} not reported within {3 * FAST_S}s:\n{stderr()[-3000:]}"
            time.sleep(0.1)
        return time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)

def test_franz_go_over_mtls_is_the_certificate_principal(secured, pki, franz):
    props = tls_props(pki, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    b = secured("SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0", props)
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


def kcat_path() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return path


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([kcat_path(), *args], input=stdin, capture_output=True, timeout=timeout)


def kcat_reports(workdir, text: str, *args: str) -> float:
    """Starts kcat with `args` and returns the seconds until `text` shows in its stderr
    (librdkafka logs a connection's failure as it happens; kcat itself waits out its own
    timeout before it exits)."""
    err = workdir / f"kcat-{time.monotonic_ns()}.err"
    t0 = time.monotonic()
    with open(err, "wb") as f:
        proc = subprocess.Popen([kcat_path(), *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=f)
    return time_to_report(proc, lambda: err.read_text(errors="replace"), text, t0)


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

    m = secured("SSL://127.0.0.1:{port}", mtls_props(pki), name="mtls")
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


def test_plain_over_sasl_ssl_with_franz_go_kcat_and_the_java_client(secured, pki, franz):
    """SASL_SSL with PLAIN, the mechanism the SCRAM tests above leave out, for the three
    clients that are not librdkafka's Python binding: each writes with the right password and
    fails at once, with an authentication error, with a wrong one (confluent-kafka too)."""
    from java_client import sasl_ssl_produce
    b = secured(SCRAM_LISTENERS, tls_props(pki, **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS_USERS}))
    create_topic(addr(b, "PLAINTEXT"), "pl", 1)
    pat = {**ssl_conf(b, pki, "SASL_SSL"), "security.protocol": "SASL_SSL",
           "sasl.mechanism": "PLAIN", "sasl.username": "pat", "sasl.password": "pat-secret"}

    sec = ["--sasl-mechanism", "PLAIN", "--sasl-user", "pat", "--tls-ca", str(pki / "ca.pem")]
    out = franz.run("produce", addr(b, "SASL_SSL"), "--topic", "pl", "--count", "10",
                    "--partition", "0", "--sasl-password", "pat-secret", *sec)
    assert out["acked"] == 10, out
    assert franz_reports(franz, addr(b, "SASL_SSL"), "SASL_AUTHENTICATION_FAILED",
                         "--topic", "pl", "--sasl-password", "wrong", *sec) < FAST_S
    t0 = time.monotonic()
    err = auth_error({**pat, "sasl.password": "wrong"}, within=3 * FAST_S)
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert time.monotonic() - t0 < FAST_S

    sasl = ["-b", addr(b, "SASL_SSL"), "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=pat",
            "-X", f"ssl.ca.location={pki / 'ca.pem'}"]
    r = kcat("-P", *sasl, "-X", "sasl.password=pat-secret", "-t", "pl", "-p", "0",
             stdin=b"k1\nk2\n")
    assert r.returncode == 0, r.stderr.decode()
    r = kcat("-L", *sasl, "-X", "sasl.password=wrong", "-m", "10", timeout=30)
    assert r.returncode != 0 and b"uthentication" in r.stderr, r

    def java_produce(password: str, count: int, *extra: str):
        return sasl_ssl_produce(addr(b, "SASL_SSL"), "pl", "PLAIN", "pat", password,
                                pki / "ca.pem", count, *extra)
    ok = java_produce("pat-secret", 20)
    assert ok.ok, ok.summary()
    refused = java_produce("wrong", 1, *JAVA_DEADLINE)
    assert not refused.ok and "SaslAuthenticationException" in refused.summary(), refused.summary()
    assert refused.data.get("elapsed_ms", JAVA_FAST_MS) < JAVA_FAST_MS, refused.summary()

    # 10 from franz-go, 2 from kcat, 20 from the Java client; nothing from the wrong passwords.
    assert len(consume(pat, "pl", 33, timeout=10)) == 32


def test_the_java_client_over_mtls(secured, pki):
    """The Java client with a PEM key store (its key and certificate in one file, Kafka's
    `ssl.keystore.type=PEM`) against a listener that requires client certificates (without
    one, or with another CA's: test_mtls_without_a_trusted_certificate_fails_fast_in_every_client)."""
    from java_client import run
    m = secured("SSL://127.0.0.1:{port}", mtls_props(pki), name="mtls")
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


def mtls_props(pki) -> dict[str, str]:
    return tls_props(pki, **{"ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                             "ssl.truststore.location": str(pki / "ca.pem")})


def test_mtls_without_a_trusted_certificate_fails_fast_in_every_client(secured, pki, foreign_pki,
                                                                      franz, tmp_path):
    """A listener requiring client certificates, and a client with no certificate or with one
    from another CA (same subject, other issuer): the broker refuses the handshake, and
    franz-go, kcat and the Java client each report a TLS failure within seconds, not at their
    deadline; the broker then still lets the trusted certificate in."""
    from java_client import run
    m = secured("SSL://127.0.0.1:{port}", mtls_props(pki), name="mtls")
    foreign_store = foreign_pki / "client.keystore.pem"
    foreign_store.write_text((foreign_pki / "client.key").read_text()
                             + (foreign_pki / "client.pem").read_text())
    ca = str(pki / "ca.pem")
    cases = {
        "no certificate": ([], [], []),
        "another CA's certificate": (
            ["--tls-cert", str(foreign_pki / "client.pem"), "--tls-key", str(foreign_pki / "client.key")],
            ["-X", f"ssl.certificate.location={foreign_pki / 'client.pem'}",
             "-X", f"ssl.key.location={foreign_pki / 'client.key'}"],
            ["--conf", "ssl.keystore.type=PEM", "--conf", f"ssl.keystore.location={foreign_store}"]),
    }
    for case, (franz_cert, kcat_cert, java_cert) in cases.items():
        took = franz_reports(franz, addr(m, "SSL"), "remote error: tls:", "--topic", "mx",
                             "--tls-ca", ca, *franz_cert)
        assert took < FAST_S, (case, took)

        # librdkafka names the TLS alert the broker sent (certificate required, unknown CA).
        took = kcat_reports(tmp_path, "SSL alert number", "-L", "-b", addr(m, "SSL"),
                            "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca}",
                            *kcat_cert, "-m", "30")
        assert took < FAST_S, (case, took)

        r = run("produce", "--bootstrap", addr(m, "SSL"), "--topic", "mx", "--count", "1",
                "--partition", "0", "--conf", "security.protocol=SSL",
                "--conf", "ssl.truststore.type=PEM", "--conf", f"ssl.truststore.location={ca}",
                *java_cert, *JAVA_DEADLINE, timeout=240)
        assert not r.ok and "SslAuthenticationException" in r.summary(), (case, r.summary())
        assert r.data.get("elapsed_ms", JAVA_FAST_MS) < JAVA_FAST_MS, (case, r.summary())
    trusted = {**ssl_conf(m, pki), "ssl.certificate.location": str(pki / "client.pem"),
               "ssl.key.location": str(pki / "client.key")}
    assert consume(trusted, "mx", 1, timeout=5) == []


def test_a_user_without_acls_gets_the_topic_authorization_error_in_every_client(secured, pki,
                                                                                 franz):
    """SASL_SSL with PLAIN and an authorizer: pat may write topic `open` (which also gets an
    idempotent producer its producer id) and has no ACL on `locked`. Producing to `locked`,
    confluent-kafka, kcat, franz-go and the Java client each get TOPIC_AUTHORIZATION_FAILED
    in their own words, and nothing is written; `open` takes her records."""
    from java_client import run
    b = secured(SCRAM_LISTENERS, tls_props(pki, **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS_USERS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}))
    plain = {"bootstrap.servers": addr(b, "PLAINTEXT")}
    create_topic(plain["bootstrap.servers"], "open", 1)
    create_topic(plain["bootstrap.servers"], "locked", 1)
    a = AdminClient(plain)
    for op in (AclOperation.WRITE, AclOperation.DESCRIBE):
        binding = AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, "User:pat",
                             "*", op, AclPermissionType.ALLOW)
        for f in a.create_acls([binding], request_timeout=10).values():
            f.result(timeout=15)
    pat = {**ssl_conf(b, pki, "SASL_SSL"), "security.protocol": "SASL_SSL",
           "sasl.mechanism": "PLAIN", "sasl.username": "pat", "sasl.password": "pat-secret"}

    err = delivery_error(pat, "locked")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    r = kcat("-P", "-b", addr(b, "SASL_SSL"), "-X", "security.protocol=SASL_SSL",
             "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=pat",
             "-X", "sasl.password=pat-secret", "-X", f"ssl.ca.location={pki / 'ca.pem'}",
             "-X", "message.timeout.ms=10000", "-t", "locked", "-p", "0", stdin=b"x\n")
    assert b"Topic authorization failed" in r.stderr, r

    sec = ["--sasl-mechanism", "PLAIN", "--sasl-user", "pat", "--sasl-password", "pat-secret",
           "--tls-ca", str(pki / "ca.pem")]
    out = franz.run("produce", addr(b, "SASL_SSL"), "--topic", "locked", "--count", "1",
                    "--partition", "0", "--timeout", "30s", *sec, check=False)
    assert out.get("acked", 0) == 0, out
    assert any("TOPIC_AUTHORIZATION_FAILED" in e for e in out.get("errors") or []), out

    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="pat" password="pat-secret";')
    java = ["--partition", "0", "--conf", "security.protocol=SASL_SSL",
            "--conf", "sasl.mechanism=PLAIN", "--conf", f"sasl.jaas.config={jaas}",
            "--conf", "ssl.truststore.type=PEM", "--conf", f"ssl.truststore.location={pki / 'ca.pem'}"]
    r = run("produce", "--bootstrap", addr(b, "SASL_SSL"), "--topic", "locked", "--count", "1",
            *java)
    assert not r.ok and "TopicAuthorizationException" in r.summary(), r.summary()

    assert consume(plain, "locked", 1, timeout=5) == []
    out = franz.run("produce", addr(b, "SASL_SSL"), "--topic", "open", "--count", "3",
                    "--partition", "0", *sec)
    assert out["acked"] == 3, out
    r = run("produce", "--bootstrap", addr(b, "SASL_SSL"), "--topic", "open", "--count", "2",
            *java)
    assert r.ok, r.summary()
    assert len(consume(plain, "open", 5)) == 5
