"""Compacted topics (issue 13) with confluent-kafka against a real broker: the log cleaner
keeps the newest record per key at its original offset, tombstones go after
delete.retention.ms, watermarks never move, a committed offset inside a removed range resumes
at the next surviving record, keyless records are refused, a SIGKILL in the middle of a
cleaning pass loses nothing, delete horizons outlive a restart, transactions are cleaned
as Kafka cleans them (aborted data and lone markers go, committed data is compacted),
batches the client compressed with each codec are cleaned and recompressed, and a
throttled pass does not hold up produce. Cleaning is made fast with small segments,
segment.ms, a short cleaner backoff and a low dirty ratio; passes are counted through
/metrics."""

from __future__ import annotations

import re
import time
import urllib.request

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

import kwire
from admin_facade import CkAdmin
from helpers import ck_admin, ck_producer, create_topic, wait_until

# Segments of 1 KiB (internal.segment.bytes, below segment.bytes' 1 MiB floor) give the cleaner
# sealed segments to clean from little data.
CLEANER_ARGS = ["--retention-check-interval-ms", "200", "--override", "log.cleaner.backoff.ms=200",
                "--override", "sluice.internal.segment.bytes.enable=true"]
DELETE_RETENTION_MS = 6000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": 1024,
    "segment.ms": 1000,
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": DELETE_RETENTION_MS,
}
INVALID_RECORD = 87
# Peak resident memory the broker may reach while cleaning about a megabyte (measured: 9 MiB).
VMHWM_KIB_MAX = 64 * 1024


def metric(broker, name: str) -> float:
    with urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10) as r:
        body = r.read().decode()
    m = re.search(rf"^{re.escape(name)}(?:_total)?(?:{{[^}}]*}})? (\S+)$", body, re.M)
    assert m, f"no {name} in /metrics"
    return float(m.group(1))


def vm_kib(pid: int, field: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} missing")


def produce(bootstrap: str, topic: str, items: list[tuple[str | None, str | None]],
            timestamp_ms: int = 0, **conf) -> dict:
    """Produces (key, value) pairs in order (with this CreateTime when not 0; `conf` adds
    producer settings); returns {offset: (key, value)}; raises on any delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "batch.num.messages": 8, "enable.idempotence": False, **conf})
    out, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            k, v = msg.key(), msg.value()
            out[msg.offset()] = (k.decode() if k is not None else None,
                                 v.decode() if v is not None else None)

    for k, v in items:
        p.produce(topic, key=k, value=v, on_delivery=report, timestamp=timestamp_ms)
        p.poll(0)
    assert p.flush(15) == 0
    assert not errors, errors
    return out


def read_all(bootstrap: str, topic: str, isolation: str = "read_committed") -> dict:
    """Every record from the beginning to the high watermark: {offset: (key, value)}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50, "enable.partition.eof": False,
                  "isolation.level": isolation})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, low)])
        out = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.2):
                assert m.error() is None, m.error()
                k, v = m.key(), m.value()
                out[m.offset()] = (k.decode() if k is not None else None,
                                   v.decode() if v is not None else None)
            pos = c.position([TopicPartition(topic, 0)])[0].offset
            if pos >= high:
                return out
        raise AssertionError(f"reading {topic} did not reach {high}")
    finally:
        c.close()


def newest(written: dict) -> dict:
    by_key = {}
    for offset in sorted(written):
        by_key[written[offset][0]] = offset
    return {o: written[o] for o in by_key.values()}


def versions(keys: int, rounds: int, size: int = 40) -> list[tuple[str, str]]:
    return [(f"k{k:03d}", f"v{r:03d}-{k:03d}-" + "x" * size) for r in range(rounds) for k in range(keys)]


