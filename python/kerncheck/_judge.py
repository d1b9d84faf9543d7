"""kerncheck.test: the model-level judge of `kerncheck test` (docs/judge.md) from Python."""
import inspect
import json
import os

from . import _core


class Report:
    """The judge's report: verdict ("PASS"/"FAIL"/"INCONCLUSIVE"), exit_code (0/1/2), passed, headline (the
    verdict in one sentence), kl (mean, median, p90, p99, p999, max, …), flips, stats (the flat statistic
    table), noise_ratio, findings, decided_by, depth_profile (the KL mean against the floor's by depth: buckets
    and onset, docs/judge.md "Depth profile and onset"; None for shards without per-depth sums), onset_depth
    (the depth from which the candidate stays outside the floor's spread, or None), notes (said in every report:
    a floor without spread, a floor mismatch), text (the CLI's text report) and json (the whole `--json` report
    as a dict)."""

    def __init__(self, js, text, exit_code):
        j = self.json = json.loads(js)
        self.text = text
        self.verdict = j["verdict"]
        self.exit_code = exit_code
        self.passed = self.verdict == "PASS"
        self.headline = j["headline"]
        self.mode = j["mode"]
        self.kl = j["kl"]
        self.flips = j["flips"]
        self.stats = j["stats"]
        self.noise_ratio = j["noise_ratio"]
        self.findings = j["findings"]
        self.decided_by = j["decided_by"]
        self.positions_judged = j["positions_judged"]
        self.depth_profile = j["depth_profile"]
        self.onset_depth = self.depth_profile["onset"]["depth"] if self.depth_profile else None
        self.notes = j["notes"]  # said in every report (a floor without spread, a floor mismatch, …)

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return f"<kerncheck Report {self.verdict}: {self.positions_judged} positions, KL mean {self.kl['mean']}>"

    def __str__(self):
        return self.text


# The judge's options, from the table the CLI's flags come from (src/judge/options.cpp): every option of
# `kerncheck test` is a keyword here, with the same default, range and help.
_OPTIONS = {o["python"]: o for o in _core.judge_option_table()}
# test()'s own keywords (the CLI's --json, --junit, --html, --ref-logits, --worst, --locate).
_TEST_KEYWORDS = ("noise", "floor", "thresholds", "html", "junit", "json_path", "ref_logits", "worst", "locate")


def judge_options(options, fn):
    """The judge's options as numbers for the core; TypeError naming a misspelt keyword ("did you mean")
    or a value of the wrong type (a flag takes a bool, a count an int, the others a number)."""
    out = {}
    for k, v in options.items():
        o = _OPTIONS.get(k)
        if o is None:
            known = list(_OPTIONS)
            hint = _core.did_you_mean(k, known + list(_TEST_KEYWORDS))
            raise TypeError(f"{fn}() got an unexpected keyword argument {k!r}{hint}; keywords: "
                            f"{', '.join(_TEST_KEYWORDS)}, and the judge's options {', '.join(known)}")
        want = {"flag": (bool,), "count": (int,), "real": (int, float)}[o["kind"]]
        if (isinstance(v, bool) and o["kind"] != "flag") or not isinstance(v, want):
            name = {"flag": "True or False", "count": "a whole number", "real": "a number"}[o["kind"]]
            raise TypeError(f"{fn}(): {k} ({o['flag']}): expected {name}, got {type(v).__name__} {v!r}")
        out[k] = float(v)
    return out


def test(golden, candidate, noise=(), thresholds=None, *, floor=None, html=None, junit=None, json_path=None,
         ref_logits=None, worst=20, locate=None, **options):
    __tracebackhide__ = True  # pytest: a bad input's error points at the caller
    if isinstance(noise, (str, os.PathLike)):
        noise = [noise]
    js, text, rc = _core.judge(os.fspath(golden), os.fspath(candidate), [os.fspath(p) for p in noise],
                               os.fspath(floor or ""), os.fspath(thresholds) if thresholds is not None else None,
                               judge_options(options, "test"), os.fspath(ref_logits or ""), worst,
                               os.fspath(html or ""), os.fspath(junit or ""), os.fspath(json_path or ""),
                               os.fspath(locate or ""))
    return Report(js, text, rc)


def _signature_and_doc():
    """test()'s signature lists every option of the table with its default; its docstring, their help."""
    sig = inspect.signature(test)
    params = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=o["default"])
               for name, o in _OPTIONS.items()]
    lines = [f"    {name} ({o['flag']}, default {o['default']!r}, {o['range'] if o['kind'] != 'flag' else 'a flag'}): "
             f"{o['help']}" for name, o in _OPTIONS.items()]
    doc = ("Judges `candidate` (a candidate file or full logits [N, vocab]) against `golden`, as `kerncheck test`:\n"
           "the same checks (the floor's provenance, the positions), the same verdict, the same reports.\n\n"
           "noise: files of equally correct implementations (the noise floor); floor: a floor manifest from\n"
           "`kerncheck floor` in place of noise (its runs, checked against it); thresholds: a TOML from\n"
           "`kerncheck calibrate`; html/junit/json_path: also write those reports (atomically); ref_logits: the\n"
           "reference's full logits (full-vocabulary KL of a logits candidate); worst: how many worst positions\n"
           "the JSON keeps; locate: with html, a `kerncheck locate --json` report the page links.\n"
           "Returns a Report; the verdict does not raise. A bad input raises kerncheck.Error (the CLI's exit 3).\n\n"
           "The judge's options (keyword, flag, default, range: help):\n" + "\n".join(lines) + "\n")
    return sig.replace(parameters=params), doc


test.__signature__, test.__doc__ = _signature_and_doc()
