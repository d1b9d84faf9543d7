"""kc::Tokenizer against the HF `tokenizers` library (ids must be identical).

References:
- SmolLM2 GGUF: a tokenizers.Tokenizer built from the GGUF's own vocab and merges with SmolLM2's
  pre-tokenizer (Digits(individual_digits) + ByteLevel(add_prefix_space=False)) and its 17 control tokens
  as special added tokens: this is SmolLM2's tokenizer.json.
- tokenizer.json: a tiny BPE trained with tokenizers as tools/make_models.py does (plain ByteLevel),
  and one with a Qwen2-style Split regex + ByteLevel(use_regex=False), merges saved as pairs.
Texts: tests/data/tokenizer/strings.json (CJK, emoji, combining marks, RTL, code, whitespace runs,
digits, special tokens), real prose and code (KJV Bible, The Devil's Dictionary, Python stdlib sources),
random vocabulary-token soups and random Unicode. The match rate is printed; it must be 100%.
"""

from kc_env import smollm2_path
import gzip
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))
TOOL = BUILD / "tests" / "kc_tokenize"
DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "tokenizer"


def run(*args, check=True):
    r = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"kc_tokenize {args} failed ({r.returncode}): {r.stderr}")
    return r


def ours_encode(src, texts, tmp_path, special=True):
    f = tmp_path / "in.json"
    f.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    args = [src, "--encode", f] + ([] if special else ["--no-special"])
    return json.loads(run(*args).stdout)


def ours_decode(src, id_lists, tmp_path, skip_special=False):
    f = tmp_path / "ids.json"
    f.write_text(json.dumps(id_lists))
    return json.loads(run(src, "--decode", f, *(["--skip-special"] if skip_special else [])).stdout)


def load_test_strings():
    return json.loads((DATA / "strings.json").read_text(encoding="utf-8"))


def real_texts(limit=220_000, chunk=4096):
    """~200 KB of real prose and code, cut into chunks at line boundaries."""
    parts = []
    if shutil.which("bible"):
        parts.append(subprocess.run(["bible", "Gen1:1-Gen12:20"], capture_output=True, text=True).stdout)
    devil = Path("/usr/share/dictd/devil.dict.dz")
    if devil.exists():
        parts.append(gzip.decompress(devil.read_bytes()).decode("utf-8", "replace")[:60_000])
    for f in ["textwrap.py", "argparse.py", "json/decoder.py", "difflib.py"]:
        p = Path("/usr/lib/python3.11") / f
        if p.exists():
            parts.append(p.read_text(encoding="utf-8"))
    text = "".join(parts)[:limit]
    out, cur = [], []
    size = 0
    for line in text.splitlines(keepends=True):
        cur.append(line)
        size += len(line)
        if size >= chunk:
            out.append("".join(cur))
            cur, size = [], 0
    if cur:
        out.append("".join(cur))
    return out


def random_unicode(rng, n):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2150, 0x218F),
              (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F),
              (0x1D400, 0x1D7FF), (0x9, 0xD)]
    s = []
    for _ in range(n):
        a, b = rng.choice(blocks)
        c = rng.randint(a, b)
        if 0xD800 <= c <= 0xDFFF:
            c = 0x41
        s.append(chr(c))
        if rng.random() < 0.15:
            s.append(rng.choice([" ", "  ", "\n", "\t", " \n ", "7", "42"]))
    return "".join(s)


def match_rate(ref, ours):
    same = sum(1 for a, b in zip(ref, ours) if a == b)
    return same / len(ref)


def report(name, texts, ref, got):
    rate = match_rate(ref, got)
    nbytes = sum(len(t.encode()) for t in texts)
    print(f"\n[tokenizer] {name}: {len(texts)} texts, {nbytes} bytes, match rate {rate * 100:.3f}%")
    for t, a, b in zip(texts, ref, got):
        if a != b:
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise AssertionError(f"{name}: first mismatch in {t[:80]!r}… at token {k}: ref {a[k:k + 8]} ours {b[k:k + 8]}")