def test_compaction_keeps_the_newest_value_per_key(sluice_factory, topic_name):
    """Goal: after cleaning, a read from the beginning sees exactly the newest record per key
    at its original offset, watermarks unchanged; tombstones produced with old timestamps
    stay until delete.retention.ms after the pass that first saw them, then go; a
    group whose committed offset was cleaned away resumes at the next surviving record with
    no error and no reset; DescribeConfigs shows the policy; each pass is logged.
    Method: 30 keys x 10 versions and 5 tombstones (~1 KiB segments, rolled by segment.ms);
    wait for cleaned segments in /metrics and for the read to match; commit an offset that
    was removed and consume with auto.offset.reset=error; after delete.retention.ms produce
    a little more and wait until the tombstoned keys are gone."""
    b = sluice_factory(CLEANER_ARGS, metrics=True)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    admin = ck_admin(b.bootstrap)
    desc = admin.describe_configs([res])[res].result(timeout=10)
    assert desc["cleanup.policy"].value == "compact"

    written = produce(b.bootstrap, topic_name, versions(30, 10))
    # Tombstones stamped long ago: they still live delete.retention.ms from the pass that
    # first sees them (Kafka >= 3.1), not from their timestamp.
    long_ago_ms = int(time.time() * 1000) - 100 * DELETE_RETENTION_MS
    written.update(produce(b.bootstrap, topic_name, [(f"k{k:03d}", None) for k in range(5)],
                           timestamp_ms=long_ago_ms))
    tombstones_at = time.monotonic()
    assert sorted(written) == list(range(305))

    expected = newest(written)
    wait_until(lambda: metric(b, "sluice_log_cleaner_segments_cleaned") >= 1, 20, what="a cleaned segment")
    after = wait_until(lambda: (lambda r: r if set(r) == set(expected) else None)(read_all(b.bootstrap, topic_name)),
                       20, what="only the newest record per key")
    assert after == expected, "each survivor is the record written at that offset"
    if time.monotonic() - tombstones_at < DELETE_RETENTION_MS / 1000 - 1:
        assert sum(1 for _, v in after.values() if v is None) == 5, "tombstones kept for now"
    assert Consumer({"bootstrap.servers": b.bootstrap, "group.id": "w"}).get_watermark_offsets(
        TopicPartition(topic_name, 0), timeout=10) == (0, 305)
    assert "log cleaner pass" in b.stderr_text()
    # What the passes did, in /metrics: time spent, and the bytes they covered shrank.
    before_bytes, after_bytes = (metric(b, f"sluice_log_cleaner_{w}_bytes") for w in ("before", "after"))
    assert 0 < after_bytes < before_bytes, (before_bytes, after_bytes)
    assert metric(b, "sluice_log_cleaner_pass_seconds") > 0

    # A committed offset inside a removed range: the group resumes at the next survivor.
    gap = min(o for o in written if o not in after)
    group = f"g-{topic_name}"[:200]
    committer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic_name, 0, gap)], asynchronous=False)
    committer.close()
    resumed = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                        "auto.offset.reset": "error", "enable.partition.eof": False})
    resumed.assign([TopicPartition(topic_name, 0)])
    first = None
    deadline = time.monotonic() + 15
    while first is None and time.monotonic() < deadline:
        m = resumed.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            first = m.offset()
    resumed.close()
    assert first == min(o for o in after if o > gap), (gap, first)

    # Past delete.retention.ms, new data makes the log dirty and the next pass drops them.
    time.sleep(max(0.0, tombstones_at + DELETE_RETENTION_MS / 1000 - time.monotonic()))
    produce(b.bootstrap, topic_name, [(f"x{i % 2}", "y" * 40) for i in range(40)])
    dead = {f"k{k:03d}" for k in range(5)}
    final = wait_until(lambda: (lambda r: r if not any(k in dead for k, _ in r.values()) else None)(
        read_all(b.bootstrap, topic_name)), 20, what="tombstones removed")
    for offset, record in final.items():
        assert written.get(offset, record) == record
    assert {k for k, _ in final.values()} >= {f"k{k:03d}" for k in range(5, 30)}


