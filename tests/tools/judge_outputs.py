#!/usr/bin/env python3
"""Writes every output of the judge (test text/JSON/HTML/JUnit/--explain, merge, calibrate, thresholds
errors) for a fixed set of small goldens and candidates into OUT, so that two builds can be compared byte
for byte (a refactoring of the judge must not change them):

  judge_outputs.py --kc BEFORE/kerncheck --data DATA OUT && mv OUT OUT_BEFORE
  judge_outputs.py --kc build/src/kerncheck --data DATA OUT && mv OUT OUT_AFTER
  judge_outputs.py --diff OUT_BEFORE OUT_AFTER     # masks times (and other paths); exit 1 on a difference

The inputs are made with numpy from fixed seeds and recorded with --from-logits into DATA once (a golden
records its time, so two recordings differ); later runs reuse them. Writing both runs to the same OUT keeps
the paths in the reports equal.
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

N, V, SIGMA = 4000, 1000, 0.02


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def make_inputs(kc, d):
    rng = np.random.default_rng(4321)
    ref = (rng.standard_normal((N, V)) * 3).astype(np.float32)
    ref[:, :5] += 6  # a few likely tokens, so margins spread over every bin
    tokens = np.array([rng.choice(V, p=np.exp(r)) for r in log_softmax(ref.astype(np.float64))], np.int32)
    segs = [
        {"name": "code-a", "domain": "code", "depth": 100, "start": 0, "decode_from": 400},
        {"name": "prose-a", "domain": "prose", "depth": 2000, "start": 1000, "decode_from": 500},
        {"name": "code-b", "domain": "code", "depth": 5000, "start": 2000, "phase": "decode"},
        {"name": "prose-b", "domain": "prose", "depth": 9000, "start": 3000, "decode_from": 200},
    ]
    text = "".join(f"w{i} " for i in range(1000))
    segs[1]["text"] = text
    segs[1]["offsets"] = [len("".join(f"w{j} " for j in range(i))) for i in range(1000)]
    (d / "segs.json").write_text(json.dumps(segs))
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", tokens)
    run(kc, "record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments",
        d / "segs.json", "-o", d / "g.st")
    runs = [(f"n{i}", SIGMA, 10 + i) for i in range(4)] + [("ok", SIGMA, 20), ("ok2", SIGMA, 22),
                                                           ("bad", 1.5 * SIGMA, 21), ("x3", 3 * SIGMA, 23)]
    for name, scale, seed in runs:
        x = (ref + np.random.default_rng(seed).normal(0, scale, ref.shape)).astype(np.float32)
        if name == "x3":
            x[17, :] = np.nan  # a non-finite row
        np.save(d / f"{name}.npy", x)
        run(kc, "record", "--from-logits", d / f"{name}.npy", "--golden", d / "g.st", "-o", d / f"{name}.st")


def run(kc, *args, out=None, name=None):
    p = subprocess.run([str(kc), *map(str, args)], capture_output=True, text=True)
    if out is not None:
        (out / f"{name}.stdout").write_text(p.stdout)
        (out / f"{name}.stderr").write_text(p.stderr)
        (out / f"{name}.rc").write_text(f"{p.returncode}\n")
    elif p.returncode != 0:
        sys.exit(f"{args}: rc {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def produce(kc, out, d):
    out.mkdir(parents=True, exist_ok=True)
    if not (d / "x3.st").exists():
        d.mkdir(parents=True, exist_ok=True)
        make_inputs(kc, d)
    g = d / "g.st"
    noise = [a for i in range(4) for a in ("--noise", d / f"n{i}.st")]

    def test(name, cand, *extra):
        run(kc, "test", g, cand, "--json", out / f"{name}.json", "--html", out / f"{name}.html", "--junit",
            out / f"{name}.xml", *extra, out=out, name=name)

    for cand in ["ok", "bad", "x3"]:
        test(f"noise4_{cand}", d / f"{cand}.st", *noise)
        test(f"noise4_{cand}_explain", d / f"{cand}.st", *noise, "--explain")
        test(f"noise1_{cand}", d / f"{cand}.st", "--noise", d / "n0.st")
    test("none_ok", d / "ok.st")
    test("logits_ok", d / "ok.npy", *noise[:4], "--ref-logits", d / "ref.npy")
    # Calibrate, then judge with its thresholds.
    run(kc, "calibrate", "--golden", g, "--good", d / "ok.st", d / "ok2.st", d / "n0.st", "--bad", d / "bad.st",
        d / "x3.st", "-o", out / "th.toml", out=out, name="calibrate")
    for cand in ["ok", "bad"]:
        test(f"th_{cand}", d / f"{cand}.st", "--thresholds", out / "th.toml")
    # Hand-written thresholds: every statistic of the table, overall and per split.
    stats = ["kl_mean", "kl_median", "kl_p90", "kl_p99", "kl_p999", "kl_max", "flip_rate", "flip_rate_uncertain",
             "high_margin_flips", "delta_p_rms", "nonfinite"]
    lines = ['[kerncheck]', 'format = "thresholds"', 'version = 1', '[limits]']
    for s in stats:
        lines.append(f'"{s}" = 0.01')
        lines.append(f'"domain.code.{s}" = 0.02')
        lines.append(f'"phase.decode.{s}" = 0.02')
        lines.append(f'"depth.4096.{s}" = 0.02')
    lines += ['"sigma" = 0.05', '"nll_diff_mean" = 0.001', '"depth.1.kl_mean" = 0.1']
    (out / "th_all.toml").write_text("\n".join(lines) + "\n")
    test("thall_ok", d / "ok.st", "--thresholds", out / "th_all.toml", *noise)
    # Unknown statistics: the messages with "did you mean".
    for i, key in enumerate(["kl_mena", "domain.code.flip_rat", "sigmaa", "phase.decode.sigma", "nonfinit",
                             "nll_diff_mea", "dpth.2048.kl_mean", "phase.middle.kl_mean", "kl_p9999",
                             "delta_p_rmss"]):
        (out / f"typo{i}.toml").write_text(f'[kerncheck]\nformat = "thresholds"\nversion = 1\n[limits]\n"{key}" = 1\n')
        run(kc, "test", g, d / "ok.st", "--thresholds", out / f"typo{i}.toml", out=out, name=f"typo{i}")
    # Shards and merge.
    for a, b in [(0, 1500), (1500, 4000)]:
        run(kc, "test", g, d / "bad.st", *noise, "--positions", f"{a}:{b}", "--partial", out / f"shard{a}.st",
            out=out, name=f"shard{a}")
    run(kc, "merge", out / "shard0.st", out / "shard1500.st", "--json", out / "merge.json", "--html",
        out / "merge.html", "--junit", out / "merge.xml", out=out, name="merge")


MASKS = [
    (re.compile(r"/[^\s\"'<>]*?/(data/|th|typo|shard)"), r"<DIR>/\1"),  # absolute paths of OUT
    (re.compile(r"\d+(\.\d+)? ?(s|ms|seconds)\b"), "<TIME>"),
    (re.compile(r"\"(time|seconds|elapsed)[a-z_]*\": ?[0-9.e+-]+"), r'"\1": <TIME>'),
]


def masked(path):
    t = path.read_text(errors="replace")
    for rx, sub in MASKS:
        t = rx.sub(sub, t)
    return t


def diff(a, b):
    fa = {p.relative_to(a) for p in a.rglob("*") if p.is_file() and "data" not in p.parts}
    fb = {p.relative_to(b) for p in b.rglob("*") if p.is_file() and "data" not in p.parts}
    bad = sorted(fa ^ fb)
    for p in bad:
        print(f"only in one: {p}")
    same = 0
    for p in sorted(fa & fb):
        if masked(a / p) != masked(b / p):
            print(f"differs: {p}")
            bad.append(p)
        else:
            same += 1
    print(f"{same} files identical (paths and times masked), {len(bad)} different")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kc", help="the kerncheck binary")
    ap.add_argument("--data", type=Path, help="the inputs: made here unless there (default OUT/data)")
    ap.add_argument("--diff", action="store_true", help="compare two output folders")
    ap.add_argument("dirs", nargs="+", type=Path)
    a = ap.parse_args()
    if a.diff:
        sys.exit(diff(*a.dirs))
    out = a.dirs[0].resolve()
    produce(Path(a.kc).resolve(), out, (a.data or out / "data").resolve())


if __name__ == "__main__":
    main()
