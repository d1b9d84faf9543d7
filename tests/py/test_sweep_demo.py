"""kerncheck sweep and kerncheck demo (docs/demo.md) on the llama-tiny fixture.

The sweep rounds `hidden` on the bf16 base; the noise pair is bf16 and bf16+attn=flash. Checks, each
against an independent computation:
- every row's KL median equals numpy's median of the per-position KL (top-k + other) computed from the
  golden and candidate files, and its verdict and statistics equal `kerncheck test` run separately on the
  same candidate file with the same noise runs;
- the knee equals the widest width from which every narrower width's `kerncheck test` verdict is FAIL,
  and the widest width tried stays at the floor (so the knee is a knee, not "everything fails");
- a rerun reuses every file and gives the same rows;
- the demo machinery runs end to end on the hidden `--preset tiny` (a few short segments: it exercises
  the code, it measures nothing) and reuses its files on a rerun;
- bad flags exit 3.
"""
import json
import re
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from kc_env import kc, write_tokenizer
from test_corpus_record import CODE, PROSE

DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
TINY = DATA / "fixtures" / "llama-tiny"
BITS = [9, 7, 5, 3, 1, 0]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    model = d / "model"
    shutil.copytree(TINY, model)
    write_tokenizer(model / "tokenizer.json")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    corpus = d / "c.kcc"
    kc("corpus", "build", "--tokenizer", model, "--depths", "48,64", "--segments-per-depth", "4",
       "--decode-last", "8", "--prose", d / "prose.txt", "--code", d / "code.py", "-o", corpus)
    golden = d / "g.kcg"
    kc("record", "--model", model, "--corpus", corpus, "-o", golden)
    noise = [d / "n-bf16.kcc", d / "n-flash.kcc"]
    kc("record", "--model", model, "--golden", golden, "--variant", "bf16", "-o", noise[0])
    kc("record", "--model", model, "--golden", golden, "--variant", "bf16+attn=flash", "-o", noise[1])
    out = d / "sweep"
    js = d / "sweep.json"
    r = kc("sweep", "--model", model, "--golden", golden, "--tensor", "hidden", "--bits", ",".join(map(str, BITS)),
           "--noise", noise[0], "--noise", noise[1], "--out-dir", out, "--json", js, "--html", d / "sweep.html")
    return d, model, golden, noise, out, json.loads(js.read_text()), r.stdout


def kl_top_k_other(golden, cand):
    """Per-position KL over the golden's top-k plus the 'other' bucket (docs/judge.md), in f64."""
    g, c = load_file(str(golden)), load_file(str(cand))
    lp = g["top_logprobs"].astype(np.float64)
    lq = c["logprobs_at_ref"].astype(np.float64)
    po, lpo = np.exp(g["other_logprob"].astype(np.float64)), g["other_logprob"].astype(np.float64)
    lqo = c["other_logprob"].astype(np.float64)
    p = np.exp(lp)
    return (p * (lp - lq)).sum(axis=1) + np.where(po > 0, po * (lpo - lqo), 0.0)


def test_rows_agree_with_test_and_numpy(setup):
    d, _, golden, noise, _, sj, _ = setup
    assert [r["bits"] for r in sj["rows"]] == BITS
    verdicts = {}
    for row in sj["rows"]:
        rep = d / f"t{row['bits']}.json"
        r = kc("test", golden, row["candidate"], "--noise", noise[0], "--noise", noise[1], "--json", rep, check=False)
        assert r.returncode in (0, 1, 2), r.stderr
        t = json.loads(rep.read_text())
        verdicts[row["bits"]] = t["verdict"]
        assert row["verdict"] == t["verdict"]
        assert row["kl_median"] == pytest.approx(t["kl"]["median"], rel=1e-12)
        assert row["kl_p99"] == pytest.approx(t["kl"]["p99"], rel=1e-12)
        assert row["flips"] == t["flips"]["count"]
        failed = [(f["rule"], f["split"], f["statistic"]) for f in t["findings"] if f["failed"]]
        assert [(f["rule"], f["split"], f["statistic"]) for f in row["failed"]] == failed
        kl = kl_top_k_other(golden, row["candidate"])
        assert row["kl_median"] == pytest.approx(np.median(kl), rel=1e-4, abs=1e-9)
    # The knee, recomputed from the separate verdicts.
    knee = None
    for b in sorted(BITS):  # narrowest first
        if verdicts[b] != "FAIL":
            break
        knee = b
    assert knee is not None and sj["knee"] == knee
    assert verdicts[BITS[0]] != "FAIL", "the widest width should stay at the floor"
    assert sj["knee_statistic"]["statistic"]


