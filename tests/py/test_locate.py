"""kerncheck locate (docs/locate.md) on the trained hybrid fixture (tests/data/models/hybrid-tiny): a variant
that rounds one stored state in one layer (round:gdn.state@2=4) is named, in both phases, as that layer's
gdn.state; a benign one (order=3) leaves no site outside the floor. The report's figures are checked
against an independent recomputation (Student's t tail from mpmath's regularized incomplete beta, numpy's
geometric means), its JSON against
its schema-like invariants, its HTML for the departing marks; bad inputs exit 3 naming the field.
The SmolLM2 must-shows are in test_e2e_locate.py (slow)."""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import mpmath  # in the lock (torch → sympy → mpmath)

from kc_env import kc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("KC_TEST_DATA", os.path.join(ROOT, "tests", "data"))
MODEL = os.path.join(DATA, "models", "hybrid-tiny")
NOISE = ("--noise-variant", "order=1", "--noise-variant", "order=2")

PROSE = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
         "and darkness was upon the face of the deep.\n") * 20
CODE = "".join(f"def g{i}(a, b):\n    return a - {i} * b  # line {i}\n\n" for i in range(80))

pytestmark = pytest.mark.skipif(not os.path.isdir(MODEL), reason="tests/data/models/hybrid-tiny not present")


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    d = tmp_path_factory.mktemp("loc")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    kc("corpus", "build", "--tokenizer", MODEL, "--depths", "64", "--segments-per-depth", "2", "--decode-last", "8",
       "--prose", d / "prose.txt", "--code", d / "code.py", "-o", d / "c.kcc")
    kc("record", "--model", MODEL, "--corpus", d / "c.kcc", "-o", d / "g.kcg")
    return d, d / "g.kcg"


def t_sf(t, df):
    """P(T_df > t): ½ I_{df/(df+t²)}(df/2, ½) for t ≥ 0, 1 − that for t < 0."""
    half = float(0.5 * mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))
    return half if t >= 0 else 1 - half


def locate(golden, tmp, variant, *flags, noise=NOISE):
    j, h = tmp / "loc.json", tmp / "loc.html"
    r = kc("locate", "--model", MODEL, "--golden", golden, "--variant", variant, *noise, "--json", j, "--html", h,
           *flags, check=False)
    assert r.returncode in (0, 1), r.stderr
    return r, json.loads(j.read_text()), h.read_text()


def test_state_rounding_in_one_layer_is_named(golden, tmp_path):
    d, g = golden
    r, rep, html = locate(g, tmp_path, "round:gdn.state@2=4", "--positions", "0:128")
    assert r.returncode == 1, r.stdout
    assert rep["positions"] == {"prefill": 112, "decode": 16}
    for phase in ("prefill", "decode"):
        assert rep["first"][phase]["layer"] == 2 and rep["first"][phase]["name"] == "gdn.state", rep["first"]
    assert "decode: first site outside the floor: layer 2 gdn.state" in r.stdout, r.stdout
    # Progress on stderr: one line per segment replayed, for every run (reference, noise runs, candidate).
    lines = [l for l in r.stderr.splitlines() if l.startswith("locate: segment replay")]
    runs = 2 + len(NOISE) // 2
    assert len(lines) == runs * rep["segments"], r.stderr
    assert lines[-1].startswith(f"locate: segment replay {runs * rep['segments']}/{runs * rep['segments']} done")
    assert f"(run {runs}/{runs}, " in lines[-1] and "ETA" in lines[-1], lines[-1]
    # The candidate is the reference (bitwise) upstream of the rounding: error 0 there.
    sites = rep["sites"]
    first = next(i for i, s in enumerate(sites) if s["phase"] == "decode" and s["departs"])
    assert all(s["cand"] <= 1e-29 for s in sites[:first] if s["phase"] == "decode")
    assert 'class="departs"' in html and "gdn.state (decode)" in html
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(ROOT) / "python" / "kerncheck" / "schemas" / "locate.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(rep)


def test_benign_order_leaves_no_site(golden, tmp_path):
    d, g = golden
    r, rep, _ = locate(g, tmp_path, "order=3", "--positions", "random:40", "--seed", "5")
    assert r.returncode == 0, r.stdout
    assert rep["first"] == {"prefill": None, "decode": None}
    assert "no site leaves the floor" in r.stdout
    assert not any(s["departs"] for s in rep["sites"])


