"""One judge for `kerncheck test`, `kerncheck merge` and `kerncheck.test()` (docs/judge.md): the same options
(one table: flag, Python keyword, default, validation, help), the same floor checks, the same report; the
verdict's rules where their inputs were once taken at face value; the headline; what the reports say.

Real files throughout: goldens and candidates recorded from numpy logits by `kerncheck record --from-logits`
(with `--engine kerncheck --variant V` where a provenance is needed), judged by the CLI and the extension.
"""
import inspect
import itertools
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from kc_env import import_kerncheck, log_softmax
from test_judge_metrics import real_looking_logits, run

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build")).resolve()
kerncheck = import_kerncheck(BUILD)

NSEG, L, V, SIGMA = 24, 200, 500, 0.02
N = NSEG * L
FLOOR = [f"n{i}" for i in range(4)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A golden of 24 segments (two domains, prefill and decode), four floor runs and candidates drawn like
    them (ok), 1.25× their per-logit noise (bad), 3× (x3), and one whose top-2 are swapped at 40 positions of
    reference margin in (1, 2] on top of 2× the noise (swap)."""
    d = tmp_path_factory.mktemp("pipeline")
    rng = np.random.default_rng(36)
    ref = real_looking_logits(rng, N, V)
    tokens = np.array([rng.choice(V, p=np.exp(r)) for r in log_softmax(ref)], np.int32)
    segs = [{"name": f"s{j}", "domain": "code" if j % 2 else "prose", "depth": 0, "start": j * L,
             "decode_from": L // 2} for j in range(NSEG)]
    (d / "segs.json").write_text(json.dumps(segs))
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", tokens)
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", d / "segs.json",
        "-o", d / "g.st", rc=0)
    runs = [(n, SIGMA, 10 + i) for i, n in enumerate(FLOOR)] + [("ok", SIGMA, 20), ("bad", 1.25 * SIGMA, 21),
                                                                  ("x3", 3 * SIGMA, 22)]
    for name, scale, seed in runs:
        x = (ref + np.random.default_rng(seed).normal(0, scale, ref.shape)).astype(np.float32)
        np.save(d / f"{name}.npy", x)
    lp = log_softmax(ref)
    top = np.argsort(-ref, axis=1)[:, :2]
    margin = np.take_along_axis(lp, top[:, :1], 1)[:, 0] - np.take_along_axis(lp, top[:, 1:], 1)[:, 0]
    x = (ref + np.random.default_rng(23).normal(0, 2 * SIGMA, ref.shape)).astype(np.float32)
    rows = np.flatnonzero((margin > 1.1) & (margin < 1.9))[:40]
    assert len(rows) == 40
    for i in rows:
        a, b = top[i]
        x[i, a], x[i, b] = x[i, b], x[i, a]
    np.save(d / "swap.npy", x)
    for name in [r[0] for r in runs] + ["swap"]:
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "g.st", "-o", d / f"{name}.st", rc=0)
    return d


def rec(d, logits, variant, name=None):
    """A candidate file of `logits` (a .npy of the fixture) that says the lab's engine made it as `variant`."""
    out = d / f"{name or logits + '_' + re.sub(r'[^a-z0-9]+', '_', variant)}.st"
    if not out.exists():
        run("record", "--from-logits", d / f"{logits}.npy", "--golden", d / "g.st", "--engine", "kerncheck",
            "--variant", variant, "-o", out, rc=0)
    return out


def cli(d, cand, *extra, rc=None, tag=""):
    out = d / f"r_{Path(str(cand)).stem}_{abs(hash(tuple(map(str, extra)) + (tag,)))}.json"
    p = run("test", d / "g.st", cand, "--json", out, *extra, rc=rc)
    return (json.loads(out.read_text()) if out.exists() and p.returncode in (0, 1, 2) else None), p


def noise_args(d, names=FLOOR):
    return [a for n in names for a in ("--noise", d / f"{n}.st")]


def thresholds_file(d, limits, name="th.toml"):
    body = "\n".join(f'"{k}" = {v}' for k, v in limits.items())
    (d / name).write_text(f'[kerncheck]\nformat = "thresholds"\nversion = 1\n\n[limits]\n{body}\n')
    return d / name


# ---- defects: each of these once gave a silent wrong answer ----------------------------------------------------
def test_python_checks_the_floor_provenance_like_the_cli(data):
    """kerncheck.test() once judged a noise run labelled f32 against a bf16 candidate (PASS, silently) where
    the CLI refused it (exit 3)."""
    d = data
    c, f1, f32 = rec(d, "ok", "bf16+p=fp8"), rec(d, "n0", "bf16+order=1"), rec(d, "n1", "f32")
    p = run("test", d / "g.st", c, "--noise", f1, "--noise", f32, rc=3)
    assert "base precision" in p.stderr
    with pytest.raises(kerncheck.Error, match="base precision"):
        kerncheck.test(d / "g.st", c, noise=[f1, f32])
    r = kerncheck.test(d / "g.st", c, noise=[f1, f32], allow_floor_mismatch=True)
    assert r.json["notes"][0].startswith("FLOOR MISMATCH") and len(r.json["floor_mismatches"]) == 1
    assert r.json["candidate_made_by"] == {"engine": "kerncheck", "variant": "bf16+p=fp8"}


def test_backstop_margin_is_no_option(data):
    """`backstop_margin` was accepted by kerncheck.test() and never read (0.01, 1 and 100 judged alike): the
    backstop's margin is the margin bins' edge 1, one constant, and the keyword is refused."""
    d = data
    with pytest.raises(TypeError, match="backstop_margin"):
        kerncheck.test(d / "g.st", d / "ok.st", noise=[d / "n0.st"], backstop_margin=100)
    assert "--backstop-margin" not in run("test", "--help").stdout


def test_a_kv_dtype_written_either_way_matches(data):
    """A variant this build cannot parse (a newer term) was compared by its terms as written (`kv=bf16`) and a
    parsed one by the dtype's name (`bfloat16`): a good floor was refused."""
    d = data
    c = rec(d, "ok", "bf16+kv=bf16+newer_term=1")
    f = [rec(d, "n0", "bf16+kv=bf16+order=1"), rec(d, "n1", "bf16+kv=bf16+order=2")]
    rep, p = cli(d, c, "--noise", f[0], "--noise", f[1])
    assert p.returncode in (0, 1, 2), p.stderr
    assert rep["floor_mismatches"] == []
    # Both directions.
    c2 = rec(d, "ok", "bf16+kv=bf16+order=7")
    f2 = [rec(d, "n0", "bf16+kv=bf16+newer_term=1"), rec(d, "n1", "bf16+kv=bf16+newer_term=2")]
    _, p = cli(d, c2, "--noise", f2[0], "--noise", f2[1])
    assert p.returncode in (0, 1, 2), p.stderr
    # A real difference is still found, spelt either way.
    f3 = [rec(d, "n0", "bf16+kv=f16+order=1"), rec(d, "n1", "bf16+kv=fp8+newer_term=1")]
    for f in f3:
        p = run("test", d / "g.st", c, "--noise", f2[0], "--noise", f, rc=3)
        assert "KV cache" in p.stderr


def test_thresholds_mode_marks_no_flip_bin_significant(data):
    """In thresholds mode the noise runs give ratios only: the flip bins once carried Holm "significant"
    marks (and p-values) that the verdict ignored."""
    d = data
    rep, _ = cli(d, d / "x3.st", *noise_args(d), rc=1)
    assert any(b["significant"] for b in rep["flip_rate_by_margin"])  # the same data in noise mode
    th = thresholds_file(d, {"kl_mean": 1e9})
    rep, _ = cli(d, d / "x3.st", *noise_args(d), "--thresholds", th, rc=0)
    assert rep["mode"] == "thresholds"
    assert not any(b["significant"] for b in rep["flip_rate_by_margin"])
    assert all(b["p_value"] is None for b in rep["flip_rate_by_margin"])
    assert all(b["floor"]["n"] > 0 for b in rep["flip_rate_by_margin"] if b["n"])  # the floor's counts stay
    assert rep["floor_test"]["family_size"] == 0 and rep["floor_test"]["tests"] == []


def test_merge_refuses_shards_judged_against_other_floors(data):
    """Shard 1 judged against one floor, shard 2 against another: merge once reported PASS listing one
    floor. Noise run r must be the same run in every shard (its engine and variant; its path where the
    file has no provenance)."""
    d = data
    half = N // 2

    def shard(tag, rng_, *noise):
        s = d / f"{tag}.kcpart"
        run("test", d / "g.st", d / "ok.st", *[a for n in noise for a in ("--noise", n)], "--positions", rng_,
            "--partial", s, rc=0)
        return s

    a = shard("fa", f"0:{half}", d / "n0.st", d / "n1.st")
    b = shard("fb", f"{half}:{N}", d / "n2.st", d / "n3.st")
    p = run("merge", a, b, rc=3)
    assert "n2.st" in p.stderr and "n0.st" in p.stderr, p.stderr
    # Lab runs: the variants name the floor.
    c = rec(d, "ok", "bf16+p=fp8")
    o1, o2, o3 = (rec(d, f"n{i}", f"bf16+order={i + 1}") for i in range(3))

    def lab_shard(tag, rng_, *noise):
        s = d / f"{tag}.kcpart"
        run("test", d / "g.st", c, *[a for n in noise for a in ("--noise", n)], "--positions", rng_, "--partial",
            s, rc=0)
        return s

    x = lab_shard("la", f"0:{half}", o1, o2)
    y = lab_shard("lb", f"{half}:{N}", o1, o3)
    p = run("merge", x, y, rc=3)
    assert "bf16+order=3" in p.stderr and "bf16+order=2" in p.stderr, p.stderr
    # The same floor in both shards merges (and equals the one-pass report's verdict and figures).
    y2 = lab_shard("lb2", f"{half}:{N}", o1, o2)
    out = d / "merged.json"
    p = run("merge", x, y2, "--json", out)
    assert p.returncode in (0, 1, 2), p.stderr
    one, _ = cli(d, c, "--noise", o1, "--noise", o2)
    merged = json.loads(out.read_text())
    assert merged["verdict"] == one["verdict"] and merged["stats"] == one["stats"]
    assert merged["noise"] == one["noise"]


def test_a_limit_on_a_split_the_golden_lacks_is_refused(data):
    """`"domain.prosee.kl_mean" = 1e-9` was accepted and applied to nothing: the run PASSed."""
    d = data
    th = thresholds_file(d, {"domain.prosee.kl_mean": 1e-9, "kl_mean": 1e9}, "typo.toml")
    p = run("test", d / "g.st", d / "ok.st", "--thresholds", th, rc=3)
    assert "domain.prosee.kl_mean" in p.stderr and "domain.prose" in p.stderr, p.stderr
    with pytest.raises(kerncheck.Error, match="prosee"):
        kerncheck.test(d / "g.st", d / "ok.st", thresholds=th)
    # A depth that is no bucket's lower edge names nothing either.
    th = thresholds_file(d, {"depth.100.kl_mean": 1e-9}, "depth.toml")
    p = run("test", d / "g.st", d / "ok.st", "--thresholds", th, rc=3)
    assert "depth.100" in p.stderr and "64" in p.stderr, p.stderr
    # A split of this golden that is too small to measure stays a "not measured" line, not an error.
    th = thresholds_file(d, {"depth.0.kl_mean": 1e-9, "kl_mean": 1e9}, "small.toml")
    rep, _ = cli(d, d / "ok.st", "--thresholds", th, rc=0)
    assert any("not measured" in f["detail"] for f in rep["findings"])


# ---- what a reader sees --------------------------------------------------------------------------------------
class Tables(HTMLParser):
    """Rows of every <table> by its class: [[cell text, …], …]."""

    def __init__(self):
        super().__init__()
        self.tables, self.cls, self.row, self.cell = {}, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.cls = a.get("class", "")
            self.tables.setdefault(self.cls, [])
        elif tag == "tr" and self.cls is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append(self.cell.strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.tables[self.cls].append(self.row)
            self.row = None
        elif tag == "table":
            self.cls = None

    def handle_data(self, s):
        if self.cell is not None:
            self.cell += s


def number(cell):
    return float(cell.replace("×", "").replace("%", "").split(" ")[0].replace("–", "nan"))


def test_html_summary_shows_the_floor_the_ratios_divide_by(data):
    """The Summary's "noise floor" column showed the first noise run while "ratio to floor" divided by the
    mean of all of them (0.0138 vs 0.0277 printed as 0.81×)."""
    d = data
    html = d / "sum.html"
    rep, _ = cli(d, d / "bad.st", *noise_args(d), "--html", html)
    t = Tables()
    t.feed(html.read_text())
    rows = {r[0]: r for r in t.tables["summary"][1:]}
    assert "mean of 4" in " ".join(t.tables["summary"][0])
    checked = 0
    for key, label in [("kl_median", "KL median"), ("kl_p99", "KL p99"), ("kl_max", "KL max"), ("sigma", None)]:
        row = next((r for k, r in rows.items() if (label and k == label) or (not label and k.startswith("σ"))))
        floor = rep["floor_stats"][key]
        assert abs(number(row[2]) - floor) <= 5e-4 * abs(floor), (key, row, floor)
        assert abs(number(row[3]) - rep["noise_ratio"][key]) <= 5e-4 * rep["noise_ratio"][key], (key, row)
        checked += 1
    assert checked == 4


def test_html_says_floor_mismatch(data):
    d = data
    c, f1, f32 = rec(d, "ok", "bf16+p=fp8"), rec(d, "n0", "bf16+order=1"), rec(d, "n1", "f32")
    html = d / "mm.html"
    rep, p = cli(d, c, "--noise", f1, "--noise", f32, "--allow-floor-mismatch", "--html", html)
    assert "FLOOR MISMATCH" in p.stdout and rep["floor_mismatches"]
    page = html.read_text()
    assert "FLOOR MISMATCH" in page and "n1_f32.st" in page


def test_a_kv_dtype_refusal_gives_the_right_advice(data):
    """A KV-dtype candidate against a bf16 floor was told to "record the floor with them": wrong where the
    KV dtype is the change under test."""
    d = data
    c = rec(d, "ok", "bf16+kv=fp8")
    f = [rec(d, "n0", "bf16+order=1"), rec(d, "n1", "bf16+order=2")]
    p = run("test", d / "g.st", c, "--noise", f[0], "--noise", f[1], rc=3)
    assert "record the floor with them" not in p.stderr
    assert "change under test" in p.stderr and "--allow-floor-mismatch" in p.stderr and "kv=fp8" in p.stderr


def test_fail_headline_is_the_strongest_evidence(data):
    """The headline was the finding with the largest ratio: a flip bin against a floor of no flips ("inf×")
    led while the KL mean, far outside the floor in every split, sat lower."""
    d = data
    html = d / "swap.html"
    rep, p = cli(d, d / "swap.st", *noise_args(d), "--html", html, rc=1)
    failed = [f for f in rep["findings"] if f["failed"]]
    rules = [f["rule"] for f in failed]
    assert {"floor_test", "kl_limit", "backstop", "flip_test"} <= set(rules), rules
    assert rep["decided_by"]["rule"] == "floor_test" and rep["decided_by"]["split"] == "overall"
    # Failing findings come rule by rule in the documented order, each rule's strongest first.
    order = ["nonfinite", "floor_test", "kl_limit", "threshold", "flip_test", "backstop"]
    assert rules == sorted(rules, key=order.index)
    ft = [f for f in failed if f["rule"] == "floor_test"]
    tests = {t["split"]: t for t in rep["floor_test"]["tests"]}
    ts = [tests[f["split"]]["t"] for f in ft]
    assert ts == sorted(ts, reverse=True)
    # The headline in words: the statistic, how many splits, the ratio to the floor, the test.
    h = rep["headline"]
    n_failed, n_tests = len(ft), len(rep["floor_test"]["tests"])
    assert h.startswith("KL mean") and f"{n_failed} of {n_tests} splits" in h and "× the floor" in h and "t = " in h
    assert h in p.stdout.splitlines()[1] or h in p.stdout
    assert h in html.read_text()
    assert f"FAIL: {h}" in (d / "swap.html").read_text() or h in (d / "swap.html").read_text()


def test_caveats_under_a_fail_are_not_reasons(data):
    """Power caveats under a FAIL read like reasons for INCONCLUSIVE: they are said as caveats that do not
    change the verdict."""
    d = data
    html = d / "cav.html"
    rep, p = cli(d, d / "x3.st", *noise_args(d), "--mde-target", "1.01", "--html", html, rc=1)
    assert rep["inconclusive_reasons"]  # the power rule still speaks
    page = html.read_text()
    assert 'class="caveats"' in page and 'class="inconclusive"' not in page
    assert "do not change a FAIL" in page and "do not change a FAIL" in p.stdout


# ---- the power target and the headline order are pinned ----------------------------------------------------------
def test_the_power_target_is_1_25(data):
    """A split that matters must detect a 1.25× increase of its KL mean: a floor whose decode MDE lies between
    1.25× and 1.5× is INCONCLUSIVE by default and PASSes only when a weaker target is asked for."""
    d = data
    found = 0
    for floor in itertools.combinations(FLOOR, 3):  # three runs: MDEs around 1.25× on this corpus
        rep, _ = cli(d, d / "ok.st", *noise_args(d, floor), tag="p" + "".join(floor))
        worst = max((t["mde_ratio"] for t in rep["floor_test"]["tests"] if t["matters"]), default=0)
        assert not [f for f in rep["findings"] if f["failed"]] and rep["floor_test"]["mde_target"] == 1.25
        assert rep["verdict"] == ("PASS" if worst <= 1.25 else "INCONCLUSIVE"), (floor, worst)
        if 1.25 < worst < 1.5:
            rep2, _ = cli(d, d / "ok.st", *noise_args(d, floor), "--mde-target", "1.5", tag="q" + "".join(floor))
            assert rep2["verdict"] == "PASS"
            found += 1
    assert found, "no floor of this corpus has its worst MDE between 1.25× and 1.5×"
    sig = inspect.signature(kerncheck.test)
    assert sig.parameters["mde_target"].default == 1.25
    assert re.search(r"--mde-target FLOAT=1\.25 ", run("test", "--help").stdout)


# ---- one option table ------------------------------------------------------------------------------------------
CLI_ONLY = {"--help", "--positions", "--partial", "--quiet"}  # shards and the terminal: not the Python API's
PY_NAME = {"--json": "json_path"}


def flags(help_text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))


def test_cli_and_python_offer_the_same_judge_options():
    table = kerncheck._core.judge_option_table()
    assert table and all(set(t) >= {"flag", "python", "kind", "default", "help"} for t in table)
    sig = inspect.signature(kerncheck.test)
    kw = {n: p for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY}
    test_flags, merge_flags = (flags(run(c, "--help").stdout) for c in ("test", "merge"))
    for t in table:
        assert t["flag"] in test_flags and t["flag"] in merge_flags, t["flag"]
        assert t["python"] in kw and kw[t["python"]].default == t["default"], t
        assert t["python"] == t["flag"][2:].replace("-", "_")
        assert t["help"] and t["help"] in (kerncheck.test.__doc__ or "")
    # Every flag of `kerncheck test` is a keyword of kerncheck.test() and the other way round.
    py_of = {f: PY_NAME.get(f, f[2:].replace("-", "_")) for f in test_flags - CLI_ONLY}
    assert set(py_of.values()) == set(kw) | {"noise", "thresholds"}, (set(py_of.values()) ^ (set(kw) | {"noise", "thresholds"}))


@pytest.mark.parametrize("bad", [("alpha", 0), ("alpha", 1.5), ("kl_factor", 0.5), ("mde_target", 1.0),
                                 ("min_coverage", 2), ("power", 1), ("min_positions", -1),
                                 ("onset_alpha", 0), ("onset_alpha", 1)])
def test_every_entry_refuses_the_same_bad_option(data, bad):
    d = data
    name, value = bad
    flag = "--" + name.replace("_", "-")
    p = run("test", d / "g.st", d / "ok.st", flag, value, rc=3)
    msg = p.stderr.strip().splitlines()[-1]
    assert flag in msg
    with pytest.raises(kerncheck.Error) as e:
        kerncheck.test(d / "g.st", d / "ok.st", **{name: value})
    assert flag in str(e.value)
    s = d / "one.kcpart"
    run("test", d / "g.st", d / "ok.st", "--positions", f"0:{N}", "--partial", s, rc=0)
    p = run("merge", s, flag, value, rc=3)
    assert flag in p.stderr


# ---- the CLI and Python judge alike on every corpus of these tests -------------------------------------------------
def same_reports(a, b):
    """Equal apart from the paths the Python driver gave in other spellings (none: the same strings)."""
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


CASES = [
    ("ok", [], []),
    ("ok", ["n0"], []),
    ("ok", FLOOR, []),
    ("bad", FLOOR, []),
    ("x3", FLOOR, ["--explain"]),
    ("swap", FLOOR[:2], ["--kl-factor", "3", "--alpha", "0.01", "--min-uncertain", "10"]),
    ("bad", FLOOR, ["--mde-target", "1.6", "--power", "0.9", "--min-split-center", "400", "--min-split-tail", "2000"]),
    ("x3", FLOOR, ["THRESHOLDS"]),
    ("ok", [], ["THRESHOLDS"]),
    ("ok", FLOOR[:3], ["--min-positions", "100000", "--min-coverage", "0.5", "--kl-abs-min", "1e-3"]),
]


def py_kwargs(extra, th):
    kw, i = {}, 0
    while i < len(extra):
        if extra[i] == "THRESHOLDS":
            kw["thresholds"] = th
            i += 1
        elif extra[i] == "--explain":
            kw["explain"] = True
            i += 1
        else:
            name = extra[i][2:].replace("-", "_")
            v = float(extra[i + 1])
            kw[name] = int(v) if name.startswith("min_") and name not in ("min_coverage",) else v
            i += 2
    return kw


@pytest.mark.parametrize("case", range(len(CASES)))
def test_python_and_cli_judge_alike(data, case):
    d = data
    cand, noise, extra = CASES[case]
    th = thresholds_file(d, {"kl_mean": 2e-3, "flip_rate_uncertain": 0.2}, "both.toml")
    args = [a if a != "THRESHOLDS" else None for a in extra]
    cli_args = []
    for a in args:
        cli_args += ["--thresholds", th] if a is None else [a]
    rep, p = cli(d, d / f"{cand}.st", *noise_args(d, noise), *cli_args, tag=str(case))
    r = kerncheck.test(d / "g.st", d / f"{cand}.st", noise=[d / f"{n}.st" for n in noise], **py_kwargs(extra, th))
    assert r.exit_code == p.returncode and r.verdict == rep["verdict"]
    same_reports(r.json, rep)
    assert r.text == p.stdout


def test_python_and_cli_judge_alike_on_the_metric_corpora(tmp_path):
    """A corpus like test_judge_metrics' hard cases (exact ties at the top, a candidate and a floor given as
    files or as full logits): the same report from both."""
    rng = np.random.default_rng(9)
    x = real_looking_logits(rng, 1200, 300)
    y = (x + rng.normal(0, 0.05, x.shape)).astype(np.float32)
    z = (x + rng.normal(0, 0.05, x.shape)).astype(np.float32)
    rows = np.arange(0, 1200, 5)
    x[rows, 3] = x[rows, 200] = x[rows].max(axis=1) + 1.0
    for name, a in [("r", x), ("c", y), ("n", z)]:
        np.save(tmp_path / f"{name}.npy", a)
    np.save(tmp_path / "t.npy", np.zeros(1200, np.int32))
    run("record", "--from-logits", tmp_path / "r.npy", "--tokens", tmp_path / "t.npy", "-o", tmp_path / "g.st", rc=0)
    for name in ("c", "n"):
        run("record", "--from-logits", tmp_path / f"{name}.npy", "--golden", tmp_path / "g.st", "-o",
            tmp_path / f"{name}.st", rc=0)
    for cand, noise in [(tmp_path / "c.st", [tmp_path / "n.st"]), (tmp_path / "c.npy", [tmp_path / "n.npy"]),
                        (tmp_path / "c.npy", [])]:
        out = tmp_path / "cli.json"
        p = run("test", tmp_path / "g.st", cand, *[a for n in noise for a in ("--noise", n)], "--json", out)
        r = kerncheck.test(tmp_path / "g.st", cand, noise=noise)
        assert r.exit_code == p.returncode
        same_reports(r.json, json.loads(out.read_text()))
