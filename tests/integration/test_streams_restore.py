"""A Kafka Streams application with a state store (kafka-streams 4.4.0, RocksDB) restores from
its compacted changelog on Sluice (issue 13).

StreamsCount (tests/integration/java/src) counts records per key into the store "counts";
Streams creates the store's changelog topic with cleanup.policy=compact, and with small
segments (its "topic."-prefixed settings) Sluice's cleaner removes the older counts. After the
application's local state directory is deleted, a new instance must rebuild the store from
that cleaned changelog, gaps and all, and go on counting from the right numbers.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from confluent_kafka.admin import ConfigResource, ResourceType

from helpers import ck_admin, create_topic, wait_until
from java_client import JVM_FLAGS, classpath
from test_compaction import metric, produce, read_all

BROKER_ARGS = ["--retention-check-interval-ms", "200", "--override", "log.cleaner.backoff.ms=200",
               "--override", "sluice.internal.segment.bytes.enable=true"]
KEYS, ROUNDS = 10, 30
APP_ID = "sluice-count"
CHANGELOG = f"{APP_ID}-counts-changelog"
# The changelog's topic configs (Streams passes "topic."-prefixed settings to the internal
# topics it creates): small segments rolled every second, so the cleaner has sealed
# segments to clean while the test runs.
CHANGELOG_CONF = ["topic.internal.segment.bytes=1024", "topic.segment.ms=1000",
                  "topic.min.cleanable.dirty.ratio=0.01"]


def run_count(bootstrap: str, input_topic: str, state_dir, expect_total: int) -> dict:
    args = ["--bootstrap", bootstrap, "--application-id", APP_ID, "--input", input_topic,
            "--state-dir", str(state_dir), "--expect-total", str(expect_total),
            "--timeout-ms", "60000"]
    for c in CHANGELOG_CONF:
        args += ["--conf", c]
    r = subprocess.run(["java", *JVM_FLAGS, "-cp", classpath(), "StreamsCount", *args],
                       capture_output=True, text=True, timeout=120)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert r.returncode == 0 and lines, f"exit {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return json.loads(lines[-1])


def test_streams_state_store_restores_from_compacted_changelog(sluice_factory, topic_name, tmp_path):
    """Goal: the count store is restored from its cleaned changelog after the local state
    directory is deleted, with the right counts, and counting continues from them.
    Method: 10 keys x 30 records; run StreamsCount until the counts add up to 300; wait until
    the cleaner has cleaned the changelog to fewer records than were written; delete the
    state directory; produce one more record per key; a new instance must report that it
    restored records, and counts of exactly 31 per key (30 restored + 1 new; a store
    rebuilt from nothing would say 1)."""
    b = sluice_factory(BROKER_ARGS, metrics=True)
    create_topic(b.bootstrap, topic_name)
    state_dir = tmp_path / "streams-state"
    produce(b.bootstrap, topic_name, [(f"k{k}", f"r{r}") for r in range(ROUNDS) for k in range(KEYS)])

    first = run_count(b.bootstrap, topic_name, state_dir, KEYS * ROUNDS)
    assert first["counts"] == {f"k{k}": ROUNDS for k in range(KEYS)}, first
    assert first["restored"] == 0, first

    res = ConfigResource(ResourceType.TOPIC, CHANGELOG)
    admin = ck_admin(b.bootstrap)
    policy = admin.describe_configs([res])[res].result(timeout=10)["cleanup.policy"]
    assert policy.value == "compact"
    # Cleaned: of the 300 changelog updates, only the newest per key (and whatever sits in
    # the active segment) remain.
    wait_until(lambda: metric(b, "sluice_log_cleaner_records_removed") >= KEYS * ROUNDS // 2, 30,
               interval=0.2, what="the cleaner to remove older counts from the changelog")
    survivors = read_all(b.bootstrap, CHANGELOG)
    assert len(survivors) < KEYS * ROUNDS // 2, len(survivors)

    shutil.rmtree(state_dir)
    produce(b.bootstrap, topic_name, [(f"k{k}", "again") for k in range(KEYS)])
    second = run_count(b.bootstrap, topic_name, state_dir, KEYS * (ROUNDS + 1))
    assert second["counts"] == {f"k{k}": ROUNDS + 1 for k in range(KEYS)}, second
    assert 0 < second["restored"] <= len(survivors), (second, len(survivors))
    print(f"changelog: {KEYS * ROUNDS} updates written, {len(survivors)} after cleaning; "
          f"restored {second['restored']} records")