def test_figures_recomputed(golden, tmp_path):
    """p = P(T_df > t), t = ln(ratio) / sd, ratio = cand / floor, floor = geometric mean of the noise runs;
    Holm over the family at alpha; departs = rejected and ratio ≥ min factor."""
    d, g = golden
    _, rep, _ = locate(g, tmp_path, "round:gdn.state@2=4", "--positions", "random:30", "--min-factor", "2")
    sites = rep["sites"]
    assert rep["family"] == len(sites) and len(sites) > 20
    ps = []
    for s in sites:
        noise = np.array(s["noise"], dtype=np.float64)
        assert s["floor"] == pytest.approx(math.exp(np.log(noise).mean()), rel=1e-9)
        assert s["ratio"] == pytest.approx(s["cand"] / s["floor"], rel=1e-9)
        if s["sd_log"] and s["sd_log"] > 0:
            assert s["t"] == pytest.approx(math.log(s["ratio"]) / s["sd_log"], rel=1e-9)
            assert s["p_value"] == pytest.approx(t_sf(s["t"], s["df"]), rel=1e-6, abs=1e-12)
        ps.append(s["p_value"])
    # Holm step-down, recomputed.
    order = np.argsort(ps, kind="stable")
    rejected = [False] * len(ps)
    for rank, i in enumerate(order):
        if ps[i] > rep["alpha"] / (len(ps) - rank):
            break
        rejected[i] = True
    assert [s["rejected"] for s in sites] == rejected
    assert [s["departs"] for s in sites] == [s["rejected"] and s["ratio"] >= 2 for s in sites]
    # Data-flow order within each phase: the prefill sites first; layer 0 before layer 1 for one name.
    phases = [s["phase"] for s in sites]
    assert phases == sorted(phases, key=lambda p: p != "prefill")
    layers = [s["layer"] for s in sites if s["phase"] == "prefill" and s["name"] == "gdn.state"]
    assert layers == sorted(layers)


def test_tensor_verdicts_beside_the_noise_runs(golden, tmp_path):
    d, g = golden
    _, rep, _ = locate(g, tmp_path, "round:gdn.state@2=4", "--positions", "0:128", "--tensors", "gdn.state",
                       "--compare", "close")
    st = [s for s in rep["sites"] if s["phase"] == "decode"]
    assert {s["name"] for s in st} == {"gdn.state"}
    for s in st:
        assert s["compare"]["method"] == "close"
        assert s["compare"]["noise_pass"] == [True, True], s  # order=N: f32-rounding differences
        assert s["compare"]["cand_pass"] == (s["layer"] < 2), s  # the rounded state propagates downstream


@pytest.fixture(scope="module")
def deep_golden(tmp_path_factory):
    """Segments of 160 positions: attention past one flash key block (64 keys), where attn=flash hands its P
    to the hook one block at a time and never whole."""
    d = tmp_path_factory.mktemp("loc160")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    kc("corpus", "build", "--tokenizer", MODEL, "--depths", "160", "--segments-per-depth", "2", "--decode-last", "8",
       "--prose", d / "prose.txt", "--code", d / "code.py", "-o", d / "c.kcc")
    kc("record", "--model", MODEL, "--corpus", d / "c.kcc", "-o", d / "g.kcg")
    return d / "g.kcg"


@pytest.mark.parametrize("noise", [("order=1", "attn=flash", "order=2"), ("order=1", "attn=flash")])
def test_a_flash_floor_run_leaves_out_what_it_never_holds(deep_golden, tmp_path, noise):
    """The demo's floor has a flash-attention run: its attn.p (never whole) is left out for that run, with a
    note, and the rounding in layer 3's attn.out is still named; with 2 noise runs attn.p is not tested."""
    flags = [x for v in noise for x in ("--noise-variant", v)]
    r, rep, html = locate(deep_golden, tmp_path, "round:attn.out@3=3", "--positions", "100:160", noise=flags)
    assert r.returncode == 1, r.stdout
    assert rep["first"]["prefill"]["layer"] == 3 and rep["first"]["prefill"]["name"] == "attn.out", rep["first"]
    assert "note: attn.p (layers 3, 7, prefill and decode): attn=flash reports it in pieces" in r.stdout, r.stdout
    p_sites = [s for s in rep["sites"] if s["name"] == "attn.p"]
    if len(noise) == 3:
        assert len(p_sites) == 4 and all(s["noise_runs"] == ["order=1", "order=2"] and len(s["noise"]) == 2
                                         for s in p_sites)
    else:
        assert p_sites == [] and any("attn.p (layers 3, 7, prefill and decode): not tested" in n for n in rep["notes"])
    others = [s for s in rep["sites"] if s["name"] != "attn.p"]
    assert all(s["noise_runs"] == list(noise) and len(s["noise"]) == len(noise) for s in others)
    assert "attn=flash reports it in pieces" in html
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(ROOT) / "python" / "kerncheck" / "schemas" / "locate.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(rep)


@pytest.mark.parametrize("flags, needle", [
    (("--variant", "order=3", "--noise-variant", "order=1"), "--noise-variant: expected at least 2"),
    (("--variant", "order=3", "--noise-variant", "order=1", "--noise-variant", "order=1"), "expected distinct"),
    (("--variant", "order=3", *NOISE, "--positions", "9:2"), "--positions: expected"),
    (("--variant", "order=3", *NOISE, "--positions", "worst:5"), "expected --report"),
    (("--variant", "order=3", *NOISE, "--tensors", "attn.nope"), "--tensors: attn.nope"),
    (("--variant", "nope=1", *NOISE), "--variant"),
    (("--variant", "order=3", *NOISE, "--compare", "bogus"), "--compare"),
])
def test_refusals(golden, tmp_path, flags, needle):
    d, g = golden
    r = kc("locate", "--model", MODEL, "--golden", g, *flags, check=False)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert needle in r.stderr, r.stderr


