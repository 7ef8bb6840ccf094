#!/usr/bin/env python3
"""Side-by-side broker comparison: Apache Kafka and Sluice, same clients, interleaved runs.

Run through `scripts/perf-compare.sh`, which builds Sluice, fetches Kafka and its tools, starts
both brokers and passes their addresses and pids here. Every scenario runs `--rounds` times on
each broker, alternating which broker goes first, so drift on this shared machine lands on both,
after `--warmup-rounds` unrecorded rounds of the same scenario on each broker: Kafka's JIT keeps
compiling (and charging its CPU to the broker) for minutes after start, and a cold Kafka costs
several times its warm CPU per MB, which would flatter Sluice.

Per run it records what the client saw (throughput, latency) and what the broker cost, read
from /proc of the broker process: CPU time (utime + stime) and bytes written to storage
(`write_bytes`, counted when pages are dirtied, so Kafka's unsynced writes count too). The
headline numbers are broker CPU ms per MB and disk bytes per byte produced, as ratios
Sluice / Kafka of the per-broker medians.

Scenarios (1 KiB records and 12 partitions unless named otherwise; acks=all everywhere):
  produce-defaults   Kafka's ProducerPerformance with the client's default batching
  produce-256k       linger.ms=5, batch.size=262144
  produce-100b       100 B records, linger.ms=5, batch.size=262144
  fetch-1p / fetch-12p   a backlog produced first (not measured), then ConsumerPerformance
                     reads it all; broker CPU is measured over the read only
  e2e                one record at a time through librdkafka (confluent-kafka): produce
                     (acks=all, linger 0), consume from an assigned partition, latency from
                     send to receipt in one process

Writeback: Kafka never fsyncs, so the kernel's flusher threads (kworkers) write its data back
and that CPU is not in Kafka's /proc/<pid>/stat; Sluice's fdatasync does the same writeback in its
own committer thread, where it is counted. So each produce run also ends with a `sync` and records
the CPU of the kernel's worker threads and of that `sync` over the run: "CPU + writeback" is the
broker's CPU plus that, the same work counted for both brokers.

Results go to stdout (a table per scenario and a summary) and, with --json, to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


@dataclass
class Broker:
    name: str
    bootstrap: str
    pid: int
    # The endpoint's client security settings (empty for PLAINTEXT): Java client keys for the
    # Java tools, librdkafka keys for the admin and e2e clients (scripts/tls_compare.py).
    java_props: dict = field(default_factory=dict)
    rdkafka_props: dict = field(default_factory=dict)

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def write_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
        return 0

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


@dataclass
class Run:
    scenario: str
    broker: str
    round: int
    mb: float = 0.0
    seconds: float = 0.0
    mb_per_s: float = 0.0
    broker_cpu_s: float = 0.0
    broker_write_bytes: int = 0
    writeback_cpu_s: float = float("nan")
    extra: dict = field(default_factory=dict)

    @property
    def cpu_ms_per_mb(self) -> float:
        return 1000 * self.broker_cpu_s / self.mb if self.mb else float("nan")

    @property
    def cpu_wb_ms_per_mb(self) -> float:
        return 1000 * (self.broker_cpu_s + self.writeback_cpu_s) / self.mb if self.mb else float("nan")

    @property
    def write_amplification(self) -> float:
        return self.broker_write_bytes / (self.mb * MIB) if self.mb else float("nan")


def kernel_workers_cpu() -> dict[int, int]:
    """Clock ticks used so far by each of the kernel's worker threads (kworker: writeback,
    among others), by pid."""
    ticks = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        if comm.startswith("kworker"):
            fields = stat.rsplit(")", 1)[1].split()
            ticks[int(d)] = int(fields[11]) + int(fields[12])
    return ticks


class Meter:
    """Broker CPU and write_bytes over a with-block; with `writeback`, also the kernel's
    worker threads' CPU over the block and a final `sync` (see the module comment)."""

    def __init__(self, broker: Broker, writeback: bool = False):
        self.broker = broker
        self.writeback = writeback
        self.writeback_cpu = float("nan")

    def __enter__(self):
        self.cpu0, self.wb0, self.t0 = self.broker.cpu_s(), self.broker.write_bytes(), time.monotonic()
        if self.writeback:
            self.kworkers0 = kernel_workers_cpu()
        return self

    def __exit__(self, *exc):
        self.cpu = self.broker.cpu_s() - self.cpu0
        self.written = self.broker.write_bytes() - self.wb0
        self.elapsed = time.monotonic() - self.t0
        if self.writeback:
            children0 = os.times()
            subprocess.run(["sync"], check=False)
            children1 = os.times()
            sync_s = (children1.children_user - children0.children_user
                      + children1.children_system - children0.children_system)
            after = kernel_workers_cpu()
            ticks = sum(t - self.kworkers0.get(pid, 0) for pid, t in after.items())
            self.writeback_cpu = max(0, ticks) / CLK_TCK + sync_s
        return False


