"""`sluice-bench` compression checks (issue 33): the bench's librdkafka (2.12) compresses its
batches against the embedded broker, and the report's compression warnings stay quiet when it
does. A run warns when a codec is set but the wire ratio stays near 1 while the payload
compresses far better offline; a set warns when two targets of one variant (or the repeats of
one target) have wire ratios more than 10 % apart. Those decisions are unit-tested in the crate
(`compression`, `compare`); here real runs check that a compressing client raises neither, and
that a sweep of codecs, whose ratios differ by design, is not flagged. The Kafka side of the
A/B is in test_bench_cluster.py.
"""

from __future__ import annotations

from test_bench_files import assert_delivered, bench, explain

# One producer into one partition with a 20 ms linger: batches of about 40 messages, so the
# wire ratio is the codec's, not the protocol overhead of one-message batches.
BATCHED = ["--payload", "mixed", "--rate", "2000", "--producers", "1", "--consumers", "1",
           "--partitions", "1", "--linger-ms", "20", "--duration", "2s", "--warmup", "1s"]


def compression_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "compression" in w]


def test_a_codec_sweep_compresses_on_the_wire_without_warnings(tmp_path):
    proc, doc = bench(tmp_path, "sweep", "compression=none,snappy", *BATCHED)
    assert proc.returncode == 0, explain(proc)
    assert doc["schema"] == "sluice-bench-set/1"
    none, snappy = doc["runs"]
    assert (none["scenario"]["compression"], snappy["scenario"]["compression"]) == ("none", "snappy")
    for r in (none, snappy):
        assert_delivered(r)
        version = tuple(int(x) for x in r["environment"]["librdkafka"].split(".")[:2])
        assert version >= (2, 12), r["environment"]
        # No compression warning on either run: none is not expected to compress, and
        # snappy reached the wire.
        assert not compression_warnings(r["warnings"]), r["warnings"]
    # The mixed payload compresses about 2x offline with snappy; on the wire the client's
    # batches come close (librdkafka 2.10 sent them uncompressed to Sluice: 0.94x-0.99x).
    offline = snappy["compression_offline"]["codecs"]["snappy"]["ratio"]
    wire = snappy["latency_split"]["wire_compression_ratio"]
    assert offline > 1.8, snappy["compression_offline"]
    assert wire > 1.5, snappy["latency_split"]
    # Without a codec the wire carries the messages plus the protocol's overhead.
    assert none["latency_split"]["wire_compression_ratio"] < 1.1, none["latency_split"]
    # The variants' ratios differ twofold, by design: a sweep never compares variants, so
    # the set has no compression warning of its own (nor any from its runs). Other warnings
    # (a rate deficit on a busy machine) are not this test's business.
    assert not compression_warnings(doc["warnings"]), doc["warnings"]
    assert "ratio" not in " ".join(w for w in proc.stdout.splitlines() if "warning:" in w), proc.stdout


def test_ab_of_the_same_client_work_is_not_flagged(tmp_path):
    # The embedded broker against the null target (the same front end over a log that keeps
    # nothing): the same client, the same codec, so the wire ratios agree and the set has no
    # compression warning.
    proc, doc = bench(tmp_path, "--target", "embedded", "--target", "null", "--compression", "snappy",
                      *BATCHED)
    assert proc.returncode == 0, explain(proc)
    ratios = [r["latency_split"]["wire_compression_ratio"] for r in doc["runs"]]
    assert min(ratios) > 1.5 and max(ratios) <= 1.1 * min(ratios), ratios
    assert not compression_warnings(doc["warnings"]), doc["warnings"]
    # The runs' own warnings are carried up, each prefixed with its run.
    for n in (2, 3):
        assert any(w.startswith(f"run {n} (null): null target") for w in doc["warnings"]), doc["warnings"]
