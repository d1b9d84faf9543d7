#!/usr/bin/env python3
"""Power curve of the judge: detection rate against injected effect size on the quick corpus.

Uses the files of bench/zoo.py (--work, default /tmp/kc-zoo: the f32 golden, the f32 reference's full
logits, the floor runs bf16+order=S and any other benign runs there). Records once (reused) one more benign
run with its full logits kept, `bf16+order=BASE_SEED` (default 5, not in the floor), the base of the
synthetic candidates.

  effect 1.0:  false-alarm rate. Repetition r judges a real benign run against a floor of FLOOR_N other
               benign runs, both drawn (seed r) from the pool of benign candidates in --work (floor seeds,
               other order seeds, attn=flash): a fresh equally correct implementation each time, no noise.
  effect e>1:  repetition r adds Gaussian noise N(0, σ_e²) (seed r) to every logit of the base run; σ_e is
               set (bisection on 512 positions) so that the true KL mean (full vocabulary, f64, against the
               f32 reference) is e × the floor's true KL mean; the noisy logits [N, vocab] are judged as a
               logits candidate against the floor runs bf16+order=1..4. The realised true ratio is measured on the 512
               calibration positions with each repetition's own noise (--full-ratio: on all positions).
For each effect it prints the detection rate (share of FAIL), the INCONCLUSIVE count and the realised true
KL ratio (mean over repetitions).

  .venv/bin/python bench/power.py [--judge BIN] [--kerncheck BIN] [--work DIR] [--reps 20]
      [--effects 1.0,1.05,1.1,1.25,1.5,2.0] [--floor-seeds 1,2,3,4] [--json OUT]

--judge is the binary that decides (e.g. the merged build's kerncheck); --kerncheck records the base (it
must know order= and --logits-out). Cost per noisy repetition: ~600 MB written and judged, ~10-25 s on the
shared 2-core machine (20 repetitions × 5 effects ≈ 20-40 min).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import ROOT, log_softmax, nice, safe, sh, true_kl  # noqa: E402


def kl_rows(lp: np.ndarray, logits: np.ndarray) -> np.ndarray:
    lq = log_softmax(logits)
    return (np.exp(lp) * (lp - lq)).sum(axis=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge", default=str(ROOT / "build/src/kerncheck"))
    ap.add_argument("--kerncheck", default=str(ROOT / "build/src/kerncheck"))
    ap.add_argument("--work", default="/tmp/kc-zoo")
    ap.add_argument("--model", default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--effects", default="1.0,1.05,1.1,1.25,1.5,2.0")
    ap.add_argument("--floor-seeds", default="1,2,3,4")
    ap.add_argument("--base-seed", type=int, default=5)
    ap.add_argument("--judge-args", default="")
    ap.add_argument("--full-ratio", action="store_true",
                    help="realised true KL ratio of each noisy repetition over all positions (slower)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    work = Path(a.work)
    golden, ref_npy = work / "golden.safetensors", work / "ref_logits.npy"
    floor = [work / f"{safe(f'bf16+order={s}')}.safetensors" for s in a.floor_seeds.split(",")]
    floor_kl = [work / f"{safe(f'bf16+order={s}')}.kl.npy" for s in a.floor_seeds.split(",")]
    for f in [golden, ref_npy, *floor, *floor_kl]:
        if not f.exists():
            sys.exit(f"power: {f}: expected a file of bench/zoo.py (run it first with the same --work)")
    floor_true = float(np.mean([np.load(f).mean() for f in floor_kl]))
    ref = np.load(ref_npy, mmap_mode="r")
    base_npy = work / f"base_order{a.base_seed}_logits.npy"
    if not base_npy.exists():
        model = a.model
        if model is None:
            r = sh(["bash", str(ROOT / "scripts/fetch_smollm2.sh")], env={**os.environ, "PYTHON": sys.executable})
            model = r.stdout.strip().splitlines()[-1]
        r = sh(nice([a.kerncheck, "record", "--model", model, "--golden", str(golden), "--variant",
                     f"bf16+order={a.base_seed}", "--logits-out", str(base_npy), "-o",
                     str(work / f"base_order{a.base_seed}.safetensors")]))
        if r.returncode != 0:
            sys.exit(f"power: recording the base failed: {r.stderr.strip()[-2000:]}")
    base = np.load(base_npy, mmap_mode="r")
    n, vocab = base.shape
    base_ratio = float(true_kl(ref, base_npy).mean()) / floor_true
    print(f"floor true KL mean {floor_true:.4e} ({len(floor)} runs); base bf16+order={a.base_seed}: "
          f"ratio {base_ratio:.3f}")

    # σ for each effect, by bisection on a fixed subset of positions (same noise draw for every σ).
    sub = np.random.default_rng(0).choice(n, size=min(512, n), replace=False)
    sub.sort()
    lp_sub = log_softmax(np.asarray(ref[sub]))
    base_sub = np.asarray(base[sub], dtype=np.float64)
    z_sub = np.random.default_rng(12345).standard_normal(base_sub.shape)
    base_sub_kl = kl_rows(lp_sub, base_sub).mean()

    def sub_ratio(sigma: float) -> float:
        # on the subset, relative to the base's own subset KL, times the base's full ratio
        return kl_rows(lp_sub, base_sub + sigma * z_sub).mean() / base_sub_kl * base_ratio

    def sigma_for(effect: float) -> float:
        if effect <= base_ratio:
            return 0.0
        lo, hi = 0.0, 0.05
        while sub_ratio(hi) < effect:
            hi *= 2
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sub_ratio(mid) < effect else (lo, mid)
        return (lo + hi) / 2

    pool = sorted(p for p in work.glob("bf16*.safetensors")
                  if "bug" not in p.name and "logits" not in p.name and "judge" not in p.name)
    effects = [float(e) for e in a.effects.split(",")]
    tmp = work / "power_tmp.npy"
    results = []
    t0 = time.time()
    for e in effects:
        verdicts, ratios = [], []
        sigma = None if e == 1.0 else sigma_for(e)
        for r in range(a.reps):
            if e == 1.0:
                if len(pool) < len(floor) + 1:
                    sys.exit(f"power: effect 1.0 needs ≥ {len(floor) + 1} benign runs in {work}, got {len(pool)}")
                rng = np.random.default_rng(1000 + r)
                pick = rng.choice(len(pool), size=len(floor) + 1, replace=False)
                cand, fl = pool[pick[0]], [pool[i] for i in pick[1:]]
                klf = Path(str(cand).removesuffix(".safetensors") + ".kl.npy")
                fk = [Path(str(f).removesuffix(".safetensors") + ".kl.npy") for f in fl]
                if klf.exists() and all(f.exists() for f in fk):
                    ratios.append(np.load(klf).mean() / np.mean([np.load(f).mean() for f in fk]))
            else:
                z = np.random.default_rng(r).standard_normal((n, vocab), dtype=np.float32)
                noisy = np.asarray(base, dtype=np.float32) + np.float32(sigma) * z
                np.save(tmp, noisy)
                # realised ratio on the calibration subset with this repetition's own noise (the full-corpus
                # value is within a few % of it: bench/power.py --full-ratio computes it, ~3x slower)
                if a.full_ratio:
                    ratios.append(true_kl(ref, tmp).mean() / floor_true)
                else:
                    ratios.append(kl_rows(lp_sub, noisy[sub].astype(np.float64)).mean() / base_sub_kl * base_ratio)
                del z, noisy
                cand, fl = tmp, floor
            out = work / "power_judge.json"
            cmd = [a.judge, "test", str(golden), str(cand), *sum((["--noise", str(f)] for f in fl), []), "--json",
                   str(out), *a.judge_args.split()]
            res = sh(cmd)
            if res.returncode == 3:
                sys.exit(f"power: judge failed: {res.stderr.strip()[-2000:]}")
            verdicts.append({0: "PASS", 1: "FAIL", 2: "INCONCLUSIVE"}.get(res.returncode, "?"))
        if tmp.exists():
            tmp.unlink()
        det = sum(v == "FAIL" for v in verdicts) / len(verdicts)
        inc = sum(v == "INCONCLUSIVE" for v in verdicts)
        rr = float(np.mean(ratios)) if ratios else float("nan")
        what = "false-alarm rate" if e == 1.0 else "detection rate"
        print(f"effect {e:5.2f}: σ {sigma if sigma is not None else 0:.4f}  realised true ratio {rr:.3f}  "
              f"{what} {det:.2f} ({sum(v == 'FAIL' for v in verdicts)}/{len(verdicts)} FAIL, {inc} INCONCLUSIVE)",
              flush=True)
        results.append(dict(effect=e, sigma=sigma, realised_ratio=rr, fail_rate=det, inconclusive=inc,
                            verdicts=verdicts))
    print(f"judge {a.judge}; {a.reps} repetitions per effect; {time.time() - t0:.0f} s", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps(dict(floor_true_kl_mean=floor_true, base_ratio=base_ratio,
                                                results=results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