def test_keyless_records_are_refused_on_a_compacted_topic(sluice_factory, topic_name):
    """Goal: Kafka's rule: a record without a key on a compacted topic is refused with
    INVALID_RECORD and not stored; keyed records are accepted; a delete-policy topic takes
    keyless records.
    Method: confluent-kafka producer (retries off), delivery reports and watermarks."""
    b = sluice_factory(CLEANER_ARGS)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "retries": 0,
                  "enable.idempotence": False, "linger.ms": 0})
    reports = []
    p.produce(topic_name, value=b"no key", on_delivery=lambda e, m: reports.append(e))
    p.flush(10)
    assert reports and reports[0] is not None and reports[0].code() == INVALID_RECORD, reports
    p.produce(topic_name, key=b"k", value=b"v", on_delivery=lambda e, m: reports.append(e))
    p.flush(10)
    assert reports[1] is None, reports
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "w"})
    assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 1)
    create_topic(b.bootstrap, topic_name + "-d")
    p.produce(topic_name + "-d", value=b"no key", on_delivery=lambda e, m: reports.append(e))
    p.flush(10)
    assert reports[2] is None, reports
    c.close()


def test_keyless_records_are_named_in_record_errors(sluice_factory, topic_name):
    """Goal: a batch with a keyless record on a compacted topic is refused whole, and the
    Produce response's record_errors (v8+) names exactly the keyless record, so the client
    blames it alone: kafka-python fails that record with InvalidRecordError and Kafka's
    per-record message, and its batch mates with "part of a batch which had one more more
    invalid records" (without record_errors all three get the top-level error).
    Method: kafka-python producer (retries off, one batch by linger), records keyed,
    keyless, keyed; their futures; watermarks show nothing stored."""
    from kafka.errors import InvalidRecordError, KafkaError as KpError

    from helpers import kp_producer
    b = sluice_factory(CLEANER_ARGS)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    p = kp_producer(b.bootstrap, retries=0, linger_ms=500)
    futures = [p.send(topic_name, key=k, value=b"v", partition=0) for k in (b"a", None, b"c")]
    p.flush(15)
    errors = [f.exception for f in futures]
    p.close()
    assert all(e is not None for e in errors), errors
    assert isinstance(errors[1], InvalidRecordError), errors
    assert "Compacted topic cannot accept message without key in topic partition" in str(errors[1])
    for e in (errors[0], errors[2]):
        assert type(e) is KpError and "part of a batch" in str(e), errors
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "w"})
    assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 0)
    c.close()


def test_a_restart_does_not_clean_again(sluice_factory, topic_name):
    """Goal: how far each partition was cleaned is persisted (cleaner-offset-checkpoint,
    written atomically after each pass), so a broker restarted after a SIGKILL finds
    nothing dirty and runs no pass, and the records read back the same.
    Method: 30 keys x 10 versions; wait until passes stop (everything but the active
    segment cleaned); kill -9; restart; /metrics shows no pass within 10 cleaner backoffs
    (without the checkpoint the whole cleanable range is dirty again and a pass runs)."""
    b = sluice_factory(CLEANER_ARGS, metrics=True)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    written = produce(b.bootstrap, topic_name, versions(30, 10))
    wait_until(lambda: metric(b, "sluice_log_cleaner_segments_cleaned") >= 1, 30, what="a pass")
    settled = {"passes": -1.0}

    def passes_stopped() -> bool:
        now = metric(b, "sluice_log_cleaner_passes")
        stopped, settled["passes"] = now == settled["passes"], now
        return stopped
    wait_until(passes_stopped, 30, interval=1.0, what="passes to stop")
    before = read_all(b.bootstrap, topic_name)
    assert len(before) < len(written)
    assert (b.data_dir / "cleaner-offset-checkpoint").exists()
    b.kill9()
    b.start(extra_args=[*CLEANER_ARGS, "--metrics-listen", "127.0.0.1:0"])
    time.sleep(2.0)
    assert metric(b, "sluice_log_cleaner_passes") == 0, "a restart cleaned again"
    assert read_all(b.bootstrap, topic_name) == before


