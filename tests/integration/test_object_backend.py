"""The object backend (storage.backend=object, docs/object-storage.md) against the real stores:
PostgreSQL and SeaweedFS's S3 server, started by scripts/stores.sh (the test command starts
them and exports their addresses; run alone, this file starts its own on other ports).
Each test gets a database and an object prefix of its own."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import BrokerStartError
from helpers import ConfluentFamily, Msg, ck_producer, create_topic

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The stores' addresses: the test command's, or a pair started for this module."""
    if os.environ.get("SLUICE_TEST_PG_URL"):
        yield dict(os.environ)
        return
    d = tmp_path_factory.mktemp("stores")
    out = subprocess.run([str(ROOT / "scripts/stores.sh"), "start", str(d), "15532", "18433"],
                         check=True, capture_output=True, text=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        k, _, v = line.removeprefix("export ").partition("=")
        env[k] = v.strip('"')
    yield env
    subprocess.run([str(ROOT / "scripts/stores.sh"), "stop", str(d)], check=False)


def psql(url: str, sql: str) -> str:
    return subprocess.run(["psql", url, "-qtAX", "-c", sql], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def backend(stores):
    """`--override` flags of an object-backed broker on a fresh database and prefix, and the
    database's URL."""
    name = f"sluice_it_{uuid.uuid4().hex[:12]}"
    base = stores["SLUICE_TEST_PG_URL"]
    psql(base, f"CREATE DATABASE {name}")
    url = base.rsplit("/", 1)[0] + "/" + name
    prefix = f"it-{uuid.uuid4().hex[:12]}"
    args = ["--override", "storage.backend=object",
            "--override", f"object.store.url=s3://{stores['SLUICE_TEST_S3_BUCKET']}/{prefix}",
            "--override", f"object.store.endpoint={stores['SLUICE_TEST_S3_ENDPOINT']}",
            "--override", f"metadata.store.url={url}"]
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ["AWS_ACCESS_KEY_ID"] = stores["AWS_ACCESS_KEY_ID"]
    os.environ["AWS_SECRET_ACCESS_KEY"] = stores["AWS_SECRET_ACCESS_KEY"]
    yield args, url
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_acknowledged_records_are_rounds_in_the_stores(sluice_factory, backend):
    """Goal: on the object backend, acks=all records come back exactly as produced, and what
    answered them is in PostgreSQL: each partition's committed log end equals its high
    watermark, and records were grouped into rounds (fewer rounds than produce requests),
    each naming its object.
    Method: an idempotent confluent-kafka producer writes 600 keyed records to 3 partitions;
    consume them all; read sluice_partitions and sluice_rounds with psql."""
    args, url = backend
    b = sluice_factory(args)
    create_topic(b.bootstrap, "orders", partitions=3)
    c = ConfluentFamily(b.bootstrap)
    sent = {}
    for p in range(3):
        msgs = [Msg(f"v{p}-{i}".encode() * 20, key=f"k{i}".encode()) for i in range(200)]
        assert c.produce("orders", msgs, partition=p, **{"enable.idempotence": True}) == list(range(200))
        sent[p] = [m.value for m in msgs]
    for p in range(3):
        got = c.consume("orders", p, 0, 200)
        assert [r.value for r in got] == sent[p]
    ends = psql(url, "SELECT sum(log_end_offset), count(*) FROM sluice_partitions")
    total, partitions = (int(x) for x in ends.split("|"))
    # The topic's 600, plus whatever the internal partitions wrote.
    assert total >= 600 and partitions >= 3, ends
    orders_total = 0
    for p in range(3):
        assert c.watermarks("orders", p) == (0, 200)
    rounds, keys = (int(x) for x in psql(url, "SELECT count(*), count(DISTINCT object_key) FROM sluice_rounds").split("|"))
    assert 1 <= rounds == keys, (rounds, keys)
    entries = int(psql(url, "SELECT coalesce(sum(last_offset - base_offset + 1), 0) FROM sluice_entries"))
    assert entries == total, (entries, total)
    del orders_total


def test_sigkill_under_acks_all_load_loses_nothing_acknowledged(sluice_factory, backend):
    """Goal: a broker SIGKILLed while idempotent acks=all producers are writing comes back on
    the same data dir with every acknowledged record exactly once, in order, and the store's
    log ends equal to the high watermarks.
    Method: a producer thread writes numbered records (callbacks record what was
    acknowledged); SIGKILL after ~1.5 s; restart; consume the partition from 0 and check."""
    args, url = backend
    b = sluice_factory(args)
    create_topic(b.bootstrap, "load", partitions=1)
    acked: list[int] = []
    stop = threading.Event()

    def produce():
        p = ck_producer(b.bootstrap, **{"enable.idempotence": True, "acks": "all", "linger.ms": 2,
                                        "message.timeout.ms": 60000})

        def cb(err, msg):
            if err is None:
                acked.append(int(msg.value()))
        i = 0
        while not stop.is_set():
            try:
                p.produce("load", str(i).encode(), partition=0, on_delivery=cb)
                i += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if i % 200 == 0:
                time.sleep(0.005)
        p.flush(60)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    deadline = time.time() + 20
    while len(acked) < 2000 and time.time() < deadline:
        time.sleep(0.05)
    assert len(acked) >= 2000, f"only {len(acked)} acknowledged before the kill"
    b.kill9()
    before_kill = set(acked)
    b.start()
    stop.set()
    t.join(90)
    assert not t.is_alive()
    c = ConfluentFamily(b.bootstrap)
    lo, hi = c.watermarks("load", 0)
    got = [int(r.value) for r in c.consume("load", 0, lo, hi - lo, timeout=30)]
    assert len(got) == len(set(got)), "an idempotent producer's record was written twice"
    assert got == sorted(got), "records out of order"
    missing = before_kill - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert set(acked) <= set(got), "a record acknowledged after the restart is missing"
    end = int(psql(url, "SELECT log_end_offset FROM sluice_partitions p JOIN sluice_entries e USING (topic_id, partition) "
                        "GROUP BY p.topic_id, p.partition, p.log_end_offset ORDER BY count(*) DESC LIMIT 1"))
    assert end == hi, (end, hi)


def test_unusable_stores_and_foreign_data_dirs_are_refused_at_start(sluice_factory, backend, tmp_path):
    """Goal: a missing bucket, an unreachable PostgreSQL, or a data dir written by the local
    backend stop the start with a message naming the setting; the broker never serves.
    Method: start brokers with each fault and read their stderr."""
    args, url = backend
    bad_bucket = [a.replace("object.store.url=s3://", "object.store.url=s3://no-such-bucket-x") if "object.store.url" in a else a
                  for a in args]
    with pytest.raises(BrokerStartError):
        sluice_factory(bad_bucket, name="nobucket")
    bad_pg = [a if "metadata.store.url" not in a else "metadata.store.url=postgresql://sluice@127.0.0.1:9/none"
              for a in args]
    with pytest.raises(BrokerStartError):
        sluice_factory(bad_pg, name="nopg")
    local = sluice_factory([], name="local")
    create_topic(local.bootstrap, "before", partitions=1)
    local.stop()
    local.extra_args = args
    with pytest.raises(BrokerStartError):
        local.start()
    logs = {n: (tmp_path / n / f"{n}-stderr.log").read_text() for n in ("nobucket", "nopg", "local")}
    assert "object.store.url" in logs["nobucket"], logs["nobucket"][-2000:]
    assert "metadata.store.url" in logs["nopg"], logs["nopg"][-2000:]
    assert "local backend" in logs["local"], logs["local"][-2000:]
