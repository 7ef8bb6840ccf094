"""The admin listener (`--metrics-listen`): Prometheus `/metrics`, `/ready`, its bounds.

Every test runs a real `sluice serve` with the admin listener on an ephemeral port, drives it
with real clients (confluent-kafka, raw frames from `kwire`) and scrapes it with urllib."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

from confluent_kafka import TopicPartition

import kwire
from helpers import ck_consumer, ck_producer, create_topic

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

# Every family the broker exports (docs/operations.md), by its `# TYPE` name.
FAMILIES = [
    "sluice_requests_total", "sluice_request_errors_total", "sluice_request_latency_seconds",
    "sluice_produce_bytes_total", "sluice_produce_records_total", "sluice_fetch_bytes_total",
    "sluice_fetch_records_total",
    "sluice_log_commit_rounds_total", "sluice_log_append_requests_total",
    "sluice_log_batches_appended_total", "sluice_log_commit_round_bytes",
    "sluice_log_commit_round_requests", "sluice_log_journal_sync_seconds",
    "sluice_log_journal_write_seconds", "sluice_log_commit_round_seconds",
    "sluice_log_append_queue_wait_seconds",
    "sluice_log_journal_syncs_total", "sluice_log_journal_written_bytes_total",
    "sluice_log_segment_syncs_total", "sluice_log_segment_written_bytes_total",
    "sluice_log_checkpoints_total", "sluice_log_poisoned",
    "sluice_log_cleaner_passes_total", "sluice_log_cleaner_segments_cleaned_total",
    "sluice_log_cleaner_read_bytes_total", "sluice_log_cleaner_written_bytes_total",
    "sluice_log_cleaner_records_removed_total",
    "sluice_connections", "sluice_request_memory_used_bytes", "sluice_request_memory_limit_bytes",
    "sluice_fetch_long_polls_parked", "sluice_groups", "sluice_group_members", "sluice_group_lag",
    "sluice_group_series_truncated", "sluice_producer_ids_issued_total", "sluice_producer_ids",
]


class Scrape:
    """One parsed scrape: samples by (name, frozenset of labels), and the TYPE lines."""

    def __init__(self, text: str):
        self.text = text
        self.samples: dict[tuple[str, frozenset], float] = {}
        self.types: dict[str, str] = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                self.types[name] = kind
                continue
            if not line or line.startswith("#"):
                continue
            m = SAMPLE_RE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels = frozenset(LABEL_RE.findall(m.group(2) or ""))
            self.samples[(m.group(1), labels)] = float(m.group(3))

    def get(self, name: str, **labels) -> float:
        key = (name, frozenset((k, str(v)) for k, v in labels.items()))
        assert key in self.samples, f"no sample {name}{labels} in the scrape"
        return self.samples[key]


def http_get(url: str, headers: dict | None = None) -> tuple[int, str, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def scrape(b) -> Scrape:
    status, ctype, body = http_get(b.metrics_url + "/metrics")
    assert status == 200, (status, body)
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return Scrape(body)


def api_versions(bootstrap: str, n: int) -> None:
    with kwire.connect(bootstrap) as s:
        for i in range(n):
            s.sendall(kwire.api_versions_request(2, i))
            kwire.read_frame(s)


def test_metrics_families_after_produce_consume_commit(sluice_factory, topic_name):
    """Goal: after real produce, consume and offset commits, /metrics has every family with
    values that follow from what the test did.
    Method: 2 partitions; an idempotent confluent producer sends 60 records to partition 0 and
    40 to partition 1; a subscribed group consumer reads all 100 and commits offsets 45 and 40;
    5 raw ApiVersions requests and one frame with an unknown API key (which closes its
    connection) are sent; a raw Fetch long-polls at the high watermark while scraping.
    Then: per-API counts cover what was sent (ApiVersions by exactly 5 more than before,
    the unknown frame as an error), latency histogram counts equal request counts, produced
    records per topic are exactly 100, fetched bytes cover the produced bytes, fsync and
    round histograms are non-empty, the group has 1 member and lag 15 on partition 0 and 0 on
    partition 1, a producer id was issued and is live in both partitions, the parked fetch is
    counted, and memory limits are the defaults. A CreateTopics of the existing topic counts
    one CreateTopics error; fetched records per topic are exactly the 100 the consumer read
    plus a raw fetch's 20; once a checkpoint ran (every 5 s), segment bytes were written."""
    b = sluice_factory(metrics=True)
    create_topic(b.bootstrap, topic_name, partitions=2)
    before = scrape(b)
    assert set(FAMILIES) <= set(before.types), set(FAMILIES) - set(before.types)

    p = ck_producer(b.bootstrap, **{"enable.idempotence": True})
    for i in range(100):
        p.produce(topic_name, value=b"v%03d" % i + b"x" * 96, partition=0 if i < 60 else 1)
    assert p.flush(15) == 0

    group = f"g-{topic_name}"[:100]
    c = ck_consumer(b.bootstrap, **{"group.id": group})
    c.subscribe([topic_name])
    got, deadline = 0, time.monotonic() + 20
    while got < 100 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == 100
    c.commit(offsets=[TopicPartition(topic_name, 0, 45), TopicPartition(topic_name, 1, 40)],
             asynchronous=False)

    api_versions(b.bootstrap, 5)
    with kwire.connect(b.bootstrap) as s:
        s.sendall(kwire.frame(kwire.header_v1(9999, 0, 1)))
        assert kwire.wait_closed(s), "an unknown API key closes the connection"

    # Creating the topic again answers TOPIC_ALREADY_EXISTS in its entry: one error.
    create_errors = before.get("sluice_request_errors_total", api="CreateTopics")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept alive for the future
    futures = admin.create_topics(
        [NewTopic(topic_name, num_partitions=2, replication_factor=1)])
    try:
        futures[topic_name].result(15)
        raise AssertionError("creating an existing topic succeeded")
    except Exception as e:  # noqa: BLE001 (the KafkaException carries the code)
        assert "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e), e
    # A raw fetch from offset 20 of partition 1 (40 records, one batch each) reads 20.
    assert kwire.fetch_v4(b.bootstrap, topic_name, 1, 20).error_code == 0

    # A fetch at the high watermark parks for up to 5 s while we scrape.
    parked = threading.Thread(target=kwire.fetch_v4, args=(b.bootstrap, topic_name, 1, 40),
                              kwargs={"max_wait_ms": 5000})
    parked.start()
    time.sleep(0.5)
    m = scrape(b)
    parked.join()
    assert set(FAMILIES) <= set(m.types), set(FAMILIES) - set(m.types)

    # Requests: every family has a series per API; counts follow from what was sent.
    assert m.get("sluice_requests_total", api="ApiVersions") >= \
        before.get("sluice_requests_total", api="ApiVersions") + 5
    assert m.get("sluice_requests_total", api="Produce") >= 1
    assert m.get("sluice_requests_total", api="Fetch") >= 1
    assert m.get("sluice_requests_total", api="OffsetCommit") >= 1
    assert m.get("sluice_requests_total", api="InitProducerId") >= 1
    assert m.get("sluice_request_errors_total", api="unknown") >= 1
    assert m.get("sluice_request_errors_total", api="Produce") == 0
    assert m.get("sluice_request_errors_total", api="CreateTopics") == create_errors + 1
    for api in ("Produce", "Fetch", "ApiVersions"):
        assert m.get("sluice_request_latency_seconds_count", api=api) == \
            m.get("sluice_requests_total", api=api)
        assert m.get("sluice_request_latency_seconds_bucket", api=api, le="+Inf") == \
            m.get("sluice_requests_total", api=api)
    assert m.types["sluice_request_latency_seconds"] == "histogram"
    assert m.types["sluice_requests_total"] == "counter"

    # Per topic.
    assert m.get("sluice_produce_records_total", topic=topic_name) == 100
    produced = m.get("sluice_produce_bytes_total", topic=topic_name)
    assert produced >= 100 * 100
    assert m.get("sluice_fetch_bytes_total", topic=topic_name) >= produced
    assert m.get("sluice_fetch_records_total", topic=topic_name) == 100 + 20

    # The group commit.
    assert m.get("sluice_log_commit_rounds_total") >= 1
    assert m.get("sluice_log_journal_sync_seconds_count") > 0
    assert m.get("sluice_log_journal_sync_seconds_sum") > 0
    assert m.get("sluice_log_journal_syncs_total") == m.get("sluice_log_journal_sync_seconds_count")
    # Where a round's time goes: every round is timed whole, every write of one (each
    # followed by its sync here), and every request's wait in the queue before its round.
    assert m.get("sluice_log_commit_round_seconds_count") == m.get("sluice_log_commit_rounds_total")
    assert m.get("sluice_log_journal_write_seconds_count") == m.get("sluice_log_journal_syncs_total")
    assert m.get("sluice_log_commit_round_seconds_sum") >= \
        m.get("sluice_log_journal_sync_seconds_sum") + m.get("sluice_log_journal_write_seconds_sum")
    assert m.get("sluice_log_append_queue_wait_seconds_count") == m.get("sluice_log_append_requests_total")
    assert m.get("sluice_log_commit_round_bytes_count") > 0
    assert m.get("sluice_log_commit_round_requests_sum") >= m.get("sluice_log_commit_round_requests_count")
    assert m.get("sluice_log_journal_written_bytes_total") >= produced
    assert m.get("sluice_log_batches_appended_total") >= 1
    assert m.get("sluice_log_poisoned") == 0
    for name in ("sluice_log_segment_syncs_total", "sluice_log_checkpoints_total"):
        assert m.get(name) >= 0

    # Network and memory.
    assert m.get("sluice_connections") >= 2, "producer and consumer connections"
    assert m.get("sluice_request_memory_limit_bytes") == 512 * 1024 * 1024
    assert 0 <= m.get("sluice_request_memory_used_bytes") <= m.get("sluice_request_memory_limit_bytes")
    assert m.get("sluice_fetch_long_polls_parked") >= 1

    # Groups and lag (high watermark minus committed offset).
    assert m.get("sluice_groups") >= 1
    assert m.get("sluice_group_members", group=group) == 1
    assert m.get("sluice_group_lag", group=group, topic=topic_name, partition=0) == 15
    assert m.get("sluice_group_lag", group=group, topic=topic_name, partition=1) == 0
    assert m.get("sluice_group_series_truncated") == 0

    assert m.get("sluice_producer_ids_issued_total") >= 1
    # The idempotent producer has state in both partitions (Kafka's ProducerIdCount).
    assert m.get("sluice_producer_ids") == 2

    # Segment files: a checkpoint (every 5 s) persists the extents of the segments written.
    deadline = time.monotonic() + 30
    while m.get("sluice_log_segment_syncs_total") < 1 and time.monotonic() < deadline:
        time.sleep(0.5)
        m = scrape(b)
    assert m.get("sluice_log_segment_syncs_total") >= 1
    assert m.get("sluice_log_segment_written_bytes_total") > 0
    assert m.get("sluice_log_segment_written_bytes_total") >= \
        m.get("sluice_log_cleaner_written_bytes_total")
    c.close()
    p = None


