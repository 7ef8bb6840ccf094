"""Kafka security settings fail closed (issue 10, item 9; issue 14).

Sluice serves TLS listeners with PEM stores and SASL PLAIN / SCRAM (test_security.py), but
not ACLs, other mechanisms, other store types or incomplete settings. A broker configured
for what it does not serve must refuse to start with a message naming the setting, instead of
serving a listener with less security than configured. Each case runs the real `sluice serve`
binary and checks that it exits non-zero, says why, and never prints its listening line.
"""

from __future__ import annotations

import subprocess

import pytest

from conftest import sluice_bin


def run_serve(tmp_path, props: str | None, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    args = [str(sluice_bin()), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")]
    if props is not None:
        path = tmp_path / "server.properties"
        path.write_text(props)
        args += ["--config", str(path)]
    return subprocess.run(args + (extra or []), capture_output=True, text=True, timeout=20)


# (server.properties, the key named on stderr, the reason's words)
SECURED = [
    ("listeners=SASL_SSL://127.0.0.1:0\n", "ssl.keystore.location", "needs"),
    ("listeners=SSL://127.0.0.1:0\n", "ssl.keystore.location", "needs"),
    ("listeners=SSL://127.0.0.1:0\nssl.keystore.location=/nonexistent/broker.pem\n",
     "ssl.keystore.location", "No such file"),
    ("listeners=EXTERNAL://127.0.0.1:0\nlistener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT\n",
     "sasl.enabled.mechanisms", "needs"),
    ("listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\n",
     "plain.sasl.jaas.config", "needs"),
    ("ssl.keystore.location=/etc/kafka/broker.jks\nssl.keystore.password=secret\n",
     "ssl.keystore.password", "not supported"),
    ("ssl.keystore.type=JKS\n", "ssl.keystore.type", "only PEM"),
    ("sasl.enabled.mechanisms=GSSAPI\n", "sasl.enabled.mechanisms", "served are"),
    ("listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=x\n", "listener.name.sasl_ssl", "not supported"),
    ("authorizer.class.name=com.example.CustomAuthorizer\n", "authorizer.class.name", "only"),
    ("principal.builder.class=com.example.Builder\n", "principal.builder.class", "not supported"),
    ("security.inter.broker.protocol=QUIC\n", "security.inter.broker.protocol", "unknown security protocol"),
]


@pytest.mark.parametrize("props,key,reason", SECURED, ids=[f"{k}-{r}" for _, k, r in SECURED])
def test_security_config_refuses_to_start(tmp_path, props, key, reason):
    """Goal: a server.properties that asks for security stops the broker before it listens.
    Method: start `sluice serve --config` with a file carrying one security setting (a file
    that sets `listeners` is run without --listen, so its listener is the one in force); the
    process must exit non-zero, name the key on stderr, and never print its listening line."""
    path = tmp_path / "server.properties"
    path.write_text(props)
    args = [str(sluice_bin()), "serve", "--data-dir", str(tmp_path / "data"), "--config", str(path)]
    if not props.startswith("listeners="):
        args += ["--listen", "127.0.0.1:0"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0, f"started with {props!r}: {proc.stdout}{proc.stderr}"
    assert "sluice listening on" not in proc.stdout
    assert key in proc.stderr, proc.stderr
    assert reason in proc.stderr, proc.stderr


def test_security_override_refuses_to_start(tmp_path):
    """Goal: the same refusal holds for --override and for a secured --listen.
    Method: run with `--override sasl.enabled.mechanisms=GSSAPI`, then with
    `--listen SASL_PLAINTEXT://127.0.0.1:0` and no mechanism; both exit non-zero without
    listening."""
    proc = run_serve(tmp_path, None, ["--override", "sasl.enabled.mechanisms=GSSAPI"])
    assert proc.returncode != 0 and "sluice listening on" not in proc.stdout
    assert "sasl.enabled.mechanisms" in proc.stderr
    args = [str(sluice_bin()), "serve", "--listen", "SASL_PLAINTEXT://127.0.0.1:0",
            "--data-dir", str(tmp_path / "d3")]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0 and "sluice listening on" not in proc.stdout
    assert "sasl.enabled.mechanisms" in proc.stderr


def test_plaintext_security_settings_still_start(sluice_factory, tmp_path):
    """Goal: settings that ask for no security (explicit PLAINTEXT, an empty authorizer, a
    protocol map sending the served listener to PLAINTEXT) do not stop the broker.
    Method: start with such a file and check the broker answers Metadata."""
    import kwire
    props = tmp_path / "plain.properties"
    props.write_text(
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "security.inter.broker.protocol=PLAINTEXT\nauthorizer.class.name=\n"
        # Settings for a TLS listener that is not configured configure nothing.
        "ssl.keystore.type=PEM\nssl.client.auth=none\n"
    )
    b = sluice_factory(["--config", str(props)])
    md = kwire.parse_metadata(kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(1, [])), 1)
    assert md is not None
