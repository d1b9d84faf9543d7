"""Benchmark `mixed` / `stat_rel_err` against the anchors, on the same data, in the same run.

    python bench/compare_bench.py [--build BUILD] [--log2n 26] [--threads 1,2] [--repeat 3] [--noise 1e-4]

Writes an f32 pair and a bf16 pair of 2^log2n elements (golden ~ N(0,1), actual = golden·(1 + noise·N)),
runs kc_compare_bench on those files (ours, plus the plain-read bandwidth anchor), then times
torch.testing.assert_close (if torch imports) and numpy.isclose on the same arrays, single-threaded and
with the same thread counts, and prints each anchor, ours and the ratio.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from _common import executable


def best_of(fn, repeat):
    """Best process CPU time of `repeat` calls (a shared machine distorts wall time)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("KC_BUILD_DIR", "build"))
    ap.add_argument("--bench-binary", help="our side (default BUILD/bench/kc_compare_bench)")
    ap.add_argument("--log2n", type=int, default=26)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noise", type=float, default=1e-4,
                    help="relative noise of actual against golden (1e-4: 1.5 %% of the bf16 codes differ)")
    args = ap.parse_args()
    exe = executable(args.bench_binary or str(Path(args.build) / "bench" / "kc_compare_bench"), "--bench-binary",
                     "kc_compare_bench (a KC_BUILD_BENCH=ON build)")
    n = 1 << args.log2n
    rng = np.random.default_rng(0)
    g32 = rng.standard_normal(n, dtype=np.float32)
    a32 = (g32 * (1 + np.float32(args.noise) * rng.standard_normal(n, dtype=np.float32))).astype(np.float32)
    pairs = {"float32": (a32, g32), "bfloat16": (a32.astype(ml_dtypes.bfloat16), g32.astype(ml_dtypes.bfloat16))}

    with tempfile.TemporaryDirectory() as td:
        cmd = [str(exe), "--threads", args.threads, "--repeat", str(args.repeat)]
        for name, (a, g) in pairs.items():
            pa, pg = Path(td) / f"a_{name}.npy", Path(td) / f"g_{name}.npy"
            np.save(pa, a)
            np.save(pg, g)
            cmd += ["--files", str(pa), str(pg), "--dtype", name]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ours = [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    try:
        import torch
    except ImportError:
        torch = None
    print(f"n = 2^{args.log2n} = {n} elements per tensor; best of {args.repeat}; noise {args.noise:g}")
    for name, (a, g) in pairs.items():  # 16-bit pairs skip bitwise-equal codes (sparse blocks)
        eq = (a.view(f"u{a.itemsize}") == g.view(f"u{g.itemsize}")).mean()
        print(f"{name}: {100 * eq:.1f} % of the elements have bitwise-equal codes")
    print("times are process CPU seconds; GB/s = bytes of both tensors per CPU second (per thread);")
    print("speedup = anchor CPU time / kerncheck mixed CPU time; wall/read = the same ratio from wall time")
    print("(trust it on an idle machine); scale = wall time at 1 thread / wall time at thr threads")
    print(f"{'dtype':9} {'thr':>3} {'what':32} {'cpu s':>9} {'GB/s/thr':>8} {'ours/read':>9} {'wall/read':>9} "
          f"{'scale':>6} {'speedup':>8}")
    for name, (a, g) in pairs.items():
        nbytes = a.nbytes + g.nbytes
        for t in [int(x) for x in args.threads.split(",")]:
            rows = [r for r in ours if r["dtype"] == name and r["threads"] == t]
            read = next(r for r in rows if r["method"] == "read")
            mixed = next(r for r in rows if r["method"] == "mixed")
            anchors = {}
            a64, g64 = a.astype(np.float32), g.astype(np.float32)  # numpy has no bf16 math: upcast, as users do
            anchors["numpy.isclose (+ upcast)"] = best_of(
                lambda: np.isclose(a.astype(np.float32), g.astype(np.float32), rtol=2**-10, atol=2**-16).mean(),
                args.repeat)
            if torch is not None:
                torch.set_num_threads(t)
                ta = torch.from_numpy(a64)
                tg = torch.from_numpy(g64)
                if name == "bfloat16":
                    ta, tg = ta.to(torch.bfloat16), tg.to(torch.bfloat16)

                def tc():
                    try:
                        torch.testing.assert_close(ta, tg, rtol=2**-10, atol=2**-16)
                    except AssertionError:
                        pass
                anchors[f"torch.testing.assert_close"] = best_of(tc, args.repeat)
            def scale(r):
                one = [o for o in ours if o["dtype"] == name and o["threads"] == 1 and o["method"] == r["method"]]
                return f"{one[0]['seconds'] / r['seconds']:6.2f}" if one else f"{'':6}"
            print(f"{name:9} {t:>3} {'plain read (sum of both buffers)':32} {read['cpu_seconds']:9.4f} "
                  f"{read['gbps_per_thread']:8.2f} {'':9} {'':9} {scale(read)}")
            for r in rows:
                if r["method"] == "read":
                    continue
                print(f"{name:9} {t:>3} {'kerncheck ' + r['method']:32} {r['cpu_seconds']:9.4f} "
                      f"{r['gbps_per_thread']:8.2f} {r['ratio_to_read']:9.3f} "
                      f"{read['seconds'] / r['seconds']:9.3f} {scale(r)}")
            for k, s in anchors.items():
                print(f"{name:9} {t:>3} {k:32} {s:9.4f} {nbytes / s / 1e9:8.2f} {'':9} {'':9} {'':6} "
                      f"{s / mixed['cpu_seconds']:7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
