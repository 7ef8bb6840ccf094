"""Raw wire forms of the transaction APIs (docs/transactions.md §1), for tests that need exact
error codes per request version: InitProducerId v1, AddPartitionsToTxn v2 and v4-5 (batched,
`verify_only`), EndTxn v1-2, DescribeTransactions v0, ListTransactions v0-2. Built on kwire's
primitives; each call opens one connection, sends one request and parses the whole answer
(trailing bytes fail the parse)."""

from __future__ import annotations

from dataclasses import dataclass

import kwire
from kwire import Reader, compact_string, i8, i16, i32, i64, string, tagged_fields_empty, uvarint

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120
INVALID_REGULAR_EXPRESSION = 128


def _uv(r: Reader) -> int:
    return kwire._uvarint(r)


def _cstr(r: Reader) -> str | None:
    n = _uv(r)
    return None if n == 0 else r.take(n - 1).decode()


def _tags(r: Reader) -> None:
    assert _uv(r) == 0, "unexpected tagged fields"


def _carr(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _send(bootstrap: str, header: bytes, body: bytes, timeout: float = 10.0) -> Reader:
    return Reader(kwire.roundtrip(bootstrap, kwire.frame(header + body), timeout))


def init_producer_id(bootstrap: str, txn_id: str, timeout_ms: int = 60000) -> tuple[int, int, int]:
    """InitProducerId v1: (error, producer id, epoch)."""
    r = _send(bootstrap, kwire.header_v1(INIT_PRODUCER_ID, 1, 1), string(txn_id) + i32(timeout_ms))
    assert r.i32() == 1
    r.i32()  # throttle
    out = r.i16(), r.i64(), r.i16()
    assert r.remaining() == 0
    return out


def init_producer_id_expecting(bootstrap: str, txn_id: str, pid: int, epoch: int, version: int,
                               timeout_ms: int = 60000) -> tuple[int, int, int]:
    """InitProducerId v3-5 (flexible) with the producer id and epoch a producer that
    re-initializes sends (KIP-360): (error, producer id, epoch)."""
    assert 3 <= version <= 5
    body = compact_string(txn_id) + i32(timeout_ms) + i64(pid) + i16(epoch) + tagged_fields_empty()
    r = _send(bootstrap, kwire.header_v2(INIT_PRODUCER_ID, version, 8), body)
    assert r.i32() == 8
    _tags(r)
    r.i32()  # throttle
    out = r.i16(), r.i64(), r.i16()
    _tags(r)
    assert r.remaining() == 0
    return out


def add_partitions(bootstrap: str, txn_id: str, pid: int, epoch: int, topic: str,
                   partitions: list[int], version: int = 2, timeout: float = 10.0) -> dict[int, int]:
    """AddPartitionsToTxn v0-2 (one topic): {partition: error}."""
    assert 0 <= version <= 2
    body = (string(txn_id) + i64(pid) + i16(epoch) + i32(1) + string(topic)
            + i32(len(partitions)) + b"".join(i32(p) for p in partitions))
    r = _send(bootstrap, kwire.header_v1(ADD_PARTITIONS_TO_TXN, version, 2), body, timeout)
    assert r.i32() == 2
    r.i32()  # throttle
    out = {}
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            p = r.i32()
            out[p] = r.i16()
    assert r.remaining() == 0
    return out


@dataclass
class BatchedTxn:
    """One transaction of an AddPartitionsToTxn v4+ request."""
    txn_id: str
    pid: int
    epoch: int
    verify_only: bool
    topics: dict[str, list[int]]


def add_partitions_batched(bootstrap: str, txns: list[BatchedTxn], version: int
                           ) -> tuple[int, dict[str, dict[tuple[str, int], int]]]:
    """AddPartitionsToTxn v4-5: (top-level error, {txn id: {(topic, partition): error}})."""
    assert version in (4, 5)
    body = _carr([
        compact_string(t.txn_id) + i64(t.pid) + i16(t.epoch) + i8(int(t.verify_only))
        + _carr([compact_string(name) + _carr([i32(p) for p in parts]) + tagged_fields_empty()
                 for name, parts in t.topics.items()])
        + tagged_fields_empty()
        for t in txns
    ]) + tagged_fields_empty()
    r = _send(bootstrap, kwire.header_v2(ADD_PARTITIONS_TO_TXN, version, 3), body)
    assert r.i32() == 3
    _tags(r)
    r.i32()  # throttle
    top = r.i16()
    results: dict[str, dict[tuple[str, int], int]] = {}
    for _ in range(_uv(r) - 1):
        txn_id = _cstr(r)
        codes = results.setdefault(txn_id, {})
        for _ in range(_uv(r) - 1):
            name = _cstr(r)
            for _ in range(_uv(r) - 1):
                p, code = r.i32(), r.i16()
                _tags(r)
                codes[(name, p)] = code
            _tags(r)
        _tags(r)
    _tags(r)
    assert r.remaining() == 0
    return top, results


def end_txn(bootstrap: str, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 1) -> int:
    """EndTxn v0-2: the error code."""
    assert 0 <= version <= 2
    body = string(txn_id) + i64(pid) + i16(epoch) + i8(int(commit))
    r = _send(bootstrap, kwire.header_v1(END_TXN, version, 4), body)
    assert r.i32() == 4
    r.i32()  # throttle
    code = r.i16()
    assert r.remaining() == 0
    return code


@dataclass
class Described:
    error: int
    txn_id: str
    state: str
    timeout_ms: int
    start_ms: int
    pid: int
    epoch: int
    partitions: set[tuple[str, int]]


def describe_transactions(bootstrap: str, txn_ids: list[str]) -> list[Described]:
    """DescribeTransactions v0, one entry per id in request order."""
    body = _carr([compact_string(t) for t in txn_ids]) + tagged_fields_empty()
    r = _send(bootstrap, kwire.header_v2(DESCRIBE_TRANSACTIONS, 0, 5), body)
    assert r.i32() == 5
    _tags(r)
    r.i32()  # throttle
    out = []
    for _ in range(_uv(r) - 1):
        error, txn_id, state = r.i16(), _cstr(r), _cstr(r)
        timeout_ms, start_ms, pid, epoch = r.i32(), r.i64(), r.i64(), r.i16()
        parts = set()
        for _ in range(_uv(r) - 1):
            topic = _cstr(r)
            for _ in range(_uv(r) - 1):
                parts.add((topic, r.i32()))
            _tags(r)
        _tags(r)
        out.append(Described(error, txn_id, state, timeout_ms, start_ms, pid, epoch, parts))
    _tags(r)
    assert r.remaining() == 0
    return out


def list_transactions(bootstrap: str, version: int, states: list[str] = (), pids: list[int] = (),
                      duration_ms: int = -1, pattern: str | None = None
                      ) -> tuple[int, list[str], dict[str, tuple[int, str]]]:
    """ListTransactions v0-2: (error, unknown state filters, {txn id: (producer id, state)})."""
    body = _carr([compact_string(s) for s in states]) + _carr([i64(p) for p in pids])
    if version >= 1:
        body += i64(duration_ms)
    if version >= 2:
        body += compact_string(pattern)
    body += tagged_fields_empty()
    r = _send(bootstrap, kwire.header_v2(LIST_TRANSACTIONS, version, 6), body)
    assert r.i32() == 6
    _tags(r)
    r.i32()  # throttle
    error = r.i16()
    unknown = [_cstr(r) for _ in range(_uv(r) - 1)]
    listed = {}
    for _ in range(_uv(r) - 1):
        txn_id, pid, state = _cstr(r), r.i64(), _cstr(r)
        _tags(r)
        listed[txn_id] = (pid, state)
    _tags(r)
    assert r.remaining() == 0
    return error, unknown, listed


DESCRIBE_PRODUCERS = 61
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def describe_producers(bootstrap: str, topic: str, partitions: list[int]
                       ) -> dict[int, tuple[int, list[tuple[int, int, int, int, int, int]]]]:
    """DescribeProducers v0 for one topic: {partition: (error, [(producer id, epoch, last
    sequence, last timestamp, coordinator epoch, current txn start offset)])}."""
    body = _carr([compact_string(topic) + _carr([i32(p) for p in partitions])
                  + tagged_fields_empty()]) + tagged_fields_empty()
    r = _send(bootstrap, kwire.header_v2(DESCRIBE_PRODUCERS, 0, 7), body)
    assert r.i32() == 7
    _tags(r)
    r.i32()  # throttle
    out = {}
    for _ in range(_uv(r) - 1):
        _cstr(r)
        for _ in range(_uv(r) - 1):
            p, error = r.i32(), r.i16()
            _cstr(r)  # error message
            producers = []
            for _ in range(_uv(r) - 1):
                producers.append((r.i64(), r.i32(), r.i32(), r.i64(), r.i32(), r.i64()))
                _tags(r)
            _tags(r)
            out[p] = (error, producers)
        _tags(r)
    _tags(r)
    assert r.remaining() == 0
    return out
