"""Summary of scripts/depth_onset_experiment.sh: the onset found for each depth-gated regression against its
true start depth, and how often an onset is reported on the benign judgments (equally correct runs judged
against floors of the others). Writes OUT_DIR/summary.json and OUT_DIR/summary.md and prints the latter.
    python scripts/depth_onset_summary.py OUT_DIR
"""
import json
import re
import sys
from pathlib import Path


def main(out):
    out = Path(out)
    reports = sorted((out / "reports").glob("*.json"))
    onsets, benign = [], []
    for p in reports:
        r = json.loads(p.read_text())
        prof = r["depth_profile"]
        on = prof["onset"]
        m = re.fullmatch(r"deep(\d+)-([0-9.]+)", p.stem)
        if m:
            d, s = int(m.group(1)), float(m.group(2))
            # The bug scales keys at positions ≥ D: the first position it changes sees D + 1 tokens.
            found = on["depth"]
            onsets.append({"report": p.name, "D": d, "strength": s, "verdict": r["verdict"], "found": on["found"],
                           "onset": found, "onset_bucket_end": on["depth_end"], "interval": on["interval"],
                           "found_share": on["found_share"], "ratio_after": on["ratio_to_floor"],
                           "error": None if found is None else (found - d) / d,
                           "within_10pct": found is not None and abs(found - d) <= 0.1 * d,
                           "buckets": len(prof["buckets"]), "t_critical": on["t_critical"],
                           "deepest_t": prof["buckets"][-1]["t"] if prof["buckets"] else None})
        elif p.stem.startswith("benign-"):
            last = prof["buckets"][-1] if prof["buckets"] else {}
            benign.append({"report": p.name, "verdict": r["verdict"], "onset": on["found"], "onset_depth": on["depth"],
                           "deepest_t": last.get("t"), "t_critical": on["t_critical"],
                           "outside_buckets": sum(b["outside"] for b in prof["buckets"]),
                           "buckets": len(prof["buckets"])})
    n_alarms = sum(b["onset"] for b in benign)
    verdicts = {}
    for b in benign:
        verdicts[b["verdict"]] = verdicts.get(b["verdict"], 0) + 1
    outside = sum(b["outside_buckets"] for b in benign)
    total_buckets = sum(b["buckets"] for b in benign)
    summary = {"onsets": onsets, "benign": benign,
               "benign_judgments": len(benign), "benign_onsets": n_alarms, "benign_verdicts": verdicts,
               "benign_buckets_outside": outside, "benign_buckets": total_buckets}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    lines = ["| D | S | verdict | onset found (bucket) | error | 90 % interval | resamples finding one | "
             "KL ÷ floor from the onset |", "|---|---|---|---|---|---|---|---|"]
    for o in sorted(onsets, key=lambda o: (o["strength"], o["D"])):
        found = f"{o['onset']} ({o['onset']} … {o['onset_bucket_end'] - 1})" if o["found"] else "none"
        err = "" if o["error"] is None else f"{100 * o['error']:+.1f} %"
        iv = "" if not o["interval"] else f"{o['interval'][0]} … {o['interval'][1]}"
        ratio = "" if o["ratio_after"] is None else f"{o['ratio_after']:.3g}"
        share = f"{100 * (o['found_share'] or 0):.0f} %"
        lines.append(f"| {o['D']} | {o['strength']} | {o['verdict']} | {found} | {err} | {iv} | {share} | {ratio} |")
    lines.append("")
    lines.append(f"Benign judgments: {len(benign)}; onset reported in {n_alarms} "
                 f"({100 * n_alarms / max(1, len(benign)):.1f} %); verdicts {verdicts}; buckets outside the "
                 f"floor's spread: {outside} of {total_buckets} ({100 * outside / max(1, total_buckets):.2f} %).")
    md = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main(sys.argv[1])
