#!/usr/bin/env python3
"""The zoo: does the judge catch realistic kernel bugs just above the normal difference, and pass the
benign implementations? (docs/lab.md, "Equally correct implementations and injected regressions")

On SmolLM2-135M and the quick corpus (3 072 positions) this records, once each (files are reused):
  - the f32 golden and the f32 reference's full logits (`record --logits-out`, 604 MB, kept);
  - the floor: >= 4 runs `bf16+order=S` (equally correct implementations of the bf16 engine);
  - every zoo case: benign implementations not in the floor (other order seeds, attn=flash) and injected
    regressions `bf16+bug:NAME=STRENGTH` (src/model/variant.cpp kBugs).
For every run it computes the TRUE KL mean: full vocabulary, f64, from the engine's own logits against the
f32 reference's (numpy here, independent of the judge), and its ratio to the floor's (mean over floor
runs). Then it judges each case with `JUDGE test GOLDEN CASE --noise FLOOR... --json` and prints one line
per case: case, kind, true KL-mean ratio, top-k KL-mean ratio (the judge's kl_mean / floor's), verdict,
expected; then a summary: misses among regressions with true ratio >= 1.25, false alarms among benign.

  .venv/bin/python bench/zoo.py [--kerncheck build/src/kerncheck] [--judge BIN] [--work DIR]
      [--model GGUF] [--corpus-args "--decode-last 128"] [--floor-seeds 1,2,3,4] [--floor-study 4,6,8]
      [--only SUBSTR,…] [--skip-judge | --no-record] [--json OUT]

--corpus-args="…" (with "=": its value starts with --): extra arguments for `corpus build --preset quick` (e.g. "--decode-last 128": a decode-rich
corpus; "--decode-last 128 --segments-per-depth 12": 24 segments, the corpus on which an 8-run floor can
detect 1.25× in decode and at depth 256, so benign runs PASS, EXPERIMENTS.md); each setting gets its own
work dir under --work (corpus-quick, corpus-quick_--decode-last_128, …).
--floor-study M,…: after the zoo, leave-m-out judgments of the benign runs (floor runs and benign cases,
pooled): each benign run judged against m others of the pool (the next m after it, cyclically); per m,
how many PASS / INCONCLUSIVE / FAIL and the decode split's MDE × (median, min…max).

--kerncheck records (it must know order=, bug: and --logits-out); --judge judges (default: the same binary;
e.g. the new rule's /work/wt19j/build/src/kerncheck). Records take ~25-40 s each on a 2-core machine and run
under `nice -n 10`; a case whose candidate and true-KL files exist is not recorded again.
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

ROOT = Path(__file__).resolve().parent.parent

# (case, kind, variant). kind: "benign" (expected PASS) or "bug" (expected FAIL when its true ratio >= 1.25).
# Strengths were picked so that several bugs sit at 1.25-2x the floor's true KL mean (EXPERIMENTS.md).
BENIGN = [
    ("order=5", "benign", "bf16+order=5"),
    ("order=6", "benign", "bf16+order=6"),
    ("order=7", "benign", "bf16+order=7"),
    ("order=8", "benign", "bf16+order=8"),
    ("order=9", "benign", "bf16+order=9"),
    ("flash", "benign", "bf16+attn=flash"),
    ("flash+order=10", "benign", "bf16+attn=flash+order=10"),
    ("flash+order=11", "benign", "bf16+attn=flash+order=11"),
    ("default", "benign", "bf16"),
    # beyond order=1..8: benign cases left outside an 8-run floor (>= 8: never in the floor)
    ("order=12", "benign", "bf16+order=12"),
    ("order=13", "benign", "bf16+order=13"),
    ("flash+order=14", "benign", "bf16+attn=flash+order=14"),
]
BUGS = [
    ("attn_scale", "attention", "bf16+bug:attn_scale=0.01"),
    ("attn_scale+", "attention", "bf16+bug:attn_scale=0.02"),
    ("deep_score", "depth-only", "bf16+bug:deep_score=0.02"),
    ("deep_score+", "depth-only", "bf16+bug:deep_score=0.05"),
    ("kv_k", "kv-cache", "bf16+bug:kv_k=4"),
    ("kv_v", "kv-cache", "bf16+bug:kv_v=4"),
    ("decode_kv", "decode-only", "bf16+bug:decode_kv=3"),
    ("rope", "rope", "bf16+bug:rope=12"),
    ("norm_rsqrt", "norm", "bf16+bug:norm_rsqrt=5"),
    ("norm_eps", "norm", "bf16+bug:norm_eps=1000"),
    ("gemm_acc", "gemm-acc", "bf16+bug:gemm_acc=64"),
    ("silu", "activation", "bf16+bug:silu=5"),
    ("logits_scale", "logits", "bf16+bug:logits_scale=0.01"),
    ("logits_scale+", "logits", "bf16+bug:logits_scale=0.02"),
]


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=False, text=True, capture_output=True, **kw)


def nice(cmd: list[str]) -> list[str]:
    return ["nice", "-n", "10", *cmd]


def safe(v: str) -> str:
    return v.replace("+", "_").replace("=", "-").replace(":", "~")


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def true_kl(ref_logits: np.ndarray, cand_npy: Path, rows: int = 256) -> np.ndarray:
    """Per-position full-vocabulary KL(ref ‖ cand) in f64."""
    cand = np.load(cand_npy, mmap_mode="r")
    assert cand.shape == ref_logits.shape, (cand.shape, ref_logits.shape)
    out = np.empty(cand.shape[0])
    for b in range(0, cand.shape[0], rows):
        lp = log_softmax(np.asarray(ref_logits[b:b + rows]))
        lq = log_softmax(np.asarray(cand[b:b + rows]))
        out[b:b + rows] = (np.exp(lp) * (lp - lq)).sum(axis=1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kerncheck", default=str(ROOT / "build/src/kerncheck"))
    ap.add_argument("--judge", default=None, help="binary for `test` (default: --kerncheck)")
    ap.add_argument("--work", default="/tmp/kc-zoo", help="where records live (reused)")
    ap.add_argument("--model", default=None, help="SmolLM2 GGUF (default: scripts/fetch_smollm2.sh)")
    ap.add_argument("--corpus-args", default="", help="extra arguments for `corpus build` (space-separated)")
    ap.add_argument("--floor-seeds", default="1,2,3,4")
    ap.add_argument("--floor-study", default=None, help="floor sizes m for leave-m-out judgments, e.g. 4,6,8")
    ap.add_argument("--only", default=None, help="only cases whose name contains one of these (comma-separated)")
    ap.add_argument("--skip-judge", action="store_true", help="record and compute true KL only")
    ap.add_argument("--no-record", action="store_true",
                    help="judge only the cases already recorded in --work (the others are listed as skipped)")
    ap.add_argument("--judge-args", default="", help="extra arguments for `test` (space-separated)")
    ap.add_argument("--json", default=None, help="write the table as JSON here")
    a = ap.parse_args()
    kc = a.kerncheck
    judge = a.judge or kc
    # One work dir per corpus setting: goldens and records of different corpora must never mix.
    corpus_args = a.corpus_args.split()
    work = Path(a.work) / ("corpus-quick" + "".join("_" + safe(x) for x in corpus_args))
    work.mkdir(parents=True, exist_ok=True)
    model = a.model
    if model is None:
        r = sh(["bash", str(ROOT / "scripts/fetch_smollm2.sh")], env={**os.environ, "PYTHON": sys.executable})
        if r.returncode != 0:
            sys.exit(f"zoo: scripts/fetch_smollm2.sh failed: {r.stderr.strip()}")
        model = r.stdout.strip().splitlines()[-1]
    corpus, golden = work / "quick.kcc", work / "golden.safetensors"
    ref_npy = work / "ref_logits.npy"
    t_start = time.time()

    def run(cmd: list[str], what: str) -> None:
        t = time.time()
        r = sh(nice(cmd))
        if r.returncode != 0:
            sys.exit(f"zoo: {what} failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
        print(f"  {what}: {time.time() - t:.0f} s", file=sys.stderr, flush=True)

    if not corpus.exists():
        run([kc, "corpus", "build", "--tokenizer", model, "--preset", "quick", *corpus_args, "-o", str(corpus)],
            "corpus " + " ".join(corpus_args))
    if not golden.exists():
        run([kc, "record", "--model", model, "--corpus", str(corpus), "-o", str(golden)], "golden f32")
    if not ref_npy.exists():
        run([kc, "record", "--model", model, "--golden", str(golden), "--logits-out", str(ref_npy), "-o",
             str(work / "ref_f32.safetensors")], "f32 reference logits")
    ref = np.load(ref_npy, mmap_mode="r")

    def record(variant: str) -> tuple[Path, float]:
        """Candidate file and its true KL mean (full vocabulary)."""
        cand, klf = work / f"{safe(variant)}.safetensors", work / f"{safe(variant)}.kl.npy"
        if not (cand.exists() and klf.exists()):
            tmp = work / "tmp_logits.npy"
            run([kc, "record", "--model", model, "--golden", str(golden), "--variant", variant, "--logits-out",
                 str(tmp), "-o", str(cand)], f"record {variant}")
            np.save(klf, true_kl(ref, tmp))
            tmp.unlink()
        return cand, float(np.load(klf).mean())

    def judge_case(cand: Path, noise: list[Path], out: Path) -> tuple[str, dict]:
        cmd = [judge, "test", str(golden), str(cand), *sum((["--noise", str(f)] for f in noise), []),
               "--json", str(out), *a.judge_args.split()]
        r = sh(cmd)
        if r.returncode == 3 or not out.exists():
            sys.exit(f"zoo: judge failed on {cand.name}: {r.stderr.strip()[-2000:]}")
        verdict = {0: "PASS", 1: "FAIL", 2: "INCONCLUSIVE"}.get(r.returncode, f"exit{r.returncode}")
        return verdict, json.loads(out.read_text())

    floor = [record(f"bf16+order={s}") for s in a.floor_seeds.split(",")]
    floor_true = float(np.mean([m for _, m in floor]))
    print(f"floor: {len(floor)} runs bf16+order={a.floor_seeds}: true KL mean {floor_true:.4e} "
          f"(runs {', '.join(f'{m:.4e}' for _, m in floor)}; spread {min(m for _, m in floor) / floor_true:.3f}"
          f"-{max(m for _, m in floor) / floor_true:.3f}x)")
    # bugs (one strength each) and benign cases interleaved, then the rest, then the second strengths
    first = [c for c in BUGS if not c[0].endswith("+")]
    order = [c for pair in zip(first, BENIGN) for c in pair]
    order += first[len(BENIGN):] + BENIGN[len(first):] + [c for c in BUGS if c[0].endswith("+")]
    in_floor = {f"bf16+order={s}" for s in a.floor_seeds.split(",")}
    # A benign case must not be one of the floor's runs (it would be judged against itself).
    only = a.only.split(",") if a.only else None
    cases = [c for c in order if (only is None or any(s in c[0] for s in only)) and c[2] not in in_floor]
    rows = []
    print(f"{'case':<16} {'kind':<12} {'true×':>7} {'top-k×':>7} {'verdict':<13} {'expected':<8} variant")
    skipped = []
    for name, kind, variant in cases:
        if a.no_record and not (work / f"{safe(variant)}.kl.npy").exists():
            skipped.append(name)
            continue
        cand, mean = record(variant)
        ratio = mean / floor_true
        expected = "PASS" if kind == "benign" else ("FAIL" if ratio >= 1.25 else "(weak)")
        verdict, topk = "-", float("nan")
        if not a.skip_judge:
            verdict, rep = judge_case(cand, [f for f, _ in floor], work / f"{safe(variant)}.judge.json")
            try:
                topk = rep["stats"]["kl_mean"] / rep["floor_stats"]["kl_mean"]
            except (KeyError, TypeError, ZeroDivisionError):
                pass
        ok = (expected == "PASS" and verdict == "PASS") or (expected == "FAIL" and verdict == "FAIL")
        rows.append(dict(case=name, kind=kind, variant=variant, true_kl_mean=mean, true_ratio=ratio,
                         topk_ratio=topk, verdict=verdict, expected=expected, ok=ok))
        print(f"{name:<16} {kind:<12} {ratio:7.3f} {topk:7.3f} {verdict:<13} {expected:<8} {variant}",
              flush=True)
    if not a.skip_judge:
        bugs = [r for r in rows if r["kind"] != "benign" and r["true_ratio"] >= 1.25]
        benign = [r for r in rows if r["kind"] == "benign"]
        missed = [r["case"] for r in bugs if r["verdict"] != "FAIL"]
        alarms = [r["case"] for r in benign if r["verdict"] == "FAIL"]
        unsure = [r["case"] for r in rows if r["verdict"] == "INCONCLUSIVE"]
        weak = [r for r in rows if r["kind"] != "benign" and r["true_ratio"] < 1.25]
        print(f"summary: judge {judge}; regressions with true ratio >= 1.25: {len(bugs)}, missed "
              f"{len(missed)} {missed}; benign: {len(benign)}, false alarms (FAIL) {len(alarms)} {alarms}; "
              f"weak regressions (< 1.25): {len(weak)}, failed {sum(r['verdict'] == 'FAIL' for r in weak)}; "
              f"INCONCLUSIVE: {unsure}")
    study = []
    if a.floor_study and not a.skip_judge:
        # Leave-m-out: every benign run (floor runs and benign cases) judged against m other benign runs.
        pool = [(f"bf16+order={s}", f) for s, (f, _) in zip(a.floor_seeds.split(","), floor)]
        pool += [(r["variant"], work / f"{safe(r['variant'])}.safetensors") for r in rows if r["kind"] == "benign"]
        print(f"floor study: {len(pool)} benign runs pooled")
        for m in [int(x) for x in a.floor_study.split(",")]:
            if m >= len(pool):
                print(f"  m = {m}: skipped (needs > {m} benign runs, have {len(pool)})")
                continue
            counts, mdes = {"PASS": 0, "INCONCLUSIVE": 0, "FAIL": 0}, []
            for i, (variant, cand) in enumerate(pool):
                noise = [pool[(i + 1 + j) % len(pool)][1] for j in range(m)]
                verdict, rep = judge_case(cand, noise, work / f"study_m{m}_{safe(variant)}.judge.json")
                counts[verdict] = counts.get(verdict, 0) + 1
                mde = [t["mde_ratio"] for t in rep["floor_test"]["tests"] if t["split"] == "phase decode"]
                if mde and mde[0] is not None:
                    mdes.append(mde[0])
                study.append(dict(m=m, variant=variant, verdict=verdict, decode_mde_ratio=mde[0] if mde else None))
            md = (f"median {np.median(mdes):.3f}, {min(mdes):.3f}…{max(mdes):.3f}" if mdes else "-")
            print(f"  m = {m}: {len(pool)} judgments: PASS {counts['PASS']}, INCONCLUSIVE {counts['INCONCLUSIVE']}, "
                  f"FAIL {counts['FAIL']}; decode MDE × {md}", flush=True)
    if skipped:
        print(f"not recorded (skipped): {', '.join(skipped)}")
    print(f"total {time.time() - t_start:.0f} s", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps(dict(floor_true_kl_mean=floor_true, corpus_args=a.corpus_args, cases=rows,
                                                 floor_study=study), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
