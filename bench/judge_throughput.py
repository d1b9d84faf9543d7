"""Judge throughput: `kerncheck test` on a synthetic golden + candidate vs the same statistics in numpy.

Synthesises a golden and a candidate with N positions (default 2M, k = 20) directly in kerncheck's
safetensors format (docs/golden-format.md; checksum XXH3-64 over the arrays, via the system libxxhash),
then times
  - `kerncheck test GOLDEN CAND --json …` after a warm-up run (warm page cache), best of 3, with
    KC_THREADS=1 (per core) and with all cores;
  - numpy computing the core statistics: KL over top-20 + other per position, flips, margins, margin-bin
    counts and flips, KL mean / median / p99 / max.
and prints positions per CPU second for both (the machine may be shared: CPU time of the process is the
per-core figure; wall time is printed too) and the ratio, plus the per-phase split from kc_judge_phases (read
golden, open candidate, accumulate, summaries, JSON) when it is built beside the CLI (build/bench/).

  python bench/judge_throughput.py [--kerncheck build/src/kerncheck] [--positions 2000000]
"""
import argparse
import ctypes
import json
import struct
import math
import os
import resource
import subprocess
import tempfile
import time

import numpy as np
from safetensors.numpy import save_file

from _common import DEFAULT_CLI, executable

K, VOCAB, SEG = 20, 151936, 512
_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def checksum(meta, arrays):
    """docs/golden-format.md: XXH3-64 of the metadata (sorted, length-prefixed) and the tensors' digest."""
    buf = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
    digest = _xxh.XXH3_64bits(buf, len(buf))
    m = b""
    for key, value in sorted(meta.items()):
        if key != "checksum":
            for s in (key.encode(), value.encode()):
                m += struct.pack("<Q", len(s)) + s
    m += struct.pack("<Q", digest)
    return "xxh3:%016x" % _xxh.XXH3_64bits(m, len(m))


