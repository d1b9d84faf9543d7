#!/usr/bin/env python3
"""Speed of `kerncheck record --model` against the machine's bound for the same work, in one run.

Records the f32 golden and one candidate variant (default bf16) of a corpus (default: the quick preset) with
SmolLM2, one segment at a time (--batch 1) and batched (the default), and prints positions per second next
to the machine's bound from the same run:

  bound = prefill flops / sgemm rate + max(decode flops / sgemm rate, decode bytes / read bandwidth)

where the sgemm rate is OpenBLAS's 2048³ multiply on the same threads (kc_engine_bench sgemm), the read
bandwidth a sum over a 1 GiB buffer (kc_engine_bench bandwidth), the flops those of the GEMMs and causal
attention, and the decode bytes what the decode steps must read: every weight once per step (f32, or the
GGUF's blocks where the f32 reference decodes from them) plus each sequence's K and V
(kc_engine_bench record-work, with record's batching). The rates are measured before and after the records;
the better of the two is used, so the ratio is not flattered by load. "of bound" = bound / our time.

Usage: bench/record_bench.py [--kerncheck build/src/kerncheck] [--bench-binary build/bench/kc_engine_bench]
                             [--model GGUF] [--corpus-args "--preset quick"] [--variant bf16] [--work DIR]
"""
import argparse
import json
import os
import shlex
import tempfile
import time

from _common import DEFAULT_CLI, DEFAULT_GGUF, ROOT, executable, gguf, run


def bench_json(exe, *args):
    return json.loads(run(exe, *args).strip().splitlines()[-1])


def timed_record(cli, *args):
    t = time.perf_counter()
    run(cli, "record", *args)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kerncheck", default=DEFAULT_CLI)
    ap.add_argument("--bench-binary", default=os.path.join(ROOT, "build", "bench", "kc_engine_bench"))
    ap.add_argument("--model", default=DEFAULT_GGUF)
    ap.add_argument("--corpus-args", default="--preset quick", help="kerncheck corpus build arguments")
    ap.add_argument("--variant", default="bf16", help="the candidate's variant")
    ap.add_argument("--work", help="folder for the files (default: a temporary one)")
    a = ap.parse_args()
    cli = executable(a.kerncheck, "--kerncheck", "the kerncheck CLI")
    eb = executable(a.bench_binary, "--bench-binary", "kc_engine_bench (a KC_BUILD_BENCH=ON build)")
    gguf(a.model)
    work = a.work or tempfile.mkdtemp(prefix="kc-record-bench-")
    os.makedirs(work, exist_ok=True)
    print(f"threads {os.environ.get('KC_THREADS') or os.cpu_count()}, load average {os.getloadavg()[0]:.1f} "
          "(other work on the machine skews every number)")

    corpus = os.path.join(work, "corpus.kcorpus")
    run(cli, "corpus", "build", "--tokenizer", a.model, *shlex.split(a.corpus_args), "-o", corpus)
    work_of = bench_json(eb, "record-work", a.model, corpus)
    rates = [bench_json(eb, "sgemm", "2048")["openblas_gflops"]]
    bws = [bench_json(eb, "bandwidth", "1024")["read_gb_s"]]

    golden = os.path.join(work, "golden.kcg")
    times = {}
    for batch in ("1", "0"):  # golden: the f32 reference (decode on the GGUF's quantized blocks)
        times[("golden f32", batch)] = timed_record(cli, "--model", a.model, "--corpus", corpus, "-o", golden,
                                                    "--batch", batch)
        os.remove(golden) if batch == "1" else None
    for batch in ("1", "0"):
        out = os.path.join(work, f"cand-{batch}.kcc")
        times[(f"candidate {a.variant}", batch)] = timed_record(
            cli, "--model", a.model, "--golden", golden, "--variant", a.variant, "-o", out, "--batch", batch)
    rates.append(bench_json(eb, "sgemm", "2048")["openblas_gflops"])
    bws.append(bench_json(eb, "bandwidth", "1024")["read_gb_s"])
    sgemm, bw = max(rates) * 1e9, max(bws) * 1e9

    w = work_of
    print(f"corpus: {w['segments']} segments, {w['positions']:.0f} positions ({w['decode_positions']:.0f} decoded); "
          f"prefill {w['prefill_flops'] / 1e12:.3f} TFLOP, decode {w['decode_flops'] / 1e12:.3f} TFLOP, "
          f"decode steps {w['decode_steps_batch1']:.0f} one segment at a time / {w['decode_steps_batched']:.0f} "
          f"batched; KV reads {w['decode_kv_bytes'] / 1e9:.1f} GB")
    print(f"machine: OpenBLAS sgemm {rates[0]:.1f} / {rates[1]:.1f} GFLOP/s (before / after), read bandwidth "
          f"{bws[0]:.2f} / {bws[1]:.2f} GB/s; the bound uses the better of each")
    print()
    print(f"{'record':<22} {'batch':>9} {'ours s':>8} {'pos/s':>8} {'bound s':>8} {'bound pos/s':>11} {'of bound':>9}")
    for (name, batch), t in times.items():
        weight_bytes = w["quant_weight_bytes"] if name.startswith("golden") and w["quant_weight_bytes"] else w["f32_weight_bytes"]
        steps = w["decode_steps_batch1"] if batch == "1" else w["decode_steps_batched"]
        # The machine's bound for this work: batched decode (the fewest weight reads) whatever ours did.
        decode_bytes = w["decode_steps_batched"] * weight_bytes + w["decode_kv_bytes"]
        bound = w["prefill_flops"] / sgemm + max(w["decode_flops"] / sgemm, decode_bytes / bw)
        label = "1" if batch == "1" else f"{w['segments']}→{steps:.0f} st"
        print(f"{name:<22} {label:>9} {t:8.2f} {w['positions'] / t:8.1f} {bound:8.2f} {w['positions'] / bound:11.1f} "
              f"{bound / t:9.1%}")
    b1 = times[(f"candidate {a.variant}", "1")] / times[(f"candidate {a.variant}", "0")]
    g1 = times[("golden f32", "1")] / times[("golden f32", "0")]
    print(f"\nbatched vs one segment at a time: golden {g1:.2f}×, candidate {b1:.2f}× faster")


if __name__ == "__main__":
    main()