def test_text_and_html(setup):
    d, *_, sj, stdout = setup
    assert f"knee at {sj['knee']} bits" in stdout
    html = (d / "sweep.html").read_text()
    assert 'class="knee"' in html and 'class="floor"' in html and html.count("<svg") == 2
    # each legend swatch is drawn as its series is: no two entries of a plot look alike (issue 23)
    for svg in html.split("<svg")[1:]:
        legend = svg[svg.index('<g class="legend">'):]
        swatches = [re.sub(r'\s(?:x|y|x1|x2|y1|y2|cx|cy)="[^"]*"', "", m)
                    for m in re.findall(r'<(?:line|circle|rect) class="swatch"[^>]*>', legend)]
        assert len(swatches) >= 2 and len(set(swatches)) == len(swatches), swatches


def test_rerun_reuses(setup):
    d, model, golden, noise, out, sj, _ = setup
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    js = d / "again.json"
    kc("sweep", "--model", model, "--golden", golden, "--tensor", "hidden", "--bits", ",".join(map(str, BITS)),
       "--noise", noise[0], "--noise", noise[1], "--out-dir", out, "--json", js)
    again = json.loads(js.read_text())
    assert all(r["reused"] for r in again["rows"])
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("reused", "record_seconds")} for r in rows]
    assert strip(again["rows"]) == strip(sj["rows"]) and again["knee"] == sj["knee"]


def test_bad_flags(setup):
    d, model, golden, noise, *_ = setup
    base = ["sweep", "--model", model, "--golden", golden, "--out-dir", d / "bad"]
    for extra in (["--tensor", "hidden", "--bits", "30..2", "--noise", noise[0]],
                  ["--tensor", "hidden", "--bits", "x", "--noise", noise[0]],
                  ["--tensor", "hidden", "--bits", "4"],  # no floor
                  ["--tensor", "no such!", "--bits", "4", "--noise", noise[0]],
                  ["--tensor", "hidden", "--bits", "4", "--base", "bf17", "--noise", noise[0]]):
        r = kc(*base, *extra, check=False)
        assert r.returncode == 3, (extra, r.stdout, r.stderr)
        assert "error" in r.stderr
    assert kc("demo", "--preset", "bogus", "--model", model, check=False).returncode == 3
    assert kc("demo", "--preset", "tiny", "--model", d / "missing.gguf", check=False).returncode == 3


def test_demo_tiny(setup):
    d, model, *_ = setup
    out = d / "demo"
    args = ["demo", "--preset", "tiny", "--model", model, "--out-dir", out, "--prose", d / "prose.txt",
            "--code", d / "code.py"]
    r = kc(*args, check=False)
    assert r.returncode in (0, 1), r.stderr
    s = json.loads((out / "summary.json").read_text())
    names = [x["name"] for x in s["runs"]]
    assert names == ["bf16", "bf16-flash", "order-1", "order-2", "order-3", "order-4", "order-5", "order-6", "p-bf16", "p-f16", "p-fp8",
                     "p-fp8-flash", "p-fp8x448", "p-fp8x256"]
    assert len(s["expectations"]) == 4
    assert (r.returncode == 0) == all(e["held"] for e in s["expectations"])
    for n in names:
        assert (out / "reports" / f"{n}.html").exists()
        # The summary's numbers are the per-run report's.
        rep = json.loads((out / "reports" / f"{n}.json").read_text())
        x = next(x for x in s["runs"] if x["name"] == n)
        assert x["verdict_floor"] == rep["verdict"] and x["kl_median_prose"] == rep["by_domain"]["prose"]["kl"]["median"]
        # The floor's spread beside each run: the overall floor test's KL means, as in the run's report.
        ft = next(t for t in rep["floor_test"]["tests"] if t["split"] == "overall")
        assert x["floor_test_overall"]["floor_runs"] == ft["floor_runs"] and len(ft["floor_runs"]) >= 5
    index = (out / "index.html").read_text()
    assert "reports/p-fp8.html" in index and 'class="sweep-kl"' in index
    assert "Summary" in r.stdout and "Expectations" in r.stdout
    # Rerun: everything is reused.
    r2 = kc(*args, check=False)
    assert r2.returncode == r.returncode
    assert r2.stdout.count("reused") >= 1 + 1 + len(names) and "wrote" not in r2.stdout.split("Summary")[0]


