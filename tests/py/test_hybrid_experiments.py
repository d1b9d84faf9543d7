"""The exact claims behind the hybrid's recurrent-state experiments (EXPERIMENTS.md "seed 000's recurrent-state findings
on the hybrid", scripts/hybrid_experiments.sh), on the trained hybrid tests/data/models/hybrid-tiny with
`kerncheck trace` (docs/lab.md), every figure recomputed from trace's --dump with numpy / ml_dtypes:

- round:gdn.state=N rounds the state only where it is stored: a prompt prefilled in one call (or in one
  block that holds it) has bitwise the f32 logits at its last position (KL exactly 0), while in blocks of 64
  the stored, rounded state moves them; the stored state is exactly the 7-bit (bf16) rounding.
- Feeding the prompt in pieces, same variant on both sides (--reference-prefill-block 0): pieces of 256
  tokens (a multiple of the 64-token chunk and of the engine's 256-row GEMM tiles) give bitwise the one-call
  state (f32 and gdn=fla); pieces whose chunk boundaries differ (100 tokens) agree to f32 rounding in f32
  but only to about bf16 precision with FLA's bf16 casts.
- trace --decode-last N (experiment 5) decodes the prompt's own last N tokens: the sequence is the prompt's,
  and the last step's logits are those of a one-call prefill of the whole prompt, to f32 rounding.
"""
import json
import os

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

from kc_env import kc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("KC_TEST_DATA", os.path.join(ROOT, "tests", "data"))
MODEL = os.path.join(DATA, "models", "hybrid-tiny")
MEM = os.path.join(DATA, "models", "hybrid-mem")  # hybrid-tiny re-trained for slow decay (docs/hybrid.md)
GDN_LAYERS = [0, 1, 2, 4, 5, 6]  # hybrid-tiny: GDN ×3 + attention, twice

# 702 tokens of plain prose with hybrid-tiny's tokenizer (two 512-token engine pieces, 64-token chunks).
PROMPT = " ".join(
    f"In the {n}th year of the reign the river rose above its banks, and the people of the valley carried "
    f"their grain up to the high fields. They counted {n * 7} sacks and {n * 3} jars of oil, and wrote the "
    f"numbers on the wall of the granary so that their children would remember the flood."
    for n in range(1, 11))

pytestmark = pytest.mark.skipif(not os.path.isdir(MODEL), reason="tests/data/models/hybrid-tiny not present")


@pytest.fixture(scope="module")
def prompt(tmp_path_factory):
    p = tmp_path_factory.mktemp("hx") / "prompt.txt"
    p.write_text(PROMPT, encoding="utf-8")
    return p


def trace(tmp_path, name, prompt, *args):
    j, d = tmp_path / f"{name}.json", tmp_path / f"{name}.safetensors"
    steps = () if "--decode-last" in args else ("--decode-steps", 0)
    kc("trace", "--model", MODEL, "--prompt", prompt, *steps, "--tensors", "gdn.state", *args,
       "--json", j, "--dump", d)
    return json.loads(j.read_text()), load_file(str(d))


def kl_f64(ref, var):
    lr = ref.astype(np.float64) - np.logaddexp.reduce(ref.astype(np.float64))
    lv = var.astype(np.float64) - np.logaddexp.reduce(var.astype(np.float64))
    return max(float((np.exp(lr) * (lr - lv)).sum()), 0.0)


def is_bf16(x):
    return np.array_equal(x.astype(ml_dtypes.bfloat16).astype(np.float32), x)


