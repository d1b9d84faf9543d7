#!/usr/bin/env python3
"""Compares two demo summary.json files apart from times and paths (the fields that differ between machines
by nature): prints every other difference and exits 1 if there is one, 0 if they agree.
  python3 scripts/summary_diff.py A/summary.json B/summary.json"""
import json
import sys

# Times and the paths of the model and the output folder; everything else must agree byte for byte.
IGNORED = {"total_seconds", "record_seconds", "record_seconds_golden", "sweep_record_seconds", "model", "golden",
           "candidate"}


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in IGNORED}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def diff(a, b, where, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            diff(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out)
    elif json.dumps(a) != json.dumps(b):
        out.append(f"{where}: {json.dumps(a)[:100]} != {json.dumps(b)[:100]}")


if len(sys.argv) != 3:
    sys.exit(__doc__)
a, b = (strip(json.load(open(p))) for p in sys.argv[1:])
out = []
diff(a, b, "summary", out)
print("\n".join(out) if out else "identical apart from times and paths")
sys.exit(1 if out else 0)
