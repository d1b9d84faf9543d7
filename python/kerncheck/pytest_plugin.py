"""kerncheck's pytest plugin (entry point pytest11, active once the package is installed; in a source
tree: `pytest -p kerncheck.pytest_plugin`). docs/python.md, "pytest".

- the `kerncheck` fixture: `kerncheck.assert_close(actual, expected, ...)` (tensor level, as
  kerncheck.testing.assert_close) and `kerncheck.test(candidate, golden=..., noise=[...], ...)` (model
  level, as kerncheck.test: a FAIL is an AssertionError naming the deciding finding, INCONCLUSIVE a skip
  unless inconclusive="fail");
- the marker `@pytest.mark.kerncheck(golden=..., noise=[...], thresholds=..., rtol=..., ...)`: defaults for
  the fixture's calls in that test (keywords of test() and of assert_close());
- every check lands in the test's JUnit properties (`--junitxml`: `kerncheck.N` = verdict and what
  decided it), and with `--kerncheck-json=FILE` in one JSON file (schema kerncheck.pytest, version 1:
  per test its checks, each with the full kerncheck report).
"""
import json
import os

import pytest

from . import testing
from ._judge import _TEST_KEYWORDS, test as _judge_test

_CLOSE_KEYWORDS = ("method", "rtol", "atol", "check_dtype", "dtype", "third", "spec", "op", "msg", "full_report")
_JSON_KEY = pytest.StashKey[list]()  # the run's checks, for --kerncheck-json


def pytest_addoption(parser):
    g = parser.getgroup("kerncheck")
    g.addoption("--kerncheck-json", default=None, metavar="FILE",
                help="write every kerncheck check of the run (verdicts, figures, full reports) as JSON to FILE")


def pytest_configure(config):
    config.addinivalue_line("markers", "kerncheck(golden=None, noise=(), thresholds=None, **options): defaults "
                                       "for the kerncheck fixture's test() and assert_close() in this test")
    config.stash[_JSON_KEY] = []


class Kerncheck:
    """The `kerncheck` fixture: tensor and model checks that fail as pytest assertions."""

    def __init__(self, request, defaults):
        self._request, self._defaults, self.checks = request, defaults, []

    def _record(self, entry):
        self.checks.append(entry)
        self._request.node.user_properties.append(
            (f"kerncheck.{len(self.checks)}", f"{entry['kind']} {entry['verdict']}: {entry['summary']}"))
        self._request.config.stash[_JSON_KEY].append(dict(entry, test=self._request.node.nodeid))

    def assert_close(self, actual, expected, **kw):
        """kerncheck.testing.assert_close with the marker's defaults; returns the CompareResult."""
        __tracebackhide__ = True
        kw = {**{k: v for k, v in self._defaults.items() if k in _CLOSE_KEYWORDS}, **kw}
        try:
            r = testing.assert_close(actual, expected, **kw)
        except testing.CloseError as e:
            res = e.result
            self._record({"kind": "assert_close", "verdict": "FAIL",
                          "summary": res.reason if res is not None else str(e).splitlines()[0],
                          "report": res.json if res is not None else None})
            raise
        self._record({"kind": "assert_close", "verdict": r.verdict, "summary": r.reason, "report": r.json})
        return r

    def test(self, candidate, golden=None, *, inconclusive="skip", **kw):
        """kerncheck.test(golden, candidate, ...) with the marker's defaults (golden, noise, thresholds,
        judge options). FAIL raises AssertionError with the deciding finding; INCONCLUSIVE skips the test
        (inconclusive="fail": fails it, "pass": returns). Returns the Report."""
        __tracebackhide__ = True
        d = {k: v for k, v in self._defaults.items() if k not in _CLOSE_KEYWORDS}
        golden = golden if golden is not None else d.pop("golden", None)
        d.pop("golden", None)
        if golden is None:
            raise TypeError("kerncheck.test(): golden: expected a golden file (argument or "
                            "@pytest.mark.kerncheck(golden=...)), got none")
        if inconclusive not in ("skip", "fail", "pass"):
            raise ValueError(f"kerncheck.test(): inconclusive: expected skip, fail or pass, got {inconclusive!r}")
        kw = {**d, **kw}
        rep = _judge_test(golden, candidate, **kw)
        why = _why(rep)
        self._record({"kind": "test", "verdict": rep.verdict, "summary": why, "report": rep.json,
                      "golden": os.fspath(golden), "candidate": os.fspath(candidate)})
        head = f"kerncheck test {os.fspath(candidate)} vs {os.fspath(golden)}: {rep.verdict}"
        if rep.verdict == "FAIL" or (rep.verdict == "INCONCLUSIVE" and inconclusive == "fail"):
            lines = rep.text.rstrip("\n").splitlines()
            raise AssertionError(f"{head}: {why}\n" + "\n".join(lines[:12])
                                 + ("\n  … (the whole report: the Report's .text)" if len(lines) > 12 else ""))
        if rep.verdict == "INCONCLUSIVE" and inconclusive == "skip":
            pytest.skip(f"{head}: {why}")
        return rep


def _why(rep):
    """One line: the reasons of an INCONCLUSIVE, else the judge's own headline (the deciding evidence of a
    FAIL in words, src/judge/words.cpp)."""
    if rep.verdict == "INCONCLUSIVE":
        return "; ".join(rep.json.get("inconclusive_reasons") or []) or "INCONCLUSIVE"
    return rep.headline


@pytest.fixture
def kerncheck(request):
    """Tensor and model checks as pytest assertions (kerncheck.assert_close, kerncheck.test); the marker
    @pytest.mark.kerncheck(...) sets their defaults."""
    defaults = {}
    for m in reversed(list(request.node.iter_markers("kerncheck"))):  # the closest marker wins
        if m.args:
            raise TypeError("@pytest.mark.kerncheck: expected keywords only (golden=..., noise=[...], ...), "
                            f"got positional {m.args!r}")
        defaults.update(m.kwargs)
    known = set(_CLOSE_KEYWORDS) | set(_TEST_KEYWORDS) | {"golden"}
    from . import _core

    known |= {o["python"] for o in _core.judge_option_table()}
    for k in defaults:
        if k not in known:
            raise TypeError(f"@pytest.mark.kerncheck: unexpected keyword {k!r}"
                            f"{_core.did_you_mean(k, sorted(known))}")
    return Kerncheck(request, defaults)


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--kerncheck-json", None)
    if not path:
        return
    doc = {"format": "kerncheck.pytest", "version": 1, "checks": session.config.stash[_JSON_KEY]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, allow_nan=False, default=str)
        f.write("\n")