def rel(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_last_prefill_kl_exactly_zero_in_one_block_not_across_blocks(tmp_path, prompt):
    for block in (0, 4096):  # one call; one block holding the whole prompt
        j, d = trace(tmp_path, f"one{block}", prompt, "--variant", "round:gdn.state=7", "--prefill-block", block)
        assert j["prompt_tokens"] > 300
        assert j["logits"]["prefill"]["kl"] == 0.0 and j["logits"]["prefill"]["rel_err"] == 0.0
        assert np.array_equal(d["var/prefill/logits"], d["ref/prefill/logits"])
        for L in GDN_LAYERS:  # the hook did act: the stored state is the bf16 rounding of the reference's
            ref, var = d[f"ref/prefill/gdn.state@{L}"], d[f"var/prefill/gdn.state@{L}"]
            assert is_bf16(var) and not is_bf16(ref)
            assert np.array_equal(var, ref.astype(ml_dtypes.bfloat16).astype(np.float32))

    j, d = trace(tmp_path, "blocks", prompt, "--variant", "round:gdn.state=7", "--prefill-block", 64)
    ref_l, var_l = d["ref/prefill/logits"], d["var/prefill/logits"]
    assert not np.array_equal(var_l, ref_l)
    assert j["logits"]["prefill"]["rel_err"] == pytest.approx(rel(var_l, ref_l), rel=1e-9)
    assert j["logits"]["prefill"]["rel_err"] > 1e-8
    # KL itself is ~1e-14 here (the barely trained model), at the f64 cancellation level of the sum: only
    # its sign and size are checked.
    assert 0 <= j["logits"]["prefill"]["kl"] < 1e-6
    assert abs(j["logits"]["prefill"]["kl"] - kl_f64(ref_l, var_l)) < 1e-12
    for L in GDN_LAYERS:
        var = d[f"var/prefill/gdn.state@{L}"]
        assert is_bf16(var)
        assert rel(var, d[f"ref/prefill/gdn.state@{L}"]) > 1e-4  # the earlier blocks' rounding carried on


def state_rel(d):
    return [rel(d[f"var/prefill/gdn.state@{L}"], d[f"ref/prefill/gdn.state@{L}"]) for L in GDN_LAYERS]


@pytest.mark.parametrize("variant", ["f32", "gdn=fla"])
def test_pieces_of_the_engine_piece_are_bitwise_one_call(tmp_path, prompt, variant):
    j, d = trace(tmp_path, "b256", prompt, "--reference", variant, "--variant", variant,
                 "--reference-prefill-block", 0, "--prefill-block", 256)
    assert j["prefill_block"] == 256 and j["reference_prefill_block"] == 0
    for L in GDN_LAYERS:
        assert np.array_equal(d[f"var/prefill/gdn.state@{L}"], d[f"ref/prefill/gdn.state@{L}"])


def test_pieces_agree_to_f32_rounding_in_f32_and_to_bf16_precision_with_fla(tmp_path, prompt):
    args = ("--reference-prefill-block", 0, "--prefill-block", 100)  # chunk boundaries not those of one call
    _, d32 = trace(tmp_path, "f32", prompt, "--reference", "f32", "--variant", "f32", *args)
    _, dfla = trace(tmp_path, "fla", prompt, "--reference", "gdn=fla", "--variant", "gdn=fla", *args)
    e32, efla = state_rel(d32), state_rel(dfla)
    # f32: another chunking of the same sums, relative difference a few f32 ulps (2^-23 ≈ 1.2e-7) …
    assert max(e32) < 2.0 ** -16, e32
    assert max(e32) > 0
    # … FLA: the state snapshots cast to bf16 at other chunk starts: errors of bf16 size (2^-8 ≈ 3.9e-3),
    # orders of magnitude above f32's, below a few bf16 ulps.
    assert max(efla) > 2.0 ** -14, efla
    assert max(efla) > 30 * max(e32)
    assert max(efla) < 2.0 ** -4


def test_decode_last_feeds_the_prompts_tail(tmp_path, prompt):
    jf, full = trace(tmp_path, "full", prompt, "--variant", "f32")
    jd, dec = trace(tmp_path, "tail", prompt, "--variant", "round:gdn.state=7", "--decode-last", 16)
    del jd["logits"], jf["logits"]
    assert jd["teacher_forced"] and not jf["teacher_forced"]
    assert jd["prompt_tokens"] == jf["prompt_tokens"] - 16 and len(jd["decoded"]) == 16
    assert np.array_equal(np.concatenate([dec["prompt"], dec["decoded"]]), full["prompt"])
    last = dec["ref/decode16/logits"].astype(np.float64)
    ref = full["ref/prefill/logits"].astype(np.float64)
    assert np.abs(last - ref).max() <= 1e-4 * (1 + np.abs(ref).max())  # recurrence vs chunked: f32 rounding
    # decode steps read the rounded stored state: the variant's decode logits move, its prefill ones do not
    assert np.array_equal(dec["var/prefill/logits"], dec["ref/prefill/logits"])
    assert not np.array_equal(dec["var/decode16/logits"], dec["ref/decode16/logits"])


def test_sweep_on_the_fla_path_rounds_the_state_the_chunk_kernel_reads(tmp_path, prompt):
    """`kerncheck sweep --base bf16+gdn=fla` (EXPERIMENTS.md, hybrid-mem, 1b): every row is recorded with FLA's
    bf16 casts on — the 23-bit row is bitwise a plain `record --variant bf16+gdn=fla` and differs from the bf16
    base — and `--tensor gdn.state.chunk` rounds the state each 64-row prefill chunk hands the next: rows of
    the first chunk (which reads the zero state) keep the 23-bit row's bits, later rows move. On hybrid-mem:
    hybrid-tiny forgets its state within a token, and the bf16 base's rounding of the layer outputs absorbs
    what is left (its 7-bit row is bitwise the 23-bit one)."""
    d = tmp_path
    model = MEM
    kc("corpus", "build", "--tokenizer", model, "--depths", "200", "--segments-per-depth", "2", "--decode-last", "8",
       "--prose", prompt, "--code", prompt, "-o", d / "c.kcc")
    kc("record", "--model", model, "--corpus", d / "c.kcc", "-o", d / "g.kcg")
    for name, v in [("bf16", "bf16"), ("fla", "bf16+gdn=fla"), ("fla-flash", "bf16+gdn=fla+attn=flash")]:
        kc("record", "--model", model, "--golden", d / "g.kcg", "--variant", v, "-o", d / f"{name}.kcc")
    r = kc("sweep", "--model", model, "--golden", d / "g.kcg", "--tensor", "gdn.state.chunk", "--bits", "23,7",
           "--base", "bf16+gdn=fla", "--noise", d / "fla.kcc", "--noise", d / "fla-flash.kcc", "--out-dir", d / "sw",
           "--json", d / "sw.json", check=False)
    assert r.returncode in (0, 1, 2), r.stderr
    sw = json.loads((d / "sw.json").read_text())
    assert sw["base"] == "bf16+gdn=fla"
    rows = {row["bits"]: row for row in sw["rows"]}
    assert rows[7]["variant"] == "bf16+gdn=fla+round:gdn.state.chunk=7"
    lp = {b: load_file(str(rows[b]["candidate"]))["logprobs_at_ref"] for b in (23, 7)}
    fla, bf16 = (load_file(str(d / f"{n}.kcc"))["logprobs_at_ref"] for n in ("fla", "bf16"))
    assert np.array_equal(lp[23], fla) and not np.array_equal(lp[23], bf16)
    depth = load_file(str(d / "g.kcg"))["depth"]
    first = depth <= 64  # the first chunk of each segment's prefill
    assert np.array_equal(lp[7][first], lp[23][first])
    assert not np.array_equal(lp[7][~first], lp[23][~first])