def test_ready_not_found_and_openmetrics(sluice_factory):
    """Goal: /ready is 200 while serving; unknown paths are 404, other methods 405; a scraper
    asking for OpenMetrics gets it (ending in `# EOF`), others get text format 0.0.4.
    Method: plain urllib requests against the admin listener."""
    b = sluice_factory(metrics=True)
    status, _, body = http_get(b.metrics_url + "/ready")
    assert (status, body) == (200, "ready\n")
    assert http_get(b.metrics_url + "/nope")[0] == 404
    assert http_get(b.metrics_url + "/")[0] == 404
    req = urllib.request.Request(b.metrics_url + "/metrics", data=b"x", method="POST")
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("POST was accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 405
    status, ctype, body = http_get(b.metrics_url + "/metrics",
                                   {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"})
    assert status == 200 and ctype.startswith("application/openmetrics-text"), ctype
    assert body.endswith("# EOF\n")
    assert "# TYPE sluice_requests counter" in body
    text = scrape(b).text
    assert "# EOF" not in text and "# TYPE sluice_requests_total counter" in text


def test_ready_is_503_while_shutting_down(sluice_factory, topic_name):
    """Goal: /ready turns 503 as soon as shutdown begins, while in-flight responses drain.
    Method: 24 MiB in one partition; a raw client asks for all of it in one fetch and does not
    read, so the broker's drain waits on that response. SIGTERM: /ready answers 503 within
    3 s while the broker is still up; once the client closes, the broker exits 0."""
    b = sluice_factory(metrics=True)
    create_topic(b.bootstrap, topic_name)
    value = b"r" * 1_000_000
    for _ in range(24):
        batch = kwire.record_batch([kwire.RawRecord(value=value)])
        assert kwire.produce_v3(b.bootstrap, topic_name, 0, batch).error_code == 0
    host, port = b.bootstrap.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, int(port)))
    try:
        s.sendall(kwire.fetch_request_v4(1, topic_name, 0, 0, max_bytes=32 << 20,
                                         partition_max_bytes=32 << 20))
        time.sleep(0.5)
        assert http_get(b.metrics_url + "/ready")[0] == 200
        b._expected_exit = True
        b.proc.send_signal(signal.SIGTERM)
        statuses, deadline = [], time.monotonic() + 3
        while time.monotonic() < deadline:
            statuses.append(http_get(b.metrics_url + "/ready")[0])
            if statuses[-1] == 503:
                break
            time.sleep(0.05)
        assert statuses[-1] == 503, statuses
        assert b.alive(), "the broker is still draining"
    finally:
        s.close()
    assert b.proc.wait(timeout=15) == 0


def test_admin_listener_off_by_default_and_a_broker_setting(sluice_factory):
    """Goal: without a setting no admin listener starts (the only stdout line is the Kafka
    listener's); the broker setting `metrics.listen` (here through --override) starts it like
    the flag does. Method: a default broker has no metrics URL and serves Kafka; a second one
    with `--override metrics.listen=127.0.0.1:0` answers /ready."""
    b = sluice_factory()
    assert b.metrics_url is None
    assert kwire.parse_api_versions_v0(kwire.roundtrip(b.bootstrap, kwire.api_versions_request(0, 7))).error_code == 0
    b2 = sluice_factory(["--override", "metrics.listen=127.0.0.1:0"])
    assert b2.metrics_url is not None
    assert http_get(b2.metrics_url + "/ready")[0] == 200


def hold_admin_slots(addr, n: int) -> list[socket.socket]:
    """`n` idle admin connections that all hold a slot. A connection closed a moment ago
    may still hold its slot while its task ends (on a busy machine, a few milliseconds
    after the client saw the close); a new one refused meanwhile is closed at once, so any
    that closes within half a second is a sign to let go of all and try again."""
    for _ in range(10):
        socks = [socket.create_connection(addr, timeout=5) for _ in range(n)]
        if not any(kwire.wait_closed(s, timeout=0.5) for s in socks):
            return socks
        for s in socks:
            s.close()
        time.sleep(0.5)
    raise AssertionError(f"could not hold {n} admin connections")


def test_bad_admin_requests_close_without_harming_kafka(sluice_factory, topic_name):
    """Goal: malformed, oversized and idle admin connections are closed, more than the admin
    connection limit are refused, and none of it disturbs the Kafka listener.
    Method: send garbage (400 and a close), a 64 KiB header without an end (431 and a close
    before it is all read), then hold 4 idle connections (the limit): a fifth is closed at
    once while a Kafka produce and fetch still succeed; after the 5 s read timeout the idle
    ones are closed and /metrics answers again."""
    b = sluice_factory(metrics=True)
    create_topic(b.bootstrap, topic_name)
    host, port = b.metrics_url.removeprefix("http://").rsplit(":", 1)
    addr = (host, int(port))

    with socket.create_connection(addr, timeout=5) as s:
        s.sendall(b"\x00\x01\x02garbage\r\n\r\n")
        reply = s.recv(1024)
        assert reply.startswith(b"HTTP/1.1 400"), reply
        assert kwire.wait_closed(s)

    with socket.create_connection(addr, timeout=5) as s:
        try:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (64 * 1024))
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            reply = s.recv(1024)
        except ConnectionResetError:
            # Closed with our bytes still unread: the kernel answers with a reset, which
            # can overtake the 431 (a race on the machine's load, not a broker fault).
            reply = b""
        assert reply.startswith(b"HTTP/1.1 431") or reply == b"", reply
        assert kwire.wait_closed(s)

    idle = hold_admin_slots(addr, 4)
    try:
        with socket.create_connection(addr, timeout=5) as extra:
            assert kwire.wait_closed(extra, timeout=2), "a fifth admin connection must be refused"
        # The Kafka listener serves meanwhile.
        batch = kwire.record_batch([kwire.RawRecord(value=b"still-serving")])
        assert kwire.produce_v3(b.bootstrap, topic_name, 0, batch).error_code == 0
        assert kwire.fetch_v4(b.bootstrap, topic_name, 0, 0).error_code == 0
        # The idle ones are closed after the read timeout (5 s).
        for s in idle:
            assert kwire.wait_closed(s, timeout=8), "an idle admin connection must be closed"
    finally:
        for s in idle:
            s.close()
    status, _, body = http_get(b.metrics_url + "/metrics")
    assert status == 200 and "sluice_requests_total" in body