def test_demo_tiny_deep(setup):
    """The deep preset's machinery on the tiny model (hidden `tiny-deep`: 4 windows of 128 tokens): each depth
    cell's KL median is numpy's median of the per-position KL over the positions of that depth bucket, the
    floor median is the mean of the other floor runs' medians, and the interval is the floor test's (with
    test_judge_floor's quadrature t quantile, not the judge's incomplete beta)."""
    from test_judge_floor import t_ppf

    d, model, *_ = setup
    out = d / "deep"
    args = ["demo", "--preset", "tiny-deep", "--model", model, "--out-dir", out, "--prose", d / "prose.txt",
            "--code", d / "code.py"]
    r = kc(*args, check=False)
    assert r.returncode in (0, 1), r.stderr
    dj = json.loads((out / "depth.json").read_text())
    assert dj["format"] == "kerncheck.demo-depth" and dj["version"] == 1
    names = [x["name"] for x in dj["runs"]]
    assert names == ["bf16", "bf16-flash", "order-1", "order-2", "p-bf16", "p-fp8", "p-fp8x448", "p-fp8x256"]
    g = load_file(str(out / "golden.kcg"))
    bucket = np.floor(np.log2(g["depth"])).astype(int)  # bucket lower bound 2^b
    kl = {x["name"]: kl_top_k_other(out / "golden.kcg", x["candidate"]) for x in dj["runs"]}
    noise = names[:4]
    for x in dj["runs"]:
        assert x["depth"], x["name"]
        rep = json.loads((out / "reports" / f"{x['name']}.json").read_text())
        assert x["verdict_floor"] == rep["verdict"]
        for c in x["depth"]:
            sel = bucket == int(np.log2(c["depth"]))
            assert c["n"] == sel.sum() >= 100
            # f32 KL in the judge against f64 here: tiny KL values (~1e-7) carry ~1e-5 relative rounding.
            assert c["kl_median"] == pytest.approx(np.median(kl[x["name"]][sel]), rel=1e-3)
            others = [np.median(kl[n][sel]) for n in noise if n != x["name"]]
            assert c["floor_median"] == pytest.approx(np.mean(others), rel=1e-3)
            assert c["median_ratio"] == pytest.approx(c["kl_median"] / c["floor_median"], rel=1e-9)
            t = next(t for t in rep["floor_test"]["tests"] if t["split"] == f"depth {c['depth']}")
            half = t_ppf(0.975, t["df"]) * t["sd"]
            assert c["mean_ratio"] == pytest.approx(t["value"] / t["floor_mean"], rel=1e-9)
            assert c["mean_ratio_lo"] == pytest.approx((t["value"] - half) / t["floor_mean"], rel=1e-6)
            assert c["mean_ratio_hi"] == pytest.approx((t["value"] + half) / t["floor_mean"], rel=1e-6)
            assert c["above_floor"] == t["significant"]
    claim = dj["seed_depth_claim"]
    assert claim["held"] == (claim["fp8_grows"] and not claim["fp8x448_grows"])
    floor_ok = all(x["verdict_floor"] != "FAIL" for x in dj["runs"] if x["role"] == "noise")
    fp8 = next(x for x in dj["runs"] if x["name"] == "p-fp8")["verdict_floor"]
    assert dj["expectations_held"] == (floor_ok and fp8 == "FAIL") == (r.returncode == 0)
    index = (out / "index.html").read_text()
    assert "<svg" in index and "reports/p-fp8.html" in index and "KL by depth" in r.stdout
    r2 = kc(*args, check=False)
    assert r2.returncode == r.returncode and r2.stdout.count("reused") >= 2 + len(names)  # records nothing
