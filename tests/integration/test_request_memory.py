"""The broker-wide request-memory budget (`--queued-max-request-bytes`): request bytes are
charged as they arrive, so many large requests cannot exhaust memory, and the budget comes
back when a connection goes away. (A bare size prefix charges nothing: see
test_hardening_net.py.)"""

from __future__ import annotations

import socket
import time

import kwire

MIB = 1024 * 1024


def stall_large_frame(bootstrap: str) -> socket.socket:
    """Sends a size prefix claiming ~1 MiB and all but 100 bytes of its body, then stalls."""
    s = kwire.connect(bootstrap)
    s.sendall((MIB - 16).to_bytes(4, "big") + b"\x00\x12\x00\x00" + b"\x00" * (MIB - 120))
    return s


def test_budget_bounds_buffered_requests_and_is_released(sluice_factory):
    """Goal: with a 2 MiB budget, stalled ~1 MiB frames whose bytes have arrived hold it all
    (two within the budget, a third on the one-frame overdraft, a fourth waiting), so
    another client's request waits; when the stalled clients disconnect, the waiting request
    is answered.
    Method: raw sockets; ApiVersions v0 on another connection gets no answer within 1.5 s
    while the budget is held, then an answer within 5 s once the stalled sockets close."""
    b = sluice_factory(["--max-request-bytes", str(MIB), "--queued-max-request-bytes", str(2 * MIB)])
    stalled = [stall_large_frame(b.bootstrap) for _ in range(4)]
    time.sleep(0.3)
    probe = kwire.connect(b.bootstrap)
    probe.sendall(kwire.api_versions_request(0, 7))
    probe.settimeout(1.5)
    try:
        probe.recv(1)
        raise AssertionError("a request was served while the request-memory budget was exhausted")
    except socket.timeout:
        pass
    for s in stalled:
        s.close()
    probe.settimeout(5)
    body = kwire.read_frame(probe)
    resp = kwire.parse_api_versions_v0(body)
    assert resp.correlation_id == 7
    assert resp.error_code == 0 and 18 in resp.api_keys
    probe.close()
    assert b.alive()
