#!/usr/bin/env python3
"""Every output of the judge on a set of recorded runs, made by one build; and the differences between two
builds' outputs, so that "the same verdicts and figures before and after a change" is one command.

  python3 scripts/judge_diff.py judge BUILD DEMO OUT [--zoo DIR] [--no-demo]
  python3 scripts/judge_diff.py diff OUT_A OUT_B

judge: DEMO is a `kerncheck demo` folder (golden.kcg, runs/*.kcc, thresholds.toml, summary.json, sweep/);
--zoo DIR adds every *.kcc in DIR (candidates recorded against DEMO/golden.kcg). Every run (runs/, sweep/,
the zoo) is judged by BUILD/src/kerncheck, each way the judge can be asked:
  floor     `test G C --noise F…` (F: the demo's noise runs, the candidate itself left out) with --json,
            --junit, --html and the text report;
  thr       the same with --thresholds DEMO/thresholds.toml (thresholds mode, noise runs for the ratios);
  throne    --thresholds alone;
  merge     two shards (`test --positions A:B --partial`) merged by `kerncheck merge` with the floor;
  py        the Python API, kerncheck.test(G, C, noise=F…) (BUILD/python), its JSON and text.
Each call's exit code is in OUT/manifest.json. Unless --no-demo, DEMO is copied to OUT/demo and
`kerncheck demo` is run there again (the records are reused: only the judging is redone).

diff: compares two such folders: JSON by field, the rest line by line. Prints every difference, then a
count per (mode, field), and exits 1 when anything differs.
"""
import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

PY_DRIVER = r"""
import json, sys
import kerncheck
jobs = json.loads(sys.argv[1])
for j in jobs:
    try:
        r = kerncheck.test(j["golden"], j["candidate"], noise=j["noise"])
        open(j["out"] + ".json", "w").write(json.dumps(r.json, indent=2, ensure_ascii=False) + "\n")
        open(j["out"] + ".txt", "w").write(r.text)
        print(json.dumps({"name": j["out"], "rc": r.exit_code}))
    except Exception as e:  # a refusal is an output too
        open(j["out"] + ".err", "w").write(f"{type(e).__name__}: {e}\n")
        print(json.dumps({"name": j["out"], "rc": "raised " + type(e).__name__}))
"""


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def judge(build, demo, out, zoo, rerun_demo):
    kc = Path(build) / "src" / "kerncheck"
    demo, out = Path(demo).resolve(), Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    golden, thresholds = demo / "golden.kcg", demo / "thresholds.toml"
    summary = json.loads((demo / "summary.json").read_text())
    floor = [demo / "runs" / f"{r['name']}.kcc" for r in summary["runs"] if r["role"] == "noise"]
    cands = sorted((demo / "runs").glob("*.kcc")) + sorted((demo / "sweep").glob("*.kcc"))
    if zoo:
        cands += sorted(Path(zoo).resolve().glob("*.kcc"))
    manifest = {}
    py_jobs = []
    for c in cands:
        stem = c.parent.name + "." + c.stem
        noise = [f for f in floor if f != c]
        nargs = [a for f in noise for a in ("--noise", f)]
        for mode, extra in [("floor", nargs), ("thr", nargs + ["--thresholds", thresholds]),
                            ("throne", ["--thresholds", thresholds])]:
            base = out / f"{stem}.{mode}"
            p = run([kc, "test", golden, c, *extra, "--json", f"{base}.json", "--junit", f"{base}.xml",
                     "--html", f"{base}.html"])
            Path(f"{base}.txt").write_text(p.stdout + (("\nSTDERR: " + p.stderr) if p.stderr else ""))
            manifest[f"{stem}.{mode}"] = p.returncode
        # Shards of the floor judgment, merged.
        positions = summary["positions"]
        half = positions // 2
        shards = []
        for a, b in [(0, half), (half, positions)]:
            s = out / f"{stem}.shard{a}.kcpart"
            p = run([kc, "test", golden, c, *nargs, "--positions", f"{a}:{b}", "--partial", s])
            shards.append(s)
        base = out / f"{stem}.merge"
        p = run([kc, "merge", *shards, "--json", f"{base}.json", "--junit", f"{base}.xml"])
        Path(f"{base}.txt").write_text(p.stdout + (("\nSTDERR: " + p.stderr) if p.stderr else ""))
        manifest[f"{stem}.merge"] = p.returncode
        for s in shards:
            s.unlink(missing_ok=True)
        py_jobs.append({"golden": str(golden), "candidate": str(c), "noise": [str(f) for f in noise],
                        "out": str(out / f"{stem}.py")})
    env = dict(os.environ, PYTHONPATH=str(Path(build).resolve() / "python"))
    p = run([sys.executable, "-c", PY_DRIVER, json.dumps(py_jobs)], env=env)
    if p.returncode:
        sys.exit(f"the Python API driver failed:\n{p.stderr}")
    for line in p.stdout.splitlines():
        j = json.loads(line)
        manifest[Path(j["name"]).name] = j["rc"]
    if rerun_demo:
        d = out / "demo"
        if d.exists():
            shutil.rmtree(d)
        shutil.copytree(demo, d)
        p = run(["nice", "-n", "10", kc, "demo", "--preset", summary["preset"], "--out-dir", d, "--model",
                 summary["model"]])
        (out / "demo.log").write_text(p.stdout + p.stderr)
        manifest["demo"] = p.returncode
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"{len(manifest)} outputs in {out}")


