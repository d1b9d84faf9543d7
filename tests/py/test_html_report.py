"""`kerncheck test --html`: a self-contained page whose SVG plots draw what the JSON report says.

Renders the page with headless Chromium (Debian package `chromium`) and asserts on the DOM it built:
one orange circle per flipped position (the JSON report's flip count: every position is in the sample
below 20k positions), the four plots with their axis labels, the verdict, no external references; and
(issue 23) the failing-checks summary, the floor band, legend swatches drawn with their series' dash and
mark, non-overlapping log-axis ticks, decoded tokens in the worst positions, and a layout that holds at
900 px (measured by a probe script run in a copy of the page; the report itself has no script).
"""
import html as htmllib
import json
import math
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


def word(t):
    """The fixture's text of token id t: hostile on purpose (the page must escape it)."""
    return f"<w{t}&\"'> "


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
    tokens = np.load(d / "tokens.npy")
    segs = []
    for i in range(N // 1000):
        # position p predicts tokens[p + 1]: the segment's text is those tokens' words, offsets where each starts
        words = [word(int(t)) for t in tokens[i * 1000 + 1:(i + 1) * 1000 + 1]]
        offsets = np.concatenate([[0], np.cumsum([len(w.encode()) for w in words])[:-1]]).tolist()
        segs.append({"name": f"s{i}", "domain": "code" if i % 2 else "prose", "depth": 64 << i,
                     "start": i * 1000, "phase": "prefill", "text": "".join(words), "offsets": offsets})
    (d / "segments.json").write_text(json.dumps(segs))
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", d / "segments.json",
        "-o", d / "golden.safetensors")
    # noise floor: tiny logit noise; candidate: 10× larger, so flips appear at small margins
    for name, sigma in (("noise", 0.01), ("noise2", 0.01), ("cand", 0.1)):
        np.save(d / f"{name}.npy", (ref + rng.standard_normal(ref.shape) * sigma).astype(np.float32))
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "golden.safetensors", "-o",
            d / f"{name}.safetensors")
    run("test", d / "golden.safetensors", d / "cand.safetensors", "--noise", d / "noise.safetensors",
        d / "noise2.safetensors", "--json",
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


PROBE = r"""<script>
const r = {scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth};
r.tables = [...document.querySelectorAll("table")].map(t => ({cls: t.className,
  right: t.getBoundingClientRect().right, sw: t.scrollWidth, cw: t.clientWidth,
  overflow: getComputedStyle(t).overflowX}));
r.svgs = {};
for (const s of document.querySelectorAll("svg.plot")) {
  const box = e => { const b = e.getBBox(); return [b.x, b.x + b.width, b.y, b.y + b.height, e.textContent]; };
  r.svgs[s.id] = {right: s.getBoundingClientRect().right,
    xticks: [...s.querySelectorAll("text.xtick")].map(box), yticks: [...s.querySelectorAll("text.ytick")].map(box),
    swatches: [...s.querySelectorAll("g.legend .swatch")].map(e => [e.tagName, e.getAttribute("stroke"),
      e.getAttribute("fill"), e.getAttribute("stroke-dasharray"), e.getAttribute("fill-opacity")])};
}
document.body.insertAdjacentHTML("beforeend",
  "<pre id=\"probe\">" + JSON.stringify(r).replace(/&/g, "&amp;").replace(/</g, "&lt;") + "</pre>");
</script>"""


def probe(report, width):
    """Layout figures of the page at a viewport `width`, measured by Chromium in a copy with a probe script."""
    page = (report / "report.html").read_text()
    copy = report / f"probe{width}.html"
    copy.write_text(page.replace("</body>", PROBE + "</body>"))
    p = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                        f"--window-size={width},3000", "--dump-dom", copy.as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stderr[-2000:]
    return json.loads(htmllib.unescape(m.group(1)))


@pytest.fixture(scope="module")
def dom(report):
    p = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--dump-dom",
                        (report / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    return p.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_failing_checks_summary_groups_by_rule_and_statistic(report, dom):
    rep = json.loads((report / "report.json").read_text())
    findings = rep["findings"]
    groups = {}
    for f in findings:  # failing first, largest ratio first: the first of a group is its worst
        g = groups.setdefault((f["rule"], f["statistic"]), {"failed": 0, "checked": 0, "worst": f})
        g["checked"] += 1
        g["failed"] += bool(f["failed"])
    failing = [(k, g) for k, g in groups.items() if g["failed"]]
    assert rep["verdict"] == "FAIL" and failing
    table = re.search(r'<table class="failing-summary">(.*?)</table>', dom, re.S).group(1)
    rows = re.findall(r'<tr class="failed">(.*?)</tr>', table, re.S)
    assert len(rows) == len(failing) < sum(g["failed"] for _, g in failing) + 1
    for ((rule, stat), g), tr in zip(failing, rows):
        cells = [htmllib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
        assert cells[:4] == [rule, stat, f'{g["failed"]} of {g["checked"]}', g["worst"]["split"]]
    # every check is still there, one row each, behind a disclosure
    details = re.search(r'<details class="all-checks">(.*?)</details>', dom, re.S).group(1)
    assert len(re.findall(r'<tr class="(?:failed|ok)">', details)) == len(findings)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_floor_band_spans_the_noise_runs(report, dom):
    rep = json.loads((report / "report.json").read_text())
    assert len(rep["noise"]) == 2
    svg = dom[dom.index('id="kl-depth"'):]
    svg = svg[: svg.index("</svg>")]
    bands = re.findall(r'<polygon class="floor-band"[^>]*points="([^"]*)"', svg)
    assert len(bands) == 1
    pts = [tuple(map(float, p.split(","))) for p in bands[0].split()]
    n_depth = len(re.findall(r"<polyline[^>]*class=\"depth-line\"", svg))  # 4 lines, one polyline each
    assert n_depth == 4
    # up along the max, back along the min: twice the depth buckets, x symmetric, upper edge never below
    half = len(pts) // 2
    assert len(pts) == 2 * half == 2 * len(rep["by_depth"])
    up, down = pts[:half], pts[half:][::-1]
    assert [x for x, _ in up] == [x for x, _ in down]
    assert all(yu <= yd + 1e-9 for (_, yu), (_, yd) in zip(up, down))  # SVG y grows downwards
    assert any(yu < yd - 0.05 for (_, yu), (_, yd) in zip(up, down))  # two runs of different noise: a spread


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_legend_swatches_are_drawn_like_their_series(report):
    r = probe(report, 1400)
    for plot_id, s in r["svgs"].items():
        sw = [tuple(x) for x in s["swatches"]]
        assert len(set(sw)) == len(sw), (plot_id, sw)  # no two entries look alike
    depth = r["svgs"]["kl-depth"]["swatches"]
    lines = [x for x in depth if x[0] == "line"]
    assert [x[3] for x in lines] == [None, "6,3", "2,3", "8,3,2,3"]  # candidate / floor × median / p99
    assert [x[0] for x in depth if x[0] != "line"] == ["rect"] and depth[0][4] == "0.22"  # the band
    assert [x[0] for x in r["svgs"]["kl-margin"]["swatches"]] == ["circle", "circle"]
    assert [x[0] for x in r["svgs"]["flip-bins"]["swatches"]] == ["rect", "rect"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_tick_labels_are_readable_and_never_overlap(report):
    r = probe(report, 1400)
    decade = re.compile(r"(1e-?[3-9]|1e-?[1-9]\d+|1e[3-9]|0\.01|0\.1|1|10|100)")
    for plot_id, s in r["svgs"].items():
        for ticks, lo, hi in ((s["xticks"], 0, 1), (s["yticks"], 2, 3)):
            assert ticks, plot_id
            for a, b in zip(ticks, ticks[1:]):
                same_row = abs(a[2] - b[2]) < 1 if lo == 0 else True
                if same_row:
                    assert min(a[hi], b[hi]) <= max(a[lo], b[lo]), (plot_id, a, b)  # disjoint boxes
            assert not any("e+" in t[4] or "e-0" in t[4] for t in ticks), (plot_id, ticks)
    for plot_id, axis in (("kl-cdf", "xticks"), ("kl-margin", "yticks"), ("kl-depth", "yticks"),
                          ("kl-depth", "xticks")):
        labels = [t[4] for t in r["svgs"][plot_id][axis]]
        assert all(decade.fullmatch(t) for t in labels), (plot_id, axis, labels)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_worst_positions_show_decoded_tokens(report, dom):
    tokens = np.load(report / "tokens.npy")
    table = re.search(r'<table class="worst">(.*?)</table>', dom, re.S).group(1)
    rows = re.findall(r"<tr><td>(\d+)</td>(.*?)</tr>", table, re.S)
    assert len(rows) > 3
    for pos, rest in rows:
        cells = re.findall(r"<td>(.*?)</td>", rest, re.S)
        nxt = re.fullmatch(r'<code class="tok" title="id (\d+)">(.*?)</code>', cells[4], re.S)
        assert nxt, cells[4]
        tid = int(nxt.group(1))
        assert tid == tokens[int(pos) + 1] and htmllib.unescape(nxt.group(2)) == word(tid)
        # every decoded token in the top-3 cells carries its own id's text
        for cell in cells[5:7]:
            for i, t in re.findall(r'<code class="tok" title="id (\d+)">(.*?)</code>', cell, re.S):
                assert htmllib.unescape(t) == word(int(i))
    assert "<w" not in table  # the hostile text arrives escaped


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_layout_holds_at_900px(report):
    r = probe(report, 900)
    assert r["clientWidth"] <= 900
    assert r["scrollWidth"] <= r["clientWidth"], r["scrollWidth"]  # no horizontal scroll of the page
    for t in r["tables"]:
        assert t["right"] <= r["clientWidth"] + 0.5, t  # a wide table scrolls in its own box
        assert t["overflow"] == "auto", t  # its own scroll box, should a row be wider than the page
    for plot_id, s in r["svgs"].items():
        assert s["right"] <= r["clientWidth"] + 0.5, (plot_id, s["right"])


def test_floor_test_table_matches_the_json_and_the_text_report(report):
    """The page's floor-test table (per split: KL mean, floor mean, floor runs' min…max, t, p, MDE ×,
    significant) says what the JSON report's floor tests say, row for row, and the text report prints the
    same cells (one source of the rows)."""
    rep = json.loads((report / "report.json").read_text())
    tests = rep["floor_test"]["tests"]
    assert len(tests) >= 3
    html = (report / "report.html").read_text()
    table = re.search(r'<table class="floor-test">(.*?)</table>', html, re.S).group(1)
    head = [htmllib.unescape(c) for c in re.findall(r"<th>(.*?)</th>", table)]
    assert head == ["split", "KL mean", "floor", "floor runs min…max", "t", "p", "MDE ×", "significant"]
    rows = re.findall(r'<tr class="(failed|ok)">(.*?)</tr>', table, re.S)
    assert len(rows) == len(tests)

    def near(cell, v):  # three significant digits
        return math.isclose(float(cell), v, rel_tol=6e-3)

    text = run("test", report / "golden.safetensors", report / "cand.safetensors", "--noise",
               report / "noise.safetensors", report / "noise2.safetensors", ok=(0, 1, 2)).stdout
    for (cls, tr), t in zip(rows, tests):
        cells = [htmllib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
        split = cells[0].removesuffix(" *")
        assert split == t["split"] and cells[0].endswith(" *") == t["matters"]
        assert near(cells[1], t["value"]) and near(cells[2], t["floor_mean"])
        lo, hi = cells[3].split("…")
        assert near(lo, min(t["floor_runs"])) and near(hi, max(t["floor_runs"]))
        assert math.isclose(float(cells[4]), t["t"], abs_tol=0.006)
        assert near(cells[5], t["p_value"]) and near(cells[6], t["mde_ratio"])
        assert cells[7] == ("yes" if t["significant"] else "no") and (cls == "failed") == t["significant"]
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(split + " ") and "…" in ln)
        assert all(c in line for c in cells[1:7]), (line, cells)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_depth_profile_plot_and_table_draw_the_json(report, dom):
    """The depth profile: one point of the candidate's line per bucket (its ratio to the floor), one orange
    point per bucket outside the floor's spread, the onset's line and sentence, the table behind a
    disclosure (docs/judge.md, "Depth profile and onset")."""
    rep = json.loads((report / "report.json").read_text())
    prof = rep["depth_profile"]
    assert prof["buckets"] and prof["onset"]["found"]  # 10× the floor's noise everywhere
    svg = dom[dom.index('id="depth-profile"'):]
    svg = svg[: svg.index("</svg>")]
    assert ">KL mean ÷ floor mean (log scale)</text>" in svg
    line = re.findall(r'<polyline[^>]*class="profile-line"[^>]*points="([^"]*)"', svg)
    assert len(line) == 1 and len(line[0].split()) == len(prof["buckets"])
    outside = sum(b["outside"] for b in prof["buckets"])
    assert outside > 0 and len(re.findall(r'<circle class="outside"', svg)) == outside
    assert len(re.findall(r'<polyline[^>]*class="onset"', svg)) == 1
    sentence = htmllib.escape(prof["onset"]["sentence"], quote=False)
    assert sentence in dom.replace("&quot;", '"') and 'id="onset"' in dom
    table = re.search(r'<details class="depth-profile">(.*?)</details>', dom, re.S).group(1)
    rows = re.findall(r'<tr class="(failed|ok)">(.*?)</tr>', table, re.S)
    assert len(rows) == len(prof["buckets"])
    for (cls, tr), b in zip(rows, prof["buckets"]):
        cells = [htmllib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
        assert cells[1] == str(b["n"]) and (cls == "failed") == b["outside"]
