"""Security, first slice (issue 14): named listeners, TLS (rustls) with PEM stores and mTLS,
SASL PLAIN and SCRAM-SHA-256/512 with durable credentials, against a real `sluice serve`.

A CA, a server certificate (SAN 127.0.0.1) and a client certificate are made at test time
with the openssl CLI. Clients: confluent-kafka (librdkafka) for every protocol, the Java
client once over SASL_SSL with SCRAM. Each test fails on a broker without security: that
broker refuses every ssl./sasl. setting at startup.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

import kwire
from conftest import SluiceBroker

EXTRA_LISTENER_RE = re.compile(r"^sluice listener (\S+) listening on (\S+):(\d+)\s*$")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
CLIENT_SUBJECT = "/O=Sluice Test/CN=alice-client"
# The principal Kafka's default builder makes of CLIENT_SUBJECT (RFC 2253 order).
CLIENT_PRINCIPAL = "CN=alice-client,O=Sluice Test"


# -- certificates -------------------------------------------------------------------------
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _leaf(d: Path, name: str, subject: str, ext: str) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"), "-subj", subject)
    (d / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"),
             "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-out", str(d / f"{name}.pem"),
             "-days", "2", "-extfile", str(d / f"{name}.ext"))


def _ca(d: Path, subject: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2",
             "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")


CLIENT_EXT = "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """ca.pem, server.keystore.pem (key + chain in one file), client.pem / client.key."""
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "/CN=Sluice Test CA")
    _leaf(d, "server", "/CN=localhost",
          "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
          "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n")
    _leaf(d, "client", CLIENT_SUBJECT, CLIENT_EXT)
    (d / "server.keystore.pem").write_text((d / "server.key").read_text() + (d / "server.pem").read_text()
                                           + (d / "ca.pem").read_text())
    return d


@pytest.fixture(scope="module")
def foreign_pki(tmp_path_factory) -> Path:
    """Another CA (same name as the test CA, other key) and a client certificate it signed
    with the same subject as pki's: only its issuer makes it untrusted."""
    d = tmp_path_factory.mktemp("foreign-pki")
    _ca(d, "/CN=Sluice Test CA")
    _leaf(d, "client", CLIENT_SUBJECT, CLIENT_EXT)
    return d


# -- brokers ------------------------------------------------------------------------------
@pytest.fixture
def secured(tmp_path, request):
    """start(listeners, props, name) -> broker; `listeners` is the --listen value with
    `{port}` for the first listener's port; `b.ports[NAME]` has every listener's port."""
    brokers: list[SluiceBroker] = []

    def start(listeners: str, props: dict[str, str], name: str = "broker") -> SluiceBroker:
        workdir = tmp_path / name
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        b = SluiceBroker(workdir, ["--config", str(config)], name=name)
        b.listen = listeners
        brokers.append(b)
        request.node._sluice_brokers = brokers
        return started(b, listeners)

    yield start
    problems = []
    for b in brokers:
        p = b.teardown()
        if p:
            problems.append(f"{b.log_path}: {p}\n{b.stderr_tail()}")
        if b.panics():
            problems.append(f"{b.log_path}: broker panicked\n{b.stderr_tail()}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def started(b: SluiceBroker, listeners: str, restart: bool = False) -> SluiceBroker:
    """Starts (or restarts, same first port) `b` and reads every listener's port."""
    if restart:
        b.start()
    else:
        b.start()
    names = [entry.split("://")[0].upper() for entry in listeners.split(",")]
    b.ports = {names[0]: b.port}
    deadline = time.monotonic() + 5
    while len(b.ports) < len(names) and time.monotonic() < deadline:
        try:
            line = b._stdout_lines.get(timeout=0.2)
        except queue.Empty:
            continue
        m = EXTRA_LISTENER_RE.match((line or "").strip())
        if m:
            b.ports[m.group(1)] = int(m.group(3))
    assert len(b.ports) == len(names), f"listener lines missing: {b.ports}\n{b.stderr_tail()}"
    return b


def addr(b: SluiceBroker, listener: str) -> str:
    return f"127.0.0.1:{b.ports[listener]}"


# -- clients ------------------------------------------------------------------------------
def produce(conf: dict, topic: str, values: list[bytes]) -> None:
    delivered, errors = [], []
    p = Producer({**conf, "linger.ms": 5, "message.timeout.ms": 20000})
    for v in values:
        p.produce(topic, v, partition=0,
                  on_delivery=lambda e, m: errors.append(e) if e else delivered.append(m.offset()))
    left = p.flush(30)
    assert left == 0 and not errors, f"not delivered: {left} left, errors {errors[:3]}"
    assert len(delivered) == len(values)


def consume(conf: dict, topic: str, n: int, timeout: float = 20) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"g-{time.monotonic_ns()}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m.value())
        return out
    finally:
        c.close()


def auth_error(conf: dict, within: float = 15) -> KafkaError | None:
    """Connects with `conf` and returns the first authentication or transport error the
    client reports (None when it got metadata instead)."""
    seen: list[KafkaError] = []
    # Slow reconnects: the client lingers until garbage-collected, and each retry is logged.
    admin = AdminClient({**conf, "error_cb": seen.append, "reconnect.backoff.ms": 2000,
                         "reconnect.backoff.max.ms": 5000})
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1)
            return None
        except KafkaException:
            pass
        admin.poll(0.1)  # serves error_cb
        if seen:
            return seen[0]
    raise AssertionError(f"no error reported within {within}s (a hang)")


