#!/usr/bin/env python3
"""Speed of kerncheck's f32 Gated DeltaNet hybrid engine against HF transformers in f32 on the same threads.

Prints prefill and decode tokens/s for ours (tests/kc_causal_logits: chunked prefill, recurrent decode) and
transformers (torch fallbacks, no flash-linear-attention; torch.set_num_threads(THREADS)) and the ratios.

Both sides first run the timed prompt's prefill once untimed (--warmup, default the whole prompt: buffers,
thread pools and caches warm, as in a model in use; --warmup 16 measures a nearly cold first call). Each side
is timed --repeat times and its best time kept (the machine is shared; the best run is the least disturbed
one), our runs interleaved with theirs.

Usage: bench/hybrid_bench.py [--build BUILD] [--model DIR] [--threads N] [--prefill 512] [--decode 64]
                             [--repeat 3] [--warmup N]
"""
import argparse, os, subprocess, sys, tempfile, time

from _common import executable, missing, need

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ours(exe, model, ids, n_prefill, threads, warmup):
    env = dict(os.environ, KC_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([exe, model, os.path.join(d, "l.npy"), "--decode-from", str(n_prefill),
                            "--warmup", str(warmup), *map(str, ids)],
                           capture_output=True, text=True, env=env, check=True)
    f = p.stdout.split()
    t_prefill, t_decode = float(f[f.index("prefill_s") + 1]), float(f[f.index("decode_s") + 1])
    return n_prefill / t_prefill, (len(ids) - n_prefill) / t_decode


def load_theirs(model, threads):
    import warnings
    torch, transformers = need("torch", "transformers")
    warnings.filterwarnings("ignore")
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    m = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    if hasattr(m, "set_experts_implementation"):
        m.set_experts_implementation("eager")
    return m


def theirs(m, ids, n_prefill, warmup):
    import torch
    x = torch.tensor([ids])
    m(x[:, :warmup])  # warm-up
    t = time.perf_counter()
    out = m(x[:, :n_prefill], use_cache=True)
    t_prefill = time.perf_counter() - t
    pkv = out.past_key_values
    t = time.perf_counter()
    for i in range(n_prefill, len(ids)):
        out = m(x[:, i:i + 1], past_key_values=pkv, use_cache=True)
        pkv = out.past_key_values
    t_decode = time.perf_counter() - t
    return n_prefill / t_prefill, (len(ids) - n_prefill) / t_decode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("KC_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--model", default=os.path.join(ROOT, "tests/data/models/hybrid-tiny"))
    ap.add_argument("--bench-binary", help="our side (default BUILD/tests/kc_causal_logits)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="runs per side; the best is kept")
    ap.add_argument("--warmup", type=int, default=None,
                    help="tokens prefilled untimed first, both sides (default: the whole prompt)")
    a = ap.parse_args()
    warmup = a.prefill if a.warmup is None else a.warmup
    import json
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    vocab = cfg.get("text_config", cfg)["vocab_size"]
    ids = [(i * 7919 + 101) % vocab for i in range(a.prefill + a.decode)]
    exe = executable(a.bench_binary or os.path.join(a.build, "tests", "kc_causal_logits"), "--bench-binary",
                     "kc_causal_logits (a test build)")
    if not os.path.isdir(a.model):
        missing(f"model folder {a.model} not found: pass --model DIR (an HF Qwen3.5 / Qwen3-Next folder)")
    m = load_theirs(a.model, a.threads)
    op = od = tp = td = 0.0
    for _ in range(max(1, a.repeat)):
        o, t = ours(exe, a.model, ids, a.prefill, a.threads, warmup), theirs(m, ids, a.prefill, warmup)
        op, od, tp, td = max(op, o[0]), max(od, o[1]), max(tp, t[0]), max(td, t[1])
    print(f"model {a.model} ({cfg.get('model_type')}), threads {a.threads}, prefill {a.prefill}, "
          f"decode {a.decode}, warm-up {warmup}, best of {max(1, a.repeat)}")
    print(f"{'':8} {'ours tok/s':>12} {'transformers':>13} {'ratio':>7}")
    print(f"{'prefill':8} {op:12.1f} {tp:13.1f} {op / tp:6.2f}x")
    print(f"{'decode':8} {od:12.1f} {td:13.1f} {od / td:6.2f}x")


if __name__ == "__main__":
    sys.exit(main())
