"""The `sluice-bench --html` report renders: a short real run writes the page, headless
Chromium draws it (screenshot, compared with a blank page's) and dumps the DOM it built, in
which the SVG charts must have drawn lines and the tables must be filled. The page must not
reach for the network. Once for one run, once for an A/A comparison of two embedded brokers
(ratio table with confidence intervals and verdicts, run overlays). Needs `chromium` on PATH
(scripts/test-integration.sh installs Debian's package when it can).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import sluice_bench_bin

RUN_TIMEOUT_S = 180
CHROMIUM_TIMEOUT_S = 90
WINDOW = (1200, 3000)


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.fail("chromium is not on PATH: install Debian's `chromium` package "
                    "(scripts/test-integration.sh does this when run as root)")
    return exe


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)


def screenshot(tmp_path: Path, url: str, name: str) -> Path:
    out = tmp_path / name
    p = run_chromium(tmp_path, f"--screenshot={out}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                     "--hide-scrollbars", url)
    assert out.exists(), f"no screenshot (exit {p.returncode}): {p.stderr[-2000:]}"
    return out


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def dump_dom(tmp_path: Path, url: str) -> str:
    p = run_chromium(tmp_path, "--dump-dom", url)
    assert p.returncode == 0 and "<html" in p.stdout, p.stderr[-2000:]
    return p.stdout


def assert_self_contained(html: str) -> None:
    external = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not external, external
    assert "url(http" not in html and "@import" not in html
    assert "<script src" not in html.lower()


def assert_renders(tmp_path: Path, page: Path, min_charts: int) -> str:
    html = page.read_text()
    assert_self_contained(html)
    url = page.resolve().as_uri()
    shot = screenshot(tmp_path, url, page.stem + ".png")
    assert png_size(shot) == WINDOW
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    blank_shot = screenshot(tmp_path, blank.resolve().as_uri(), "blank.png")
    # A flat page compresses to almost nothing; charts, text and tables do not.
    assert shot.stat().st_size > 10 * blank_shot.stat().st_size, (shot.stat().st_size,
                                                                   blank_shot.stat().st_size)
    dom = dump_dom(tmp_path, url)
    svgs = re.findall(r"<svg\b.*?</svg>", dom, re.S)
    drawn = [s for s in svgs if re.search(r'<path d="M[\d.]+,[\d.]+ L', s)]
    assert len(drawn) >= min_charts, (len(svgs), len(drawn))
    assert "<table" in dom and "<td" in dom
    return dom


def test_single_run_html_renders(tmp_path):
    page = tmp_path / "report.html"
    cmd = [str(sluice_bench_bin()), "--quiet", "--duration", "3s", "--warmup", "1s", "--rate", "2000",
           "--consumer-delay", "2ms", "--json", "r.json", "--html", str(page)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    dom = assert_renders(tmp_path, page, min_charts=5)
    r = json.loads((tmp_path / "r.json").read_text())
    # The per-partition lag heatmap: one cell per (interval, partition) with lag; 4 consumers
    # at 2 ms each handle ~2000 msg/s, so at 2000 msg/s some partitions fall behind.
    heat = re.search(r'<svg[^>]*class="heatmap".*?</svg>', dom, re.S)
    assert heat, "no lag heatmap"
    lagged = sum(1 for i in r["intervals"] for v in i["lag_per_partition"] if v > 0)
    assert heat.group(0).count('fill="#d62728"') == lagged > 0
    # The offline compression table lists every codec.
    section = dom[dom.index("Offline compression"):]
    for codec in ["none", "snappy", "lz4", "gzip", "zstd"]:
        assert f"<td>{codec}</td>" in section, codec
    # The page reads as people read: the summary and the charts first, topology and the raw
    # broker metrics after them.
    first_chart = dom.index("<svg")
    assert dom.index("<h2>Summary</h2>") < dom.index("<h2>Time series (1 s)</h2>") < first_chart
    assert first_chart < dom.index("<h2>Topology</h2>") < dom.index("<h2>Broker metrics (scraped)</h2>")
    # The scraped broker histograms list only those that saw samples (the embedded broker
    # exports one per API; a run uses a few), and say how many were left out.
    metrics = dom[dom.index("<h2>Broker metrics (scraped)</h2>"):]
    metrics = metrics[:metrics.index("</p>")]
    rows = re.findall(r"<tr><td[^>]*>([^<]*)</td><td>([^<]*)</td>", metrics)
    assert rows and all(float(n) > 0 for _, n in rows), rows
    assert any('api="Produce"' in name.replace("&quot;", '"') for name, _ in rows), rows
    left_out = re.search(r"(\d+) histograms with no samples not listed", metrics)
    assert left_out and int(left_out.group(1)) > 0, metrics[-500:]
    assert len(rows) + int(left_out.group(1)) == len(r["broker_metrics"]["histograms"])


def test_ab_comparison_html_renders(tmp_path):
    page = tmp_path / "ab.html"
    cmd = [str(sluice_bench_bin()), "--quiet", "--no-settle", "--target", "embedded", "--target", "embedded",
           "--duration", "2s", "--warmup", "0", "--rate", "1000", "--json", "ab.json", "--html", str(page),
           "--omb-json", "omb.json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    dom = assert_renders(tmp_path, page, min_charts=2)
    s = json.loads((tmp_path / "ab.json").read_text())
    # A/A: the same spec twice is two targets, each run twice (A B B A).
    assert s["targets"] == ["embedded#1", "embedded#2"]
    assert [k["target"] for k in s["order"]] == ["embedded#1", "embedded#2", "embedded#2", "embedded#1"]
    (ratio,) = s["ratios"]
    allowed = re.compile(r"^(no difference|n/a|[AB] (faster|better)( \(weak: \d+ runs\))?)$")
    for metric, verdict in ratio["verdicts"].items():
        assert allowed.match(verdict), (metric, verdict)
        ci = ratio["ratio_ci95"][metric]
        r = ratio["ratios"][metric]
        if ci is not None and r is not None:
            assert ci[0] <= ci[1]
            # The verdict follows from the interval.
            assert (verdict == "no difference") == (ci[0] <= 1 <= ci[1]), (metric, ci, verdict)
    for row in s["rows"]:
        st = row["metrics"]["received_msg_s"]
        assert st["n"] == 2 and st["min"] <= st["median"] <= st["max"]
        assert st["ci95_lo"] <= st["mean"] <= st["ci95_hi"]
    assert "Verdicts" in dom and "Runs overlaid" in dom and "95% CI" in dom
    # One OMB file per run, numbered in run order.
    for n in range(1, 5):
        omb = json.loads((tmp_path / f"omb-{n}.json").read_text())
        assert omb["driver"].startswith("embedded")
