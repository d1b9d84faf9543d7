"""kerncheck generate and corpus build --answers (docs/generate.md, docs/corpus.md).

Independent checks:
- greedy tokens are the numpy argmax of the engine's own logits (kc_llama_logits, same prefill/decode
  split), and the reported margins / logprobs are numpy's top-1 − top-2 and log-softmax of those rows;
- greedy tokens equal transformers' greedy generation on the tiny llama / qwen3 / qwen2 fixtures
  (tests/data/fixtures/greedy_reference.json, made by scripts/make_qwen2_fixture.py);
- the prompt ids equal HF `tokenizers`' encoding of the text;
- an answer corpus's segments are prompt + answer with the answer in the decode phase, and a golden
  recorded over it has top-1 = the answer token at every greedy answer position;
- --against reports the first index where the two variants' greedy outputs differ and the reference
  margin there, recomputed here from the two plain generations.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from kc_env import bytes_to_unicode, kc, write_tokenizer

U2B = {u: b for b, u in bytes_to_unicode().items()}

BUILD = Path(os.environ.get("KC_BUILD_DIR", "."))
DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
FIX = DATA / "fixtures"
GREEDY = json.loads((FIX / "greedy_reference.json").read_text())


M64 = (1 << 64) - 1


def splitmix64(x):
    """First output of SplitMix64 seeded with x (Vigna's reference)."""
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def gen_json(tmp, *args, name="g.json"):
    kc("generate", *args, "--json", tmp / name)
    return json.loads((tmp / name).read_text())


def engine_logits(model, ids, n_prefill, tmp):
    out = tmp / "l.npy"
    r = subprocess.run([str(BUILD / "tests" / "kc_llama_logits"), str(model), str(out), "--decode-from",
                        str(n_prefill), *map(str, ids)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.load(out).astype(np.float64)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """llama-tiny with a byte-level tokenizer.json (test_corpus_record's) next to it."""
    d = tmp_path_factory.mktemp("gen") / "model"
    shutil.copytree(FIX / "llama-tiny", d)
    # Letter-pair merges fill the tokenizer up to the model's 512 embedding rows, so every id decodes.
    pairs = [(a, b) for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz" if a + b != "he"]
    write_tokenizer(d / "tokenizer.json", extra_merges=pairs[:512 - 261])
    return d


@pytest.mark.parametrize("name", ["llama-tiny", "qwen3-tiny", "qwen2-tiny"])
def test_greedy_matches_transformers_and_own_argmax(name, tmp_path):
    ref = GREEDY["models"][name]
    prompt = GREEDY["prompt"]
    j = gen_json(tmp_path, "--model", FIX / name, "--ids", ",".join(map(str, prompt)), "--max-tokens",
                 GREEDY["steps"])
    g = j["generation"]
    assert j["prompt_ids"] == prompt and j["sampling"]["greedy"] is True
    assert g["stop_reason"] == "max_tokens"
    assert g["tokens"] == ref["ids"]  # transformers' generate(do_sample=False)
    ours = np.array([s["margin"] for s in g["steps"]])
    np.testing.assert_allclose(ours, ref["margins"], atol=1e-4)
    # Our own logits, recomputed over prompt + generated with the same split: argmax, margin, logprob.
    ids = prompt + g["tokens"][:-1]
    x = engine_logits(FIX / name, ids, len(prompt) - 1, tmp_path)[len(prompt) - 1:]
    assert (x.argmax(axis=1) == g["tokens"]).all()
    top2 = np.sort(x, axis=1)[:, -2:]
    np.testing.assert_array_equal(ours.astype(np.float32), (top2[:, 1] - top2[:, 0]).astype(np.float32))
    m = x.max(axis=1, keepdims=True)
    lp = (x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[np.arange(len(ids) - len(prompt) + 1), g["tokens"]]
    np.testing.assert_allclose([s["logprob"] for s in g["steps"]], lp, atol=1e-9)


def test_text_prompt_uses_the_tokenizer(tiny, tmp_path):
    from tokenizers import Tokenizer
    text = "And the evening and the morning were the first day."
    j = gen_json(tmp_path, "--model", tiny, "--text", text, "--max-tokens", 6)
    assert j["prompt_ids"] == Tokenizer.from_file(str(tiny / "tokenizer.json")).encode(text).ids
    (tmp_path / "p.txt").write_text(text)
    j2 = gen_json(tmp_path, "--model", tiny, "--prompt", tmp_path / "p.txt", "--max-tokens", 6, name="g2.json")
    assert j2["prompt_ids"] == j["prompt_ids"] and j2["generation"]["tokens"] == j["generation"]["tokens"]
    r = kc("generate", "--model", tiny, "--text", text, "--max-tokens", 6)
    assert r.stdout.rstrip("\n") == j["generation"]["text"]
    assert "generated 6 tokens (max_tokens)" in r.stderr


def test_sampling_is_seeded(tiny, tmp_path):
    args = ("--model", tiny, "--ids", "5,6,7,8", "--max-tokens", 32, "--temperature", 1.3, "--top-p", 0.97)
    a = gen_json(tmp_path, *args, "--seed", 9, name="a.json")
    b = gen_json(tmp_path, *args, "--seed", 9, name="b.json")
    c = gen_json(tmp_path, *args, "--seed", 10, name="c.json")
    assert a["generation"]["tokens"] == b["generation"]["tokens"]
    assert a["generation"]["tokens"] != c["generation"]["tokens"]
    assert a["sampling"] == {"greedy": False, "temperature": 1.3, "top_p": 0.97, "seed": 9}
    # Sampled tokens are not all the argmax (T = 1.3 on a spread distribution).
    assert any(s["token"] != s["top1"] for s in a["generation"]["steps"])


def test_against_reports_first_divergence(tiny, tmp_path):
    ids = ",".join(map(str, GREEDY["prompt"]))
    ref = gen_json(tmp_path, "--model", tiny, "--ids", ids, "--max-tokens", 40, name="r.json")["generation"]
    other = gen_json(tmp_path, "--model", tiny, "--ids", ids, "--max-tokens", 40, "--variant", "bf16",
                     name="o.json")["generation"]
    j = gen_json(tmp_path, "--model", tiny, "--ids", ids, "--max-tokens", 40, "--against", "bf16", name="v.json")
    assert j["reference"]["tokens"] == ref["tokens"] and j["against"]["tokens"] == other["tokens"]
    assert j["against"]["variant"] == "bf16"
    diff = [i for i, (a, b) in enumerate(zip(ref["tokens"], other["tokens"])) if a != b]
    if not diff:
        assert j["divergence"] is None
    else:
        d = j["divergence"]
        assert d["index"] == diff[0]
        assert d["reference_margin"] == ref["steps"][diff[0]]["margin"]
        assert d["reference_token"] == ref["tokens"][diff[0]] and d["against_token"] == other["tokens"][diff[0]]


def test_generate_refusals(tiny, tmp_path):
    cases = [
        (("--ids", "1,2", "--temperature", "-1"), "--temperature: expected a finite value > 0"),
        (("--ids", "1,2", "--temperature", "1", "--top-p", "0"), "--top-p: expected a value in (0, 1]"),
        (("--ids", "1,x"), "--ids: expected comma-separated token ids"),
        (("--ids", "1,512"), "prompt: token 1: expected an id in [0, 512)"),
        (("--ids", "1,2", "--max-tokens", "0"), "--max-tokens: expected 1"),
        (("--text", "hi", "--chat"), "--chat: expected a ChatML tokenizer"),
        (("--ids", "1,2", "--against", "bf16", "--temperature", "1"), "--against: expected greedy decoding"),
        (("--ids", "1,2", "--variant", "p=f17"), "--variant"),
        ((), "prompt: expected --prompt FILE, --text S or --ids LIST"),
    ]
    for args, msg in cases:
        r = kc("generate", "--model", tiny, *args, check=False)
        assert r.returncode == 3 and msg in r.stderr, (args, r.stderr)
    r = kc("generate", "--model", FIX / "llama-tiny", "--text", "hi", check=False)
    assert r.returncode == 3 and "tokenizer" in r.stderr


@pytest.mark.parametrize("greedy", [True, False])
def test_answer_corpus_and_golden(greedy, tiny, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("And the evening\n\n{\"prompt\": \"What manner of man\\nis this?\"}\nthe wind rose over\n")
    sampling = ["--greedy"] if greedy else ["--temperature", "0.9", "--top-p", "0.95"]
    args = ["corpus", "build", "--answers", prompts, "--model", tiny, "--max-tokens", 10, "--seed", 3, *sampling]
    kc(*args, "-o", tmp_path / "a.kcc")
    kc(*args, "-o", tmp_path / "b.kcc")
    assert (tmp_path / "a.kcc").read_bytes() == (tmp_path / "b.kcc").read_bytes()
    with safe_open(str(tmp_path / "a.kcc"), "np") as f:
        md = f.metadata()
    segs = json.loads(md["segments"])
    gen = json.loads(md["generation"])
    assert md["preset"] == "answers"
    assert gen["greedy"] is greedy and gen["seed"] == 3 and gen["max_tokens"] == 10
    assert gen["model_identity"].startswith("model-xxh3:") and gen["temperature"] == (0.0 if greedy else 0.9)
    toks = load_file(str(tmp_path / "a.kcc"))["tokens"]
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    texts = ["And the evening", "What manner of man\nis this?", "the wind rose over"]
    assert [s["domain"] for s in segs] == ["answer"] * 3
    assert [s["source"] for s in segs] == [f"{prompts}:{n}" for n in (1, 3, 4)]
    for s, text in zip(segs, texts):
        p = tk.encode(text).ids
        w = toks[s["token_begin"]:s["token_begin"] + s["depth"] + 1]
        assert list(w[:len(p)]) == p
        assert s["depth"] + 1 == len(p) + s["decode_last"] and 1 <= s["decode_last"] <= 10
        # text = the window's bytes, invalid UTF-8 bytes replaced by '?' one for one (offsets stay bytes)
        raw = b"".join(bytes(U2B[c] for c in tk.id_to_token(int(i))) for i in w)
        t = s["text"].encode()
        assert len(t) == len(raw) and all(x == y or x == ord("?") for x, y in zip(t, raw))
        assert s["offsets"][len(p) - 1] == len(b"".join(bytes(U2B[c] for c in tk.id_to_token(int(i))) for i in w[:len(p)]))
        # The answer is `generate`'s, with the per-prompt seed the metadata documents.
        k = int(s["name"].split("-")[1])
        seed = splitmix64((3 ^ ((0xA24BAED4963EE407 * (k + 1)) & M64)) & M64)
        j = gen_json(tmp_path, "--model", tiny, "--text", text, "--max-tokens", 10,
                     *(sampling if greedy else [*sampling, "--seed", seed]))
        assert list(w[len(p):]) == j["generation"]["tokens"]
    out = kc("corpus", "show", tmp_path / "a.kcc").stdout
    assert "answer-0" in out and "generation" in out
    # Record a golden over it: the decode-phase positions are the answer tokens; under greedy each is the
    # golden's top-1 (generation and record take the same prefill/decode path, so the same bits).
    kc("record", "--model", tiny, "--corpus", tmp_path / "a.kcc", "-k", 4, "-o", tmp_path / "g.safetensors")
    g = load_file(str(tmp_path / "g.safetensors"))
    dec = g["phase"] == 1
    assert dec.sum() == sum(s["decode_last"] for s in segs)
    answers = np.concatenate([toks[s["token_begin"] + s["depth"] + 1 - s["decode_last"]:s["token_begin"] + s["depth"] + 1]
                              for s in segs])
    assert (g["token"][dec] == answers).all()
    if greedy:
        assert (g["top_ids"][dec, 0] == answers).all()


def test_answer_corpus_refusals(tiny, tmp_path):
    p = tmp_path / "p.txt"
    p.write_text("x\n")
    r = kc("corpus", "build", "--answers", p, "--model", tiny, "-o", tmp_path / "a.kcc", check=False)
    assert r.returncode == 3 and "line 1: prompt: expected at least 2 tokens" in r.stderr
    p.write_text("a good prompt\n")
    r = kc("corpus", "build", "--answers", p, "-o", tmp_path / "a.kcc", check=False)
    assert r.returncode == 3 and "--answers: expected --model" in r.stderr
    r = kc("corpus", "build", "--answers", p, "--model", tiny, "--depths", "64", "-o", tmp_path / "a.kcc", check=False)
    assert r.returncode == 3 and "--depths: expected a text corpus" in r.stderr
    r = kc("corpus", "build", "--tokenizer", tiny, "--temperature", "0.5", "-o", tmp_path / "a.kcc", check=False)
    assert r.returncode == 3 and "--temperature: expected an answer corpus" in r.stderr


def smollm2():
    from kc_env import smollm2_path
    p = smollm2_path()
    if not p.exists():
        pytest.skip(f"SmolLM2 GGUF not at {p} (bash scripts/fetch_smollm2.sh)")
    return p


def test_smollm2_chat_greedy(tmp_path):
    m = smollm2()
    j = gen_json(tmp_path, "--model", m, "--chat", "--text", "What is the capital of France?", "--max-tokens", 12)
    g = j["generation"]
    # ChatML as SmolLM2's chat_template renders one user turn with the default system prompt.
    # The ChatML wrapper is what the GGUF's own chat_template renders for one user turn.
    import jinja2
    from gguf import GGUFReader
    tmpl = GGUFReader(str(m)).fields["tokenizer.chat_template"].contents()
    want = jinja2.Template(tmpl).render(messages=[{"role": "user", "content": "What is the capital of France?"}],
                                        add_generation_prompt=True)
    assert j["prompt_text"] == want
    assert j["stop_ids"] == [2]  # <|im_end|>, the GGUF's EOS
    assert "Paris" in g["text"]
    x = engine_logits(m, j["prompt_ids"] + g["tokens"][:-1], len(j["prompt_ids"]) - 1, tmp_path)
    assert (x[len(j["prompt_ids"]) - 1:].argmax(axis=1) == g["tokens"]).all()