def test_sigkill_during_cleaning_loses_nothing(sluice_factory, topic_name):
    """Goal: a SIGKILL in the middle of a cleaning pass (some segments swapped, others not)
    loses nothing: after a restart every key's newest record is at its offset and nothing
    appears that was not written there; cleaning then completes; the broker's peak memory
    stays bounded while cleaning.
    Method: ~1.2 MB over 100 keys written under cleanup.policy=delete, then switched to
    compact (IncrementalAlterConfigs) with the cleaner throttled by
    log.cleaner.io.max.bytes.per.second; kill -9 once /metrics shows a swapped segment but
    no finished pass; restart without the throttle; compare reads; read VmHWM."""
    # 150 kB/s makes the pass last about 10 s, so the window between its first swap and its
    # end survives a busy machine (at 400 kB/s, with another test file beside it, the pass
    # once ended before a scrape saw its first swap).
    slow = [*CLEANER_ARGS, "--override", "log.cleaner.io.max.bytes.per.second=150000"]
    b = sluice_factory(slow, metrics=True)
    # Written under the delete policy, then switched to compact: the first pass covers
    # everything, so it is long enough (throttled) to be killed in the middle.
    create_topic(b.bootstrap, topic_name, config={**TOPIC_CONFIG, "cleanup.policy": "delete"})
    written = produce(b.bootstrap, topic_name, versions(100, 12, size=800))
    assert CkAdmin(b.bootstrap).incremental_alter(topic_name, {"cleanup.policy": "compact"}) == 0
    wait_until(lambda: metric(b, "sluice_log_cleaner_segments_cleaned") >= 1, 60, interval=0.05,
               what="a swapped segment")
    assert metric(b, "sluice_log_cleaner_passes") == 0, "the pass is still running"
    b.kill9()
    b.start(extra_args=[*CLEANER_ARGS, "--metrics-listen", "127.0.0.1:0"])
    mid = read_all(b.bootstrap, topic_name)
    for offset, record in newest(written).items():
        assert mid.get(offset) == record, f"newest record at {offset} lost"
    for offset, record in mid.items():
        assert written[offset] == record, f"record at {offset} was not written there"
    final = wait_until(lambda: (lambda r: r if set(r) == set(newest(written)) else None)(
        read_all(b.bootstrap, topic_name)), 30, what="cleaning completes after the restart")
    assert final == newest(written)
    hwm = vm_kib(b.proc.pid, "VmHWM")
    print(f"broker VmHWM after cleaning: {hwm} KiB")
    assert hwm < VMHWM_KIB_MAX, hwm


def raw_batches(bootstrap: str, topic: str) -> list[kwire.BatchInfo]:
    """Every stored batch from offset 0 to the high watermark, as Fetch v4 returns them
    (read_uncommitted: control batches included)."""
    out, offset = [], 0
    while True:
        part = kwire.fetch_v4(bootstrap, topic, 0, offset)
        assert part.error_code == 0, part.error_code
        batches = [b for b in part.batches() if b.last_offset >= offset]
        if offset >= part.high_watermark or not batches:
            return out
        out += batches
        offset = batches[-1].last_offset + 1


def markers(bootstrap: str, topic: str) -> list[int]:
    """Offsets of the transaction markers (control batches with their record) in the log."""
    return [b.base_offset for b in raw_batches(bootstrap, topic)
            if b.attributes & 0x20 and b.record_count > 0]