def synthesize(n, d, rng):
    # 21 "bins" per position: the reference top-20 and the tail; peaked or flat by a per-row temperature.
    temp = np.exp(rng.normal(0.5, 0.8, size=(n, 1))).astype(np.float32)
    z = (rng.standard_normal((n, K + 1), dtype=np.float32) * temp).astype(np.float32)
    z[:, K] += 1.0  # the tail bucket carries real mass
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) + z.max(1, keepdims=True)
    lp_all = (z - lse).astype(np.float32)
    order = np.argsort(-lp_all[:, :K], axis=1, kind="stable")
    lp = np.take_along_axis(lp_all[:, :K], order, 1)
    other = lp_all[:, K].copy()
    base = rng.integers(0, VOCAB - 20 * 7, size=(n, 1), dtype=np.int64)
    ids = (base + rng.permuted(np.tile(np.arange(K) * 7, (n, 1)), axis=1)).astype(np.int32)
    pick = rng.integers(0, K, size=n)
    token = ids[np.arange(n), pick]
    token_lp = lp[np.arange(n), pick]
    seg = (np.arange(n) // SEG).astype(np.int32)
    depth = (1024 + np.arange(n) % SEG).astype(np.int32)
    phase = ((np.arange(n) % SEG) >= SEG // 2).astype(np.uint8)
    flags = np.zeros(n, np.uint8)
    n_seg = int(seg[-1]) + 1
    segments = [{"name": f"s{s}", "domain": "code" if s % 3 == 0 else "prose", "depth": 1024 + SEG, "start": s * SEG}
                for s in range(n_seg)]
    g = [ids, lp, other, token, token_lp, seg, depth, phase, flags]
    meta = {"kerncheck.format": "golden", "kerncheck.version": "2", "k": str(K), "vocab": str(VOCAB),
            "positions": str(n), "model": "synthetic", "tokenizer": "synthetic", "corpus": "synthetic",
            "engine": "bench", "variant": "", "command_line": "bench/judge_throughput.py",
            "segments": json.dumps(segments)}
    meta["checksum"] = checksum(meta, g)
    save_file(dict(zip(["top_ids", "top_logprobs", "other_logprob", "token", "token_logprob", "segment", "depth",
                        "phase", "flags"], g)), f"{d}/golden.safetensors", meta)
    # Candidate: the same 21 logits plus noise, renormalised.
    zq = z + (rng.standard_normal(z.shape, dtype=np.float32) * 0.05).astype(np.float32)
    lq_all = (zq - (np.log(np.exp(zq - zq.max(1, keepdims=True)).sum(1, keepdims=True)) + zq.max(1, keepdims=True)))
    lq_all = lq_all.astype(np.float32)
    lq = np.take_along_axis(lq_all[:, :K], order, 1)
    best = np.argmax(lq, axis=1)
    top1 = ids[np.arange(n), best]
    top1_lp = lq[np.arange(n), best]
    c = [lq, lq_all[:, K].copy(), top1, top1_lp, lq[np.arange(n), pick], flags, np.zeros(0, np.uint8)]
    cmeta = {"kerncheck.format": "candidate", "kerncheck.version": "2", "k": str(K), "vocab": str(VOCAB),
             "positions": str(n), "position_begin": "0", "golden_checksum": meta["checksum"], "model": "synthetic",
             "tokenizer": "synthetic", "corpus": "synthetic", "engine": "bench", "variant": "noise",
             "command_line": "bench/judge_throughput.py"}
    cmeta["checksum"] = checksum(cmeta, c)
    save_file(dict(zip(["logprobs_at_ref", "other_logprob", "top1_id", "top1_logprob", "token_logprob", "flags"], c)),
              f"{d}/cand.safetensors", cmeta)
    return dict(ids=ids, lp=lp, other=other, lq=lq, lq_other=lq_all[:, K].copy(), top1=top1)


EDGES = np.array([0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0])


def numpy_stats(x):
    """KL over top-20 + other, flips, margins, margin-bin counts/flips, KL quantiles."""
    lp, lq = x["lp"].astype(np.float64), x["lq"].astype(np.float64)
    p = np.exp(lp)
    kl = (p * (lp - lq)).sum(1)
    po = np.exp(x["other"].astype(np.float64))
    kl += po * (x["other"] - x["lq_other"])
    flip = x["top1"] != x["ids"][:, 0]
    margin = lp[:, 0] - lp[:, 1]
    b = np.where(margin <= 0, 0, np.searchsorted(EDGES, margin, side="left"))
    bin_n = np.bincount(b, minlength=8)
    bin_flips = np.bincount(b, weights=flip, minlength=8)
    q = np.percentile(kl, [50, 90, 99, 99.9])
    return dict(mean=kl.mean(), stderr=kl.std(ddof=1) / np.sqrt(len(kl)), median=q[0], p99=q[2], max=kl.max(),
                flips=int(flip.sum()), bin_n=bin_n, bin_flips=bin_flips)


def time_kerncheck(kc, d, threads, repeats=3):
    """Best of `repeats` runs after a warm-up (page cache): (wall s, CPU s of the child: user + sys)."""
    env = dict(os.environ)
    if threads:
        env["KC_THREADS"] = str(threads)
    cmd = [kc, "test", f"{d}/golden.safetensors", f"{d}/cand.safetensors", "--json", f"{d}/report.json", "-q"]
    subprocess.run(cmd, env=env, capture_output=True)  # warm-up (page cache)
    best_wall = best_cpu = math.inf
    for _ in range(repeats):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode not in (0, 1, 2):
            raise SystemExit(f"kerncheck test failed ({p.returncode}): {p.stderr}")
        best_wall = min(best_wall, dt)
        best_cpu = min(best_cpu, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return best_wall, best_cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--positions", type=int, default=2_000_000)
    ap.add_argument("--kerncheck", default=DEFAULT_CLI, help="the CLI (default $KC_BIN, else build/src/kerncheck)")
    ap.add_argument("--dir", help="write the synthetic files here and keep them (for profiling)")
    args = ap.parse_args()
    kc = executable(args.kerncheck, "--kerncheck", "the kerncheck CLI")
    n = args.positions
    cores = os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        d = args.dir or tmp
        if args.dir:
            os.makedirs(d, exist_ok=True)
        x = synthesize(n, d, np.random.default_rng(1))
        t_np, c_np = math.inf, math.inf
        for _ in range(2):
            c0, t0 = time.process_time(), time.perf_counter()
            ref = numpy_stats(x)
            t_np, c_np = min(t_np, time.perf_counter() - t0), min(c_np, time.process_time() - c0)
        t1, c1 = time_kerncheck(kc, d, 1)
        tn, cn = time_kerncheck(kc, d, None)
        rep = json.load(open(f"{d}/report.json"))
        # Phase split (bench/judge_phases.cpp), one thread, when built beside the CLI.
        phases_bin = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(kc))), "bench", "kc_judge_phases")
        phases = None
        if os.path.exists(phases_bin):
            phases = subprocess.run([phases_bin, f"{d}/golden.safetensors", f"{d}/cand.safetensors", "3"],
                                    env=dict(os.environ, KC_THREADS="1"), capture_output=True, text=True).stdout
    load = open("/proc/loadavg").read().split()[:3]
    print(f"load average {' '.join(load)} on {cores} cores (a shared machine: read the CPU-time figures)")
    print(f"positions {n}, k {K}; kerncheck KL mean {rep['kl']['mean']} (numpy {ref['mean']:.6g}), "
          f"flips {rep['flips']['count']} (numpy {ref['flips']})")
    print(f"numpy (core statistics only), best of 2: wall {t_np:.3f} s, CPU {c_np:.3f} s = "
          f"{n / c_np / 1e6:.2f} M positions per CPU second")
    print(f"kerncheck test, KC_THREADS=1 (whole command: read, verify checksums, judge, report), best of 3: "
          f"wall {t1:.3f} s, CPU {c1:.3f} s = {n / c1 / 1e6:.2f} M positions per CPU second "
          f"(wall: {n / t1 / 1e6:.2f} M/s)  → {c_np / c1:.1f}× numpy (CPU time; wall {t_np / t1:.1f}×)")
    if phases:
        print("phases, KC_THREADS=1 (best of 3, in one process):")
        print(phases.rstrip())
    print(f"kerncheck test, {cores} threads: wall {tn:.3f} s = {n / tn / 1e6:.2f} M positions/s, "
          f"CPU {cn:.3f} s")

if __name__ == "__main__":
    main()