def java(classpath: str, main: str, args: list[str], timeout_s: float) -> str:
    cmd = ["java", "-Xmx1g", "-cp", classpath, main] + args
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{main} failed ({proc.returncode}): {proc.stderr[-2000:]}{proc.stdout[-2000:]}")
    return proc.stdout


_ADMINS: dict = {}


def admin(b: Broker):
    """One admin client per endpoint, kept alive (a dropped client cancels its futures)."""
    from confluent_kafka.admin import AdminClient
    if b.bootstrap not in _ADMINS:
        _ADMINS[b.bootstrap] = AdminClient({"bootstrap.servers": b.bootstrap, **b.rdkafka_props})
    return _ADMINS[b.bootstrap]


def create_topic(b: Broker, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic
    futures = admin(b).create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
    futures[name].result(60)
    time.sleep(0.5)  # let metadata settle on both brokers alike


def delete_topic(b: Broker, name: str) -> None:
    try:
        admin(b).delete_topics([name], operation_timeout=30)[name].result(60)
    except Exception as e:  # noqa: BLE001 - cleanup only
        print(f"  (could not delete {name}: {e})", file=sys.stderr)


PRODUCE_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def producer_perf(cp: str, b: Broker, topic: str, records: int, size: int, props: dict) -> dict:
    prop_args = [f"{k}={v}" for k, v in {"bootstrap.servers": b.bootstrap, "acks": "all", **b.java_props, **props}.items()]
    out = java(cp, "org.apache.kafka.tools.ProducerPerformance",
               ["--topic", topic, "--num-records", str(records), "--record-size", str(size),
                "--throughput", "-1", "--producer-props", *prop_args], timeout_s=900)
    m = PRODUCE_RE.search(out.strip().splitlines()[-1]) if out.strip() else None
    if not m:
        raise RuntimeError(f"cannot parse ProducerPerformance output: {out[-500:]}")
    return {"records": int(m.group(1)), "mb_per_s_client": float(m.group(3)),
            "lat_avg_ms": float(m.group(4)), "lat_p50_ms": int(m.group(6)),
            "lat_p99_ms": int(m.group(8)), "lat_p999_ms": int(m.group(9))}


def run_produce(cp: str, b: Broker, scenario: str, rnd: int, mb: int, size: int, props: dict) -> Run:
    topic = f"perf-{scenario}-{uuid.uuid4().hex[:8]}"
    create_topic(b, topic, 12)
    records = mb * MIB // size
    subprocess.run(["sync"], check=False)  # start clean: no earlier run's dirty pages
    with Meter(b, writeback=True) as m:
        res = producer_perf(cp, b, topic, records, size, props)
    delete_topic(b, topic)
    data_mb = records * size / MIB
    return Run(scenario, b.name, rnd, mb=data_mb, seconds=m.elapsed, mb_per_s=res["mb_per_s_client"],
               broker_cpu_s=m.cpu, broker_write_bytes=m.written, writeback_cpu_s=m.writeback_cpu,
               extra=res)


def run_fetch(cp: str, b: Broker, scenario: str, rnd: int, mb: int, partitions: int) -> Run:
    topic = f"perf-{scenario}-{uuid.uuid4().hex[:8]}"
    create_topic(b, topic, partitions)
    size = 1024
    records = mb * MIB // size
    producer_perf(cp, b, topic, records, size, {"linger.ms": 5, "batch.size": 262144})
    time.sleep(1.0)
    config = []
    if b.java_props:
        path = Path(f"/tmp/perf-compare-{os.getpid()}-{b.name}.properties")
        path.write_text("".join(f"{k}={v}\n" for k, v in b.java_props.items()))
        config = ["--command-config", str(path)]
    with Meter(b) as m:
        out = java(cp, "org.apache.kafka.tools.ConsumerPerformance",
                   ["--bootstrap-server", b.bootstrap, "--topic", topic, "--messages", str(records),
                    "--group", f"perf-{uuid.uuid4().hex[:8]}", "--timeout", "60000", *config],
                   timeout_s=900)
    delete_topic(b, topic)
    # CSV: start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance ms, fetch ms, fetch.MB.sec, fetch.nMsg.sec
    row = [line for line in out.strip().splitlines() if line and line[0].isdigit()][-1].split(",")
    consumed_mb, fetch_mb_s = float(row[2]), float(row[8])
    return Run(scenario, b.name, rnd, mb=consumed_mb, seconds=m.elapsed, mb_per_s=fetch_mb_s,
               broker_cpu_s=m.cpu, broker_write_bytes=m.written,
               extra={"records": int(row[4]), "mb_per_s_incl_join": float(row[3])})


def run_e2e(b: Broker, scenario: str, rnd: int, count: int, probe_dir: str) -> Run:
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = f"perf-{scenario}-{uuid.uuid4().hex[:8]}"
    create_topic(b, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, **b.rdkafka_props, "acks": "all", "linger.ms": 0})
    c = Consumer({"bootstrap.servers": b.bootstrap, **b.rdkafka_props, "group.id": f"e2e-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    payload = b"x" * 1024
    lat_us: list[float] = []
    warmup = 200
    with Meter(b) as m:
        for i in range(count + warmup):
            t0 = time.perf_counter()
            p.produce(topic, payload)
            p.poll(0)
            while True:
                msg = c.poll(5.0)
                if msg is None:
                    raise RuntimeError(f"e2e: record {i} not received within 5 s")
                if msg.error():
                    continue
                break
            if i >= warmup:
                lat_us.append((time.perf_counter() - t0) * 1e6)
        p.flush(10)
    c.close()
    delete_topic(b, topic)
    lat_us.sort()
    q = lambda f: lat_us[min(len(lat_us) - 1, int(f * len(lat_us)))]  # noqa: E731
    extra = {"p50_us": q(0.50), "p99_us": q(0.99), "p999_us": q(0.999), "records": count,
             **fdatasync_probe_us(probe_dir)}
    return Run(scenario, b.name, rnd, mb=count * 1024 / MIB, seconds=m.elapsed,
               broker_cpu_s=m.cpu, broker_write_bytes=m.written, extra=extra)


def fdatasync_probe_us(directory: str, count: int = 1000) -> dict:
    """What one fdatasync costs on this file system right now: append 1 KiB to a file in
    `directory` (the brokers' file system) and fdatasync it, `count` times. The issue's e2e
    goal is Kafka's p50 plus one of these, so it is measured beside each e2e round."""
    path = Path(directory) / f"fdatasync-probe-{os.getpid()}"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    lat = []
    try:
        for _ in range(count):
            os.write(fd, b"x" * 1024)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t0) * 1e6)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    lat.sort()
    return {"fdatasync_p50_us": lat[len(lat) // 2], "fdatasync_p99_us": lat[int(0.99 * len(lat))]}


PRODUCE = {
    "produce-defaults": (1024, {}),
    "produce-256k": (1024, {"linger.ms": 5, "batch.size": 262144}),
    "produce-100b": (100, {"linger.ms": 5, "batch.size": 262144}),
}


def median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def summarize(runs: list[Run]) -> list[dict]:
    rows = []
    for scenario in dict.fromkeys(r.scenario for r in runs):
        row = {"scenario": scenario}
        for name in ("kafka", "sluice"):
            rs = [r for r in runs if r.scenario == scenario and r.broker == name]
            row[name] = {
                "runs": len(rs),
                "mb_per_s": median([r.mb_per_s for r in rs]),
                "cpu_ms_per_mb": median([r.cpu_ms_per_mb for r in rs]),
                "cpu_wb_ms_per_mb": median([r.cpu_wb_ms_per_mb for r in rs]),
                "write_amplification": median([r.write_amplification for r in rs]),
                **{k: median([r.extra.get(k, float("nan")) for r in rs])
                   for k in ("p50_us", "p99_us", "p999_us", "lat_p50_ms", "lat_p99_ms",
                             "fdatasync_p50_us")},
            }
        k, s = row["kafka"], row["sluice"]
        ratio = lambda a, b: (a / b) if b and a == a and b == b else float("nan")  # noqa: E731
        row["ratio"] = {m: ratio(s[m], k[m]) for m in s if isinstance(s[m], float)}
        rows.append(row)
    return rows


def fmt(x: float, digits: int = 2) -> str:
    return "-" if x != x else f"{x:.{digits}f}"


def print_tables(runs: list[Run], rows: list[dict]) -> None:
    print("\n## Runs\n")
    print("| scenario | broker | round | MB | s | MB/s | broker CPU s | CPU ms/MB | CPU + writeback ms/MB | disk bytes/byte | latency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        lat = (f"p50 {r.extra['p50_us']:.0f} µs, p99 {r.extra['p99_us']:.0f}, p99.9 {r.extra['p999_us']:.0f}"
               if "p50_us" in r.extra else
               f"p50 {r.extra.get('lat_p50_ms', '-')} ms, p99 {r.extra.get('lat_p99_ms', '-')} ms"
               if "lat_p50_ms" in r.extra else "-")
        print(f"| {r.scenario} | {r.broker} | {r.round} | {r.mb:.0f} | {r.seconds:.1f} | {fmt(r.mb_per_s, 1)} "
              f"| {r.broker_cpu_s:.2f} | {fmt(r.cpu_ms_per_mb)} | {fmt(r.cpu_wb_ms_per_mb)} "
              f"| {fmt(r.write_amplification)} | {lat} |")
    print("\n## Medians and ratios (Sluice / Kafka)\n")
    print("| scenario | MB/s K | MB/s S | ratio | CPU ms/MB K | CPU ms/MB S | ratio | disk B/B K | disk B/B S | e2e p50 µs K / S | p99 K / S | p99.9 K / S |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        k, s, q = row["kafka"], row["sluice"], row["ratio"]
        print(f"| {row['scenario']} | {fmt(k['mb_per_s'], 1)} | {fmt(s['mb_per_s'], 1)} | {fmt(q['mb_per_s'])} "
              f"| {fmt(k['cpu_ms_per_mb'])} | {fmt(s['cpu_ms_per_mb'])} | {fmt(q['cpu_ms_per_mb'])} "
              f"| {fmt(k['write_amplification'])} | {fmt(s['write_amplification'])} "
              f"| {fmt(k['p50_us'], 0)} / {fmt(s['p50_us'], 0)} | {fmt(k['p99_us'], 0)} / {fmt(s['p99_us'], 0)} "
              f"| {fmt(k['p999_us'], 0)} / {fmt(s['p999_us'], 0)} |")
    for row in rows:
        k, s = row["kafka"], row["sluice"]
        if k["p50_us"] == k["p50_us"] and s["p50_us"] == s["p50_us"]:
            sync = median([k["fdatasync_p50_us"], s["fdatasync_p50_us"]])
            print(f"\ne2e p50: Sluice {s['p50_us']:.0f} µs against Kafka's {k['p50_us']:.0f} µs + one fdatasync "
                  f"(p50 {sync:.0f} µs, probed beside each round) = {k['p50_us'] + sync:.0f} µs: "
                  f"{'within' if s['p50_us'] <= k['p50_us'] + sync else 'OVER'} the goal")
    print("\n## Produce CPU including the kernel's writeback (kworker threads and a final sync)\n")
    print("| scenario | CPU + writeback ms/MB K | S | ratio |")
    print("|---|---|---|---|")
    for row in rows:
        k, s, q = row["kafka"], row["sluice"], row["ratio"]
        if k["cpu_wb_ms_per_mb"] == k["cpu_wb_ms_per_mb"]:
            print(f"| {row['scenario']} | {fmt(k['cpu_wb_ms_per_mb'])} | {fmt(s['cpu_wb_ms_per_mb'])} "
                  f"| {fmt(q['cpu_wb_ms_per_mb'])} |")


def run_scenario(a: argparse.Namespace, b: Broker, scenario: str, rnd: int) -> Run:
    if scenario in PRODUCE:
        size, props = PRODUCE[scenario]
        return run_produce(a.classpath, b, scenario, rnd, a.mb, size, props)
    if scenario.startswith("fetch-"):
        return run_fetch(a.classpath, b, scenario, rnd, a.mb, int(scenario[6:-1]))
    if scenario == "e2e":
        return run_e2e(b, scenario, rnd, a.e2e_records, a.fsync_probe_dir)
    raise SystemExit(f"unknown scenario {scenario}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kafka", required=True, help="bootstrap,pid")
    ap.add_argument("--sluice", required=True, help="bootstrap,pid")
    ap.add_argument("--classpath", required=True, help="classpath with kafka-tools")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup-rounds", type=int, default=2,
                    help="unrecorded rounds of each scenario on each broker before the measured ones "
                         "(the JVM's JIT keeps compiling for minutes: a cold Kafka costs 2-7x its warm CPU per MB)")
    ap.add_argument("--mb", type=int, default=1024, help="MiB produced per produce run and per backlog")
    ap.add_argument("--e2e-records", type=int, default=3000)
    ap.add_argument("--scenarios", default="produce-defaults,produce-256k,produce-100b,fetch-1p,fetch-12p,e2e")
    ap.add_argument("--json", help="write runs and summary here")
    ap.add_argument("--fsync-probe-dir", default=".",
                    help="a directory on the brokers' file system, for the fdatasync probe run with each e2e round")
    a = ap.parse_args()

    def broker(name: str, spec: str) -> Broker:
        bootstrap, pid = spec.split(",")
        return Broker(name, bootstrap, int(pid))

    brokers = [broker("kafka", a.kafka), broker("sluice", a.sluice)]
    scenarios = [s for s in a.scenarios.split(",") if s]
    runs: list[Run] = []
    # Warm-up: one small produce run each (JIT, page cache, connections), not recorded.
    for b in brokers:
        run_produce(a.classpath, b, "warmup", 0, max(64, a.mb // 8), 1024, {"linger.ms": 5, "batch.size": 262144})
    for scenario in scenarios:
        for rnd in range(-a.warmup_rounds, a.rounds):
            order = brokers if rnd % 2 == 0 else list(reversed(brokers))
            for b in order:
                label = f"warm-up {rnd + a.warmup_rounds}" if rnd < 0 else f"round {rnd}"
                print(f"-- {scenario} {label} on {b.name}", file=sys.stderr, flush=True)
                r = run_scenario(a, b, scenario, rnd)
                print(f"   {r.mb_per_s:.1f} MB/s, broker {r.cpu_ms_per_mb:.2f} ms CPU/MB "
                      f"({r.cpu_wb_ms_per_mb:.2f} with writeback), {r.write_amplification:.2f} disk B/B "
                      f"{r.extra}", file=sys.stderr, flush=True)
                if rnd >= 0:
                    runs.append(r)
    rows = summarize(runs)
    print_tables(runs, rows)
    print(f"\nbroker RSS after the runs: " + ", ".join(f"{b.name} {b.rss_mb():.0f} MiB" for b in brokers))
    if a.json:
        Path(a.json).write_text(json.dumps({
            "runs": [{**r.__dict__, "cpu_ms_per_mb": r.cpu_ms_per_mb, "cpu_wb_ms_per_mb": r.cpu_wb_ms_per_mb,
                      "write_amplification": r.write_amplification}
                     for r in runs],
            "summary": rows}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
