#!/usr/bin/env python3
"""Compares two demo outputs apart from times and paths (the fields that differ between machines by nature):
prints every other difference and exits 1 if there is one, 0 if they agree.
  python3 scripts/summary_diff.py A/summary.json B/summary.json   two summaries
  python3 scripts/summary_diff.py DEMO_A DEMO_B                   two demo folders: summary.json and every
                                                                  file in reports/ (JSON by field, the rest
                                                                  byte for byte), each folder's own path
                                                                  replaced by <out> first"""
import json
import os
import re
import sys

# Times and the paths of the model and the output folder; everything else must agree byte for byte.
IGNORED = {"total_seconds", "record_seconds", "record_seconds_golden", "sweep_record_seconds", "model", "golden",
           "candidate"}
# In the judge's reports the paths are kept (with <out> in place of the folder), only times are dropped, and
# the golden's checksum: it seals the record command line, which holds the output folder's path.
TIMES = re.compile(r"seconds|elapsed|wall")
REPORT_IGNORED = {"checksum"}


def strip(x, ignored):
    if isinstance(x, dict):
        return {k: strip(v, ignored) for k, v in x.items() if k not in ignored and not TIMES.search(k)}
    if isinstance(x, list):
        return [strip(v, ignored) for v in x]
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


def load(path, folder=None):
    text = open(path, encoding="utf-8", errors="surrogateescape").read()
    if folder:  # the folder as an absolute path, and as the demo was given it (a relative --out-dir)
        for form in (os.path.abspath(folder), os.path.relpath(folder), os.path.basename(os.path.abspath(folder))):
            text = re.sub(r'(?<![\w/.-])' + re.escape(json.dumps(form)[1:-1]) + r'(?=/)', "<out>", text)
    return text


def main(a, b):
    out = []
    if os.path.isdir(a) and os.path.isdir(b):
        diff(strip(json.loads(load(f"{a}/summary.json", a)), IGNORED),
             strip(json.loads(load(f"{b}/summary.json", b)), IGNORED), "summary", out)
        ra, rb = (sorted(os.listdir(f"{d}/reports")) for d in (a, b))
        if ra != rb:
            out.append(f"reports/: {ra} != {rb}")
        for name in sorted(set(ra) & set(rb)):
            x, y = load(f"{a}/reports/{name}", a), load(f"{b}/reports/{name}", b)
            if name.endswith(".json"):
                diff(strip(json.loads(x), REPORT_IGNORED), strip(json.loads(y), REPORT_IGNORED), f"reports/{name}", out)
            elif x != y:
                out.append(f"reports/{name}: differs")
    else:
        diff(strip(json.load(open(a)), IGNORED), strip(json.load(open(b)), IGNORED), "summary", out)
    print("\n".join(out) if out else "identical apart from times and paths")
    return 1 if out else 0


if len(sys.argv) != 3:
    sys.exit(__doc__)
sys.exit(main(*sys.argv[1:]))