def test_a_delete_horizon_outlives_a_restart(sluice_factory, topic_name):
    """Goal: the latest delete horizon of a partition is persisted with the cleaner
    checkpoint, so tombstones whose horizon passes after a restart go by themselves, with
    nothing new written (kept in memory only, they would wait for new data).
    Method: 10 keys x 3 versions, then tombstones for 5 keys; wait until a pass stamped them
    and passes stopped; SIGKILL; restart; wait past delete.retention.ms producing nothing;
    the tombstoned keys disappear from a read."""
    b = sluice_factory(CLEANER_ARGS, metrics=True)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    produce(b.bootstrap, topic_name, versions(10, 3))
    time.sleep(1.1)  # segment.ms: the next append rolls, so the tombstones sit in a sealed segment
    written = produce(b.bootstrap, topic_name, [(f"k{k:03d}", None) for k in range(5)])
    time.sleep(1.1)
    produce(b.bootstrap, topic_name, [("x", "y")])
    tombstones = set(written)
    wait_until(lambda: tombstones <= set(read_all(b.bootstrap, topic_name))
               and len(read_all(b.bootstrap, topic_name)) <= 11, 20, what="versions cleaned")
    settled = {"passes": -1.0}

    def passes_stopped() -> bool:
        now = metric(b, "sluice_log_cleaner_passes")
        stopped, settled["passes"] = now == settled["passes"], now
        return stopped
    wait_until(passes_stopped, 20, interval=1.0, what="passes to stop")
    stamped_by = time.monotonic()
    b.kill9()
    b.start(extra_args=[*CLEANER_ARGS, "--metrics-listen", "127.0.0.1:0"])
    assert tombstones <= set(read_all(b.bootstrap, topic_name)), "kept until the horizon"
    time.sleep(max(0.0, stamped_by + DELETE_RETENTION_MS / 1000 - time.monotonic()))
    final = wait_until(lambda: (lambda r: r if not tombstones & set(r) else None)(
        read_all(b.bootstrap, topic_name)), 15, what="tombstones removed after the restart")
    assert {k for k, _ in final.values()} == {f"k{k:03d}" for k in range(5, 10)} | {"x"}
    assert metric(b, "sluice_log_cleaner_passes") >= 1


def test_transactions_in_a_compacted_topic(sluice_factory, topic_name):
    """Goal: the cleaner treats transactions as Kafka's does: after the passes, read_committed
    and read_uncommitted readers both see exactly the newest committed value per key at its
    original offset (aborted values are gone and never hid an older committed one); the
    ABORT markers, whose data is gone, are removed after delete.retention.ms while the
    COMMIT markers of transactions with surviving data stay; the transactional producer
    keeps working afterwards.
    Method: confluent-kafka transactional producer: commit 20 keys, abort new values for
    them, commit 10, abort 10, commit 5; fillers from a plain producer every second roll
    segments and make passes run; markers are read with raw Fetch v4 requests."""
    b = sluice_factory(CLEANER_ARGS, metrics=True)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    p = ck_producer(b.bootstrap, **{"transactional.id": f"t-{topic_name}"[:200],
                                    "enable.idempotence": True, "linger.ms": 2})
    p.init_transactions(30)
    delivered: dict[int, tuple[str, str]] = {}

    def report(err, msg):
        assert err is None, err
        delivered[msg.offset()] = (msg.key().decode(), msg.value().decode())

    plan = [("c1", range(20), True), ("a2", range(20), False), ("c3", range(10), True),
            ("a4", range(10, 20), False), ("c5", range(5), True)]
    for tag, keys, commit in plan:
        p.begin_transaction()
        for k in keys:
            p.produce(topic_name, key=f"k{k:03d}", value=f"{tag}-{k:03d}-" + "x" * 40,
                      partition=0, on_delivery=report)
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    committed = {o: kv for o, kv in delivered.items() if not kv[1].startswith("a")}
    expected = newest(committed)
    assert {v[:2] for _, v in expected.values()} == {"c1", "c3", "c5"}
    before = markers(b.bootstrap, topic_name)
    assert len(before) == 5, before
    kept_markers = [before[0], before[2], before[4]]  # the COMMITs of data that survives

    plain = ck_producer(b.bootstrap)

    def cleaned_and_markers_gone():
        plain.produce(topic_name, key="filler", value="f", partition=0)
        plain.flush(10)
        return markers(b.bootstrap, topic_name) == kept_markers
    wait_until(cleaned_and_markers_gone, 40, interval=1.0, what="ABORT markers removed")
    for isolation in ("read_committed", "read_uncommitted"):
        seen = read_all(b.bootstrap, topic_name, isolation)
        records = {o: kv for o, kv in seen.items() if kv[0] != "filler"}
        assert records == expected, isolation
    assert metric(b, "sluice_log_cleaner_records_removed") >= 45

    p.begin_transaction()
    p.produce(topic_name, key="k000", value="c6", partition=0, on_delivery=report)
    p.flush(30)
    p.commit_transaction(30)
    after = read_all(b.bootstrap, topic_name, "read_committed")
    assert [after[o][1] for o in sorted(after) if after[o][0] == "k000"][-1] == "c6"


