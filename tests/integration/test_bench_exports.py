"""`sluice-bench` machine outputs beyond its own JSON: the OpenMessaging Benchmark and SSP
result formats (`--omb-json`, `--ssp-json`), the raw HdrHistogram of every latency
(`latency.<kind>.hdr_base64`, decoded here independently of the Rust code) and the offline
compression table. Short real runs against the embedded broker; the assertions are
relations between the outputs (counts agree, units convert, percentiles are ordered), not
particular numbers.
"""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import zlib
from pathlib import Path

from conftest import sluice_bench_bin

RUN_TIMEOUT_S = 120
OMB_STATS = ["Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "99999pct", "Max"]
SSP_STATS = ["Min", "Max", "Mean", "StdDev", "Variance", "P50", "P75", "P90", "P95", "P99", "P995",
             "P999", "P9999", "MAD", "Count", "CDFBuckets"]


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(sluice_bench_bin()), "--quiet", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)


def explain(p: subprocess.CompletedProcess) -> str:
    return f"exit {p.returncode}\n--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}"


def varints(buf: bytes):
    """HdrHistogram V2 counts: ZigZag LEB128 (at most 9 bytes, the 9th holds 8 bits)."""
    i = 0
    while i < len(buf):
        value, shift = 0, 0
        for n in range(9):
            b = buf[i]
            i += 1
            if n == 8:
                value |= b << 56
                break
            value |= (b & 0x7F) << shift
            shift += 7
            if b & 0x80 == 0:
                break
        yield (value >> 1) ^ -(value & 1)


def hdr_total_count(b64: str) -> tuple[int, int]:
    """Decodes a base64 V2-deflate HdrHistogram far enough to sum its counts; returns
    (total count, significant digits)."""
    raw = base64.b64decode(b64)
    cookie, length = struct.unpack(">iI", raw[:8])
    # V2 compressed encoding; bits 4..7 carry the word size (0x10), as HdrHistogram writes them.
    assert cookie & ~0xF0 == 0x1C849304, hex(cookie)
    inner = zlib.decompress(raw[8:8 + length])
    cookie, payload_len, _offset, sigfig, lowest, highest = struct.unpack(">iiiiqq", inner[:32])
    assert cookie & ~0xF0 == 0x1C849303, hex(cookie)  # V2 encoding
    assert lowest >= 1 and highest > lowest
    counts = inner[40:40 + payload_len]
    total = sum(v for v in varints(counts) if v > 0)  # negatives are runs of empty buckets
    return total, sigfig