def advertised_port(conf: dict) -> int:
    md = AdminClient(conf).list_topics(timeout=10)
    (broker,) = md.brokers.values()
    return broker.port


def tls_props(pki: Path, **extra: str) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki / "server.keystore.pem"),
            **extra}


def ssl_conf(b: SluiceBroker, pki: Path, listener: str = "SSL") -> dict:
    return {"bootstrap.servers": addr(b, listener), "security.protocol": "SSL",
            "ssl.ca.location": str(pki / "ca.pem")}


# -- tests --------------------------------------------------------------------------------
def test_ssl_and_plaintext_listeners_each_advertise_themselves(secured, pki):
    """Over TLS, records written with sendfile on plain TCP go through the copy-and-encrypt
    path: 300 records of 8 KiB (many TLS records and file ranges) come back intact; each
    listener's Metadata names its own port; a plaintext client on the TLS port gets nowhere."""
    b = secured("SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0", tls_props(pki))
    conf = ssl_conf(b, pki)
    values = [bytes([i % 251]) * 8192 for i in range(300)]
    produce(conf, "tls-topic", values)
    assert consume(conf, "tls-topic", len(values)) == values
    plain = {"bootstrap.servers": addr(b, "PLAINTEXT")}
    assert consume(plain, "tls-topic", 3) == values[:3]
    assert advertised_port(conf) == b.ports["SSL"]
    assert advertised_port(plain) == b.ports["PLAINTEXT"]
    assert auth_error({"bootstrap.servers": addr(b, "SSL"), "socket.timeout.ms": 3000}) is not None
    # 100 idle TLS connections (handshake done, one request each) cost little memory.
    before = vm_rss_kib(b)
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    conns = []
    try:
        for _ in range(100):
            c = ctx.wrap_socket(socket.create_connection(("127.0.0.1", b.ports["SSL"]), timeout=5),
                                server_hostname="127.0.0.1")
            c.sendall(kwire.api_versions_request(0, 1))
            kwire.read_frame(c)
            conns.append(c)
        grown = vm_rss_kib(b) - before
        assert grown < 16 * 1024, f"100 TLS connections grew VmRSS by {grown} KiB"
    finally:
        for c in conns:
            c.close()


