"""Exposure warnings (issue 14): a listener reachable beyond loopback that lets clients in
without authentication is warned about at start (PLAINTEXT, SSL without required client
certificates); loopback listeners and authenticating ones are not; a data directory other
users can read or enter is warned about too (everything the broker creates under it is
0700/0600 already: `test_hardening_storage.py::test_data_dir_is_private`).
"""

from __future__ import annotations

import os

import pytest

from conftest import SluiceBroker
from test_security import pki, secured, tls_props  # noqa: F401  (fixtures)
from test_acls import JAAS

OPEN_WARNING = "reachable beyond loopback without authentication"
DATA_DIR_WARNING = "data directory is accessible to other users"


def log_text(b: SluiceBroker) -> str:
    return b.log_path.read_text(errors="replace")


def broker(tmp_path, name: str, listen: str, args: list[str] | None = None,
           data_dir_mode: int = 0o700) -> SluiceBroker:
    b = SluiceBroker(tmp_path / name, args or [], name=name)
    b.listen = listen
    b.data_dir.mkdir(parents=True)
    os.chmod(b.data_dir, data_dir_mode)
    return b


def test_open_listener_beyond_loopback_is_warned_about(tmp_path):
    brokers = [broker(tmp_path, "open", "0.0.0.0:{port}"),
               broker(tmp_path, "local", "127.0.0.1:{port}")]
    try:
        for b in brokers:
            b.start()
        assert OPEN_WARNING in log_text(brokers[0])
        assert OPEN_WARNING not in log_text(brokers[1])
    finally:
        for b in brokers:
            b.teardown()


def test_authenticated_listener_beyond_loopback_is_not_warned_about(secured):
    b = secured("SASL_PLAINTEXT://0.0.0.0:{port}", {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    assert "listener bound" in log_text(b)
    assert OPEN_WARNING not in log_text(b)


@pytest.mark.parametrize("client_auth,warned", [("none", True), ("requested", True),
                                                ("required", False)])
def test_ssl_listener_beyond_loopback_is_warned_about_unless_certificates_are_required(
        secured, pki, client_auth, warned):
    """TLS encrypts but does not authenticate: without required client certificates anyone
    can connect (as User:ANONYMOUS), so an SSL listener beyond loopback is warned about like
    a PLAINTEXT one; with `ssl.client.auth=required` only holders of a trusted certificate
    get in, and it is not. (Kafka warns about neither; the warning is Sluice's own.)"""
    b = secured("SSL://0.0.0.0:{port}", tls_props(pki, **{
        "ssl.client.auth": client_auth, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem")}))
    assert "listener bound" in log_text(b)
    assert (OPEN_WARNING in log_text(b)) == warned, client_auth


def test_data_dir_readable_by_others_is_warned_about(tmp_path):
    shared = broker(tmp_path, "shared", "127.0.0.1:{port}", data_dir_mode=0o755)
    private = broker(tmp_path, "private", "127.0.0.1:{port}", data_dir_mode=0o700)
    try:
        shared.start()
        private.start()
        assert DATA_DIR_WARNING in log_text(shared)
        assert DATA_DIR_WARNING not in log_text(private)
        # Left as the operator made it: the broker warns, it does not change it.
        assert os.stat(shared.data_dir).st_mode & 0o777 == 0o755
    finally:
        shared.teardown()
        private.teardown()
