"""The method table (src/compare/methods.h, exposed as kerncheck._core.methods()) is the one list every
front end shows: `kerncheck compare --help`, `python -m kerncheck compare --help`, kerncheck.METHODS, the
docs' --compare row and docs/compare.md's defaults table must name the table's methods in its order, each
name must be accepted where the table says (CLI, CSV column, Python, spec), and an unknown method, standard
or key is refused (exit 3 / ValueError) with "did you mean". The reports' params must be the table's
defaults. Generated from the table, so a method added to it is checked here without editing this file."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
KC_BIN = os.environ.get("KC_BIN", str(ROOT / "build" / "src" / "kerncheck"))
from kc_env import import_kerncheck  # noqa: E402
BUILD = Path(os.environ.get("KC_BUILD_DIR", ROOT / "build"))

pytestmark = pytest.mark.skipif(not Path(KC_BIN).exists(), reason=f"{KC_BIN} not built")


kerncheck = import_kerncheck(BUILD)
TABLE = kerncheck._core.methods()
CLI = [m["name"] for m in TABLE if m["cli"]]
DEFAULT = next(m["name"] for m in TABLE if m["default"])
NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
      "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2, "int8": np.int8,
      "uint8": np.uint8, "int32": np.int32}


def kc(*args):
    return subprocess.run([KC_BIN, "compare", *map(str, args)], capture_output=True, text=True, timeout=120)


def unwrap(text):
    return " ".join(text.split())


def listed(text, before):
    """The comma-separated names after `before` in help text (line breaks and indents removed)."""
    m = re.search(re.escape(before) + r"\s*([a-z_]+(?:,\s*[a-z_]+)*)", unwrap(text))
    assert m, f"{before!r} not in {text!r}"
    return [w.strip() for w in m.group(1).split(",")]


def test_table_shape():
    names = [m["name"] for m in TABLE]
    assert len(set(names)) == len(names)
    assert {"mixed", "stat_rel_err", "close", "cosine", "binary", "requant", "quant", "cross_check"} <= set(names)
    assert sum(m["default"] for m in TABLE) == 1
    claimed = [d for m in TABLE for d in m["auto_for"]]
    assert len(claimed) == len(set(claimed)), "a dtype is auto-routed to two methods"


def test_cli_help_python_help_and_names_agree_with_the_table():
    r = kc("--help")
    assert r.returncode == 0, r.stderr
    assert listed(r.stdout, "--compare TEXT method:") == CLI
    assert f"then by dtype, then {DEFAULT})" in unwrap(r.stdout)
    assert list(kerncheck.METHODS) == CLI
    p = subprocess.run([sys.executable, "-m", "kerncheck", "compare", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(BUILD / "python")), timeout=60)
    assert p.returncode == 0, p.stderr
    assert listed(p.stdout, "method for every case:") == CLI
    assert ", ".join(CLI) in unwrap(kerncheck.compare.__doc__)


def test_docs_list_the_table():
    row = next(l for l in (ROOT / "docs/cli-compare.md").read_text().splitlines() if l.startswith("| `--compare M`"))
    assert re.findall(r"`([a-z_]+)`", row.split("|")[2])[:len(CLI)] == CLI
    spec_only = [m["name"] for m in TABLE if not m["cli"]]
    for name in spec_only:
        assert f"`{name}` is refused" in row
    # docs/compare.md: one row per method in the methods table, in the table's order
    doc = (ROOT / "docs/compare.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)`(?: \(`[a-z_]+`\))? \|", doc, flags=re.M)
    assert rows[:len(TABLE)] == [m["name"] for m in TABLE]


def pair(dtype, n=64, seed=0):
    rng = np.random.default_rng(seed)
    if dtype in ("int8", "uint8", "int32"):
        g = rng.integers(0, 100, n).astype(NP[dtype])
        return g.copy(), g
    g = rng.normal(0, 1, n)
    return (g * (1 + 1e-4 * rng.normal(0, 1, n))).astype(NP[dtype]), g.astype(NP[dtype])


def dtype_for(m):
    """A dtype of the method's defaults that numpy can write (value methods: a float)."""
    for d in m["defaults"]:
        if d in NP and (not m["values"] or d.startswith("float") or d == "bfloat16"):
            return d
    pytest.fail(f"{m['name']}: no usable dtype in {list(m['defaults'])}")


