"""kerncheck.test: the model-level judge of `kerncheck test` (docs/judge.md) from Python."""
import json
import os

from . import _core


class Report:
    """The judge's report: verdict ("PASS"/"FAIL"/"INCONCLUSIVE"), exit_code (0/1/2), passed, kl (mean,
    median, p90, p99, p999, max, …), flips, stats (the flat statistic table), noise_ratio, findings,
    decided_by, text (the CLI's text report) and json (the whole `--json` report as a dict)."""

    def __init__(self, js, text, exit_code):
        j = self.json = json.loads(js)
        self.text = text
        self.verdict = j["verdict"]
        self.exit_code = exit_code
        self.passed = self.verdict == "PASS"
        self.mode = j["mode"]
        self.kl = j["kl"]
        self.flips = j["flips"]
        self.stats = j["stats"]
        self.noise_ratio = j["noise_ratio"]
        self.findings = j["findings"]
        self.decided_by = j["decided_by"]
        self.positions_judged = j["positions_judged"]

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return f"<kerncheck Report {self.verdict}: {self.positions_judged} positions, KL mean {self.kl['mean']}>"

    def __str__(self):
        return self.text


# test()'s own keywords, offered with the judge's options when a keyword is misspelt.
_TEST_KEYWORDS = ("noise", "thresholds", "html", "junit", "json_path")


def judge_options(options, fn):
    """The judge's options as numbers for the core; TypeError naming a misspelt keyword ("did you mean")
    or a value that is not a number."""
    known = list(_core.judge_option_names())
    out = {}
    for k, v in options.items():
        if k not in known:
            hint = _core.did_you_mean(k, known + list(_TEST_KEYWORDS))
            raise TypeError(f"{fn}() got an unexpected keyword argument {k!r}{hint}; keywords: "
                            f"{', '.join(_TEST_KEYWORDS)}, and the judge's options {', '.join(known)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{fn}(): {k}: expected a number, got {type(v).__name__} {v!r}")
        out[k] = float(v)
    return out


def test(golden, candidate, noise=(), thresholds=None, *, html=None, junit=None, json_path=None, **options):
    """Judges `candidate` (a candidate file or full logits [N, vocab]) against `golden`, as `kerncheck test`.

    noise: files of equally correct implementations (the noise floor); thresholds: a TOML from
    `kerncheck calibrate`. options: the judge's (kl_factor, kl_abs_min, alpha, backstop_margin,
    min_positions, min_split_center, min_split_tail, min_uncertain, min_coverage). html/junit/json_path:
    also write those reports. Returns a Report; the verdict does not raise.
    """
    __tracebackhide__ = True  # pytest: a bad input's error points at the caller
    if isinstance(noise, (str, os.PathLike)):
        noise = [noise]
    js, text, rc = _core.judge(os.fspath(golden), os.fspath(candidate), [os.fspath(p) for p in noise],
                               os.fspath(thresholds) if thresholds is not None else None,
                               judge_options(options, "test"), os.fspath(html or ""),
                               os.fspath(junit or ""))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            f.write(js + "\n")
    return Report(js, text, rc)
