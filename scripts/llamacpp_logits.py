#!/usr/bin/env python3
"""llama.cpp's logits at a golden's positions, for `kerncheck record --from-logits` (docs/engines.md
"llama.cpp"). Runs in the venv of scripts/llamacpp_cpu.sh (llama-cpp-python), not the test venv.

    python scripts/llamacpp_logits.py MODEL.gguf GOLDEN -o LOGITS.npy [--phase both|prefill]
    kerncheck record --from-logits LOGITS.npy --golden GOLDEN -o CAND

Per segment t_0 … t_D (the windows of `kerncheck corpus prompts GOLDEN`): a fresh KV cache, then
`Llama(logits_all=True).eval`: with --phase prefill all of t_0 … t_{D-1} in one batch; with --phase both
(default) the golden's prefill positions in one batch and each decode position as its own one-token
eval over the cached KV (llama.cpp's decode path). Row d-1 of `scores` is the distribution at depth d,
so rows scores[0:D] are the segment's positions; the file is [N, vocab] f32 in the golden's order.
Written atomically. Exit 3 on bad input (a golden whose decode positions are not each segment's last).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def fail(msg):
    print(f"llamacpp_logits: error: {msg}", file=sys.stderr)
    sys.exit(3)


def golden_tensor(path, name):
    """One small tensor of a golden file (safetensors: u64 header size, JSON header, data)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        head = json.loads(f.read(n))
        if name not in head:
            fail(f"{path}: tensor {name!r}: expected in a kerncheck golden, got none")
        t = head[name]
        dtype = {"U8": np.uint8, "I32": np.int32}[t["dtype"]]
        b, e = t["data_offsets"]
        f.seek(8 + n + b)
        return np.frombuffer(f.read(e - b), dtype=dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the GGUF llama.cpp loads")
    ap.add_argument("golden", help="the golden whose positions to score")
    ap.add_argument("-o", "--out", required=True, help="LOGITS.npy ([N, vocab] f32)")
    ap.add_argument("--phase", choices=["both", "prefill"], default="both")
    ap.add_argument("--kerncheck", default=os.environ.get("KC_BIN", "kerncheck"), help="the kerncheck binary")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: its own)")
    ap.add_argument("--n-batch", type=int, default=512, help="llama.cpp batch size (prefill chunks)")
    a = ap.parse_args()

    from llama_cpp import Llama

    r = subprocess.run([a.kerncheck, "corpus", "prompts", a.golden, "--jsonl"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{a.golden}: kerncheck corpus prompts failed: {r.stderr.strip()}")
    windows = [json.loads(line)["prompt_token_ids"] for line in r.stdout.splitlines()]
    phase = golden_tensor(a.golden, "phase")
    n = sum(len(w) - 1 for w in windows)
    if len(phase) != n:
        fail(f"{a.golden}: phase: expected {n} positions (the windows' depths), got {len(phase)}")

    llm = Llama(model_path=a.model, n_ctx=max(len(w) for w in windows) + 1, n_batch=a.n_batch,
                logits_all=True, n_threads=a.threads, verbose=False)
    vocab = llm.n_vocab()
    out_dir = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(prefix=".llamacpp_logits.", suffix=".npy", dir=out_dir)
    os.close(fd)
    try:
        rows = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, vocab))
        at = 0
        for s, w in enumerate(windows):
            depth = len(w) - 1
            marks = phase[at:at + depth]
            n_prefill = depth if a.phase == "prefill" else int((marks == 0).sum())
            if (np.diff(marks.astype(np.int8)) < 0).any():
                fail(f"{a.golden}: phase of segment {s}: expected the decode positions last, got {marks.tolist()}")
            llm.reset()
            if n_prefill:
                llm.eval(w[:n_prefill])
            for d in range(n_prefill + 1, depth + 1):  # one decode step per decode position
                llm.eval([w[d - 1]])
            rows[at:at + depth] = llm.scores[:depth]
            at += depth
        rows.flush()
        del rows
        os.replace(tmp, a.out)
    except BaseException:
        os.unlink(tmp)
        raise
    print(f"wrote {a.out}: {n} positions x {vocab} logits from llama.cpp ({len(windows)} segments, "
          f"phase {a.phase})")


if __name__ == "__main__":
    main()