@pytest.mark.parametrize("m", TABLE, ids=[m["name"] for m in TABLE])
def test_every_method_is_accepted_where_the_table_says(m, tmp_path):
    d = dtype_for(m)
    a, g = pair(d)
    files = []
    for k, arr in (("a", a), ("g", g), ("b", g)):
        p = tmp_path / f"{k}.bin"
        p.write_bytes(arr.tobytes())
        files.append(p)
    raw = ["--dtype", d, "--shape", a.size]
    third = ["--third", files[2]] if m["needs_third"] else []
    # spec: the seed spelling and the CLI name, each key of the table with its default value
    for std in filter(None, {m["standard"], m["name"]}):
        body = "".join(f'{k} = {json.dumps(v)}\n' for k, v in m["defaults"][d].items())
        spec = tmp_path / "s.toml"
        spec.write_text(f'[op.{d}]\nstandard = "{std}"\n{body}')
        r = kc(files[0], files[1], *raw, *third, "--spec", spec, "--op", "op", "--json", tmp_path / "r.json")
        assert r.returncode in (0, 1), r.stderr
        case = json.loads((tmp_path / "r.json").read_text())["cases"][0]
        assert case["method"] == m["name"] and f"[op.{d}]" in case["route_source"]
    if m["cli"]:
        r = kc(files[0], files[1], *raw, *third, "--compare", m["name"])
        assert r.returncode in (0, 1), r.stderr
        csv = tmp_path / "c.csv"
        third_col = "b.bin" if m["needs_third"] else ""
        csv.write_text(f"actual,golden,third,dtype,shape,compare\na.bin,g.bin,{third_col},{d},{a.size},{m['name']}\n")
        r = kc("-i", csv)
        assert r.returncode in (0, 1), r.stderr
        res = kerncheck.compare(a, g, method=m["name"], third=g if m["needs_third"] else None)
        assert res.method == m["name"]
    else:
        r = kc(files[0], files[1], *raw, "--compare", m["name"])
        assert r.returncode == 3 and "declared only in a spec" in r.stderr
        csv = tmp_path / "c.csv"
        csv.write_text(f"actual,golden,dtype,shape,compare\na.bin,g.bin,{d},{a.size},{m['name']}\n")
        r = kc("-i", csv)
        assert r.returncode == 3 and f"{m['name']} is declared only in a spec" in r.stderr


@pytest.mark.parametrize("m", [m for m in TABLE if m["values"]], ids=lambda m: m["name"])
def test_reports_apply_the_table_defaults(m, tmp_path):
    for d in ("float32", "float16", "bfloat16"):
        a, g = pair(d, 256, 1)
        pa, pg = tmp_path / "a.bin", tmp_path / "g.bin"
        pa.write_bytes(a.tobytes())
        pg.write_bytes(g.tobytes())
        r = kc(pa, pg, "--dtype", d, "--shape", a.size, "--compare", m["name"], "--json", tmp_path / "r.json")
        assert r.returncode in (0, 1), r.stderr
        params = json.loads((tmp_path / "r.json").read_text())["cases"][0]["params"]
        want = {"limit": "max_abs_error_limit"}
        for k, v in m["defaults"][d].items():
            assert params[want.get(k, k)] == v, (m["name"], d, k)


def test_unknown_method_and_key_are_refused_with_did_you_mean(tmp_path):
    a, g = pair("float32")
    pa, pg = tmp_path / "a.bin", tmp_path / "g.bin"
    pa.write_bytes(a.tobytes())
    pg.write_bytes(g.tobytes())
    raw = [pa, pg, "--dtype", "float32", "--shape", a.size]
    for name in CLI:
        typo = name[:-1]  # one letter short
        r = kc(*raw, "--compare", typo)
        assert r.returncode == 3
        assert f"expected one of {', '.join(CLI)}, got {typo} (did you mean \"{name}\"?)" in r.stderr
        csv = tmp_path / "c.csv"
        csv.write_text(f"actual,golden,dtype,shape,compare\na.bin,g.bin,float32,{a.size},{typo}\n")
        r = kc("-i", csv)
        assert r.returncode == 3 and f'got "{typo}" (did you mean "{name}"?)' in r.stderr
        with pytest.raises(ValueError, match=re.escape(f'(did you mean "{name}"?)')):
            kerncheck.compare(a, g, method=typo)
    for m in TABLE:
        std = m["standard"] or m["name"]
        spec = tmp_path / "s.toml"
        spec.write_text(f'[op.float32]\nstandard = "{std}x"\n')
        r = kc(*raw, "--spec", spec, "--op", "op")
        assert r.returncode == 3 and f'got "{std}x" (did you mean "{std}"?)' in r.stderr
        for k in m["keys"]:
            spec.write_text(f'[op.{dtype_for(m)}]\nstandard = "{std}"\n{k}x = 1\n')
            r = kc(*raw, "--spec", spec, "--op", "op")
            assert r.returncode == 3
            assert f'expected a key that {std} reads: {", ".join(m["keys"])}, got unknown key "{k}x" ' \
                   f'(did you mean "{k}"?)' in r.stderr
