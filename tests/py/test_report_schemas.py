"""Every JSON report validates against its shipped schema (python/kerncheck/schemas/, docs/schemas.md),
checked by `jsonschema` (PyPI) on real reports: compare (files and CSV cases), test and merge (the judge),
and every JSON file the demo writes on the tiny Llama fixture (summary, per-run reports, sweep). JUnit
from `kerncheck test` names its suite and cases after the golden, candidate and variant, and its failure
message is the deciding finding (the JSON report's decided_by).
"""
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

jsonschema = pytest.importorskip("jsonschema")
from kc_env import has_python_extension, kc  # noqa: E402
from test_sweep_demo import setup  # noqa: E402,F401 - the tiny model, golden, floor runs and sweep

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build")).resolve()
sys.path.insert(0, str(BUILD / "python"))
SCHEMAS = Path(__file__).resolve().parents[2] / "python" / "kerncheck" / "schemas"


def validate(doc, name):
    schema = json.loads((SCHEMAS / f"{name}.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


def test_schemas_are_shipped_and_loadable():
    if not has_python_extension(BUILD):
        pytest.skip("this build has no Python extension (the sanitized build): the package cannot import")
    import kerncheck.schemas as ks  # the package's loader, from the build tree (as installed)

    assert sorted(ks.NAMES) == sorted(p.stem for p in SCHEMAS.glob("*.json"))
    for n in ks.NAMES:
        jsonschema.Draft202012Validator.check_schema(ks.load(n))


def test_compare_reports(tmp_path):
    rng = np.random.default_rng(0)
    g = rng.standard_normal(500).astype(np.float32)
    a = g.copy()
    a[3] = np.nan
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "g.npy", g)
    kc("compare", tmp_path / "a.npy", tmp_path / "g.npy", "--json", tmp_path / "c.json", check=False)
    doc = json.loads((tmp_path / "c.json").read_text())
    validate(doc, "compare")
    assert doc["format"] == "kerncheck.compare" and doc["version"] == 1 and doc["cases"][0]["verdict"] == "FAIL"
    examples = Path(__file__).resolve().parents[2] / "examples"
    kc("compare", "-i", examples / "cases.csv", "--spec", examples / "spec.toml", "--json", tmp_path / "cases.json",
       check=False, cwd=examples)
    validate(json.loads((tmp_path / "cases.json").read_text()), "compare")
    with pytest.raises(jsonschema.ValidationError):  # the schema is not vacuous
        validate(dict(doc, version=2), "compare")


def test_demo_reports_and_junit(setup):  # noqa: F811 - the fixture imported above
    d, model, golden, noise, out, sweep, _ = setup
    validate(sweep, "sweep")
    demo = d / "schema-demo"
    kc("demo", "--preset", "tiny", "--model", model, "--out-dir", demo, "--prose", d / "prose.txt", "--code",
       d / "code.py", check=False)
    files = sorted(demo.rglob("*.json"))
    seen = set()
    for f in files:
        doc = json.loads(f.read_text())
        kind = doc.get("format", "kerncheck.test" if "kerncheck_report" in doc else None)
        assert kind, f"{f}: a JSON report without a version key"
        validate(doc, kind.removeprefix("kerncheck."))
        seen.add(kind)
    assert {"kerncheck.demo-summary", "kerncheck.sweep", "kerncheck.test"} <= seen, seen
    # kerncheck test (and merge) on a sweep row: JSON and JUnit
    row = next(r for r in sweep["rows"] if r["verdict"] == "FAIL")
    cand = Path(row["candidate"])
    rep, xml = d / "t.json", d / "t.xml"
    kc("test", golden, cand, "--noise", noise[0], "--noise", noise[1], "--json", rep, "--junit", xml, check=False)
    t = json.loads(rep.read_text())
    validate(t, "test")
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite.get("name") == f"kerncheck test {cand.name.split('.')[0]} ({t['candidate_made_by']['variant']}) " \
                                f"vs {golden.name.split('.')[0]}"
    verdict = suite.find("testcase")
    assert verdict.get("classname") == f"kerncheck.{golden.name.split('.')[0]}.{cand.name.split('.')[0]}"
    msg = verdict.find("failure").get("message")
    dec = t["decided_by"]
    assert msg == f"FAIL: {t['headline']}"  # the verdict in words; the deciding finding's own case says its numbers
    case = next(c for c in suite.findall("testcase") if c.get("name") == f"{dec['split']} {dec['statistic']}"
                and c.get("classname").endswith("." + dec["rule"]))
    assert case.find("failure").get("message") == f"{dec['sentence']}. {dec['detail']}"
    parts = [d / "p0.kcp", d / "p1.kcp"]
    n = t["positions_judged"]
    for p, rng in zip(parts, [f"0:{n // 2}", f"{n // 2}:{n}"]):
        kc("test", golden, cand, "--noise", noise[0], "--noise", noise[1], "--positions", rng, "--partial", p)
    kc("merge", *parts, "--json", d / "m.json", check=False)
    m = json.loads((d / "m.json").read_text())
    validate(m, "test")
    assert m["verdict"] == t["verdict"]