# ------------------------------------------------------------------ SmolLM2 (GGUF)
@pytest.fixture(scope="module")
def smollm2():
    p = smollm2_path()
    if not p.exists():
        pytest.skip(f"{p} not present (scripts/fetch_smollm2.sh fetches it)")
    r = gguf.GGUFReader(str(p))
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in r.fields["tokenizer.ggml.merges"].contents()]
    ref = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges))
    ref.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    ref.decoder = decoders.ByteLevel()
    specials = [toks[i] for i, t in enumerate(types) if t == 3]
    ref.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    assert [ref.token_to_id(s) for s in specials] == list(range(17))
    return p, ref, toks


def test_smollm2_info(smollm2):
    p, ref, toks = smollm2
    info = json.loads(run(p, "--info").stdout)
    assert info == {"vocab_size": 49152, "bos": 1, "eos": 2, "pad": 2, "add_bos": False, "pre": "smollm"}


def test_smollm2_test_strings(smollm2, tmp_path):
    p, ref, _ = smollm2
    texts = load_test_strings()
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours_encode(p, texts, tmp_path)
    report("smollm2 test strings", texts, want, got)
    # a known value pinned (chat-template prefix)
    assert got[texts.index("<|endoftext|><|endoftext|>")] == [0, 0]


def test_smollm2_special_tokens_not_parsed(smollm2, tmp_path):
    p, ref, _ = smollm2
    texts = [t for t in load_test_strings() if "<" in t]
    ref.encode_special_tokens = True  # HF: treat special tokens as plain text
    try:
        want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    finally:
        ref.encode_special_tokens = False
    got = ours_encode(p, texts, tmp_path, special=False)
    report("smollm2 specials as text", texts, want, got)
    assert all(i > 16 for ids in got for i in ids)


def test_smollm2_real_text(smollm2, tmp_path):
    p, ref, toks = smollm2
    texts = real_texts()
    assert sum(len(t) for t in texts) > 150_000
    rng = random.Random(7)
    # vocabulary soups: random token sequences decoded to text (every script and byte piece the vocab has)
    for _ in range(40):
        ids = [rng.randrange(17, len(toks)) for _ in range(120)]
        texts.append(ref.decode(ids))
    texts += [random_unicode(rng, 400) for _ in range(40)]
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours_encode(p, texts, tmp_path)
    report("smollm2 real text + soups", texts, want, got)


def test_smollm2_decode_roundtrip(smollm2, tmp_path):
    p, ref, toks = smollm2
    texts = load_test_strings()
    id_lists = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    rng = random.Random(3)
    id_lists += [[rng.randrange(0, len(toks)) for _ in range(50)] for _ in range(30)]  # broken UTF-8 too
    got = ours_decode(p, id_lists, tmp_path)
    want = [ref.decode(ids, skip_special_tokens=False) for ids in id_lists]
    assert got == want
    assert got[: len(texts)] == texts
    got = ours_decode(p, id_lists, tmp_path, skip_special=True)
    assert got == [ref.decode(ids, skip_special_tokens=True) for ids in id_lists]


def test_smollm2_vocab_check(smollm2):
    p = smollm2[0]
    assert run(p, "--check-vocab", 49152).stdout.strip() == "ok"
    r = run(p, "--check-vocab", 49153, check=False)
    assert r.returncode == 3
    assert str(p) in r.stderr and "vocabulary size" in r.stderr and "expected 49153" in r.stderr
    assert "got 49152" in r.stderr