def test_log_format_json(sluice_factory, topic_name):
    """Goal: `--log-format json` writes every stderr log line as one JSON object with the
    level, target and the event's fields. Method: start with it, create a topic (which logs),
    parse every log line of the broker's stderr."""
    b = sluice_factory(["--log-format", "json"])
    create_topic(b.bootstrap, topic_name)
    time.sleep(0.2)
    lines = [ln for ln in b.stderr_text().splitlines()
             if ln and not ln.startswith("=====") and not ln.startswith("[stdout]")]
    assert lines, "the broker logged nothing"
    events = [json.loads(ln) for ln in lines]
    assert all({"timestamp", "level", "target", "fields"} <= e.keys() for e in events)
    created = [e for e in events if e["fields"].get("message") == "created topic"]
    assert created and created[0]["fields"]["topic"] == topic_name


def test_every_family_while_sluice_bench_runs(sluice_factory, tmp_path):
    """Goal: what an operator sees when curling /metrics during a `sluice bench` run against
    the broker: every family present, and the figures that the load must move moving.
    Method: a broker with the admin listener; `sluice-bench --bootstrap` producing and
    consuming through a consumer group at 2,000 msg/s for 8 s; /metrics scraped before and
    while it runs (once the bench's consumers are reading).
    Then: every family is exported; Produce and Fetch request counts and the bench topics'
    produced bytes and records and fetched bytes grew; commit rounds, journal syncs and the
    fdatasync histogram grew; connections and the bench's group with lag series per
    partition are there while it runs; and the bench itself exits 0 (nothing lost)."""
    from conftest import sluice_bench_bin

    b = sluice_factory(metrics=True)
    before = scrape(b)
    out = tmp_path / "r.json"
    cmd = [str(sluice_bench_bin()), "--bootstrap", b.bootstrap, "--quiet", "--json", str(out),
           "--rate", "2000", "--producers", "1", "--consumers", "2", "--partitions", "4",
           "--warmup", "1s", "--duration", "8s"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        during, deadline = None, time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1.0)
            s = scrape(b)
            fetched = sum(v for (n, _), v in s.samples.items() if n == "sluice_fetch_bytes_total")
            if fetched > 0 and any(n == "sluice_group_lag" for n, _ in s.samples):
                during = s
                break
        assert during is not None, "no scrape saw the bench's consumers reading"
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"{stdout[-2000:]}\n{stderr[-2000:]}"

    assert set(FAMILIES) <= set(during.types), set(FAMILIES) - set(during.types)

    def total(s: Scrape, name: str, **labels) -> float:
        want = {(k, str(v)) for k, v in labels.items()}
        return sum(v for (n, ls), v in s.samples.items() if n == name and want <= ls)

    for api in ("Produce", "Fetch"):
        assert total(during, "sluice_requests_total", api=api) > total(before, "sluice_requests_total", api=api), api
    for family in ("sluice_produce_bytes_total", "sluice_produce_records_total",
                   "sluice_fetch_bytes_total", "sluice_log_commit_rounds_total",
                   "sluice_log_journal_syncs_total", "sluice_log_journal_sync_seconds_count",
                   "sluice_log_journal_written_bytes_total"):
        assert total(during, family) > total(before, family), family
    assert total(during, "sluice_connections") >= 2
    assert total(during, "sluice_groups") >= 1
    # The bench's consumers assign their partitions and commit to the bench's group (no
    # members: nobody subscribes), so the group shows up with lag series per partition.
    lag = {dict(ls).get("group") for (n, ls), _ in during.samples.items() if n == "sluice_group_lag"}
    assert any(g and g.startswith("sluice-bench") for g in lag), lag