def vm_rss_kib(b: SluiceBroker) -> int:
    for line in Path(f"/proc/{b.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_mtls_required_refuses_a_client_without_a_certificate(secured, pki, monkeypatch):
    monkeypatch.setenv("SLUICE_LOG", "info,sluice_broker::net::tls_stream=debug")
    b = secured("SSL://127.0.0.1:{port}", tls_props(
        pki, **{"ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(pki / "ca.pem")}))
    with_cert = {**ssl_conf(b, pki), "ssl.certificate.location": str(pki / "client.pem"),
                 "ssl.key.location": str(pki / "client.key")}
    produce(with_cert, "mtls", [b"a", b"b"])
    assert consume(with_cert, "mtls", 2) == [b"a", b"b"]
    err = auth_error(ssl_conf(b, pki))
    assert err is not None, "a client without a certificate got metadata"
    assert "principal=User:CN=alice-client,O=Sluice Test" in b.stderr_text()
    assert "TLS handshake failed" in b.stderr_text()


def served_subject(port: int, ca: Path) -> str:
    """The CN of the certificate the broker presents on `port`."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            subject = dict(x[0] for x in tls.getpeercert()["subject"])
    return subject["commonName"]


def test_certificates_are_reloaded_when_the_files_change(secured, pki, tmp_path):
    """A new key store written over the old file is served to new connections without a
    restart; a key store that does not load keeps the previous one in use."""
    store = tmp_path / "keystore.pem"
    store.write_text((pki / "server.keystore.pem").read_text())
    b = secured("SSL://127.0.0.1:{port}", {"ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(store)})
    assert served_subject(b.port, pki / "ca.pem") == "localhost"
    conf = ssl_conf(b, pki)
    produce(conf, "reload", [b"1"])
    _leaf(pki, "renewed", "/CN=renewed",
          "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    tmp = tmp_path / "keystore.pem.new"
    tmp.write_text((pki / "renewed.key").read_text() + (pki / "renewed.pem").read_text())
    tmp.replace(store)
    deadline = time.monotonic() + 15
    while served_subject(b.port, pki / "ca.pem") != "renewed":
        assert time.monotonic() < deadline, "the renewed certificate was not served"
        time.sleep(0.5)
    store.write_text("garbage")
    time.sleep(6)
    assert served_subject(b.port, pki / "ca.pem") == "renewed"
    assert "do not load; keeping the previous ones" in b.stderr_text()
    assert consume(conf, "reload", 1) == [b"1"]


def inline_pem(text: str) -> str:
    """A PEM value written into server.properties as Kafka's documentation shows it: each PEM
    line followed by a backslash continuation."""
    return " \\\n".join(text.strip().splitlines())


def mtls_conf(b: SluiceBroker, pki: Path, certs: Path | None = None) -> dict:
    """ssl_conf with the client certificate of `certs` (default: pki's own)."""
    certs = certs or pki
    return {**ssl_conf(b, pki), "ssl.certificate.location": str(certs / "client.pem"),
            "ssl.key.location": str(certs / "client.key")}


def refused_tls(conf: dict) -> bool:
    """True when a client with `conf` is refused (an error, no metadata) within 15 s."""
    return auth_error(conf) is not None


def test_inline_pem_key_store_and_trust_store(secured, pki):
    """The key store from `ssl.keystore.key` and `ssl.keystore.certificate.chain` and the
    trust store from `ssl.truststore.certificates`, all inline in server.properties, with
    client certificates required: the trusted certificate gets in, no certificate does not,
    and the private key never shows in the log."""
    key = (pki / "server.key").read_text()
    b = secured("SSL://127.0.0.1:{port}", {
        "ssl.keystore.type": "PEM", "ssl.keystore.key": inline_pem(key),
        "ssl.keystore.certificate.chain": inline_pem((pki / "server.pem").read_text()
                                                     + (pki / "ca.pem").read_text()),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": inline_pem((pki / "ca.pem").read_text()),
        "ssl.client.auth": "required"})
    assert served_subject(b.port, pki / "ca.pem") == "localhost"
    produce(mtls_conf(b, pki), "inline", [b"a", b"b"])
    assert consume(mtls_conf(b, pki), "inline", 2) == [b"a", b"b"]
    assert refused_tls(ssl_conf(b, pki))
    key_body = key.strip().splitlines()[1]
    assert key_body not in b.stderr_text()


def test_requested_client_certificates_are_optional_but_checked(secured, pki, foreign_pki):
    """`ssl.client.auth=requested`: a client without a certificate gets in as User:ANONYMOUS,
    one with a trusted certificate as its subject (an ACL that names only the subject tells
    them apart), and one with another CA's certificate is refused in the handshake."""
    b = secured("SSL://127.0.0.1:{port}", tls_props(pki, **{
        "ssl.client.auth": "requested", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}))
    anonymous, subject = ssl_conf(b, pki), mtls_conf(b, pki)
    admin = AdminClient(anonymous)
    binding = AclBinding(ResourceType.TOPIC, "certified", ResourcePatternType.LITERAL,
                         "User:" + CLIENT_PRINCIPAL, "*", AclOperation.ALL, AclPermissionType.ALLOW)
    for f in admin.create_acls([binding], request_timeout=10).values():
        f.result(timeout=15)
    produce(anonymous, "open", [b"anyone"])
    produce(subject, "certified", [b"alice"])
    from test_acls import delivery_error
    err = delivery_error(anonymous, "certified")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    foreign = mtls_conf(b, pki, foreign_pki)
    assert refused_tls(foreign)
    assert consume(subject, "certified", 2, timeout=5) == [b"alice"]


def test_trust_store_is_reloaded_when_its_file_changes(secured, pki, foreign_pki, tmp_path):
    """A trust store file replaced on disk is used for new connections without a restart:
    the client certificate of a CA the old file did not hold gets in, the old CA's does not."""
    trust = tmp_path / "trust.pem"
    trust.write_text((foreign_pki / "ca.pem").read_text())
    b = secured("SSL://127.0.0.1:{port}", tls_props(pki, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(trust)}))
    ours = mtls_conf(b, pki)
    foreign = mtls_conf(b, pki, foreign_pki)
    produce(foreign, "trust", [b"old"])
    assert refused_tls(ours)
    new = tmp_path / "trust.pem.new"
    new.write_text((pki / "ca.pem").read_text())
    new.replace(trust)
    deadline = time.monotonic() + 20
    while auth_error(ours, within=4) is not None:
        assert time.monotonic() < deadline, "the new trust store was not used"
    assert consume(ours, "trust", 1) == [b"old"]
    assert refused_tls(foreign)
    assert "TLS stores changed on disk; reloaded" in b.stderr_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_custom_listener_names_through_the_protocol_map(secured, pki):
    """Listeners named INTERNAL and EXTERNAL, their protocols from
    `listener.security.protocol.map`, per-listener SASL users under `listener.name.external.`,
    and an `advertised.listeners` entry for EXTERNAL only: a client on EXTERNAL is told
    EXTERNAL's advertised host (localhost, which the server certificate names) and must
    authenticate; one on INTERNAL is told INTERNAL's bound address and need not."""
    external = free_port()
    listeners = f"INTERNAL://127.0.0.1:{{port}},EXTERNAL://127.0.0.1:{external}"
    b = secured(listeners, tls_props(pki, **{
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "advertised.listeners": f"EXTERNAL://localhost:{external}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config": PLAIN_JAAS}))
    assert b.ports["EXTERNAL"] == external
    alice = {**ssl_conf(b, pki, "EXTERNAL"), "security.protocol": "SASL_SSL",
             "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    md = AdminClient(alice).list_topics(timeout=10)
    (broker,) = md.brokers.values()
    assert (broker.host, broker.port) == ("localhost", external)
    produce(alice, "named", [b"via-external"])
    internal = {"bootstrap.servers": addr(b, "INTERNAL")}
    md = AdminClient(internal).list_topics(timeout=10)
    (broker,) = md.brokers.values()
    assert (broker.host, broker.port) == ("127.0.0.1", b.ports["INTERNAL"])
    assert consume(internal, "named", 1) == [b"via-external"]
    err = auth_error({**alice, "sasl.password": "wrong"})
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err


def test_sasl_plain_good_and_bad_password_and_the_pre_auth_gate(secured):
    b = secured("SASL_PLAINTEXT://127.0.0.1:{port}", {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    base = {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice"}
    t0 = time.monotonic()
    err = auth_error({**base, "sasl.password": "wrong"})
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert "Authentication failed" in err.str(), err.str()
    assert time.monotonic() - t0 < 10
    good = {**base, "sasl.password": "alice-secret"}
    produce(good, "plain", [b"x"] * 5)
    assert consume(good, "plain", 5) == [b"x"] * 5
    # Before authenticating, ApiVersions is answered and Metadata closes the connection.
    s = kwire.connect(b.bootstrap)
    s.sendall(kwire.api_versions_request(0, 1))
    versions = kwire.parse_api_versions_v0(kwire.read_frame(s))
    assert versions.error_code == 0 and 17 in versions.api_keys and 36 in versions.api_keys
    s.sendall(kwire.metadata_request_v0(2))
    assert kwire.wait_closed(s), "Metadata before authentication was served"
    # A frame larger than sasl.server.max.receive.size before authentication closes too.
    s = kwire.connect(b.bootstrap)
    s.sendall(struct_i32(1024 * 1024) + b"\0" * 64)
    assert kwire.wait_closed(s)
    produce(good, "plain", [b"y"])


def struct_i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def on(s: socket.socket, request: bytes) -> bytes:
    """One request on an open connection; the response frame body."""
    s.sendall(request)
    return kwire.read_frame(s)


def sasl_handshake(s: socket.socket, version: int, mechanism: str) -> tuple[int, list[str]]:
    s.sendall(kwire.frame(kwire.header_v1(SASL_HANDSHAKE, version, 7) + kwire.string(mechanism)))
    r = kwire.Reader(kwire.read_frame(s))
    assert r.i32() == 7
    code = r.i16()
    return code, [r.string() for _ in range(r.array_len())]


def sasl_authenticate_v0(s: socket.socket, token: bytes) -> tuple[int, str | None, bytes]:
    s.sendall(kwire.frame(kwire.header_v1(SASL_AUTHENTICATE, 0, 8) + struct_i32(len(token)) + token))
    r = kwire.Reader(kwire.read_frame(s))
    assert r.i32() == 8
    code, message = r.i16(), r.string()
    return code, message, r.bytes_()


def test_sasl_on_the_wire_v0_raw_tokens_error_58_and_reauth_expiry(secured):
    """SaslHandshake v0 then a raw PLAIN token; v1 + SaslAuthenticate with a bad password gets
    SASL_AUTHENTICATION_FAILED (58) with a message, then the close; an unknown mechanism gets
    UNSUPPORTED_SASL_MECHANISM (33) with the enabled list; a session past
    connections.max.reauth.ms is closed at its next request."""
    b = secured("SASL_PLAINTEXT://127.0.0.1:{port}", {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": "1500"})
    s = kwire.connect(b.bootstrap)
    assert sasl_handshake(s, 0, "PLAIN") == (0, ["PLAIN", "SCRAM-SHA-256"])
    s.sendall(kwire.frame(b"\0alice\0alice-secret"))
    assert kwire.read_frame(s) == b""
    md = kwire.parse_metadata(on(s, kwire.metadata_request_v1(3, [])), 1)
    assert md.brokers[0][2] == b.port

    s = kwire.connect(b.bootstrap)
    assert sasl_handshake(s, 1, "PLAIN")[0] == 0
    code, message, _ = sasl_authenticate_v0(s, b"\0alice\0wrong")
    assert code == 58 and "Authentication failed" in message
    assert kwire.wait_closed(s)

    s = kwire.connect(b.bootstrap)
    assert sasl_handshake(s, 1, "GSSAPI") == (33, ["PLAIN", "SCRAM-SHA-256"])
    assert kwire.wait_closed(s)

    # Garbage SCRAM and PLAIN tokens: code 58 each time, never a panic or a hang.
    for mech, token in [("SCRAM-SHA-256", b""), ("SCRAM-SHA-256", b"\xff\xfe\x00"),
                        ("SCRAM-SHA-256", b"n,,n=alice,r="), ("SCRAM-SHA-256", b"p=tls,,n=a,r=b"),
                        ("SCRAM-SHA-256", b"n,,n=nobody,r=abc"), ("SCRAM-SHA-256", b"y" * 70_000),
                        ("PLAIN", b"\0\0\0\0"), ("PLAIN", b"alice"), ("PLAIN", b"other\0alice\0alice-secret")]:
        s = kwire.connect(b.bootstrap)
        assert sasl_handshake(s, 1, mech)[0] == 0
        assert sasl_authenticate_v0(s, token)[0] == 58, (mech, token[:20])
        assert kwire.wait_closed(s)

    s = kwire.connect(b.bootstrap)
    assert sasl_handshake(s, 1, "PLAIN")[0] == 0
    assert sasl_authenticate_v0(s, b"\0alice\0alice-secret")[0] == 0
    on(s, kwire.metadata_request_v1(4, []))
    time.sleep(1.7)
    s.sendall(kwire.metadata_request_v1(5, []))
    assert kwire.wait_closed(s), "a request after the session ended was served"


def test_librdkafka_reauthenticates_within_connections_max_reauth_ms(secured, monkeypatch):
    """Also: the JAAS value written over several lines with backslash continuations, as
    Kafka's server.properties examples do."""
    monkeypatch.setenv("SLUICE_LOG", "info,sluice_broker::net::sasl=debug")
    multiline = PLAIN_JAAS.replace('" ', '" \\\n    ').replace("required ", "required \\\n    ")
    assert multiline.count("\n") == 4
    b = secured("SASL_PLAINTEXT://127.0.0.1:{port}", {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": multiline,
        "connections.max.reauth.ms": "1000"})
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    p = Producer(conf)
    errors = []
    for i in range(12):
        p.produce("reauth", b"%d" % i, partition=0, on_delivery=lambda e, m: e and errors.append(e))
        p.flush(10)
        time.sleep(0.25)
    assert not errors
    assert consume(conf, "reauth", 12) == [b"%d" % i for i in range(12)]
    assert "SASL re-authenticated" in b.stderr_text()


def test_sasl_ssl_scram_users_from_the_admin_api_survive_a_restart(secured, pki):
    listeners = "SASL_SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0"
    b = secured(listeners, tls_props(pki, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256"}))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     b"carol-secret")])
    for f in futures.values():
        f.result(timeout=10)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=10)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    stored = (b.data_dir / "meta" / "scram_credentials.json").read_text()
    assert "bob" in stored and "bob-secret" not in stored
    assert oct((b.data_dir / "meta" / "scram_credentials.json").stat().st_mode & 0o777) == "0o600"
    bob = {**ssl_conf(b, pki, "SASL_SSL"), "security.protocol": "SASL_SSL",
           "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"}
    produce(bob, "scram", [b"before"])
    assert advertised_port(bob) == b.ports["SASL_SSL"]
    err = auth_error({**bob, "sasl.password": "nope"})
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err

    b.stop()
    started(b, listeners, restart=True)
    bob["bootstrap.servers"] = addr(b, "SASL_SSL")
    assert consume(bob, "scram", 1) == [b"before"]
    carol = {**bob, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol",
             "sasl.password": "carol-secret"}
    produce(carol, "scram", [b"after"])

    # The Java client: its Admin creates a user as kafka-configs.sh does, then its producer
    # comes in over SASL_SSL with SCRAM-SHA-512.
    from java_client import _parse, java_cmd, sasl_ssl_produce
    made = subprocess.run(java_cmd("ScramUsers", [
        "--bootstrap", addr(b, "PLAINTEXT"), "--user", "dave", "--mechanism", "SCRAM-SHA-512",
        "--password", "dave-secret", "--iterations", "4096"]), capture_output=True, text=True, timeout=120)
    made = _parse(made.returncode, made.stdout, made.stderr)
    assert made.ok and made["credentials"] == [["SCRAM_SHA_512", 4096]], made.summary()
    dave = {**bob, "sasl.username": "dave", "sasl.password": "dave-secret"}
    assert consume(dave, "scram", 2) == [b"before", b"after"]
    def java_produce(password: str, count: int, *extra: str):
        return sasl_ssl_produce(addr(b, "SASL_SSL"), "scram", "SCRAM-SHA-512", "dave", password,
                                pki / "ca.pem", count, *extra)
    r = java_produce("dave-secret", 20)
    assert r.ok, r.summary()
    # A wrong password: the broker's SASL_AUTHENTICATION_FAILED reaches the Java producer as
    # its authentication exception with the broker's message, long before max.block.ms.
    from test_secured_clients import JAVA_DEADLINE, JAVA_FAST_MS
    refused = java_produce("not-daves", 1, *JAVA_DEADLINE)
    assert not refused.ok, refused.summary()
    assert "SaslAuthenticationException" in refused.summary(), refused.summary()
    assert "Authentication failed: invalid credentials" in refused.summary(), refused.summary()
    assert refused.data.get("elapsed_ms", JAVA_FAST_MS) < JAVA_FAST_MS, refused.summary()
    assert len(consume(bob, "scram", 23, timeout=8)) == 22