def test_speed_report(smollm2, tmp_path):
    """Not a timing assertion: prints tokens/s of ours and of HF tokenizers on ~1 MB."""
    p, ref, _ = smollm2
    text = "".join(real_texts(limit=10**9, chunk=10**9))
    text = (text * (1 + 1_000_000 // max(1, len(text))))[:1_000_000]
    f = tmp_path / "bench.txt"
    f.write_text(text, encoding="utf-8")
    ours = json.loads(run(p, "--bench", f).stdout)
    import time
    t0 = time.perf_counter()
    n = len(ref.encode(text, add_special_tokens=False).ids)
    dt = time.perf_counter() - t0
    assert ours["tokens"] == n
    print(f"\n[tokenizer] speed on {ours['bytes']} bytes: ours {ours['tokens_per_s']:.0f} tokens/s, "
          f"HF tokenizers {n / dt:.0f} tokens/s")


# ------------------------------------------------------------------ tokenizer.json
def train_tiny(tmp_path, kind):
    corpus = real_texts(limit=120_000) + load_test_strings()
    tok = Tokenizer(models.BPE())
    if kind == "bytelevel":  # as tools/make_models.py
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    elif kind == "qwen":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(tokenizers.Regex(
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                r"|\s+(?!\S)|\s+"), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif kind == "prefix":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(" ", behavior="merged_with_next"),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True, normalized=False),
                            AddedToken("<|é|>", special=True, normalized=False),
                            AddedToken("<|日本|>", special=False, normalized=False),
                            AddedToken("<sp>", special=True, lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("kerncheck", normalized=True)])
    path = tmp_path / f"tokenizer-{kind}.json"
    tok.save(str(path))
    return path, tok


@pytest.mark.parametrize("kind", ["bytelevel", "qwen", "prefix"])
def test_tokenizer_json_matches_tokenizers(kind, tmp_path):
    path, ref = train_tiny(tmp_path, kind)
    texts = load_test_strings() + real_texts(limit=60_000) + [
        "x <sp> y", "a<sp>b", "  <sp>  ", "use kerncheck now", "kerncheck<|im_start|>kerncheck", "<|é|>é", "x<|日本|>y"]
    texts += [random_unicode(random.Random(11), 300) for _ in range(10)]
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours_encode(path, texts, tmp_path)
    report(f"tokenizer.json ({kind})", texts, want, got)
    dec = ours_decode(path, want, tmp_path)
    assert dec == [ref.decode(ids, skip_special_tokens=False) for ids in want]
    info = json.loads(run(path, "--info").stdout)
    assert info["vocab_size"] == ref.get_vocab_size(with_added_tokens=True)
    assert info["eos"] == ref.token_to_id("<|endoftext|>")


def test_tokenizer_json_merges_as_strings(tmp_path):
    """Older tokenizer.json files store merges as "a b" strings: same ids."""
    path, ref = train_tiny(tmp_path, "bytelevel")
    j = json.loads(path.read_text(encoding="utf-8"))
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    texts = load_test_strings()
    assert ours_encode(legacy, texts, tmp_path) == [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]


def test_tokenizer_json_errors(tmp_path):
    path, _ = train_tiny(tmp_path, "bytelevel")
    base = json.loads(path.read_text(encoding="utf-8"))

    def bad(mutate, *needles):
        j = json.loads(json.dumps(base))
        mutate(j)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(j), encoding="utf-8")
        r = run(p, "--info", check=False)
        assert r.returncode == 3, r.stderr
        assert str(p) in r.stderr
        for n in needles:
            assert n in r.stderr, (n, r.stderr)

    bad(lambda j: j["model"].update(type="WordPiece"), "model.type", "expected \"BPE\"")
    bad(lambda j: j.update(normalizer={"type": "NFC"}), "normalizer", "NFC")
    bad(lambda j: j.update(pre_tokenizer={"type": "Metaspace"}), "pre_tokenizer.type", "Metaspace")
    bad(lambda j: j["model"]["merges"].append(["zzz_not", "in_vocab"]), "model.merges[", "zzz_not")
    bad(lambda j: j["model"]["vocab"].update(x=-5), "model.vocab[\"x\"]", "token id")
    bad(lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(unclosed"},
                                          "behavior": "Isolated", "invert": False}), "pattern", "regular expression")
    bad(lambda j: j["model"].update(byte_fallback=True), "byte_fallback")
    p = tmp_path / "notjson.json"
    p.write_text("{ not json", encoding="utf-8")
    r = run(p, "--info", check=False)
    assert r.returncode == 3 and str(p) in r.stderr

