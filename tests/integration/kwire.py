"""A minimal, hand-written Kafka wire codec for raw-socket tests.

Only what the raw tests need: request framing (header v1 and v2), ApiVersions,
Metadata, Produce v3 (with a v2 record batch built here, CRC-32C included),
Fetch v4, OffsetForLeaderEpoch v2-4, and response readers for those. Nothing here is clever on purpose:
the point is to send exactly the bytes a test means to send.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------
# Kafka error codes used by the tests
# ---------------------------------------------------------------------------
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_CONFIG = 40
INVALID_REQUEST = 42
INVALID_RECORD = 87
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75

# API keys
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
OFFSET_FOR_LEADER_EPOCH = 23

# ---------------------------------------------------------------------------
# CRC-32C (Castagnoli), table driven, reflected polynomial 0x82F63B78
# ---------------------------------------------------------------------------
_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---------------------------------------------------------------------------
# Primitive encoders
# ---------------------------------------------------------------------------
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag signed varint (as used inside v2 records)."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def tagged_fields_empty() -> bytes:
    return uvarint(0)


# ---------------------------------------------------------------------------
# Request framing
# ---------------------------------------------------------------------------
def header_v1(api_key: int, api_version: int, correlation_id: int, client_id: str | None = "sluice-it") -> bytes:
    return i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)


def header_v2(api_key: int, api_version: int, correlation_id: int, client_id: str | None = "sluice-it") -> bytes:
    return header_v1(api_key, api_version, correlation_id, client_id) + tagged_fields_empty()


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def api_versions_request(version: int, correlation_id: int) -> bytes:
    """ApiVersions request. v0-v2 have an empty body and header v1; v3+ use header v2 and a
    body of client_software_name, client_software_version (compact strings) and tags."""
    if version <= 2:
        return frame(header_v1(API_VERSIONS, version, correlation_id))
    body = compact_string("sluice-it") + compact_string("1.0") + tagged_fields_empty()
    return frame(header_v2(API_VERSIONS, version, correlation_id) + body)


def metadata_request_v1(correlation_id: int, topics: list[str] | None = None) -> bytes:
    """Metadata v1; topics=None asks for all topics (null array)."""
    if topics is None:
        body = i32(-1)
    else:
        body = i32(len(topics)) + b"".join(string(t) for t in topics)
    return frame(header_v1(METADATA, 1, correlation_id) + body)


def metadata_request_v0(correlation_id: int) -> bytes:
    """Metadata v0 with an empty topic array, which v0 defines as 'all topics'."""
    return frame(header_v1(METADATA, 0, correlation_id) + i32(0))


# ---------------------------------------------------------------------------
# Record batch v2
# ---------------------------------------------------------------------------
@dataclass
class RawRecord:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_delta: int = 0


def _encode_record(offset_delta: int, rec: RawRecord) -> bytes:
    body = bytearray()
    body += i8(0)  # attributes
    body += varint(rec.timestamp_delta)
    body += varint(offset_delta)
    if rec.key is None:
        body += varint(-1)
    else:
        body += varint(len(rec.key)) + rec.key
    if rec.value is None:
        body += varint(-1)
    else:
        body += varint(len(rec.value)) + rec.value
    body += varint(len(rec.headers))
    for hk, hv in rec.headers:
        kb = hk.encode()
        body += varint(len(kb)) + kb
        if hv is None:
            body += varint(-1)
        else:
            body += varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def record_batch(records: list[RawRecord], base_timestamp: int | None = None,
                 corrupt_crc: bool = False, claimed_count: int | None = None,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False) -> bytes:
    """An uncompressed magic-2 batch. `corrupt_crc` flips the CRC; `claimed_count` lies about
    the number of records in the batch header (the CRC is computed over the lie, so only
    the count is wrong). The producer fields make it an idempotent producer's batch."""
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    recs = b"".join(_encode_record(i, r) for i, r in enumerate(records))
    max_ts = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    count = len(records) if claimed_count is None else claimed_count
    after_crc = (
        i16(0x10 if transactional else 0)  # attributes: no compression, CreateTime
        + i32(len(records) - 1)  # lastOffsetDelta
        + i64(base_timestamp)
        + i64(max_ts)
        + i64(producer_id)
        + i16(producer_epoch)
        + i32(base_sequence)
        + i32(count)
        + recs
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    after_length = i32(-1) + i8(2) + struct.pack(">I", crc) + after_crc  # leader epoch, magic, crc
    return i64(0) + i32(len(after_length)) + after_length


def produce_request_v3(correlation_id: int, topic: str, partition: int, batch: bytes,
                       acks: int = -1, timeout_ms: int = 10000,
                       transactional_id: str | None = None) -> bytes:
    body = (
        string(transactional_id)
        + i16(acks)
        + i32(timeout_ms)
        + i32(1) + string(topic)
        + i32(1) + i32(partition) + i32(len(batch)) + batch
    )
    return frame(header_v1(PRODUCE, 3, correlation_id) + body)


def produce_request_flexible(version: int, correlation_id: int, topic: str, partition: int,
                             batch: bytes, transactional_id: str | None = None,
                             acks: int = -1, timeout_ms: int = 10000) -> bytes:
    """Produce v9-v12 (flexible versions; topics by name)."""
    assert 9 <= version <= 12
    body = (
        compact_string(transactional_id)
        + i16(acks)
        + i32(timeout_ms)
        + uvarint(2) + compact_string(topic)
        + uvarint(2) + i32(partition) + uvarint(len(batch) + 1) + batch + tagged_fields_empty()
        + tagged_fields_empty()
        + tagged_fields_empty()
    )
    return frame(header_v2(PRODUCE, version, correlation_id) + body)


def parse_produce_flexible_error(frame_body: bytes) -> tuple[int, int]:
    """(correlation id, error code of the first partition) of a Produce v9-v12 response."""
    r = Reader(frame_body)
    correlation_id = r.i32()
    _uvarint(r)  # response header tagged fields (none)
    assert _uvarint(r) == 2, "one topic"
    name_len = _uvarint(r) - 1
    r.take(name_len)
    assert _uvarint(r) == 2, "one partition"
    r.i32()  # index
    return correlation_id, r.i16()


def fetch_request_v4(correlation_id: int, topic: str, partition: int, offset: int,
                     max_wait_ms: int = 0, min_bytes: int = 1,
                     max_bytes: int = 10 << 20, partition_max_bytes: int = 10 << 20) -> bytes:
    body = (
        i32(-1)  # replica_id
        + i32(max_wait_ms)
        + i32(min_bytes)
        + i32(max_bytes)
        + i8(0)  # isolation level read_uncommitted
        + i32(1) + string(topic)
        + i32(1) + i32(partition) + i64(offset) + i32(partition_max_bytes)
    )
    return frame(header_v1(FETCH, 4, correlation_id) + body)


# ---------------------------------------------------------------------------
# Response reading / decoding
# ---------------------------------------------------------------------------
OFFSET_FETCH = 9
UNSTABLE_OFFSET_COMMIT = 88


def offset_fetch_request_v7(correlation_id: int, group: str, topic: str, partition: int,
                            require_stable: bool) -> bytes:
    """OffsetFetch v7 (flexible) for one partition, with KIP-447's `require_stable`."""
    body = (compact_string(group)
            + uvarint(2) + compact_string(topic) + uvarint(2) + i32(partition)
            + tagged_fields_empty()
            + i8(1 if require_stable else 0) + tagged_fields_empty())
    return frame(header_v2(OFFSET_FETCH, 7, correlation_id) + body)


def parse_offset_fetch_v7(frame_body: bytes) -> tuple[int, int]:
    """(partition error code, committed offset) of the one partition of an OffsetFetch v7
    response; asserts the group-level error is NONE."""
    r = Reader(frame_body)
    r.i32()  # correlation id
    _read_uvarint(r)  # response header tags
    r.i32()  # throttle time
    topics = _read_uvarint(r) - 1
    assert topics == 1, topics
    r.take(_read_uvarint(r) - 1)  # topic name
    parts = _read_uvarint(r) - 1
    assert parts == 1, parts
    r.i32()  # partition index
    offset = r.i64()
    r.i32()  # leader epoch
    n = _read_uvarint(r)
    if n > 0:
        r.take(n - 1)  # metadata
    code = r.i16()
    _read_uvarint(r)  # partition tags
    _read_uvarint(r)  # topic tags
    assert r.i16() == NONE, "group-level error"
    return code, offset


def _read_uvarint(r: "Reader") -> int:
    shift = value = 0
    while True:
        b = r.take(1)[0]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


class ConnectionClosed(Exception):
    pass


def connect(bootstrap: str, timeout: float = 5.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 0 or size > 200 << 20:
        raise AssertionError(f"broker sent an implausible response size {size}")
    return recv_exact(sock, size)


def wait_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closes (EOF or reset) within `timeout`; any bytes received meanwhile
    are discarded. False when the connection is still open at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not data:
            return True


class Reader:
    """Cursor over a response body."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise AssertionError(f"response truncated: need {n} bytes at {self.pos}, have {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        return self.take(n).decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        return self.take(n)

    def array_len(self) -> int:
        n = self.i32()
        if n > 1_000_000:
            raise AssertionError(f"implausible array length {n}")
        return n

    def remaining(self) -> int:
        return len(self.data) - self.pos


@dataclass
class ApiVersionsV0:
    correlation_id: int
    error_code: int
    api_keys: dict[int, tuple[int, int]]


def parse_api_versions_v0(frame_body: bytes) -> ApiVersionsV0:
    """Parses a v0-v2 format ApiVersions response (header v0). v1/v2 append throttle_time_ms."""
    r = Reader(frame_body)
    corr = r.i32()
    err = r.i16()
    keys = {}
    for _ in range(r.array_len()):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        keys[k] = (lo, hi)
    return ApiVersionsV0(corr, err, keys)


@dataclass
class MetadataV1:
    correlation_id: int
    brokers: list[tuple[int, str, int]]
    controller_id: int
    topics: dict[str, tuple[int, list[tuple[int, int, int]]]]  # name -> (error, [(partition, error, leader)])
    internal: set[str] = field(default_factory=set)  # names with is_internal set (v1+)


def parse_metadata(frame_body: bytes, version: int) -> MetadataV1:
    r = Reader(frame_body)
    corr = r.i32()
    brokers = []
    for _ in range(r.array_len()):
        node_id, host, port = r.i32(), r.string(), r.i32()
        if version >= 1:
            r.string()  # rack
        brokers.append((node_id, host, port))
    controller = r.i32() if version >= 1 else -1
    topics = {}
    internal = set()
    for _ in range(r.array_len()):
        terr = r.i16()
        name = r.string()
        if version >= 1 and r.i8():
            internal.add(name)
        parts = []
        for _ in range(r.array_len()):
            perr, pidx, leader = r.i16(), r.i32(), r.i32()
            for _ in range(r.array_len()):
                r.i32()
            for _ in range(r.array_len()):
                r.i32()
            parts.append((pidx, perr, leader))
        topics[name] = (terr, parts)
    return MetadataV1(corr, brokers, controller, topics, internal)


@dataclass
class ProduceV3Partition:
    error_code: int
    base_offset: int
    log_append_time: int


def parse_produce_v3(frame_body: bytes) -> tuple[int, dict[tuple[str, int], ProduceV3Partition]]:
    r = Reader(frame_body)
    corr = r.i32()
    out = {}
    for _ in range(r.array_len()):
        name = r.string()
        for _ in range(r.array_len()):
            idx, err, base, lat = r.i32(), r.i16(), r.i64(), r.i64()
            out[(name, idx)] = ProduceV3Partition(err, base, lat)
    r.i32()  # throttle
    return corr, out


@dataclass
class BatchInfo:
    base_offset: int
    last_offset: int
    attributes: int
    record_count: int


@dataclass
class FetchV4Partition:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    records: bytes

    def batches(self) -> list[BatchInfo]:
        """Walks whole v2 batches in the record set (a trailing partial batch is ignored, as
        Kafka allows the last one to be cut by max_bytes)."""
        out = []
        pos = 0
        data = self.records
        while pos + 12 <= len(data):
            base, length = struct.unpack(">qi", data[pos:pos + 12])
            if pos + 12 + length > len(data):
                break
            batch = data[pos:pos + 12 + length]
            magic = batch[16]
            if magic != 2:
                raise AssertionError(f"batch at {base} has magic {magic}")
            attributes = struct.unpack(">h", batch[21:23])[0]
            last_delta = struct.unpack(">i", batch[23:27])[0]
            count = struct.unpack(">i", batch[57:61])[0]
            out.append(BatchInfo(base, base + last_delta, attributes, count))
            pos += 12 + length
        return out


def parse_fetch_v4(frame_body: bytes) -> tuple[int, dict[tuple[str, int], FetchV4Partition]]:
    r = Reader(frame_body)
    corr = r.i32()
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.array_len()):
        name = r.string()
        for _ in range(r.array_len()):
            idx, err, hw, lso = r.i32(), r.i16(), r.i64(), r.i64()
            n_aborted = r.i32()
            for _ in range(max(n_aborted, 0)):
                r.i64()
                r.i64()
            records = r.bytes_() or b""
            out[(name, idx)] = FetchV4Partition(err, hw, lso, records)
    return corr, out


def offset_for_leader_epoch_request(version: int, correlation_id: int,
                                    topics: dict[str, list[tuple[int, int, int]]],
                                    replica_id: int = -1) -> bytes:
    """OffsetForLeaderEpoch v2-4: topics maps a name to [(partition, current_leader_epoch,
    leader_epoch)]. v3 adds replica_id; v4 is flexible (compact arrays and strings, tags)."""
    flexible = version >= 4

    def arr(items: list[bytes]) -> bytes:
        return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)

    tags = tagged_fields_empty() if flexible else b""
    body = i32(replica_id) if version >= 3 else b""
    body += arr([(compact_string(t) if flexible else string(t))
                 + arr([i32(p) + i32(cur) + i32(ep) + tags for p, cur, ep in parts]) + tags
                 for t, parts in topics.items()])
    body += tags
    header = (header_v2 if flexible else header_v1)(OFFSET_FOR_LEADER_EPOCH, version, correlation_id)
    return frame(header + body)


def _uvarint(r: Reader) -> int:
    shift = value = 0
    while True:
        b = r.take(1)[0]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def parse_offset_for_leader_epoch(frame_body: bytes, version: int) -> tuple[int, dict[tuple[str, int], tuple[int, int, int]]]:
    """(correlation id, {(topic, partition): (error_code, leader_epoch, end_offset)})."""
    flexible = version >= 4
    r = Reader(frame_body)
    corr = r.i32()
    if flexible:
        assert _uvarint(r) == 0, "response header tags"

    def arr_len() -> int:
        return _uvarint(r) - 1 if flexible else r.array_len()

    def name() -> str:
        if flexible:
            return r.take(_uvarint(r) - 1).decode()
        return r.string()

    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(arr_len()):
        topic = name()
        for _ in range(arr_len()):
            err, part, epoch, end = r.i16(), r.i32(), r.i32(), r.i64()
            if flexible:
                assert _uvarint(r) == 0
            out[(topic, part)] = (err, epoch, end)
        if flexible:
            assert _uvarint(r) == 0
    if flexible:
        assert _uvarint(r) == 0
    assert r.remaining() == 0, f"{r.remaining()} trailing bytes"
    return corr, out


def roundtrip(bootstrap: str, request: bytes, timeout: float = 10.0) -> bytes:
    """Sends one request on a fresh connection and returns the response frame body."""
    with connect(bootstrap, timeout) as s:
        s.sendall(request)
        return read_frame(s)


def fetch_v4(bootstrap: str, topic: str, partition: int, offset: int, **kw) -> FetchV4Partition:
    _, parts = parse_fetch_v4(roundtrip(bootstrap, fetch_request_v4(4242, topic, partition, offset, **kw)))
    return parts[(topic, partition)]


def produce_v3(bootstrap: str, topic: str, partition: int, batch: bytes, acks: int = -1) -> ProduceV3Partition:
    corr, parts = parse_produce_v3(roundtrip(bootstrap, produce_request_v3(5151, topic, partition, batch, acks)))
    assert corr == 5151
    return parts[(topic, partition)]


@dataclass
class ApiVersionsV3:
    """An ApiVersions v3+ response: the API ranges, and the tagged fields a broker adds
    (supported and finalized feature levels, the finalized features' epoch)."""
    correlation_id: int
    error_code: int
    api_keys: dict[int, tuple[int, int]]
    throttle_time_ms: int
    supported_features: dict[str, tuple[int, int]] = field(default_factory=dict)
    finalized_features: dict[str, tuple[int, int]] = field(default_factory=dict)
    finalized_features_epoch: int = -1
    zk_migration_ready: bool | None = None


def _compact_str(r: Reader) -> str:
    n = _uvarint(r) - 1
    return r.take(n).decode()


def _features(data: bytes) -> dict[str, tuple[int, int]]:
    """SupportedFeatures / FinalizedFeatures: compact array of (name, i16, i16, tags)."""
    r = Reader(data)
    out = {}
    for _ in range(_uvarint(r) - 1):
        name = _compact_str(r)
        lo, hi = r.i16(), r.i16()
        assert _uvarint(r) == 0, "feature tags"
        out[name] = (lo, hi)
    assert r.remaining() == 0
    return out


def parse_api_versions_v3(frame_body: bytes) -> ApiVersionsV3:
    """Parses a v3+ ApiVersions response (response header v0, flexible body)."""
    r = Reader(frame_body)
    corr = r.i32()
    err = r.i16()
    keys = {}
    for _ in range(_uvarint(r) - 1):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        assert _uvarint(r) == 0, "api key tags"
        keys[k] = (lo, hi)
    out = ApiVersionsV3(corr, err, keys, r.i32())
    for _ in range(_uvarint(r)):
        tag, size = _uvarint(r), _uvarint(r)
        data = r.take(size)
        if tag == 0:
            out.supported_features = _features(data)
        elif tag == 1:
            out.finalized_features_epoch = Reader(data).i64()
        elif tag == 2:
            out.finalized_features = _features(data)
        elif tag == 3:
            out.zk_migration_ready = bool(data[0])
    assert r.remaining() == 0, f"{r.remaining()} trailing bytes"
    return out


def api_versions(bootstrap: str, version: int = 3) -> ApiVersionsV3:
    """One ApiVersions round trip at `version` (3 or 4) on a fresh connection."""
    return parse_api_versions_v3(roundtrip(bootstrap, api_versions_request(version, 1818)))
