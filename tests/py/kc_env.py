"""Where the Python tests find the things scripts/test.sh provides."""
import os
from pathlib import Path


def smollm2_path() -> Path:
    """The SmolLM2 GGUF: $KC_SMOLLM2_GGUF, else the cache of scripts/fetch_smollm2.sh."""
    p = os.environ.get("KC_SMOLLM2_GGUF")
    if p:
        return Path(p)
    cache = Path(os.environ.get("KC_CACHE", Path.home() / ".cache" / "kerncheck"))
    return cache / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"


KC_BIN = os.environ.get("KC_BIN", "kerncheck")


def log_softmax(x):
    """log softmax over the last axis in f64: the tests' one independent reference for log-probs."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def kc(*args, env=None, check=True, cwd=None):
    """Runs the kerncheck CLI; with check, a non-zero exit raises with its stdout and stderr."""
    import subprocess

    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([KC_BIN, *map(str, args)], capture_output=True, text=True, env=e, cwd=cwd)
    if check and r.returncode != 0:
        raise AssertionError(f"{args}: rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def bytes_to_unicode():
    """GPT-2's byte → printable-character table (byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


DEFAULT_MERGES = (("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "a"), ("Ġ", "w"))


def write_tokenizer(path, extra_merges=(), merges=DEFAULT_MERGES):
    """A small HF byte-level BPE tokenizer.json (256 byte tokens + the merges) for the tiny fixtures."""
    import json

    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = list(merges) + list(extra_merges)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
          "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                              "use_regex": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                    "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
    Path(path).write_text(json.dumps(tj, ensure_ascii=False), encoding="utf-8")


def has_python_extension(build: Path) -> bool:
    """False for a build configured without the extension (KC_BUILD_PYTHON=OFF, e.g. the sanitized one)."""
    cache = Path(build) / "CMakeCache.txt"
    return not (cache.is_file() and "KC_PYTHON_BUILT:INTERNAL=OFF" in cache.read_text(errors="replace"))


def import_kerncheck(build: Path):
    """The kerncheck package from the build tree ($KC_BUILD_DIR/python); skips the calling test module when
    the build has no extension."""
    import sys

    import pytest

    if not has_python_extension(build):
        pytest.skip("this build has no Python extension (KC_BUILD_PYTHON=OFF)", allow_module_level=True)
    sys.path.insert(0, str(Path(build) / "python"))
    import kerncheck

    return kerncheck
