"""Raw-socket protocol tests: malformed and hostile input, version negotiation, pipelining.

After every bad input the broker must still be alive and a separate, well-behaved connection
must still be served.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

import kwire
from helpers import ConfluentFamily, Msg, create_topic

REQUIRED_APIS = {
    kwire.PRODUCE: 3, kwire.FETCH: 4, kwire.LIST_OFFSETS: 1, kwire.METADATA: 1, kwire.API_VERSIONS: 3,
    19: 2,  # CreateTopics
    20: 1,  # DeleteTopics
    21: 0,  # DeleteRecords
    32: 1,  # DescribeConfigs
    33: 0,  # AlterConfigs
    37: 0,  # CreatePartitions
    44: 0,  # IncrementalAlterConfigs
    60: 0,  # DescribeCluster
}


def assert_broker_healthy(broker):
    """The process is alive and a fresh connection gets a correct ApiVersions v0 answer."""
    assert broker.alive(), f"broker died\n{broker.stderr_tail()}"
    resp = kwire.parse_api_versions_v0(kwire.roundtrip(broker.bootstrap, kwire.api_versions_request(0, 777)))
    assert resp.correlation_id == 777
    assert resp.error_code == 0
    assert kwire.API_VERSIONS in resp.api_keys


def test_api_versions_lists_supported_apis(broker):
    """Goal: ApiVersions (v0 and v3) advertises every implemented API with sane ranges.
    Method: raw ApiVersions v0, check error 0, correlation id, and that each API from the
    contract is listed with min <= the listed version <= max; v3 (flexible) also answers with
    the same correlation id."""
    resp = kwire.parse_api_versions_v0(kwire.roundtrip(broker.bootstrap, kwire.api_versions_request(0, 41)))
    assert (resp.correlation_id, resp.error_code) == (41, 0)
    for key, needed in REQUIRED_APIS.items():
        assert key in resp.api_keys, f"api key {key} not advertised"
        lo, hi = resp.api_keys[key]
        assert lo <= needed <= hi, f"api key {key}: [{lo}, {hi}] does not include v{needed}"
    body = kwire.roundtrip(broker.bootstrap, kwire.api_versions_request(3, 42))
    corr, err = struct.unpack(">ih", body[:6])
    assert (corr, err) == (42, 0)


def test_api_versions_unsupported_version(broker):
    """Goal: ApiVersions at an unknown version (99) is answered, not dropped: a v0-format
    response with UNSUPPORTED_VERSION (35), the same correlation id, and the supported list,
    after which the client can retry on the same connection.
    Method: raw ApiVersions v99 (flexible header, like new clients send), parse as v0, then
    send ApiVersions v0 on the same socket."""
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(kwire.api_versions_request(99, 0x5A5A))
        resp = kwire.parse_api_versions_v0(kwire.read_frame(s))
        assert resp.correlation_id == 0x5A5A
        assert resp.error_code == kwire.UNSUPPORTED_VERSION
        assert kwire.API_VERSIONS in resp.api_keys
        assert resp.api_keys[kwire.API_VERSIONS][0] == 0
        s.sendall(kwire.api_versions_request(0, 0x5A5B))
        again = kwire.parse_api_versions_v0(kwire.read_frame(s))
        assert (again.correlation_id, again.error_code) == (0x5A5B, 0)
    assert_broker_healthy(broker)


@pytest.mark.parametrize("payload", [
    pytest.param(b"GET / HTTP/1.1\r\nHost: sluice\r\n\r\n", id="http-request"),
    pytest.param(struct.pack(">i", -7) + b"\x00" * 16, id="negative-length"),
    pytest.param(struct.pack(">i", 0) + b"\x00" * 16, id="zero-length"),
    pytest.param(struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 64, id="oversized-length"),
    pytest.param(kwire.frame(b"\x00\x03"), id="truncated-header"),
    pytest.param(kwire.frame(struct.pack(">hhi", kwire.METADATA, 1, 5) + struct.pack(">h", 0x7FFF) + b"abc"),
                 id="client-id-overrun"),
    pytest.param(kwire.frame(kwire.header_v1(kwire.METADATA, 1, 6) + struct.pack(">i", 3) + b"\x00\x05ab"),
                 id="metadata-body-truncated"),
])
def test_garbage_closes_connection(broker, payload):
    """Goal: bytes that are not a valid request make the broker close that connection (after
    at most an error answer), without dying or affecting other connections.
    Method: open a healthy connection first, send the garbage on a second one and wait for it
    to be closed, then use the first connection and a new one."""
    with kwire.connect(broker.bootstrap) as good:
        with kwire.connect(broker.bootstrap) as bad:
            bad.sendall(payload)
            assert kwire.wait_closed(bad, timeout=5), "broker kept a connection open after garbage"
        good.sendall(kwire.api_versions_request(1, 9))
        resp = kwire.parse_api_versions_v0(kwire.read_frame(good))
        assert (resp.correlation_id, resp.error_code) == (9, 0)
    assert_broker_healthy(broker)


def test_random_garbage_fuzz(broker):
    """Goal: random bytes, framed and unframed, never crash the broker.
    Method: 40 connections each send random data (seeded; half with a plausible small length
    prefix and a real API key); each connection is either answered or closed; then the
    broker must be alive and serving."""
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"fuzz seed {seed}")
    import random
    rng = random.Random(seed)
    for i in range(40):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))
        if i % 2:
            api_key = rng.choice(list(REQUIRED_APIS))
            body = struct.pack(">hhi", api_key, rng.randint(0, 12), i) + body
            data = kwire.frame(body)
        else:
            data = body
        with kwire.connect(broker.bootstrap) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            kwire.wait_closed(s, timeout=2)
    assert_broker_healthy(broker)


def test_unknown_api_key(broker):
    """Goal: a request with an API key Kafka does not define is answered with an error for the
    same correlation id or the connection is closed; nothing else is affected.
    Method: raw request with api key 9999, then check the connection state and broker."""
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(kwire.frame(kwire.header_v1(9999, 0, 31) + b"\x00\x00\x00\x00"))
        s.settimeout(5)
        try:
            body = kwire.read_frame(s)
            assert struct.unpack(">i", body[:4])[0] == 31, "answer carries the wrong correlation id"
        except kwire.ConnectionClosed:
            pass
        except ConnectionResetError:
            pass
    assert_broker_healthy(broker)


def test_unsupported_version_of_other_api(broker):
    """Goal: a known API at a version outside the advertised range (Metadata v99) does not
    crash the broker; it answers or closes.
    Method: raw Metadata v99, then health check."""
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(kwire.frame(kwire.header_v2(kwire.METADATA, 99, 32) + b"\x00\x00"))
        s.settimeout(5)
        try:
            body = kwire.read_frame(s)
            assert struct.unpack(">i", body[:4])[0] == 32
        except (kwire.ConnectionClosed, ConnectionResetError):
            pass
    assert_broker_healthy(broker)


@pytest.mark.parametrize("flexible", [False, True], ids=["metadata-v1", "metadata-v12"])
def test_hostile_array_count(broker, flexible):
    """Goal: a tiny Metadata request whose topics array claims 2,000,000,000 entries neither
    crashes the broker nor makes it allocate for the claim; it answers an error or closes.
    Method: raw Metadata v1 (i32 count) or v12 (compact varint count) with the huge count and
    a few bytes of body; wait for an answer or close; check memory stayed small (RSS under
    1 GiB) and the broker still serves."""
    if flexible:
        body = kwire.uvarint(2_000_000_001) + kwire.compact_string("a") + b"\x00" * 8
        req = kwire.frame(kwire.header_v2(kwire.METADATA, 12, 77) + body)
    else:
        body = struct.pack(">i", 2_000_000_000) + kwire.string("a")
        req = kwire.frame(kwire.header_v1(kwire.METADATA, 1, 77) + body)
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(req)
        s.settimeout(5)
        try:
            resp = kwire.read_frame(s)
            assert struct.unpack(">i", resp[:4])[0] == 77
        except (kwire.ConnectionClosed, ConnectionResetError):
            pass
    assert broker.alive()
    rss_kb = _rss_kb(broker.proc.pid)
    assert rss_kb < 1 << 20, f"broker RSS {rss_kb} kB after a hostile count"
    assert_broker_healthy(broker)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_pipelined_requests_answered_in_order(broker):
    """Goal: several requests written back to back on one connection are all answered, in
    request order, each with its own correlation id.
    Method: one sendall() with ApiVersions v0, Metadata v1 (all topics), ApiVersions v2 and
    Metadata v0, then read four frames and parse each as the matching response."""
    create_topic(broker.bootstrap, "piped")
    reqs = (kwire.api_versions_request(0, 1001) + kwire.metadata_request_v1(1002)
            + kwire.api_versions_request(2, 1003) + kwire.metadata_request_v0(1004))
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(reqs)
        f1, f2, f3, f4 = (kwire.read_frame(s) for _ in range(4))
    r1 = kwire.parse_api_versions_v0(f1)
    assert (r1.correlation_id, r1.error_code) == (1001, 0)
    r2 = kwire.parse_metadata(f2, 1)
    assert r2.correlation_id == 1002
    assert r2.brokers == [(1, "127.0.0.1", broker.port)]
    assert "piped" in r2.topics and r2.topics["piped"][0] == 0
    r3 = kwire.parse_api_versions_v0(f3)
    assert (r3.correlation_id, r3.error_code) == (1003, 0)
    r4 = kwire.parse_metadata(f4, 0)
    assert r4.correlation_id == 1004
    assert "piped" in r4.topics


def test_pipelining_behind_long_poll(broker, topic_name):
    """Goal: a slow request (a Fetch parked in long poll) holds back the answers to requests
    pipelined after it on the same connection: responses stay in request order.
    Method: on one connection send Fetch v4 (empty partition, max_wait 700 ms) and then
    ApiVersions v0 immediately; the first frame back must be the Fetch (correlation 1),
    arriving after ~700 ms, and the second the ApiVersions (correlation 2)."""
    create_topic(broker.bootstrap, topic_name)
    with kwire.connect(broker.bootstrap) as s:
        t0 = time.monotonic()
        s.sendall(kwire.fetch_request_v4(1, topic_name, 0, 0, max_wait_ms=700)
                  + kwire.api_versions_request(0, 2))
        first = kwire.read_frame(s)
        t_first = time.monotonic() - t0
        second = kwire.read_frame(s)
    corr1, parts = kwire.parse_fetch_v4(first)
    assert corr1 == 1, f"first response has correlation id {corr1}; responses were reordered"
    assert parts[(topic_name, 0)].error_code == 0
    assert t_first >= 0.5, f"fetch answered after {t_first:.2f}s despite max_wait 700 ms and no data"
    assert kwire.parse_api_versions_v0(second).correlation_id == 2


def test_many_connections_and_client_churn(broker, topic_name):
    """Goal: many concurrent connections, some dropped abruptly mid-request, do not disturb
    the broker or a client working alongside.
    Method: 8 threads each open 10 connections, send half a request and drop it; meanwhile
    a confluent producer writes 50 records; afterwards all 50 read back and the broker is
    healthy."""
    create_topic(broker.bootstrap, topic_name)
    req = kwire.metadata_request_v1(3)

    def churn():
        for _ in range(10):
            with kwire.connect(broker.bootstrap) as s:
                s.sendall(req[: len(req) // 2])
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads:
        t.start()
    c = ConfluentFamily(broker.bootstrap)
    assert c.produce(topic_name, [Msg(f"c{i}".encode()) for i in range(50)]) == list(range(50))
    for t in threads:
        t.join(30)
    recs = c.consume(topic_name, 0, 0, 50)
    assert [r.value for r in recs] == [f"c{i}".encode() for i in range(50)]
    assert_broker_healthy(broker)


def test_acks_zero_gets_no_response(broker, topic_name):
    """Goal: Produce with acks=0 is never answered (Kafka semantics), yet is appended; the next
    request on the same connection gets the next response.
    Method: on one connection send Produce v3 acks=0 (correlation 1) then ApiVersions
    (correlation 2); the first frame read must carry correlation 2; the record is readable."""
    create_topic(broker.bootstrap, topic_name)
    batch = kwire.record_batch([kwire.RawRecord(b"fire-and-forget")])
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(kwire.produce_request_v3(1, topic_name, 0, batch, acks=0) + kwire.api_versions_request(0, 2))
        first = kwire.read_frame(s)
    assert struct.unpack(">i", first[:4])[0] == 2, "broker answered an acks=0 produce"

    def appended():
        return kwire.fetch_v4(broker.bootstrap, topic_name, 0, 0).high_watermark == 1

    from helpers import wait_until
    wait_until(appended, 5, what="acks=0 record appended")
    [rec] = ConfluentFamily(broker.bootstrap).consume(topic_name, 0, 0, 1)
    assert rec.value == b"fire-and-forget"
