#!/usr/bin/env python3
"""TLS cost, Apache Kafka against Sluice, same clients (issue 14's last verify item).

Each broker serves the same data over two listeners at once, PLAINTEXT and SSL, so one broker
process is measured both ways without a restart (Kafka's JIT stays warm). The four endpoints
(kafka PLAINTEXT, kafka SSL, sluice PLAINTEXT, sluice SSL) run each scenario in turn, the
order rotating every round so drift on this shared machine lands on all of them, after
`--warmup-rounds` unrecorded rounds. The runs are scripts/perf_compare.py's: Kafka's own
ProducerPerformance and ConsumerPerformance (Java client, TLS by the JDK), with the endpoint's
security settings; broker CPU from /proc/<pid>/stat over each run.

Reported per endpoint: client throughput (MB/s) and broker CPU ms per MB; per broker, the ratio
SSL / PLAINTEXT of both (what TLS costs that broker); and Sluice / Kafka on SSL.

Usage (both brokers started by the caller, see docs/operations.md "TLS cost against Kafka"):
  tls_compare.py --kafka PLAIN_BOOTSTRAP,SSL_BOOTSTRAP,PID --sluice PLAIN_BOOTSTRAP,SSL_BOOTSTRAP,PID \
      --ca CA.pem --classpath 'target/java-deps/*' [--mb 512 --rounds 3 --scenarios produce-256k,fetch-1p]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_compare as pc  # noqa: E402

SCENARIOS = "produce-256k,fetch-1p"


def endpoints(name: str, spec: str, ca: str) -> list[pc.Broker]:
    plain, tls, pid = spec.split(",")
    java_tls = {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
    rdkafka_tls = {"security.protocol": "SSL", "ssl.ca.location": ca}
    return [pc.Broker(f"{name}-plaintext", plain, int(pid)),
            pc.Broker(f"{name}-ssl", tls, int(pid), java_tls, rdkafka_tls)]


def summarize(runs: list[pc.Run], names: list[str]) -> dict:
    out: dict = {}
    for scenario in dict.fromkeys(r.scenario for r in runs):
        row = {}
        for name in names:
            rs = [r for r in runs if r.scenario == scenario and r.broker == name]
            row[name] = {"runs": len(rs), "mb_per_s": pc.median([r.mb_per_s for r in rs]),
                         "cpu_ms_per_mb": pc.median([r.cpu_ms_per_mb for r in rs])}
        for broker in ("kafka", "sluice"):
            p, s = row[f"{broker}-plaintext"], row[f"{broker}-ssl"]
            row[f"{broker} ssl/plaintext"] = {k: s[k] / p[k] if p[k] else float("nan")
                                              for k in ("mb_per_s", "cpu_ms_per_mb")}
        k, s = row["kafka-ssl"], row["sluice-ssl"]
        row["ssl sluice/kafka"] = {m: s[m] / k[m] if k[m] else float("nan") for m in ("mb_per_s", "cpu_ms_per_mb")}
        out[scenario] = row
    return out


def print_tables(runs: list[pc.Run], summary: dict) -> None:
    f = pc.fmt
    print("\n## Runs\n")
    print("| scenario | endpoint | round | MB | MB/s | broker CPU s | CPU ms/MB |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r.scenario} | {r.broker} | {r.round} | {r.mb:.0f} | {f(r.mb_per_s, 1)} "
              f"| {r.broker_cpu_s:.2f} | {f(r.cpu_ms_per_mb)} |")
    print("\n## Medians and ratios\n")
    print("| scenario | endpoint | MB/s | CPU ms/MB |")
    print("|---|---|---|---|")
    for scenario, row in summary.items():
        for name, v in row.items():
            digits = 2 if "/" in name else 1
            print(f"| {scenario} | {name} | {f(v['mb_per_s'], digits)} | {f(v['cpu_ms_per_mb'])} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kafka", required=True, help="plaintext bootstrap,ssl bootstrap,pid")
    ap.add_argument("--sluice", required=True, help="plaintext bootstrap,ssl bootstrap,pid")
    ap.add_argument("--ca", required=True, help="PEM file the clients trust (both brokers' CA)")
    ap.add_argument("--classpath", required=True, help="classpath with kafka-tools")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-rounds", type=int, default=1)
    ap.add_argument("--mb", type=int, default=512, help="MiB per produce run and per backlog")
    ap.add_argument("--scenarios", default=SCENARIOS)
    ap.add_argument("--json", help="write runs and summary here")
    a = ap.parse_args()
    brokers = endpoints("kafka", a.kafka, a.ca) + endpoints("sluice", a.sluice, a.ca)
    names = [b.name for b in brokers]
    # perf_compare's scenario runner reads these fields.
    a.e2e_records = 0
    runs: list[pc.Run] = []
    load = []
    for b in brokers:
        pc.run_produce(a.classpath, b, "warmup", 0, max(64, a.mb // 8), 1024, {"linger.ms": 5, "batch.size": 262144})
    for scenario in [s for s in a.scenarios.split(",") if s]:
        for rnd in range(-a.warmup_rounds, a.rounds):
            shift = rnd % len(brokers)
            for b in brokers[shift:] + brokers[:shift]:
                print(f"-- {scenario} round {rnd} on {b.name}", file=sys.stderr, flush=True)
                r = pc.run_scenario(a, b, scenario, rnd)
                load.append(os.getloadavg()[0])
                print(f"   {r.mb_per_s:.1f} MB/s, broker {r.cpu_ms_per_mb:.2f} ms CPU/MB", file=sys.stderr, flush=True)
                if rnd >= 0:
                    runs.append(r)
    summary = summarize(runs, names)
    print_tables(runs, summary)
    print(f"\nload average (1 min) after each run: min {min(load):.1f}, median {pc.median(load):.1f}, "
          f"max {max(load):.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": [{**r.__dict__, "cpu_ms_per_mb": r.cpu_ms_per_mb} for r in runs],
                                            "summary": summary, "load": load}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
