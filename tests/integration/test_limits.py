"""Connection and request size limits (--max-connections, --max-request-bytes)."""

from __future__ import annotations

import socket

import kwire
from helpers import create_topic, wait_until


def _api_versions_ok(sock: socket.socket, corr: int) -> bool:
    sock.sendall(kwire.api_versions_request(0, corr))
    resp = kwire.parse_api_versions_v0(kwire.read_frame(sock))
    return resp.correlation_id == corr and resp.error_code == 0


def test_max_connections(sluice_factory):
    """Goal: --max-connections caps concurrent connections without disturbing the ones that
    are open, and frees the slot when a connection closes.
    Method: limit 3; open 3 connections and use them; a 4th connection must be refused or
    closed without an answer; close one of the 3; a new connection is then served (within a
    few seconds); the original 2 still work."""
    b = sluice_factory(["--max-connections", "3"])
    conns = [kwire.connect(b.bootstrap) for _ in range(3)]
    try:
        for i, c in enumerate(conns):
            assert _api_versions_ok(c, 10 + i)
        try:
            extra = kwire.connect(b.bootstrap, timeout=3)
        except OSError:
            extra = None
        if extra is not None:
            with extra:
                try:
                    extra.settimeout(3)
                    extra.sendall(kwire.api_versions_request(0, 99))
                    kwire.read_frame(extra)
                    raise AssertionError("a connection over --max-connections was served")
                except (kwire.ConnectionClosed, ConnectionResetError, BrokenPipeError, socket.timeout):
                    pass
        conns.pop().close()

        def new_conn_served():
            with kwire.connect(b.bootstrap, timeout=3) as s:
                s.settimeout(3)
                return _api_versions_ok(s, 50)

        wait_until(new_conn_served, 10, interval=0.3, what="a connection after one was closed")
        for i, c in enumerate(conns):
            assert _api_versions_ok(c, 20 + i)
    finally:
        for c in conns:
            c.close()


def test_max_request_bytes(sluice_factory):
    """Goal: --max-request-bytes refuses larger frames by closing the connection, and
    requests below the limit are served.
    Method: limit 20000 bytes; a Produce frame of ~30000 bytes: the connection is closed and
    nothing is appended; a ~5000-byte Produce on a new connection is appended at offset 0."""
    b = sluice_factory(["--max-request-bytes", "20000"])
    create_topic(b.bootstrap, "limited", config={"max.message.bytes": 100000})
    big = kwire.produce_request_v3(1, "limited", 0, kwire.record_batch([kwire.RawRecord(b"B" * 30000)]))
    assert len(big) > 20000
    with kwire.connect(b.bootstrap) as s:
        try:
            s.sendall(big)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert kwire.wait_closed(s, timeout=5), "oversized request did not close the connection"
    small = kwire.produce_v3(b.bootstrap, "limited", 0, kwire.record_batch([kwire.RawRecord(b"s" * 5000)]))
    assert (small.error_code, small.base_offset) == (0, 0)
