"""Golden size: kerncheck's golden (k = 20) vs llama.cpp's KLD base file, bytes per scored position.

llama.cpp: 2·(2·⌈V/2⌉ + 4) bytes per scored token, plus the i32 tokens of the whole chunk (n_ctx = 512:
511 − 256 = 255 scored per 512 tokens), plus a 20-byte header (tools/perplexity/perplexity.cpp).
kerncheck: measured from a real `kerncheck record --from-logits` run with N positions (its size does not
depend on the vocabulary: top-20 ids and log-probs plus per-position fields, plus the JSON header).

  python bench/golden_size.py [--kerncheck build/src/kerncheck] [--positions 4096]
"""
import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from _common import DEFAULT_CLI, executable, missing

VOCABS = [49152, 151936, 248320]


def llamacpp_bytes(n_ctx, n_vocab, n_chunk):
    nv = 2 * ((n_vocab + 1) // 2) + 4
    scored = n_ctx - 1 - n_ctx // 2
    return 20 + 4 * n_ctx * n_chunk + 2 * nv * scored * n_chunk, scored * n_chunk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--positions", type=int, default=4096)
    ap.add_argument("--record-vocab", type=int, default=8192, help="vocabulary of the logits fed to record")
    ap.add_argument("--kerncheck", default=DEFAULT_CLI, help="the CLI (default $KC_BIN, else build/src/kerncheck)")
    args = ap.parse_args()
    kc = executable(args.kerncheck, "--kerncheck", "the kerncheck CLI")
    n, v = args.positions, args.record_vocab
    with tempfile.TemporaryDirectory() as d:
        rng = np.random.default_rng(0)
        logits = (rng.standard_normal((n, v), dtype=np.float32) * 3).astype(np.float32)
        np.save(f"{d}/logits.npy", logits)
        np.save(f"{d}/tokens.npy", rng.integers(0, v, size=n + 1).astype(np.int32))
        p = subprocess.run([kc, "record", "--from-logits", f"{d}/logits.npy", "--tokens", f"{d}/tokens.npy", "-k",
                            "20", "-o", f"{d}/golden.safetensors"], capture_output=True, text=True)
        if p.returncode != 0:
            missing(f"{kc} record exited {p.returncode}: {p.stderr.strip()}")
        golden_bytes = Path(f"{d}/golden.safetensors").stat().st_size
    ours = golden_bytes / n
    print(f"kerncheck golden (k=20): {golden_bytes} bytes for {n} positions = {ours:.1f} B/position "
          f"(measured; independent of the vocabulary)")
    print(f"{'vocab':>8} {'llama.cpp B/pos':>16} {'kerncheck B/pos':>16} {'ratio':>8}")
    n_ctx = 512
    n_chunk = max(1, -(-n // (n_ctx - 1 - n_ctx // 2)))
    for vocab in VOCABS:
        b, scored = llamacpp_bytes(n_ctx, vocab, n_chunk)
        theirs = b / scored
        print(f"{vocab:>8} {theirs:>16.0f} {ours:>16.1f} {theirs / ours:>7.0f}×")


if __name__ == "__main__":
    main()
