"""record --model runs segments in batches (their decode steps as GEMM rows of one forward); the files must not
depend on it. Each variant family is recorded one segment at a time (--batch 1) and batched (the default), at
one and two threads, and the tensors are compared byte for byte: the f32 reference on the GGUF's quantized
blocks, the bf16 base, other summation orders, flash attention, P and KV rounding, a round: term, kernel- and
hook-side bugs (deep_score acts past key 256: the corpus has depth-300 segments), and the hybrid.
"""
import os

import pytest
from safetensors.numpy import load_file

from kc_env import kc, smollm2_path

DATA = os.environ.get("KC_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))
HYBRID = os.path.join(DATA, "models", "hybrid-tiny")
SMOLLM2 = str(smollm2_path())

VARIANTS = ["f32", "bf16", "bf16+order=2", "bf16+attn=flash+order=5", "bf16+p=fp8+kv=fp8+round:attn.out@3=4",
            "bf16+bug:decode_kv=3+bug:deep_score=0.05+bug:gemm_acc=64"]


def corpus(tmp, model, name):
    c = tmp / f"{name}.kcc"
    kc("corpus", "build", "--tokenizer", model, "--preset", "quick", "--depths", "40,270",
       "--segments-per-depth", "2", "--decode-last", "9", "-o", c)
    return c


def tensors(path):
    t = load_file(str(path))
    return {k: v.tobytes() for k, v in t.items()}


def check_batch_invariance(tmp, model, golden_corpus, variants):
    golden = tmp / "g.kcg"
    kc("record", "--model", model, "--corpus", golden_corpus, "-o", golden, "--batch", "1")
    gb = tmp / "g-batched.kcg"
    kc("record", "--model", model, "--corpus", golden_corpus, "-o", gb, env={"KC_THREADS": "2"})
    assert tensors(golden) == tensors(gb), "golden: batched differs from one segment at a time"
    for v in variants:
        one = tmp / f"{v}-1.kcc"
        kc("record", "--model", model, "--golden", golden, "--variant", v, "-o", one, "--batch", "1",
           env={"KC_THREADS": "1"})
        ref = tensors(one)
        for threads, batch in (("2", "0"), ("1", "3")):  # 3: batches of a part of the segments
            out = tmp / f"{v}-{threads}-{batch}.kcc"
            kc("record", "--model", model, "--golden", golden, "--variant", v, "-o", out, "--batch", batch,
               env={"KC_THREADS": threads})
            assert tensors(out) == ref, f"{v}: --batch {batch} at {threads} threads differs from --batch 1"


@pytest.mark.skipif(not os.path.exists(SMOLLM2), reason="SmolLM2 GGUF not present (scripts/fetch_smollm2.sh)")
def test_smollm2_batched_records_are_bitwise_batch_one(tmp_path):
    check_batch_invariance(tmp_path, SMOLLM2, corpus(tmp_path, SMOLLM2, "smollm2"), VARIANTS)


def test_hybrid_batched_records_are_bitwise_batch_one(tmp_path):
    check_batch_invariance(tmp_path, HYBRID, corpus(tmp_path, HYBRID, "hybrid"), ["bf16", "bf16+gdn=fla+order=1"])


def test_batch_flag_is_validated(tmp_path):
    r = kc("record", "--model", HYBRID, "--corpus", tmp_path / "none.kcc", "-o", tmp_path / "x", "--batch", "-1",
           check=False)
    assert r.returncode == 3 and "--batch" in (r.stderr + r.stdout)
