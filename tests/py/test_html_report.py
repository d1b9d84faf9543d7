"""`kerncheck test --html`: a self-contained page whose SVG plots draw what the JSON report says.

Renders the page with headless Chromium (Debian package `chromium`) and asserts on the DOM it built:
one orange circle per flipped position (the JSON report's flip count: every position is in the sample
below 20k positions), the four plots with their axis labels, the verdict, no external references.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

KC = os.environ.get("KC_BIN", "kerncheck")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

N, V = 6000, 96


def run(*args, ok=(0,)):
    p = subprocess.run([KC, *map(str, args)], capture_output=True, text=True)
    assert p.returncode in ok, f"kerncheck {' '.join(map(str, args))} → {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    rng = np.random.default_rng(3)
    temp = np.exp(rng.normal(0.3, 0.9, size=(N, 1)))
    ref = (rng.standard_normal((N, V)) * temp).astype(np.float32)
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", rng.integers(0, V, size=N + 1).astype(np.int32))
    segs = [{"name": f"s{i}", "domain": "code" if i % 2 else "prose", "depth": 64 << i, "start": i * 1000,
             "phase": "prefill"} for i in range(N // 1000)]
    (d / "segments.json").write_text(json.dumps(segs))
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", d / "segments.json",
        "-o", d / "golden.safetensors")
    # noise floor: tiny logit noise; candidate: 10× larger, so flips appear at small margins
    for name, sigma in (("noise", 0.01), ("cand", 0.1)):
        np.save(d / f"{name}.npy", (ref + rng.standard_normal(ref.shape) * sigma).astype(np.float32))
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "golden.safetensors", "-o",
            d / f"{name}.safetensors")
    run("test", d / "golden.safetensors", d / "cand.safetensors", "--noise", d / "noise.safetensors", "--json",
        d / "report.json", "--html", d / "report.html", ok=(0, 1, 2))
    return d


def test_page_is_self_contained(report):
    html = (report / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    # the only URLs are the SVG namespace and in-page clip-path references
    assert re.findall(r"(?:src|href)\s*=", html) == []
    urls = set(re.findall(r"https?://[^\s\"')]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert all(re.fullmatch(r"#clip[-\w]+", u) for u in re.findall(r"url\(([^)]*)\)", html))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_chromium_draws_what_the_json_says(report):
    rep = json.loads((report / "report.json").read_text())
    p = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--dump-dom",
                        (report / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    dom = p.stdout
    assert "</svg>" in dom, p.stderr[-2000:]
    flips = rep["flips"]["count"]
    assert flips > 0  # the candidate is noisy enough to flip near-ties
    assert rep["positions_judged"] <= 20000  # so the sample holds every position
    assert len(re.findall(r"<circle[^>]*class=\"flip\"", dom)) == flips
    # the four plots, with their axis labels
    for plot_id in ("kl-cdf", "kl-margin", "flip-bins", "kl-depth"):
        assert f'id="{plot_id}"' in dom
    for label in ("KL(P‖Q) over top-k + other (log scale)", "fraction of positions ≤ KL",
                  "margin (linear to 1, log above on grey)", "flip rate", "reference margin bin",
                  "context depth (tokens, bucket lower edge, log scale)"):
        assert f">{label}</text>" in dom, label
    # one CDF curve per domain; one bar per margin bin for the candidate and for the floor
    assert len(re.findall(r"<polyline[^>]*class=\"cdf\"", dom)) == 2
    assert len(re.findall(r"<rect[^>]*class=\"bin-cand\"", dom)) == 8
    assert len(re.findall(r"<rect[^>]*class=\"bin-floor\"", dom)) == 8
    # the verdict and the deciding statistic
    assert rep["verdict"] in dom and 'id="decided-by"' in dom
    decided = rep["decided_by"]
    assert decided["rule"] in dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_flip_points_sit_at_their_margins(report):
    """Every flip circle's x lies left of the margin-1 line iff its margin is ≤ 1 (the axis break)."""
    html = (report / "report.html").read_text()
    svg = html[html.index('id="kl-margin"'):]
    svg = svg[: svg.index("</svg>")]
    band = re.search(r'<rect x="([\d.]+)" y="[\d.]+" width="[\d.]+" height="[\d.]+" fill="#eeeeee"/>', svg)
    x1 = float(band.group(1))  # where margin 1 is drawn
    for m in re.finditer(r'<circle class="flip" cx="([\d.]+)"[^>]*><title>[^<]*margin ([-\d.e+]+) KL', svg):
        cx, margin = float(m.group(1)), float(m.group(2))
        assert (cx <= x1 + 0.1) == (margin <= 1.0), (cx, margin, x1)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_screenshot_renders(report):
    png = report / "report.png"
    subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                    f"--screenshot={png}", "--window-size=1400,2600", (report / "report.html").as_uri()],
                   capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000
    if os.environ.get("KC_KEEP_SCREENSHOT"):
        shutil.copy(png, os.environ["KC_KEEP_SCREENSHOT"])
