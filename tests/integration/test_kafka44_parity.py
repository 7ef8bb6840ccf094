"""Kafka 4.4 parity (issue 33): what Sluice advertises, side by side with a real Apache Kafka
4.4 broker, and the client behaviour that hangs on it.

- Older librdkafka (before 2.12) decides whether a broker supports compression from Produce
  v0 being listed in ApiVersions, and otherwise sends every batch uncompressed, silently
  ("Broker does not support compression type ...: not compressing batch"). Kafka 4.x lists
  Produce from v0 for that reason and refuses v0-2 if they are ever sent (KAFKA-18659); so
  does Sluice. Debian's kcat (librdkafka 2.0.2) must compress with every codec, and the
  batches Sluice stores must carry the codec.
- Sluice's ApiVersions answer is compared with a Kafka 4.4 broker's, started here: every
  API whose range differs, and every feature level that differs, must be a row of the
  tables in docs/api-versions.md, with Kafka's and Sluice's values as observed, and every
  row there must still be a difference (so the document stays true both ways).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

import kwire

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = os.environ.get("SLUICE_TEST_KAFKA_VERSION", "4.4.0")
KAFKA_LIBS = REPO_ROOT / ".cache" / f"kafka-{KAFKA_VERSION}" / "libs"
SCRIPT = REPO_ROOT / "scripts" / "kafka-local.sh"
DOC = REPO_ROOT / "docs" / "api-versions.md"
START_TIMEOUT_S = 150

# librdkafka's codec names and the attribute bits of a v2 batch that carry them.
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kcat_path() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return path


def librdkafka_version(kcat: str) -> tuple[int, int, int]:
    out = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=30)
    m = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    assert m, f"kcat -V names no librdkafka version:\n{out.stdout}{out.stderr}"
    return tuple(int(g) for g in m.groups())


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_older_librdkafka_compresses(broker, topic_name, codec):
    """Goal: librdkafka before 2.12 compresses against Sluice, with every codec.
    Method: Debian's kcat (the test asserts its librdkafka is older than 2.12, so the test
    means what it says) produces 200 highly compressible records with `-z CODEC` and the
    `msg` debug context; its log must not say "not compressing", and every batch Sluice then
    serves (raw Fetch v4) must carry the codec's id in its attributes, in fewer bytes than the
    records' values alone. Before the fix, kcat logged "Broker does not support compression
    type" and the batches were stored uncompressed (codec 0)."""
    kcat = kcat_path()
    version = librdkafka_version(kcat)
    assert version < (2, 12, 0), f"kcat's librdkafka {version} no longer shows the failure"
    lines = b"".join(b"sluice-compresses-this-line-%05d " % i + b"x" * 200 + b"\n" for i in range(200))
    r = subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", topic_name, "-z", codec,
                        "-X", "linger.ms=50", "-X", "debug=msg"],
                       input=lines, capture_output=True, timeout=60)
    log = r.stderr.decode(errors="replace")
    assert r.returncode == 0, log[-3000:]
    assert "not compressing" not in log, log[-3000:]
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 0, max_bytes=8 << 20)
    assert part.error_code == kwire.NONE
    batches = part.batches()
    assert sum(b.record_count for b in batches) == 200, batches
    assert {b.attributes & 7 for b in batches} == {CODECS[codec]}, batches
    assert len(part.records) < len(lines) // 4, f"{len(part.records)} bytes stored for {len(lines)}"


# ---- ApiVersions against Kafka 4.4 ------------------------------------------------------------

def free_port_pair() -> int:
    """A port p with p and p + 1 free on the loopback (Kafka's listener and controller)."""
    for _ in range(100):
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", 0))
                port = a.getsockname()[1]
                b.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise AssertionError("no free port pair")