# ---- diff -------------------------------------------------------------------------------------------------
TIMES = re.compile(r"seconds|elapsed|wall")


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not TIMES.search(k)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def finding_key(f):
    """A finding's identity: rule, split, statistic. Thresholds findings once named their split by the whole
    key ("domain.prose.kl_mean" as split and statistic); that spelling is read as (domain prose, kl_mean)."""
    split, stat = f.get("split"), f.get("statistic")
    if f.get("rule") == "threshold" and split == stat and isinstance(stat, str):
        parts = stat.split(".")
        split, stat = ("overall", stat) if len(parts) == 1 else (" ".join(parts[:-1]), parts[-1])
    return (f.get("rule"), split, stat)


def is_findings(x):
    return isinstance(x, list) and x and all(isinstance(f, dict) and {"rule", "split", "statistic"} <= set(f) for f in x)


def jdiff(a, b, where, out):
    """Differences of b from a: ("value", path, a, b), ("new", path, b) for a field only b has, ("gone", …),
    ("order", path, a's order, b's order) for a list of findings whose members agree but not their order."""
    if isinstance(a, dict) and isinstance(b, dict):
        if {"rule", "split", "statistic"} <= set(a) and {"rule", "split", "statistic"} <= set(b):
            a, b = dict(a), dict(b)  # a finding (decided_by): compared by its identity's current spelling
            a["split"], a["statistic"] = finding_key(a)[1:]
            b["split"], b["statistic"] = finding_key(b)[1:]
        for k in a:
            if k in b:
                jdiff(a[k], b[k], f"{where}.{k}", out)
            else:
                out.append(("gone", f"{where}.{k}", json.dumps(a[k], ensure_ascii=False)[:160], ""))
        for k in b:
            if k not in a:
                out.append(("new", f"{where}.{k}", "", json.dumps(b[k], ensure_ascii=False)[:160]))
    elif is_findings(a) and is_findings(b) and len(a) == len(b):
        ka, kb = [finding_key(f) for f in a], [finding_key(f) for f in b]
        if sorted(ka, key=str) == sorted(kb, key=str):
            if ka != kb:
                out.append(("order", where, " | ".join(map(str, ka[:3])), " | ".join(map(str, kb[:3]))))
            by_b = {finding_key(f): f for f in b}
            for f in a:
                g = dict(by_b[finding_key(f)])
                fa = dict(f)
                fa["split"], fa["statistic"] = finding_key(f)[1:]
                g["split"], g["statistic"] = finding_key(g)[1:]
                jdiff(fa, g, f"{where}[{'/'.join(map(str, finding_key(f)))}]", out)
        else:
            out.append(("value", where, str(ka)[:160], str(kb)[:160]))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            jdiff(x, y, f"{where}[{i}]", out)
    elif json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
        out.append(("value", where, json.dumps(a, ensure_ascii=False)[:160], json.dumps(b, ensure_ascii=False)[:160]))


def load(path, folder):
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    return text.replace(str(folder), "<out>")


def diff(a, b):
    a, b = Path(a).resolve(), Path(b).resolve()
    fa = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    skip = re.compile(r"(^|/)(runs|sweep)/|\.kc[cgp]$|\.kcpart$|demo\.log$|\.new$")
    found, per = [], Counter()
    for f in sorted(fa ^ fb):
        if not skip.search(str(f)):
            found.append(f"{f}: only in {'A' if f in fa else 'B'}")
            per[(mode_of(f), "<file>")] += 1
    for f in sorted(fa & fb):
        if skip.search(str(f)):
            continue
        x, y = load(a / f, a), load(b / f, b)
        if x == y:
            continue
        if f.suffix == ".json":
            out = []
            jdiff(strip(json.loads(x)), strip(json.loads(y)), "", out)
            for kind, where, u, v in out:
                found.append(f"{f}: {kind} {where}: {u} → {v}")
                field = re.sub(r"\[[^\]]*\]", "[]", where)
                field = re.sub(r"\.by_(depth|domain|phase)\.[^.]+\.", r".by_\1.*.", field)
                per[(mode_of(f), f"{kind} {field}")] += 1
        else:
            lx, ly = x.splitlines(), y.splitlines()
            d = [l for l in difflib.unified_diff(lx, ly, lineterm="", n=0) if l[:1] in "+-" and l[:3] not in ("+++", "---")]
            found.append(f"{f}: {len(d)} changed lines")
            for l in d[:12]:
                found.append("    " + l[:200])
            per[(mode_of(f), f.suffix)] += 1
    print("\n".join(found) if found else "identical")
    if per:
        print("\ncount per (mode, field):")
        for (m, w), c in sorted(per.items()):
            print(f"  {c:5d}  {m:8s} {w}")
    return 1 if found else 0


def mode_of(f):
    s = str(f)
    if s.startswith("demo/"):
        return "demo"
    parts = Path(s).name.split(".")
    return parts[-2] if len(parts) >= 3 else parts[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("judge")
    j.add_argument("build")
    j.add_argument("demo")
    j.add_argument("out")
    j.add_argument("--zoo")
    j.add_argument("--no-demo", action="store_true")
    d = sub.add_parser("diff")
    d.add_argument("a")
    d.add_argument("b")
    o = ap.parse_args()
    if o.cmd == "judge":
        judge(o.build, o.demo, o.out, o.zoo, not o.no_demo)
        return 0
    return diff(o.a, o.b)


if __name__ == "__main__":
    sys.exit(main())