def test_omb_ssp_exports_and_raw_histograms(tmp_path):
    p = run(tmp_path, "--duration", "3s", "--warmup", "1s", "--rate", "1500", "--json", "r.json",
            "--omb-json", "omb.json", "--ssp-json", "ssp.json")
    assert p.returncode == 0, explain(p)
    r = json.loads((tmp_path / "r.json").read_text())
    omb = json.loads((tmp_path / "omb.json").read_text())
    ssp = json.loads((tmp_path / "ssp.json").read_text())
    s = r["scenario"]

    # Raw histograms: standard HdrHistogram V2-deflate; their counts are the summaries' counts.
    for kind in ["ack", "ack_intended", "send_delay", "e2e", "e2e_intended"]:
        lat = r["latency"][kind]
        assert lat["count"] > 0
        total, sigfig = hdr_total_count(lat["hdr_base64"])
        assert total == lat["count"], kind
        assert sigfig == 3

    # OMB: identity fields, one entry per 10 s window of the measured phase (here one),
    # units (ms for publish/e2e, µs for the publish delay) consistent with our report.
    assert omb["messageSize"] == s["message_bytes"] and omb["partitions"] == s["partitions"]
    assert omb["producersPerTopic"] == s["producers"] and omb["topics"] == 1
    assert omb["workload"] == s["preset"] and "embedded" in omb["driver"]
    windows = len(omb["publishRate"])
    assert windows == 1, omb["publishRate"]
    for prefix in ["publishLatency", "publishDelayLatency", "endToEndLatency"]:
        for stat in OMB_STATS:
            assert len(omb[prefix + stat]) == windows, prefix + stat
        pct = [omb[prefix + k][0] for k in OMB_STATS[1:]]
        assert pct == sorted(pct), (prefix, pct)
    assert all(isinstance(v, int) for v in omb["publishDelayLatency99pct"])
    assert omb["publishRate"][0] > 0 and omb["consumeRate"][0] > 0
    lat = r["latency"]
    assert omb["aggregatedPublishLatency99pct"] == lat["ack"]["p99_ms"]
    assert omb["aggregatedEndToEndLatency50pct"] == lat["e2e"]["p50_ms"]
    assert omb["aggregatedPublishDelayLatency99pct"] == round(lat["send_delay"]["p99_ms"] * 1000)
    q = omb["aggregatedPublishLatencyQuantiles"]
    assert q["100.0"] == lat["ack"]["max_ms"] and q["50.0"] == lat["ack"]["p50_ms"]

    # SSP: config mirrors the scenario; final counts and Go-named stats mirror our report.
    c = ssp["config"]
    assert c["partitions"] == s["partitions"] and c["message_size"] == s["message_bytes"]
    assert c["target_rate"] == 1500 and c["warmup_s"] == 1.0 and c["acks"] == 1
    assert c["bp_poll"].endswith("ms") and c["consumer_delay"] == "0s"
    f = ssp["final"]
    assert f["messages_sent"] == r["counts"]["acked"]
    assert f["messages_received"] == r["audit"]["received"]
    assert f["bytes_sent"] == f["messages_sent"] * s["message_bytes"]
    for key, ours in [("ack_latency_ms", "ack"), ("e2e_latency_ms", "e2e")]:
        g = ssp["final"][key]
        assert sorted(g) == sorted(SSP_STATS), g.keys()
        assert g["Count"] == lat[ours]["count"] and g["P99"] == lat[ours]["p99_ms"]
        assert abs(g["Variance"] - g["StdDev"] ** 2) < 1e-6
        assert 0 <= g["MAD"] <= g["Max"] - g["Min"]
        assert len(g["CDFBuckets"]) == 23 and sum(g["CDFBuckets"]) == g["Count"]
    measured = [i for i in r["intervals"] if i["phase"] == "measure"]
    assert len(ssp["timeline"]) == len(measured) >= 2
    assert all(t["elapsed_s"] > 0 for t in ssp["timeline"])
    assert ssp["lag_timeline"] and all(len(t["per_partition_lag"]) == s["partitions"]
                                       for t in ssp["lag_timeline"])
    assert ssp["lag_summary"]["sample_count"] == r["lag"]["samples"]
    assert ssp["sysperf_summary"]["count"] == len(ssp["sysperf_timeline"])
    assert ssp["sysperf_summary"]["num_gc"] == 0  # no garbage collector, truly
    assert ssp["bp_events"] == 0 and ssp["bp_paused_s"] == 0.0

    # Offline compression: every codec, consistent arithmetic, in both documents.
    co = r["compression_offline"]
    assert ssp["compression_offline"] == co
    assert set(co["codecs"]) == {"none", "snappy", "lz4", "gzip", "zstd"}
    assert co["sample_count"] == 2000 and co["raw_bytes"] == 2000 * s["message_bytes"]
    assert co["codecs"]["none"]["compressed_bytes"] == co["raw_bytes"]
    for name, v in co["codecs"].items():
        assert abs(v["ratio"] - co["raw_bytes"] / v["compressed_bytes"]) < 1e-9, name
        assert abs(v["space_saved_pct"] - (1 - v["compressed_bytes"] / co["raw_bytes"]) * 100) < 1e-9
    # The default payload (mixed: text, json, logs, zeros, random) does compress.
    assert co["codecs"]["zstd"]["ratio"] > 1.5
    assert "offline compression" in p.stdout and "zstd" in p.stdout


def test_zeros_compress_far_better_than_random(tmp_path):
    ratios = {}
    for payload in ["zeros", "random"]:
        out = tmp_path / f"{payload}.json"
        p = run(tmp_path, "--duration", "1s", "--warmup", "0", "--rate", "500", "--payload", payload,
                "--json", str(out))
        assert p.returncode == 0, explain(p)
        ratios[payload] = json.loads(out.read_text())["compression_offline"]["codecs"]["snappy"]["ratio"]
    assert ratios["zeros"] > 5 * ratios["random"], ratios