@pytest.fixture(scope="module")
def kafka44(tmp_path_factory):
    """A Kafka 4.4 broker (one KRaft node) with its own home under the test's tmp dir; its
    jars are the ones `scripts/kafka-local.sh fetch` put in .cache (linked, not copied)."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java and mvn are needed to run Kafka")
    home = tmp_path_factory.mktemp("kafka44")
    env = {**os.environ, "KAFKA_VERSION": KAFKA_VERSION, "KAFKA_HOME": str(home),
           "KAFKA_PORT": str(free_port_pair()), "KAFKA_HEAP": "512M",
           "KAFKA_START_TIMEOUT_S": str(START_TIMEOUT_S)}
    if not (KAFKA_LIBS / ".complete").exists():
        r = subprocess.run([str(SCRIPT), "fetch"], env={**env, "KAFKA_HOME": str(KAFKA_LIBS.parent)},
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"kafka-local.sh fetch failed:\n{r.stderr[-3000:]}"
    (home / "libs").symlink_to(KAFKA_LIBS)
    try:
        r = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True,
                           timeout=START_TIMEOUT_S + 60)
        assert r.returncode == 0, f"kafka-local.sh start failed:\n{r.stderr[-3000:]}"
        yield r.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


def doc_table(heading: str) -> dict[str, tuple[str, str, str]]:
    """The rows of the table under `heading` in docs/api-versions.md: first cell (the API key,
    or the feature name) -> (Kafka 4.4's value, Sluice's value, the reason)."""
    text = DOC.read_text()
    start = text.index(heading)
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0] or cells[0].startswith("-") or cells[0] in ("key", "feature"):
            continue
        first, _name, kafka, sluice, why = cells[:5]
        assert why, f"{DOC.name}: row {first} gives no reason"
        rows[first] = (kafka, sluice, why)
    assert rows, f"{DOC.name}: no rows under {heading!r}"
    return rows


def shown(rng: tuple[int, int] | None) -> str:
    return "-" if rng is None else f"{rng[0]}-{rng[1]}"


def feature_shown(rng: tuple[int, int] | None) -> str:
    return "-" if rng is None else str(rng[1])


@pytest.mark.timeout(START_TIMEOUT_S + 120)
def test_api_versions_match_kafka_44_except_where_documented(broker, kafka44):
    """Goal: Sluice advertises what Kafka 4.4 advertises, for every API and finalized
    feature, except the differences docs/api-versions.md lists with a reason.
    Method: ApiVersions v4 to both brokers; each API key whose (min, max) differs must be a
    row of the document's API table with exactly the observed ranges ("-" for not
    advertised), and each finalized feature whose level differs a row of its feature table;
    a row that is no longer a difference fails too."""
    kafka = kwire.api_versions(kafka44, 4)
    ours = kwire.api_versions(broker.bootstrap, 4)
    assert kafka.error_code == ours.error_code == kwire.NONE
    documented = doc_table("## APIs")
    seen = {}
    for key in sorted(set(kafka.api_keys) | set(ours.api_keys)):
        k, s = kafka.api_keys.get(key), ours.api_keys.get(key)
        if k != s:
            seen[str(key)] = (shown(k), shown(s))
    problems = [f"API {key}: Kafka 4.4 {k}, Sluice {s}, not in {DOC.name}"
                for key, (k, s) in seen.items() if documented.get(key, (None, None))[:2] != (k, s)]
    problems += [f"API {key}: {DOC.name} lists {row[:2]}, but both advertise {shown(kafka.api_keys.get(int(key)))}"
                 for key, row in documented.items() if key not in seen]
    features = doc_table("## Finalized features")
    seen_features = {}
    for name in sorted(set(kafka.finalized_features) | set(ours.finalized_features)):
        k, s = kafka.finalized_features.get(name), ours.finalized_features.get(name)
        if feature_shown(k) != feature_shown(s):
            seen_features[name] = (feature_shown(k), feature_shown(s))
    problems += [f"feature {name}: Kafka 4.4 {k}, Sluice {s}, not in {DOC.name}"
                 for name, (k, s) in seen_features.items() if features.get(name, (None, None))[:2] != (k, s)]
    problems += [f"feature {name}: {DOC.name} lists {row[:2]}, but both finalize the same level"
                 for name, row in features.items() if name not in seen_features]
    assert not problems, "\n".join(problems)
