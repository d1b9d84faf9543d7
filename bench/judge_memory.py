"""Memory of `kerncheck test` at N positions (docs/judge.md "Memory"): peak anonymous memory (heap: the
judge's per-position KL values, sample, histograms) and peak file-backed resident memory (the mapped golden
and candidate pages), sampled from /proc/PID/status (RssAnon, RssFile) every 5 ms, with VmHWM at exit.
Files: bench/judge_throughput.py's synthetic pair (k = 20).

  KC_BIN=build/src/kerncheck python bench/judge_memory.py [--positions 1000000 10000000] [--threads 1]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from judge_throughput import synthesize  # noqa: E402


def status_kb(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("RssAnon", "RssFile", "VmHWM"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def measure(kc, d, threads):
    env = dict(os.environ)
    if threads:
        env["KC_THREADS"] = str(threads)
    cmd = [kc, "test", f"{d}/golden.safetensors", f"{d}/cand.safetensors", "--json", f"{d}/report.json", "-q"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = {"RssAnon": 0, "RssFile": 0, "VmHWM": 0}
    while p.poll() is None:
        s = status_kb(p.pid)
        for k, v in s.items():
            peak[k] = max(peak[k], v)
        time.sleep(0.005)
    if p.returncode not in (0, 1, 2):
        raise SystemExit(f"kerncheck test failed ({p.returncode}): {p.stderr.read().decode()}")
    return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--positions", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--threads", type=int, default=0, help="KC_THREADS (0: all cores)")
    args = ap.parse_args()
    kc = os.environ.get("KC_BIN", "kerncheck")
    for n in args.positions:
        with tempfile.TemporaryDirectory() as d:
            synthesize(n, d, np.random.default_rng(1))
            size = os.path.getsize(f"{d}/golden.safetensors") + os.path.getsize(f"{d}/cand.safetensors")
            peak = measure(kc, d, args.threads)
        anon, filed = peak["RssAnon"] * 1024, peak["RssFile"] * 1024
        print(f"positions {n}: peak anonymous {anon / 1e6:.1f} MB = {anon / n:.1f} B/position; peak "
              f"file-backed {filed / 1e6:.1f} MB = {filed / n:.1f} B/position (files {size / 1e6:.1f} MB = "
              f"{size / n:.1f} B/position); VmHWM {peak['VmHWM'] / 1e3:.1f} MB; threads "
              f"{args.threads or os.cpu_count()}")


if __name__ == "__main__":
    main()
