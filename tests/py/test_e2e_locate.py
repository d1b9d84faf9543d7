"""kerncheck locate's must-shows on the real model (issue 22, docs/locate.md): on SmolLM2-135M with a small
golden (2 segments of 64 tokens, the last 24 decoded), noise runs bf16 and bf16+order=1,
- a rounding of one tensor in one layer (round:attn.out@12=4, round:mlp.out@20=3) is named as that layer
  and tensor in both phases;
- P rounded to fp8 in every layer (p=fp8) is named as layer 0 attn.p, the first layer;
- equally correct implementations (order=5, attn=flash) leave no site outside the floor.
Slow (label `slow`: the file name): each case replays 128 positions four times on SmolLM2."""
import json

import pytest

from kc_env import kc, smollm2_path

MODEL = smollm2_path()
NOISE = ("--noise-variant", "bf16", "--noise-variant", "bf16+order=1")
PROSE = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
         "foolishness, it was the epoch of belief, it was the epoch of incredulity.\n") * 12
CODE = "".join(f"def step_{i}(state, x):\n    return state * {i} + x - {i % 7}\n\n" for i in range(60))

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="SmolLM2 GGUF not present (scripts/fetch_smollm2.sh)")


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    d = tmp_path_factory.mktemp("loc2")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    kc("corpus", "build", "--tokenizer", MODEL, "--depths", "64", "--segments-per-depth", "2", "--decode-last", "24",
       "--prose", d / "prose.txt", "--code", d / "code.py", "-o", d / "c.kcc")
    kc("record", "--model", MODEL, "--corpus", d / "c.kcc", "-o", d / "g.kcg")
    return d / "g.kcg"


def locate(golden, tmp, variant):
    j = tmp / "loc.json"
    r = kc("locate", "--model", MODEL, "--golden", golden, "--variant", variant, *NOISE, "--positions", "0:128",
           "--no-compare", "--json", j, check=False)
    assert r.returncode in (0, 1), r.stderr
    return r, json.loads(j.read_text())


@pytest.mark.parametrize("variant, layer, name", [
    ("bf16+round:attn.out@12=4", 12, "attn.out"),
    ("bf16+round:mlp.out@20=3", 20, "mlp.out"),
    ("bf16+p=fp8", 0, "attn.p"),
])
def test_one_site_is_named(golden, tmp_path, variant, layer, name):
    r, rep = locate(golden, tmp_path, variant)
    assert r.returncode == 1, r.stdout
    assert rep["positions"]["decode"] > 0 and rep["positions"]["prefill"] > 0
    for phase in ("prefill", "decode"):
        f = rep["first"][phase]
        assert f is not None and (f["layer"], f["name"]) == (layer, name), (phase, r.stdout)


@pytest.mark.parametrize("variant", ["bf16+order=5", "bf16+attn=flash"])
def test_benign_leaves_no_site(golden, tmp_path, variant):
    r, rep = locate(golden, tmp_path, variant)
    assert r.returncode == 0, r.stdout
    assert rep["first"] == {"prefill": None, "decode": None}
    assert "no site leaves the floor" in r.stdout


def test_judge_does_not_fail_what_locate_finds(golden, tmp_path):
    """The tensor level's reason to exist, on real figures: round:mlp.out@20=3 fails no check of the
    model-level judge on this golden (floor bf16, bf16+order=1; --min-positions 100, the golden has 128:
    measured KL mean 1.26x the floor, p 0.03 with 1 df, minimum detectable 2.4x; INCONCLUSIVE only for too
    few uncertain positions, 34 < 50), while locate names layer 20 mlp.out in both phases; the judge's page
    with --locate shows that beside the verdict. (A PASS needs a golden the judge can pass on, >= 1000
    positions and >= 50 with margin <= 1: not measured here, see docs/locate.md.)"""
    runs = {}
    for name, v in [("n1", "bf16"), ("n2", "bf16+order=1"), ("cand", "bf16+round:mlp.out@20=3")]:
        runs[name] = tmp_path / f"{name}.kcc"
        kc("record", "--model", MODEL, "--golden", golden, "--variant", v, "-o", runs[name])
    r, rep = locate(golden, tmp_path, "bf16+round:mlp.out@20=3")
    assert r.returncode == 1 and rep["first"]["decode"]["layer"] == 20, r.stdout
    page, jr = tmp_path / "judge.html", tmp_path / "judge.json"
    t = kc("test", golden, runs["cand"], "--noise", runs["n1"], "--noise", runs["n2"], "--min-positions", "100",
           "--json", jr, "--html", page, "--locate", tmp_path / "loc.json", check=False)
    j = json.loads(jr.read_text())
    assert t.returncode != 1 and j["verdict"] != "FAIL", t.stdout
    assert not [f for f in j["findings"] if f["failed"]], j["findings"][:3]
    html = page.read_text()
    for phase in ("prefill", "decode"):
        assert f"{phase}: first site outside the floor: layer 20 mlp.out" in html
