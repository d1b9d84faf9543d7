"""kerncheck's pytest plugin, run by pytest itself (the `pytester` fixture: real pytest sessions in a temp
folder): the fixture's tensor and model checks pass and fail as pytest assertions, the marker sets their
defaults, INCONCLUSIVE skips, and JUnit (--junitxml) and --kerncheck-json carry every check. The model
files are real goldens and candidates (`kerncheck record --from-logits`), judged by the C++ judge.
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["pytester"]
from kc_env import import_kerncheck  # noqa: E402
BUILD = Path(os.environ.get("KC_BUILD_DIR", "build")).resolve()
KC = os.environ.get("KC_BIN", "kerncheck")
ROOT = Path(__file__).resolve().parents[2]


import_kerncheck(BUILD)


def run(*args):
    p = subprocess.run([KC, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """A golden, two floor runs, a correct candidate (noise like the floor's), two broken ones (10x the
    floor's noise) and thresholds calibrated on floor (good) and broken (bad) runs."""
    d = tmp_path_factory.mktemp("model")
    rng = np.random.default_rng(7)
    n, v = 3000, 300
    base = -1.1 * np.log(np.arange(1, v + 1))
    ref = np.stack([base[rng.permutation(v)] / t + rng.normal(0, 0.5, v)
                    for t in rng.uniform(0.25, 3.0, n)]).astype(np.float32)
    tokens = np.array([int(np.argmax(r)) for r in ref], np.int32)
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", tokens)
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "-o", d / "golden.safetensors")
    for name, scale, seed in [("floor1", 0.02, 1), ("floor2", 0.02, 2), ("ok", 0.02, 3), ("broken", 0.2, 4),
                              ("broken2", 0.2, 5)]:
        np.save(d / f"{name}.npy", (ref + np.random.default_rng(seed).normal(0, scale, ref.shape)).astype(np.float32))
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "golden.safetensors", "-o",
            d / f"{name}.safetensors")
    run("calibrate", "--golden", d / "golden.safetensors", "--good", d / "floor1.safetensors", "--good",
        d / "floor2.safetensors", "--bad", d / "broken.safetensors", "--bad", d / "broken2.safetensors", "-o",
        d / "thresholds.toml")
    return d


def runpytest(pytester, *args):
    return pytester.runpytest_subprocess("-p", "kerncheck.pytest_plugin", "-p", "no:cacheprovider", *args)


@pytest.fixture
def env(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(BUILD / "python"))
    return pytester


def test_tensor_checks_fail_as_pytest_assertions(env):
    env.makepyfile(test_t="""
        import numpy as np, pytest

        G = np.linspace(-1, 1, 2048, dtype=np.float32).reshape(64, 32)

        def test_good(kerncheck):
            kerncheck.assert_close(G * np.float32(1 + 1e-7), G)

        def test_bad(kerncheck):
            a = G.copy()
            a[9, 13] += 0.5
            kerncheck.assert_close(a, G, rtol=1e-5, atol=1e-5)

        @pytest.mark.kerncheck(rtol=0.0, atol=0.6)
        def test_marker_tolerance(kerncheck):
            a = G.copy()
            a[9, 13] += 0.5
            r = kerncheck.assert_close(a, G)
            assert r.method == "close"

        def test_shape(kerncheck):
            kerncheck.assert_close(G.T.copy(), G)
    """)
    r = runpytest(env, "--junitxml=j.xml")
    r.assert_outcomes(passed=2, failed=2)
    out = r.stdout.str()
    assert "Mismatched elements: 1 / 2048" in out and "at index (9, 13)" in out
    assert "'shape' do not match: (32, 64) != (64, 32)" in out
    assert "kerncheck/testing.py" not in out and "pytest_plugin.py" not in out  # __tracebackhide__
    cases = {c.get("name"): c for c in ET.parse(env.path / "j.xml").getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_bad"].iter("property")}
    assert props["kerncheck.1"].startswith("assert_close FAIL: mismatch fraction")
    assert cases["test_bad"].find("failure") is not None and cases["test_good"].find("failure") is None


def test_model_checks_with_marker_and_json(env, model_files):
    d = model_files
    env.makepyfile(test_m=f"""
        import pytest

        D = {str(d)!r}
        pytestmark = pytest.mark.kerncheck(golden=D + "/golden.safetensors", thresholds=D + "/thresholds.toml")

        def test_correct_kernel(kerncheck):
            rep = kerncheck.test(D + "/ok.safetensors")
            assert rep.verdict == "PASS"

        def test_broken_kernel(kerncheck):
            kerncheck.test(D + "/broken.safetensors")

        @pytest.mark.kerncheck(thresholds=None, noise=[D + "/floor1.safetensors", D + "/floor2.safetensors"])
        def test_weak_floor_is_inconclusive(kerncheck):
            kerncheck.test(D + "/ok.safetensors")  # 3000 positions and two floor runs detect too little

        @pytest.mark.kerncheck(nosie=[])
        def test_typo(kerncheck):
            pass
    """)
    r = runpytest(env, "--kerncheck-json=k.json", "-rs")
    r.assert_outcomes(passed=1, failed=1, skipped=1, errors=1)
    out = r.stdout.str()
    # the failure says the verdict's headline, as `kerncheck test --json` does (the deciding finding in words)
    ref = subprocess.run([KC, "test", d / "golden.safetensors", d / "broken.safetensors", "--thresholds",
                          d / "thresholds.toml", "--json", env.path / "r.json"], capture_output=True, text=True)
    assert ref.returncode == 1
    rj = json.loads((env.path / "r.json").read_text())
    dec = rj["decided_by"]
    assert f"broken.safetensors vs {d}/golden.safetensors: FAIL: {rj['headline']}" in out
    assert dec["statistic"] in rj["headline"] or dec["split"] in rj["headline"]
    assert 'unexpected keyword \'nosie\' (did you mean "noise"?)' in out
    assert "INCONCLUSIVE: depth" in out and "add noise runs (--noise) or segments" in out  # the skip's reason
    k = json.loads((env.path / "k.json").read_text())
    assert k["format"] == "kerncheck.pytest" and k["version"] == 1
    import jsonschema  # requirements.txt; the schema the package ships (docs/schemas.md)

    jsonschema.validate(k, json.loads((ROOT / "python" / "kerncheck" / "schemas" / "pytest.json").read_text()))
    verdicts = {c["test"].split("::")[1]: c["verdict"] for c in k["checks"]}
    assert verdicts == {"test_correct_kernel": "PASS", "test_broken_kernel": "FAIL",
                        "test_weak_floor_is_inconclusive": "INCONCLUSIVE"}
    broken = next(c for c in k["checks"] if c["verdict"] == "FAIL")
    assert broken["report"]["decided_by"] == dec


def test_the_example_runs(env):
    # examples/test_pytest_example.py, copied as a user would
    env.makepyfile(test_example=(ROOT / "examples" / "test_pytest_example.py").read_text())
    r = runpytest(env, "-rs")
    r.assert_outcomes(passed=3, skipped=1)
