"""franz-go (kgo + kadm), the third client family, through `franz-it` (tests/integration/franz):
a small Go program whose subcommands each print one JSON object.

- Lag: a group commits 4 of 10 records on each of 3 partitions; kadm's Lag (DescribeGroups +
  OffsetFetch + ListOffsets) must see committed 4, end 10, lag 6 each, 18 in all, and 0 once
  a live member has consumed and committed the rest. DescribeGroups must show that member with
  the subscription and assignment kadm (and librdkafka) decode from the member bytes.
- franz-go's default producer is idempotent (acks=all): 500 records land exactly once, in
  order, under a real producer id; a second producer gets a different id.
- Two franz-go group members split 6 partitions (disjoint, covering all) and together receive
  every record exactly once.
- The idempotent producer keeps going through a broker SIGKILL and restart: every value is in
  the log once, in order, at the offset the producer was told.
- GroupTransactSession (EOS, KIP-447) over two members with a rebalance mid-stream and
  deliberate aborts: every input record is in the output exactly once under read_committed.

The binary comes from FRANZ_IT_BIN (scripts/test-integration.sh builds it); without that
variable this module builds it into target/franz-it with `go build`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from conftest import REPO_ROOT
from helpers import ck_admin, ck_consumer, ck_poll, ck_producer, create_topic, wait_until

FRANZ_SRC = Path(__file__).resolve().parent / "franz"
# Fast rebalances for tests: no initial delay, short sessions allowed.
GROUP_ARGS = ["--override", "group.initial.rebalance.delay.ms=0",
              "--override", "group.min.session.timeout.ms=1000"]


# ---------------------------------------------------------------------------
# Running franz-it
# ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def franz_bin() -> Path:
    env = os.environ.get("FRANZ_IT_BIN")
    if env:
        path = Path(env)
        assert path.is_file() and os.access(path, os.X_OK), f"FRANZ_IT_BIN={env} is not an executable file"
        return path
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        pytest.fail("the Go toolchain (go) is needed to build tests/integration/franz; install it or set "
                    "FRANZ_IT_BIN to a built franz-it", pytrace=False)
    path = REPO_ROOT / "target" / "franz-it"
    path.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([go, "build", "-mod=readonly", "-buildvcs=false", "-o", str(path), "."], cwd=FRANZ_SRC,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"go build of tests/integration/franz failed:\n{r.stdout}\n{r.stderr}"
    return path


class Franz:
    """Runs franz-it subcommands against one broker; background runs are killed at teardown."""

    def __init__(self, binary: Path, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self.background: list[subprocess.Popen] = []
        self.n = 0

    def run(self, cmd: str, bootstrap: str, *args: str, timeout: float = 60.0, check: bool = True) -> dict:
        argv = [str(self.binary), cmd, "--brokers", bootstrap, *args]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        out = _parse(argv, r.returncode, r.stdout, r.stderr)
        if check:
            assert r.returncode == 0, f"{' '.join(argv)} exited {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
        return out

    def start(self, cmd: str, bootstrap: str, *args: str) -> "Background":
        self.n += 1
        argv = [str(self.binary), cmd, "--brokers", bootstrap, *args]
        out_path = self.workdir / f"franz-{self.n}-{cmd}.out"
        err_path = self.workdir / f"franz-{self.n}-{cmd}.err"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.background.append(p)
        return Background(argv, p, out_path, err_path)

    def close(self) -> None:
        for p in self.background:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


class Background:
    def __init__(self, argv, proc, out_path: Path, err_path: Path):
        self.argv, self.proc, self.out_path, self.err_path = argv, proc, out_path, err_path

    def running(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def finish(self, timeout: float = 60.0, sig: int | None = None) -> dict:
        """Optionally signals, waits, and returns the JSON output; asserts exit code 0."""
        if sig is not None and self.running():
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"{' '.join(self.argv)} still running after {timeout}s\nstderr: {self.stderr()[-3000:]}")
        stdout = self.out_path.read_text(errors="replace")
        out = _parse(self.argv, code, stdout, self.stderr())
        assert code == 0, f"{' '.join(self.argv)} exited {code}\nstdout: {stdout[:3000]}\nstderr: {self.stderr()[-3000:]}"
        return out


def _parse(argv, code, stdout: str, stderr: str) -> dict:
    lines = stdout.splitlines()
    assert len(lines) == 1, (f"{' '.join(argv)} (exit {code}) printed {len(lines)} stdout lines, not one JSON object\n"
                             f"stdout: {stdout[:3000]}\nstderr: {stderr[-3000:]}")
    return json.loads(lines[0])


@pytest.fixture
def franz(franz_bin, tmp_path):
    f = Franz(franz_bin, tmp_path)
    yield f
    f.close()


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------
def seq(i: int) -> str:
    return f"seq-{i:06d}"


def brief(out: dict) -> dict:
    """A produce output without its per-record offsets, for assertion messages."""
    return {k: v for k, v in out.items() if k != "partitions"}


def spread_value(partition: int, offset: int, partitions: int) -> str:
    """The value `produce --spread K` puts at (partition, offset): record i goes to i % K."""
    return seq(offset * partitions + partition)


def produce_spread(franz: Franz, bootstrap: str, topic: str, count: int, partitions: int) -> dict:
    out = franz.run("produce", bootstrap, "--topic", topic, "--count", str(count), "--spread", str(partitions))
    assert out["acked"] == count and out["error_count"] == 0, brief(out)
    assert out["producer_id"] >= 0, f"records carry no producer id, so the producer was not idempotent: {brief(out)}"
    per = count // partitions
    assert {p: r["offsets"] for p, r in out["partitions"].items()} == \
        {str(p): list(range(per)) for p in range(partitions)}, out["partitions"]
    return out


def consume_values(bootstrap: str, topic: str, partition: int = 0, timeout: float = 30.0) -> list[bytes]:
    """Every value in the partition, up to its current high watermark (so duplicates show)."""
    end = high_watermark(bootstrap, topic, partition)
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        msgs = ck_poll(c, end, timeout=timeout)
    finally:
        c.close()
    assert [m.offset() for m in msgs] == list(range(end)), f"could not read offsets 0..{end - 1} back"
    return [m.value() for m in msgs]


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    c = ck_consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        c.close()


def librdkafka_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as librdkafka's OffsetFetch sees them (without joining)."""
    c = ck_consumer(bootstrap, **{"group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def librdkafka_assignment(bootstrap: str, group: str) -> dict[str, set[tuple[str, int]]]:
    """client id -> assigned partitions, as librdkafka's DescribeConsumerGroups decodes them."""
    admin = ck_admin(bootstrap)  # kept alive until the future resolves
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    return {m.client_id: {(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])}
            for m in desc.members}


def by_partition(lag: dict) -> dict[int, dict]:
    return {p["partition"]: p for p in lag["partitions"]}


# ---------------------------------------------------------------------------
# 1. kadm lag and DescribeGroups
# ---------------------------------------------------------------------------
def test_kadm_lag_and_describe(sluice_factory, topic_name, franz):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    produce_spread(franz, bs, topic_name, 30, 3)
    group = f"g-franz-{uuid.uuid4().hex[:8]}"

    # A first member takes exactly 4 records from each partition, commits them, and leaves.
    first = franz.run("consume-group", bs, "--group", group, "--topic", topic_name, "--count", "12",
                      "--max-per-partition", "4", "--commit", "--client-id", "franz-lag-a")
    assert first["stopped_by"] == "count" and first["received"] == 12, first
    assert first["ever_assigned"] == [0, 1, 2], first
    assert sorted((r["partition"], r["offset"], r["value"]) for r in first["records"]) == \
        [(p, o, spread_value(p, o, 3)) for p in range(3) for o in range(4)]
    assert first["committed"] == {"0": 4, "1": 4, "2": 4}, first
    assert librdkafka_committed(bs, group, topic_name, 3) == {0: 4, 1: 4, 2: 4}

    lag = franz.run("lag", bs, "--group", group)
    assert lag["state"] == "Empty" and lag["members"] == [], lag
    parts = by_partition(lag)
    assert sorted(parts) == [0, 1, 2], lag
    for p, row in parts.items():
        assert (row["topic"], row["committed"], row["start"], row["end"], row["lag"]) == \
            (topic_name, 4, 0, 10, 6), row
        assert row["member_id"] == "" and row["client_id"] == "", f"no member holds {p} in an Empty group: {row}"
    assert lag["total_lag"] == 18 and lag["topic_lag"] == {topic_name: 18}, lag

    desc = franz.run("describe", bs, "--group", group)
    assert (desc["state"], desc["protocol_type"], desc["members"]) == ("Empty", "consumer", []), desc

    # A second member resumes at the committed offsets, takes the other 18, and stays.
    second = franz.start("consume-group", bs, "--group", group, "--topic", topic_name, "--count", "18",
                         "--commit", "--linger", "--client-id", "franz-lag-b")

    def caught_up():
        lg = franz.run("lag", bs, "--group", group)
        return lg if lg["state"] == "Stable" and lg["total_lag"] == 0 and len(lg["members"]) == 1 else None

    lag = wait_until(caught_up, 30, interval=0.2, what="the second member committing everything")
    member = lag["members"][0]
    assert member["client_id"] == "franz-lag-b", lag
    for p, row in by_partition(lag).items():
        assert (row["committed"], row["end"], row["lag"]) == (10, 10, 0), row
        assert (row["member_id"], row["client_id"]) == (member["member_id"], "franz-lag-b"), row
    assert sorted(by_partition(lag)) == [0, 1, 2]

    desc = franz.run("describe", bs, "--group", group)
    assert (desc["state"], desc["protocol_type"], desc["protocol"]) == ("Stable", "consumer", "cooperative-sticky"), desc
    assert desc["coordinator"] >= 0
    [m] = desc["members"]
    assert m["client_id"] == "franz-lag-b" and m["member_id"] == member["member_id"], m
    assert m["client_host"], m
    # What kadm decoded from the JoinGroup metadata and SyncGroup assignment the broker kept.
    assert m["join"] is not None and m["join"]["topics"] == [topic_name], m
    assert m["assigned"] == {topic_name: [0, 1, 2]}, m
    assert m["metadata_bytes"] > 0 and m["assignment_bytes"] > 0 and "decode_error" not in m, m
    # librdkafka decodes the same assignment bytes independently.
    assert librdkafka_assignment(bs, group) == {"franz-lag-b": {(topic_name, p) for p in range(3)}}

    out = second.finish(timeout=30, sig=signal.SIGTERM)
    assert out["stopped_by"] == "count" and out["member_id"] == member["member_id"], out
    assert sorted((r["partition"], r["offset"], r["value"]) for r in out["records"]) == \
        [(p, o, spread_value(p, o, 3)) for p in range(3) for o in range(4, 10)]
    assert out["committed"] == {"0": 10, "1": 10, "2": 10}, out
    assert sorted(first["values"] + out["values"]) == [seq(i) for i in range(30)]

    # The member left: the group is Empty again and its offsets stay.
    desc = franz.run("describe", bs, "--group", group)
    assert (desc["state"], desc["members"]) == ("Empty", []), desc
    lag = franz.run("lag", bs, "--group", group)
    assert lag["total_lag"] == 0 and [r["committed"] for r in lag["partitions"]] == [10, 10, 10], lag


# ---------------------------------------------------------------------------
# 2. Idempotent producer (franz-go's default)
# ---------------------------------------------------------------------------
def test_idempotent_producer_exactly_once_in_order(broker, topic_name, franz):
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    a = franz.run("produce", bs, "--topic", topic_name, "--count", "500", "--partition", "0")
    assert a["acked"] == 500 and a["error_count"] == 0 and a["errors"] == [], brief(a)
    assert a["producer_id"] >= 0, f"no producer id: InitProducerId was not used: {brief(a)}"
    assert a["producer_epochs"] == [0], brief(a)
    assert a["partitions"]["0"]["offsets"] == list(range(500)), "offsets not 0..499 in produce order"
    assert high_watermark(bs, topic_name) == 500
    got = consume_values(bs, topic_name)
    assert got == [seq(i).encode() for i in range(500)], f"{len(got)} values, {len(set(got))} distinct"

    # A second producer gets its own id, and its sequences start over without clashing.
    b = franz.run("produce", bs, "--topic", topic_name, "--count", "100", "--partition", "0", "--start", "500")
    assert b["acked"] == 100 and b["error_count"] == 0, brief(b)
    assert b["producer_id"] >= 0 and b["producer_id"] != a["producer_id"], (a["producer_id"], b["producer_id"])
    assert b["partitions"]["0"]["offsets"] == list(range(500, 600))
    assert high_watermark(bs, topic_name) == 600
    assert consume_values(bs, topic_name) == [seq(i).encode() for i in range(600)]


# ---------------------------------------------------------------------------
# 3. Two franz-go group members
# ---------------------------------------------------------------------------
def test_two_franz_members_split_partitions(sluice_factory, topic_name, franz):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    partitions = 6
    create_topic(bs, topic_name, partitions)
    group = f"g-franz-{uuid.uuid4().hex[:8]}"
    total = 60
    members = [franz.start("consume-group", bs, "--group", group, "--topic", topic_name, "--count", str(total),
                           "--commit", "--client-id", name)
               for name in ("franz-m1", "franz-m2")]

    def settled():
        d = franz.run("describe", bs, "--group", group)
        if d["state"] != "Stable" or len(d["members"]) != 2:
            return None
        sets = [set(m["assigned"].get(topic_name, [])) for m in d["members"]]
        if not all(sets) or sum(len(s) for s in sets) != partitions or set().union(*sets) != set(range(partitions)):
            return None
        return d

    desc = wait_until(settled, 40, interval=0.2, what="two members splitting 6 partitions")
    broker_view = {m["client_id"]: set(m["assigned"][topic_name]) for m in desc["members"]}
    assert set(broker_view) == {"franz-m1", "franz-m2"}, desc
    assert all("decode_error" not in m for m in desc["members"]), desc
    for m in members:
        assert m.running(), f"a member exited early: {m.stderr()[-2000:]}"

    produce_spread(franz, bs, topic_name, total, partitions)

    def all_committed():
        lg = franz.run("lag", bs, "--group", group)
        rows = by_partition(lg)
        ok = sorted(rows) == list(range(partitions)) and all(r["committed"] == 10 for r in rows.values())
        return lg if ok and lg["total_lag"] == 0 else None

    lag = wait_until(all_committed, 30, interval=0.2, what="the group committing all 60 records")
    holders = {r["partition"]: r["client_id"] for r in lag["partitions"]}
    assert {p: c for p, c in holders.items()} == \
        {p: c for c, ps in broker_view.items() for p in ps}, (holders, broker_view)

    outs = {m.argv[m.argv.index("--client-id") + 1]: m.finish(timeout=30, sig=signal.SIGTERM) for m in members}
    a, b = outs["franz-m1"], outs["franz-m2"]
    for name, o in outs.items():
        assert o["stopped_by"] == "signal", o
        assert set(o["assigned"]) == broker_view[name], (name, o["assigned"], broker_view)
        assert {r["partition"] for r in o["records"]} <= set(o["assigned"]), (name, o["records"][:5])
        assert o["received"] == 10 * len(o["assigned"]), (name, o["received"], o["assigned"])
        assert o["committed"] == {str(p): 10 for p in o["assigned"]}, (name, o["committed"])
    assert not set(a["assigned"]) & set(b["assigned"]), (a["assigned"], b["assigned"])
    assert set(a["assigned"]) | set(b["assigned"]) == set(range(partitions))
    records = sorted((r["partition"], r["offset"], r["value"]) for o in outs.values() for r in o["records"])
    assert records == sorted((p, o, spread_value(p, o, partitions))
                             for p in range(partitions) for o in range(total // partitions)), \
        f"{len(records)} records received, {len(set(records))} distinct"


# ---------------------------------------------------------------------------
# 4. Idempotent producer through a broker SIGKILL
# ---------------------------------------------------------------------------
def test_idempotent_producer_survives_sigkill(broker, topic_name, franz):
    seed = int(os.environ.get("SLUICE_CRASH_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    print(f"seed {seed} (replay with SLUICE_CRASH_SEED={seed})")
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    n = 3000
    producer = franz.start("produce", bs, "--topic", topic_name, "--count", str(n), "--partition", "0",
                           "--interval", "300us", "--timeout", "90s")
    # Kill once the stream is well under way, at a random point.
    wait_until(lambda: high_watermark(bs, topic_name) >= 200 or not producer.running(), 30, interval=0.05,
               what="the first 200 records")
    time.sleep(rnd.random() * 0.4)
    assert producer.running(), f"seed {seed}: the producer finished before the kill; the test proved nothing"
    broker.kill9()
    time.sleep(0.2 + rnd.random() * 0.3)
    broker.start()
    out = producer.finish(timeout=90)
    assert out["acked"] == n and out["error_count"] == 0, f"seed {seed}: {out['errors']}"
    assert out["disconnects"] + out["connect_errors"] >= 1, f"seed {seed}: the producer never saw the kill: {brief(out)}"
    assert out["producer_id"] >= 0, f"seed {seed}: not idempotent: {brief(out)}"
    got = consume_values(bs, topic_name, timeout=60)
    want = [seq(i).encode() for i in range(n)]
    offsets = out["partitions"]["0"]["offsets"]
    first_bad = next((i for i, o in enumerate(offsets) if o != i), None)
    # The log first: every value once, in order.
    assert got == want, (f"seed {seed}: {len(got)} values, {len(got) - len(set(got))} duplicates, "
                         f"{len(set(want) - set(got))} missing, first difference at "
                         f"{next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None)}; "
                         f"acked offsets first differ from 0..{n - 1} at record {first_bad}: "
                         f"{offsets[max(0, (first_bad or 0) - 3):(first_bad or 0) + 3]}")
    # Then what the producer was told: a retried batch gets its original offsets back.
    assert first_bad is None, (f"seed {seed}: acked offsets are not 0..{n - 1} in order; from record "
                               f"{first_bad}: {offsets[first_bad:first_bad + 8]}")
    assert high_watermark(bs, topic_name) == n


def produce_values(bootstrap: str, topic: str, start: int, n: int, partitions: int) -> None:
    """Values v-<i> for i in start..start+n-1, record i to partition i % partitions."""
    p = ck_producer(bootstrap, **{"enable.idempotence": True})
    for i in range(start, start + n):
        p.produce(topic, value=f"v-{i:05d}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def read_committed_all(bootstrap: str, topic: str, idle_s: float = 2.0) -> list[bytes]:
    c = ck_consumer(bootstrap, **{"isolation.level": "read_committed"})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            for m in c.consume(num_messages=1000, timeout=0.25):
                if m.error() is None:
                    out.append(m.value())
                    last = time.monotonic()
    finally:
        c.close()
    return out


def test_group_transact_session_exactly_once_across_a_rebalance(sluice_factory, topic_name, franz):
    """Goal: franz-go's GroupTransactSession (consume-transform-produce, TxnOffsetCommit
    with KIP-447 member checks, read_committed, require_stable) over a two-member group:
    every input record reaches the output exactly once under read_committed, the aborted
    transactions (every 3rd of member A's on purpose, and any the session aborts for the
    rebalance) leave nothing visible and move no offset, and the group's committed offsets
    end at the input's end.
    Method: 3 partitions; 90 records; member A starts; once the group committed something,
    member B joins (a rebalance mid-stream) and 210 more records arrive; wait until the
    group committed 100 on each partition; SIGTERM both; read the output."""
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    inp, out = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, inp, 3)
    create_topic(bs, out)
    group = f"g-eos-{uuid.uuid4().hex[:8]}"

    def member(name: str, *extra: str):
        return franz.start("transact", bs, "--group", group, "--topic", inp, "--out", out,
                           "--transactional-id", f"{group}-{name}", "--client-id", name, *extra)

    produce_values(bs, inp, 0, 90, 3)
    a = member("a", "--abort-every", "3")
    wait_until(lambda: sum(max(o, 0) for o in librdkafka_committed(bs, group, inp, 3).values()) > 0,
               timeout=60, what="member a's first committed transaction")
    b = member("b")
    produce_values(bs, inp, 90, 90, 3)
    time.sleep(1.0)
    produce_values(bs, inp, 180, 120, 3)
    wait_until(lambda: librdkafka_committed(bs, group, inp, 3) == {0: 100, 1: 100, 2: 100},
               timeout=90, what="the group's offsets at the input's end")
    ra = a.finish(timeout=60, sig=signal.SIGTERM)
    rb = b.finish(timeout=60, sig=signal.SIGTERM)
    assert ra["aborted"] >= 1, ra
    assert ra["committed"] >= 1 and rb["committed"] >= 1, (ra, rb)
    got = read_committed_all(bs, out)
    expected = [f"out-v-{i:05d}".encode() for i in range(300)]
    assert len(got) == len(expected), (len(got), ra, rb)
    assert sorted(got) == expected
