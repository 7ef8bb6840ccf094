"""`sluice bench` against secured brokers (issue 14, "Bench"): `-X key=value` and
`--client-config FILE` reach every librdkafka client the bench makes, so the bench runs over
SASL_SSL with SCRAM against a real `sluice serve` (users made through the admin API on a second,
PLAINTEXT listener, as in test_security.py); a wrong password fails within seconds with the
authentication error and exit 1, never a hang; an unknown setting or one the bench owns fails
before any run with librdkafka's (or the bench's) reason; the embedded broker itself can be
started with a SASL_SSL listener (`--embedded-listener`, broker settings from `--serve-arg`), so
the TLS and SASL cost is measured. Secrets never reach the report.

Each test fails on a bench without client settings: `-X` is then an unknown flag (exit 2).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from conftest import sluice_bin
# Fixtures and helpers of the security tests: the PKI made with the openssl CLI, and brokers
# with named listeners.
from test_security import PLAIN_JAAS, addr, pki, secured, tls_props  # noqa: F401

RUN_TIMEOUT_S = 120
SECRET = "bob-secret-7f3a"


def bench(tmp_path: Path, *args: str, timeout: float = RUN_TIMEOUT_S) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "r.json"
    out.unlink(missing_ok=True)
    cmd = [str(sluice_bin()), "bench", "--quiet", "--json", str(out), "--rate", "2000",
           "--producers", "2", "--consumers", "2", "--partitions", "4", "--warmup", "1s",
           "--duration", "4s", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def scram_broker(secured, pki):
    b = secured("SASL_SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:0",
                tls_props(pki, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"}))
    admin = AdminClient({"bootstrap.servers": addr(b, "PLAINTEXT")})
    up = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                      SECRET.encode())
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(timeout=10)
    return b


def client_properties(tmp_path: Path, pki: Path, **extra: str) -> Path:
    """A Java-style client.properties (comments, `key: value`, a continued line)."""
    p = tmp_path / "client.properties"
    lines = ["# the bench's clients, as Kafka's own tools take them",
             "security.protocol=SASL_SSL",
             "sasl.mechanism : SCRAM-SHA-512",
             "sasl.username=bob",
             f"ssl.ca.location=\\\n    {pki / 'ca.pem'}",
             *[f"{k}={v}" for k, v in extra.items()]]
    p.write_text("\n".join(lines) + "\n")
    return p


def test_bench_over_sasl_ssl_with_scram_delivers_everything(secured, pki, tmp_path):
    b = scram_broker(secured, pki)
    props = client_properties(tmp_path, pki)
    proc, r = bench(tmp_path, "--bootstrap", addr(b, "SASL_SSL"), "--client-config", str(props),
                    "-X", f"sasl.password={SECRET}", "--acks", "all",
                    "--html", str(tmp_path / "r.html"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and r is not None, out[-4000:]
    assert r["throughput"]["delivery_pct"] == 100.0, out[-3000:]
    a = r["audit"]
    assert a["produced"] > 5000 and a["lost"] == 0 and a["lost_acked"] == 0 and a["duplicates"] == 0
    # The file's settings and -X's, the password hidden; nowhere in the report files.
    cc = r["scenario"]["client_config"]
    assert cc["security.protocol"] == "SASL_SSL" and cc["sasl.username"] == "bob"
    assert cc["ssl.ca.location"] == str(pki / "ca.pem")
    assert cc["sasl.password"] == "***"
    for f in ["r.json", "r.html"]:
        assert SECRET not in (tmp_path / f).read_text(), f
    assert SECRET not in out
    assert "client settings" in proc.stdout and "sasl.password=***" in proc.stdout
    # The topology came through a SASL_SSL client: the broker as that listener advertises it.
    start = r["topology"]["start"]
    assert [br["port"] for br in start["brokers"]] == [b.ports["SASL_SSL"]], start
    assert len(start["partitions"]) == 4 and all(p["leader"] >= 0 for p in start["partitions"])


def test_a_wrong_password_fails_fast_with_the_authentication_error(secured, pki, tmp_path):
    b = scram_broker(secured, pki)
    props = client_properties(tmp_path, pki, **{"sasl.password": "not-the-password"})
    t0 = time.monotonic()
    proc, r = bench(tmp_path, "--bootstrap", addr(b, "SASL_SSL"), "--client-config", str(props),
                    timeout=60)
    took = time.monotonic() - t0
    err = proc.stderr
    assert proc.returncode == 1, (proc.returncode, err[-3000:])
    assert took < 15, f"took {took:.1f} s"
    assert "authenticat" in err.lower(), err[-3000:]
    assert "Authentication failed" in err, err[-3000:]
    assert "not-the-password" not in proc.stdout + err
    assert r is None


def test_unknown_invalid_and_owned_settings_fail_before_any_run(tmp_path):
    cases = [
        (["-X", "no.such.setting=1"], "No such configuration property"),
        (["-X", "socket.timeout.ms=banana"], "socket.timeout.ms"),
        (["-X", "acks=all"], "--acks"),
        (["-X", "nokeyvalue"], "key=value"),
    ]
    props = tmp_path / "bad.properties"
    props.write_text("security.protocol=SASL_SSL\ngroup.id=mine\n")
    cases.append((["--client-config", str(props)], "line 2"))
    cases.append((["--client-config", str(tmp_path / "missing.properties")], "missing.properties"))
    for args, why in cases:
        t0 = time.monotonic()
        proc, r = bench(tmp_path, *args, timeout=30)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr[-2000:])
        assert why in proc.stderr, (args, proc.stderr[-2000:])
        assert time.monotonic() - t0 < 10 and r is None
        # Refused before a broker was started or a client connected.
        assert "embedded broker" not in proc.stderr


def test_embedded_broker_started_with_a_sasl_ssl_listener(pki, tmp_path):
    """The embedded Sluice on SASL_SSL (PLAIN users from the JAAS setting, Kafka's format),
    its settings through --serve-arg; the clients' from --client-config. The same scenario on
    a plaintext embedded broker is the baseline the TLS and SASL cost is read against."""
    server = tmp_path / "server.properties"
    server.write_text("".join(f"{k}={v}\n" for k, v in {
        **tls_props(pki), "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS}.items()))
    client = tmp_path / "client.properties"
    client.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
                      f"sasl.password=alice-secret\nssl.ca.location={pki / 'ca.pem'}\n")
    proc, r = bench(tmp_path, "--embedded-listener", "SASL_SSL", f"--serve-arg=--config={server}",
                    "--client-config", str(client), "--acks", "all")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and r is not None, out[-4000:]
    assert r["target"]["kind"] == "embedded"
    assert r["throughput"]["delivery_pct"] == 100.0 and r["audit"]["lost"] == 0
    assert r["topology"]["start"]["brokers"][0]["port"] == int(r["target"]["bootstrap"].rsplit(":", 1)[1])
    # The broker-side metrics still come from its admin listener.
    assert r["broker_metrics"] is not None
    # A plaintext client cannot talk to that listener: the bench's settings really were used.
    proc2, _ = bench(tmp_path, "--embedded-listener", "SASL_SSL", f"--serve-arg=--config={server}",
                     timeout=60)
    assert proc2.returncode == 1, proc2.stderr[-2000:]
