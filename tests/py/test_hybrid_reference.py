"""kerncheck's f32 Gated DeltaNet hybrid engine (kc_causal_logits → load_causal_lm → HybridModel) against
transformers' f32 logits, committed with the fixtures (../shared/tools/make_models.py reference_logits():
`logits` = one-piece prefill of `input_ids`, `decode_logits[j]` = cached decode step predicting token P+j
after a prefill of P = decode_start+1 tokens).

- Qwen3.5 text, Qwen3.5-MoE (fused experts), Qwen3-Next dense and MoE fixtures: max |Δlogit| ≤
  1e-4·(1+|logit|) for prefill and decode.
- Qwen3.5-MoE in the vision-language wrapper and in the per-expert tensor layout: the same bits as the text
  export with fused experts.
- Prefill in blocks of 16 (state stored between prefill calls) agrees with one piece to f32 rounding.
- FLA-style bf16 casts move the logits by about bf16 precision, not more, not zero.
- The trained hybrids (tests/data/models/hybrid-tiny and hybrid-mem, when present): their reference
  prose/code logits.
- Bitwise identical for KC_THREADS=1, 2, 3; broken checkpoints exit 3 naming the tensor or field (and for
  Qwen3.5-MoE the expected fused expert shape).
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("KC_TEST_DATA", os.path.join(ROOT, "tests", "data"))
FIX = os.path.join(DATA, "fixtures")
TOOL = os.path.join(os.environ.get("KC_BUILD_DIR", os.path.join(ROOT, "build")), "tests", "kc_causal_logits")
HYBRIDS = ["qwen3_5-tiny", "qwen3_5_moe-tiny", "qwen3_next-tiny-dense", "qwen3_next-tiny-moe"]
TRAINED = os.path.join(DATA, "models", "hybrid-tiny")
# hybrid-mem: hybrid-tiny's architecture with slow-decay GDN heads (scripts/train_hybrid.py); a state that
# remembers, so the long-half-life path of the chunked GDN prefill and decode is checked on trained weights
TRAINED_MEM = os.path.join(DATA, "models", "hybrid-mem")


def run(model, ids, tmp_path, *flags, threads=None, name="out.npy", check=True):
    out = str(tmp_path / name)
    env = dict(os.environ)
    if threads:
        env["KC_THREADS"] = str(threads)
    p = subprocess.run([TOOL, model, out, *flags, *map(str, ids)], capture_output=True, text=True, env=env)
    if not check:
        return p
    assert p.returncode == 0, p.stderr
    return np.load(out)


def assert_close(ours, ref, what):
    tol = 1e-4 * (1 + np.abs(ref))
    worst = float((np.abs(ours - ref) / tol).max())
    assert worst <= 1.0, f"{what}: max |Δ|/(1e-4·(1+|l|)) = {worst:.3g}"
    return worst


@pytest.mark.parametrize("name", HYBRIDS)
def test_prefill_and_decode_match_transformers(name, tmp_path):
    d = os.path.join(FIX, name)
    ref = load_file(os.path.join(d, "reference.safetensors"))
    ids = ref["input_ids"][0].tolist()
    assert_close(run(d, ids, tmp_path), ref["logits"], f"{name} prefill")
    P = int(ref["decode_start"][0]) + 1
    n = ref["decode_logits"].shape[0]
    ours = run(d, ids[:P + n - 1], tmp_path, "--decode-from", str(P))
    # row P-1 is the prefill's last position (= decode_logits[0]); rows P… come from decode steps
    assert_close(ours[P - 1:P - 1 + n], ref["decode_logits"], f"{name} cached decode")


@pytest.mark.parametrize("name", HYBRIDS)
def test_prefill_in_blocks_agrees_to_f32_rounding(name, tmp_path):
    d = os.path.join(FIX, name)
    ids = load_file(os.path.join(d, "reference.safetensors"))["input_ids"][0].tolist()
    one = run(d, ids, tmp_path, "--state-out", str(tmp_path / "s1.npy"))
    blk = run(d, ids, tmp_path, "--prefill-block", "16", "--state-out", str(tmp_path / "s2.npy"))
    assert np.abs(one - blk).max() <= 1e-5 * (1 + np.abs(one).max())
    s1, s2 = np.load(tmp_path / "s1.npy"), np.load(tmp_path / "s2.npy")
    assert np.abs(s1 - s2).max() <= 1e-5 * (1 + np.abs(s1).max())
    assert not np.array_equal(one, blk)  # different chunking: not the same bits, only the same values


def test_fla_casts_change_logits_by_bf16_precision(tmp_path):
    d = os.path.join(FIX, "qwen3_5-tiny")
    ids = load_file(os.path.join(d, "reference.safetensors"))["input_ids"][0].tolist()
    ref = run(d, ids, tmp_path)
    fla = run(d, ids, tmp_path, "--gdn-fla", name="fla.npy")
    diff = np.abs(fla - ref).max() / np.abs(ref).max()
    assert 1e-5 < diff < 5e-2, diff


def test_deterministic_across_thread_counts(tmp_path):
    d = os.path.join(FIX, "qwen3_next-tiny-moe")
    ids = load_file(os.path.join(d, "reference.safetensors"))["input_ids"][0].tolist()
    outs = [run(d, ids, tmp_path, "--decode-from", "40", threads=t, name=f"t{t}.npy") for t in (1, 2, 3)]
    for o in outs[1:]:
        assert np.array_equal(outs[0], o)


def broken_copy(tmp_path, src, edit_config=None, edit_tensors=None):
    d = tmp_path / "broken"
    shutil.copytree(os.path.join(FIX, src), d)
    if edit_config:
        cfg = json.loads((d / "config.json").read_text())
        edit_config(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
    if edit_tensors:
        t = load_file(str(d / "model.safetensors"))
        edit_tensors(t)
        save_file(t, str(d / "model.safetensors"))
    return str(d)


@pytest.mark.parametrize("case,expect", [
    ("missing", "model.layers.1.linear_attn.A_log"),
    ("shape", "model.layers.0.linear_attn.conv1d.weight': shape"),
    ("layer_type", "layer_types[1]"),
    ("swapped", "layer 2 type"),
])
def test_bad_checkpoints_are_refused(case, expect, tmp_path):
    src = "qwen3_5-tiny"
    if case == "missing":
        d = broken_copy(tmp_path, src, edit_tensors=lambda t: t.pop("model.layers.1.linear_attn.A_log"))
    elif case == "shape":
        d = broken_copy(tmp_path, src, edit_tensors=lambda t: t.__setitem__(
            "model.layers.0.linear_attn.conv1d.weight", np.zeros((128, 1, 3), np.float32)))
    elif case == "layer_type":
        d = broken_copy(tmp_path, src, edit_config=lambda c: c["layer_types"].__setitem__(1, "mamba"))
    else:
        d = broken_copy(tmp_path, src, edit_config=lambda c: c["layer_types"].__setitem__(2, "linear_attention"))
    p = run(d, [1, 2, 3], tmp_path, check=False)
    assert p.returncode == 3, p.stderr
    assert expect in p.stderr, p.stderr


# qwen3_5_moe-tiny: E=4 experts, Im=24, D=64, 4 layers, every FFN sparse
MOE_FIX = "qwen3_5_moe-tiny"


@pytest.mark.parametrize("case,expect", [
    ("missing_gate_up", ["model.layers.1.mlp.experts.gate_up_proj'", "[4, 48, 64]", "missing"]),
    ("missing_down", ["model.layers.3.mlp.experts.down_proj'", "[4, 64, 24]", "missing"]),
    ("unfused", ["model.layers.0.mlp.experts.gate_up_proj': shape", "expected [4, 48, 64], got [4, 24, 64]"]),
    ("transposed", ["model.layers.2.mlp.experts.down_proj': shape", "expected [4, 64, 24], got [4, 24, 64]"]),
    ("router", ["model.layers.0.mlp.gate.weight': shape", "expected [4, 64], got [3, 64]"]),
    ("shared_gate", ["model.layers.1.mlp.shared_expert_gate.weight'", "[1, 64]", "missing"]),
    ("no_experts", ["config.json: num_experts", "a positive integer", "missing"]),
    ("top_k", ["config.json: num_experts_per_tok", "at most num_experts 4", "got 5"]),
])
def test_bad_qwen3_5_moe_checkpoints_are_refused(case, expect, tmp_path):
    def tensors(t):
        if case == "missing_gate_up":
            t.pop("model.layers.1.mlp.experts.gate_up_proj")
        elif case == "missing_down":
            t.pop("model.layers.3.mlp.experts.down_proj")
        elif case == "unfused":  # only the gate half of the fused gate/up rows
            t["model.layers.0.mlp.experts.gate_up_proj"] = t["model.layers.0.mlp.experts.gate_up_proj"][:, :24]
        elif case == "transposed":
            t["model.layers.2.mlp.experts.down_proj"] = np.ascontiguousarray(
                t["model.layers.2.mlp.experts.down_proj"].transpose(0, 2, 1))
        elif case == "router":
            t["model.layers.0.mlp.gate.weight"] = t["model.layers.0.mlp.gate.weight"][:3]
        elif case == "shared_gate":
            t.pop("model.layers.1.mlp.shared_expert_gate.weight")

    def config(c):
        if case == "no_experts":
            c.pop("num_experts")
        elif case == "top_k":
            c["num_experts_per_tok"] = 5

    d = broken_copy(tmp_path, MOE_FIX, edit_config=config, edit_tensors=tensors)
    p = run(d, [1, 2, 3], tmp_path, check=False)
    assert p.returncode == 3, p.stderr
    for e in expect:
        assert e in p.stderr, p.stderr


def test_qwen3_5_moe_cli_refuses_broken_checkpoint_with_exit_3(tmp_path):
    d = broken_copy(tmp_path, MOE_FIX, edit_tensors=lambda t: t.pop("model.layers.0.mlp.experts.down_proj"))
    p = subprocess.run([os.environ.get("KC_BIN", os.path.join(ROOT, "build", "src", "kerncheck")), "generate",
                        "--model", d, "--ids", "1,2,3", "--max-tokens", "2"], capture_output=True, text=True)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "model.layers.0.mlp.experts.down_proj" in p.stderr and "[4, 64, 24]" in p.stderr, p.stderr


def test_qwen3_5_moe_wrapper_and_per_expert_layouts_give_the_same_bits(tmp_path):
    """The vision-language wrapper (model_type qwen3_5_moe, text_config, weights under
    model.language_model., a model.visual.* tensor to skip) and the original per-expert layout
    (mlp.experts.e.{gate,up,down}_proj.weight, fused by transformers' qwen2_moe conversion) load the same
    numbers as the fused text export."""
    src = os.path.join(FIX, MOE_FIX)
    ids = load_file(os.path.join(src, "reference.safetensors"))["input_ids"][0].tolist()
    base = run(src, ids, tmp_path, "--decode-from", "40", name="base.npy")
    cfg = json.loads(open(os.path.join(src, "config.json")).read())
    t = load_file(os.path.join(src, "model.safetensors"))

    vl = tmp_path / "vl"
    vl.mkdir()
    text = dict(cfg)
    (vl / "config.json").write_text(json.dumps({"model_type": "qwen3_5_moe", "architectures":
                                                ["Qwen3_5MoeForConditionalGeneration"], "text_config": text,
                                                "vision_config": {"depth": 1}, "tie_word_embeddings": False}))
    w = {(k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k): v
         for k, v in t.items()}
    w["model.visual.patch_embed.proj.weight"] = np.zeros((8, 3), np.float32)
    save_file(w, str(vl / "model.safetensors"))

    pe = tmp_path / "per_expert"
    pe.mkdir()
    (pe / "config.json").write_text(json.dumps(cfg))
    w, Im = {}, cfg["moe_intermediate_size"]
    for k, v in t.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            for e in range(v.shape[0]):
                w[k.replace("gate_up_proj", f"{e}.gate_proj.weight")] = np.ascontiguousarray(v[e, :Im])
                w[k.replace("gate_up_proj", f"{e}.up_proj.weight")] = np.ascontiguousarray(v[e, Im:])
        elif k.endswith("mlp.experts.down_proj"):
            for e in range(v.shape[0]):
                w[k.replace("down_proj", f"{e}.down_proj.weight")] = np.ascontiguousarray(v[e])
        else:
            w[k] = v
    save_file(w, str(pe / "model.safetensors"))

    assert np.array_equal(run(str(vl), ids, tmp_path, "--decode-from", "40", name="vl.npy"), base)
    assert np.array_equal(run(str(pe), ids, tmp_path, "--decode-from", "40", name="pe.npy"), base)

    # tie_word_embeddings at the top level that is not true or false: refused, naming the field.
    bad = json.loads((vl / "config.json").read_text())
    bad["tie_word_embeddings"] = "no"
    (vl / "config.json").write_text(json.dumps(bad))
    p = run(str(vl), [1, 2, 3], tmp_path, check=False)
    assert p.returncode == 3 and 'tie_word_embeddings: expected true or false, got "no"' in p.stderr, p.stderr

    w.pop("model.layers.2.mlp.experts.3.up_proj.weight")  # one expert short: refused, not skipped
    save_file(w, str(pe / "model.safetensors"))
    p = run(str(pe), [1, 2, 3], tmp_path, check=False)
    assert p.returncode == 3, p.stderr
    assert "model.layers.2.mlp.experts.3.up_proj.weight'" in p.stderr and "[24, 64]" in p.stderr, p.stderr


def test_qwen3_5_moe_ignores_qwen3_next_routing_keys(tmp_path):
    """Qwen3_5MoeTopKRouter always renormalises the top-k and every layer is sparse: norm_topk_prob,
    decoder_sparse_step and mlp_only_layers (Qwen3-Next keys) change nothing, as in transformers."""
    src = os.path.join(FIX, MOE_FIX)
    ids = load_file(os.path.join(src, "reference.safetensors"))["input_ids"][0].tolist()
    base = run(src, ids, tmp_path, name="base.npy")
    d = broken_copy(tmp_path, MOE_FIX, edit_config=lambda c: c.update(
        norm_topk_prob=False, decoder_sparse_step=2, mlp_only_layers=[0, 1]))
    assert np.array_equal(run(d, ids, tmp_path, name="keys.npy"), base)


@pytest.mark.parametrize("model", [TRAINED, TRAINED_MEM], ids=["hybrid-tiny", "hybrid-mem"])
@pytest.mark.parametrize("seg", ["prose", "code"])
def test_trained_hybrid_matches_transformers(model, seg, tmp_path):
    if not os.path.isdir(model):
        pytest.skip(f"{model} not committed")
    ref = load_file(os.path.join(model, "reference.safetensors"))
    ids_key = next(k for k in ref if k.startswith(seg) and "ids" in k)
    logit_key = next(k for k in ref if k.startswith(seg) and k.endswith("logits") and "decode" not in k)
    ids = ref[ids_key].reshape(-1).tolist()
    assert_close(run(model, ids, tmp_path), ref[logit_key].reshape(len(ids), -1), f"trained {seg}")
    P = int(ref[f"{seg}.decode_start"][0]) + 1
    dec = ref[f"{seg}.decode_logits"]
    ours = run(model, ids[:P + len(dec) - 1], tmp_path, "--decode-from", str(P), name="dec.npy")
    assert_close(ours[P - 1:P - 1 + len(dec)], dec, f"trained {seg} cached decode")


@pytest.mark.parametrize("name", ["qwen3_5-tiny", "qwen3_5_moe-tiny", "qwen3_next-tiny-moe"])
def test_long_prompt_many_chunks_matches_transformers_live(name, tmp_path):
    """300 tokens: 5 GDN chunks of 64 and two internal prefill pieces (256 + 44), then 6 cached decode
    steps, against transformers run here (the committed references have 48 tokens: one chunk)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    d = os.path.join(FIX, name)
    cls = {"qwen3_5-tiny": transformers.Qwen3_5ForCausalLM, "qwen3_5_moe-tiny": transformers.Qwen3_5MoeForCausalLM,
           "qwen3_next-tiny-moe": transformers.Qwen3NextForCausalLM}[name]
    model = cls.from_pretrained(d, dtype=torch.float32).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    ids = torch.randint(0, 512, (1, 306), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = model(ids).logits[0].numpy()
    ours = run(d, ids[0].tolist(), tmp_path, "--decode-from", "300")
    assert_close(ours[:300], ref[:300], f"{name} prefill 300")
    assert_close(ours[300:], ref[300:], f"{name} decode after 300")


@pytest.mark.skipif(not os.path.isdir(TRAINED), reason="trained hybrid not committed yet")
def test_trained_hybrid_tokenizer_matches_hf_tokenizers(tmp_path):
    """kerncheck's tokenizer reads the trained model's tokenizer.json: same ids as HF tokenizers."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(os.path.join(TRAINED, "tokenizer.json"))
    texts = ["In the beginning God created the heaven and the earth.",
             "def wrap(text, width=70):\n    return [line.strip() for line in text.splitlines()]\n",
             "Unicode: café, naïve — “quotes” 12345 3.14\t\ttabs  and   spaces"]
    src = tmp_path / "in.json"
    src.write_text(json.dumps(texts))
    exe = os.path.join(os.path.dirname(TOOL), "kc_tokenize")
    p = subprocess.run([exe, os.path.join(TRAINED, "tokenizer.json"), "--encode", str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [tok.encode(t).ids for t in texts]