def test_compressed_batches_from_a_real_client_are_cleaned(sluice_factory, topic_name):
    """Goal: batches confluent-kafka (librdkafka) compressed with gzip, snappy, lz4 and zstd
    are decompressed, filtered and recompressed with their own codec by the cleaner: a read
    from the beginning sees exactly the newest record per key at its original offset, and
    the surviving batches still carry every codec.
    Method: four producers, one per codec, each writing 2 versions of 20 keys (batches of up
    to 8 records), the keys of one codec overlapping half of the next one's, so many
    batches lose some records but not all; wait for the read to match."""
    b = sluice_factory(CLEANER_ARGS, metrics=True)
    create_topic(b.bootstrap, topic_name, config=TOPIC_CONFIG)
    codecs = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    written = {}
    for i, codec in enumerate(codecs):
        items = [(f"k{10 * i + k:03d}", f"{codec}-{r}-" + "z" * 60) for r in range(2) for k in range(20)]
        written.update(produce(b.bootstrap, topic_name, items, **{"compression.type": codec}))
    expected = newest(written)
    after = wait_until(lambda: (lambda r: r if set(r) == set(expected) else None)(read_all(b.bootstrap, topic_name)),
                       30, what="only the newest record per key")
    assert after == expected
    surviving = {bt.attributes & 7 for bt in raw_batches(b.bootstrap, topic_name) if bt.record_count > 0}
    assert surviving >= set(codecs.values()), surviving
    assert metric(b, "sluice_log_cleaner_records_removed") >= len(written) - len(expected)


def test_produce_is_not_held_up_by_a_throttled_pass(sluice_factory, topic_name):
    """Goal: the cleaner never blocks produce: while a pass over the partition runs
    (throttled by log.cleaner.io.max.bytes.per.second to take about 10 s), a fixed-rate
    producer to that same partition gets its acks as quickly as ever.
    Method: ~450 KB written under cleanup.policy=delete, then switched to compact, so one
    pass covers it all at 100 KB/s; once /metrics shows the pass reading, 50 msg/s for 4 s
    with linger.ms=0, each record's ack latency from its delivery report; /metrics shows no
    finished pass afterwards (so every ack came during it). A produce waiting for the pass
    would wait seconds; the bound is generous for a loaded machine."""
    slow = [*CLEANER_ARGS, "--override", "log.cleaner.io.max.bytes.per.second=100000"]
    b = sluice_factory(slow, metrics=True)
    create_topic(b.bootstrap, topic_name,
                 config={**TOPIC_CONFIG, "cleanup.policy": "delete", "internal.segment.bytes": 16384})
    produce(b.bootstrap, topic_name, versions(100, 10, size=400))
    assert CkAdmin(b.bootstrap).incremental_alter(topic_name, {"cleanup.policy": "compact"}) == 0
    wait_until(lambda: metric(b, "sluice_log_cleaner_read_bytes") > 0, 30, interval=0.05,
               what="the pass to start")
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": False})
    latencies, errors = [], []

    def report(err, msg, sent=0.0):
        if err is not None:
            errors.append(err)
        else:
            latencies.append(time.monotonic() - sent)

    rate, seconds = 50, 4
    start = time.monotonic()
    for i in range(rate * seconds):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        sent = time.monotonic()
        p.produce(topic_name, key=f"live-{i % 10}", value="x" * 100,
                  on_delivery=lambda err, msg, sent=sent: report(err, msg, sent))
        p.poll(0)
    assert p.flush(15) == 0
    assert not errors, errors
    assert metric(b, "sluice_log_cleaner_passes") == 0, "the pass lasted the whole run"
    latencies.sort()
    p50, p99, worst = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)], latencies[-1]
    print(f"acks during a throttled pass: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {worst * 1000:.1f} ms over {len(latencies)}")
    assert len(latencies) == rate * seconds
    assert p50 < 0.5 and worst < 2.5, (p50, p99, worst)
