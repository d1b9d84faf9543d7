#!/usr/bin/env python3
"""Speed of kerncheck's f32 Llama engine against HF transformers in f32 on the same threads, in one run.

Prints: the machine's sgemm rate (OpenBLAS, one large multiply), our fixed-tile gemm_nt (hybrid model) and
the packed GEMM of the Llama engine (src/ops/packed_gemm.h); SmolLM2-135M
prefill (tokens/s, GFLOP/s, fraction of the sgemm rate) and decode (tokens/s; ours reads the GGUF's
quantized blocks, and says so) for ours and transformers (torch.set_num_threads(THREADS)) with the ratios;
the peak memory (maxrss) of an 8k-token prefill. --f32-decode adds our decode on the f32 weights.

With --profile, also where our prefill's time goes per op (process CPU seconds between the engine's
named-tensor hook events, robust against other load on the machine).

Usage: bench/engine_bench.py [--build BUILD | --bench-binary build/bench/kc_engine_bench] [--model GGUF]
                             [--threads N] [--prefill 512] [--decode 128]
                             [--memory-tokens 8192] [--no-transformers] [--profile]
                             [--f32-decode]
"""
import argparse, json, os, subprocess, sys, time

from _common import DEFAULT_GGUF, executable, missing, need

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ours(exe, *args, threads):
    env = dict(os.environ, KC_THREADS=str(threads))
    p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, env=env, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def transformers_run(model_path, threads, n_prefill, n_decode, vocab):
    import warnings
    torch, transformers, _, _ = need("torch", "transformers", "accelerate", "gguf")  # GGUF loading needs both
    warnings.filterwarnings("ignore")
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    d, name = os.path.split(os.path.abspath(model_path))
    m = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
    ids = torch.tensor([[(i * 7919 + 101) % vocab for i in range(n_prefill + n_decode)]])
    m(ids[:, :n_prefill])  # warm-up on the whole prompt, as ours (kc_engine_bench)
    t_prefill = float("inf")
    for _ in range(3):  # best of 3, as ours
        t = time.perf_counter()
        out = m(ids[:, :n_prefill], use_cache=True)
        t_prefill = min(t_prefill, time.perf_counter() - t)
    pkv = out.past_key_values
    t = time.perf_counter()
    for i in range(n_decode):
        out = m(ids[:, n_prefill + i:n_prefill + i + 1], past_key_values=pkv, use_cache=True)
        pkv = out.past_key_values
    t_decode = time.perf_counter() - t
    return {"prefill_tok_s": n_prefill / t_prefill, "decode_tok_s": n_decode / t_decode,
            "torch": torch.__version__, "transformers": transformers.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("KC_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--model", default=DEFAULT_GGUF)
    ap.add_argument("--bench-binary", help="our side (default BUILD/bench/kc_engine_bench)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--sgemm-n", type=int, default=2048)
    ap.add_argument("--memory-tokens", type=int, default=8192)
    ap.add_argument("--no-transformers", action="store_true")
    ap.add_argument("--profile", action="store_true", help="per-op CPU time of our prefill")
    ap.add_argument("--f32-decode", action="store_true",
                    help="also time our decode on the f32 weights (A/B of the quantized GEMV)")
    a = ap.parse_args()
    exe = executable(a.bench_binary or os.path.join(a.build, "bench", "kc_engine_bench"), "--bench-binary",
                     "kc_engine_bench (a KC_BUILD_BENCH=ON build)")
    if not os.path.isfile(a.model):
        missing(f"model {a.model} not found: scripts/fetch_smollm2.sh fetches SmolLM2, or pass --model GGUF")
    n = a.threads
    print(f"threads {n}, load average {os.getloadavg()[0]:.1f} (other work on the machine skews every number)")

    sg = ours(exe, "sgemm", a.sgemm_n, threads=n)
    packed = f", our packed GEMM (the engine's) {sg['packed_gflops']:.1f} GFLOP/s" if "packed_gflops" in sg else ""
    print(f"sgemm {a.sgemm_n}^3: OpenBLAS {sg['openblas_gflops']:.1f} GFLOP/s, our fixed-tile gemm_nt "
          f"{sg['gemm_nt_gflops']:.1f} GFLOP/s{packed}")

    us = ours(exe, "model", a.model, a.prefill, a.decode, threads=n)
    print(f"ours: prefill {a.prefill} tokens {us['prefill_tok_s']:.1f} tok/s ({us['prefill_gflops']:.1f} GFLOP/s = "
          f"{us['prefill_gflops'] / sg['openblas_gflops']:.0%} of sgemm), decode {us['decode_tok_s']:.2f} tok/s "
          f"({us['decode_weights']} weights, {us['decode_cpu_ms_per_token']:.1f} CPU ms/token)")
    if a.f32_decode:
        f32 = ours(exe, "model", a.model, 16, a.decode, "f32", threads=n)
        print(f"ours, f32 decode (the path after for_each_weight): {f32['decode_tok_s']:.2f} tok/s "
              f"({f32['decode_cpu_ms_per_token']:.1f} CPU ms/token)")
    if a.profile:
        # what runs before each hook event (docs/engine.md): the time is charged to the event that ends it
        what = {"attn.q": "Q/K/V GEMMs + RoPE", "attn.ctx": "attention", "attn.out": "o_proj GEMM",
                "mlp.gate": "gate+up GEMMs", "mlp.act": "SiLU·up", "mlp.out": "down GEMM", "logits": "LM head GEMM",
                "attn.norm": "RMSNorm", "mlp.norm": "residual add + RMSNorm", "hidden": "residual add",
                "embed": "scratch/KV allocation + embedding", "final.norm": "final RMSNorm"}
        pr = ours(exe, "profile", a.model, a.prefill, threads=n)
        print(f"profile of a {a.prefill}-token prefill: {pr['cpu_s']:.3f} CPU s, {pr['wall_s']:.3f} s wall")
        for name, (wall, cpu) in sorted(pr["ops"].items(), key=lambda kv: -kv[1][1]):
            if cpu >= 0.0005:
                print(f"  {name:11s} {cpu:7.3f} CPU s {cpu / pr['cpu_s']:4.0%}  {what.get(name, '')}")
    if not a.no_transformers:
        hf = transformers_run(a.model, n, a.prefill, a.decode, 49152)
        print(f"transformers {hf['transformers']} (torch {hf['torch']}): prefill {hf['prefill_tok_s']:.1f} tok/s, "
              f"decode {hf['decode_tok_s']:.2f} tok/s")
        print(f"ratio ours/transformers: prefill {us['prefill_tok_s'] / hf['prefill_tok_s']:.2f}x, "
              f"decode {us['decode_tok_s'] / hf['decode_tok_s']:.2f}x")
    if a.memory_tokens:
        mem = ours(exe, "memory", a.model, a.memory_tokens, threads=n)
        print(f"memory: {a.memory_tokens}-token prefill in {mem['prefill_s']:.1f} s, maxrss {mem['maxrss_mb']:.0f} MB "
              f"(after load {mem['maxrss_after_load_mb']:.0f} MB)")


if __name__ == "__main__":
    main()