def test_report_positions_and_bad_report(golden, tmp_path):
    d, g = golden
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"verdict": "PASS", "worst": [{"position": 5}, {"position": 10 ** 6}]}))
    r = kc("locate", "--model", MODEL, "--golden", g, "--variant", "order=3", *NOISE, "--positions", "worst:4",
           "--report", bad, check=False)
    assert r.returncode == 3 and str(bad) in r.stderr and "worst[1].position" in r.stderr, r.stderr
    good = tmp_path / "r2.json"
    good.write_text(json.dumps({"verdict": "PASS", "worst": [{"position": 5}, {"position": 70}]}))
    r, rep, _ = locate(g, tmp_path, "round:gdn.state@2=4", "--positions", "worst:2", "--report", good)
    assert rep["positions"]["prefill"] + rep["positions"]["decode"] == 2 + 8  # + max(N/4, 8) random
    assert "the model-level judge PASSes this candidate, but a site leaves the floor" in r.stdout


def test_refuses_another_models_golden(golden, tmp_path):
    """As record --golden: a model whose identity differs (here one more config key) is refused."""
    import shutil
    d, g = golden
    other = tmp_path / "other"
    shutil.copytree(MODEL, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["kerncheck_test_note"] = "another identity"
    (other / "config.json").write_text(json.dumps(cfg))
    r = kc("locate", "--model", other, "--golden", g, "--variant", "order=3", *NOISE, check=False)
    assert r.returncode == 3 and str(g) in r.stderr and "model: expected the golden's model" in r.stderr, r.stderr


def test_worst_n_beyond_20_from_the_judge_report(golden, tmp_path):
    """`kerncheck test --worst 40` keeps 40 worst positions, and `--positions worst:40` takes all of them
    (plus max(40/4, 8) random others); a report that kept fewer than N of more judged positions is refused,
    saying how to get N (the ranking itself is checked against numpy in test_judge_metrics.py)."""
    d, g = golden
    cand = tmp_path / "cand.kcc"
    kc("record", "--model", MODEL, "--golden", g, "--variant", "round:gdn.state@2=4", "-o", cand)
    for n in ("40", "20"):
        kc("test", g, cand, "--worst", n, "--json", tmp_path / f"r{n}.json", check=False)
    r40 = json.loads((tmp_path / "r40.json").read_text())
    assert len(r40["worst"]) == 40 and r40["positions_judged"] == 128
    r, rep, _ = locate(g, tmp_path, "round:gdn.state@2=4", "--positions", "worst:40", "--report",
                       tmp_path / "r40.json", "--tensors", "gdn.state", "--no-compare")
    assert rep["positions"]["prefill"] + rep["positions"]["decode"] == 40 + 10
    r = kc("locate", "--model", MODEL, "--golden", g, "--variant", "round:gdn.state@2=4", *NOISE, "--positions",
           "worst:40", "--report", tmp_path / "r20.json", check=False)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert str(tmp_path / "r20.json") in r.stderr and "--worst 40" in r.stderr and "20 of the 128" in r.stderr, r.stderr


def test_judge_page_links_the_locate_report(golden, tmp_path):
    """`kerncheck test --html R --locate L.json`: the judge's page names each phase's first departing site
    and links to the locate page (L.json's "html", relative to R's folder); a file that is not a locate
    report is refused, exit 3, naming it and the field."""
    d, g = golden
    cand = tmp_path / "cand.kcc"
    kc("record", "--model", MODEL, "--golden", g, "--variant", "round:gdn.state@2=4", "-o", cand)
    _, rep, _ = locate(g, tmp_path, "round:gdn.state@2=4", "--positions", "0:128", "--tensors", "gdn.state",
                       "--no-compare")
    assert rep["html"] == "loc.html"
    (tmp_path / "pages").mkdir()
    page = tmp_path / "pages" / "r.html"
    kc("test", g, cand, "--html", page, "--json", tmp_path / "r.json", "--locate", tmp_path / "loc.json",
       check=False)
    html = page.read_text()
    assert '<a href="../loc.html">locate report</a>' in html
    for phase in ("prefill", "decode"):
        assert f"{phase}: first site outside the floor: layer 2 gdn.state" in html, html
    r = kc("test", g, cand, "--html", page, "--locate", tmp_path / "r.json", check=False)
    assert r.returncode == 3 and str(tmp_path / "r.json") in r.stderr and "format" in r.stderr, r.stderr
    (tmp_path / "num.json").write_text('{"format": 3}')  # a format that is not a string: refused, not a crash
    r = kc("test", g, cand, "--html", page, "--locate", tmp_path / "num.json", check=False)
    assert r.returncode == 3 and f"{tmp_path / 'num.json'}: format: expected" in r.stderr, r.stderr
    r = kc("test", g, cand, "--locate", tmp_path / "loc.json", check=False)
    assert r.returncode == 3 and "--locate: expected --html" in r.stderr, r.stderr
