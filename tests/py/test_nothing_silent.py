"""Nothing silently wrong: a hostile user's inputs through the real CLI (and the Python API where it has the
same rule). Each case gives exit 3 naming the file and field, or the right answer:

- an output path that is one of the inputs, read as text or not read at all, is refused and the input kept;
- compare refuses a shape mismatch unless --flat, and a --dtype that contradicts the dtype a file declares
  (CLI and CSV case files; kerncheck.compare in test_python_compare.py, assert_close's non-finite figures in
  test_python_testing.py);
- corpus build honours --decode-last 0 (prefill only) and refuses --segments-per-depth 0;
- terminal escapes in segment names, file names and CLI11's messages are printed escaped;
- pins of behaviours a single-line change once broke unnoticed: a file without any checksum is refused
  like one with a wrong checksum; cross_check's small-value rule (candidate errors ≤ 2.0 × the third
  party's) passes at 2.0× and fails at 2.01×.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from kc_env import KC_BIN

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("KC_TEST_DATA", ROOT / "tests" / "data"))
TINY = DATA / "models" / "hybrid-tiny"
N, V = 2000, 64


def run(*args, rc=None, cwd=None):
    p = subprocess.run([KC_BIN, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)
    if rc is not None:
        assert p.returncode == rc, (args, p.returncode, p.stdout, p.stderr)
    return p


def refused(p, *parts):
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    for s in parts:
        assert str(s) in p.stderr, (s, p.stderr)


def load(path):
    with safe_open(str(path), "np") as f:
        return dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A golden with two named segments, a good and a bad candidate, thresholds from calibrate."""
    d = tmp_path_factory.mktemp("silent")
    rng = np.random.default_rng(39)
    ref = (rng.standard_normal((N, V)) * 3).astype(np.float32)
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", rng.integers(0, V, N).astype(np.int32))
    segs = [{"name": "plain", "domain": "prose", "depth": 1000, "start": 0},
            {"name": "evil\x1b[2J\x1b]0;owned\x07", "domain": "prose", "depth": 1000, "start": 1000}]
    (d / "segs.json").write_text(json.dumps(segs))
    runs = [("cand", 0.01), ("noise", 0.01), ("good", 0.01), ("bad", 1.0), ("bad2", 0.8)]
    for name, sd in runs:
        np.save(d / f"{name}.npy", ref + rng.normal(0, sd, ref.shape).astype(np.float32))
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", d / "segs.json",
        "-o", d / "g.st", rc=0)
    for name, _ in runs:
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "g.st", "-o", d / f"{name}.st", rc=0)
    run("calibrate", "--golden", d / "g.st", "--good", d / "cand.st", d / "noise.st", d / "good.st", "--bad",
        d / "bad.st", d / "bad2.st", "-o", d / "t.toml", rc=0)
    return d


# ---- an output is never an input ----------------------------------------------------------------------------
def kept(path, before):
    assert Path(path).read_bytes() == before, f"{path} was overwritten"


@pytest.mark.parametrize("flag", ["--json", "--html", "--junit", "--partial"])
def test_a_report_onto_the_thresholds_is_refused(files, tmp_path, flag):
    """--partial reads no thresholds: the file is still the user's input and is not replaced."""
    t = tmp_path / "t.toml"
    shutil.copy(files / "t.toml", t)
    before = t.read_bytes()
    refused(run("test", files / "g.st", files / "cand.st", "--thresholds", t, flag, t),
            f"{t}: output: expected a path that is not one of the inputs", "refusing to overwrite it")
    kept(t, before)


def test_a_report_onto_a_hard_link_of_the_thresholds_is_refused(files, tmp_path):
    t = tmp_path / "t.toml"
    shutil.copy(files / "t.toml", t)
    os.link(t, tmp_path / "link.json")
    before = t.read_bytes()
    refused(run("test", files / "g.st", files / "cand.st", "--thresholds", t, "--json", tmp_path / "link.json"),
            "refusing to overwrite it")
    kept(t, before)


def test_text_inputs_of_other_commands_are_not_outputs(files, tmp_path):
    d = tmp_path
    np.save(d / "a.npy", np.ones(8, np.float32))
    spec = d / "spec.toml"
    spec.write_text('[gelu.float32]\nstandard = "close"\n')
    before = spec.read_bytes()
    refused(run("compare", d / "a.npy", d / "a.npy", "--spec", spec, "--op", "gelu", "--json", spec),
            "refusing to overwrite it")
    kept(spec, before)
    segs = d / "segs.json"
    shutil.copy(files / "segs.json", segs)
    before = segs.read_bytes()
    refused(run("record", "--from-logits", files / "ref.npy", "--tokens", files / "tokens.npy", "--segments", segs,
                "-o", segs), "refusing to overwrite it")
    kept(segs, before)
    prose = d / "prose.txt"
    prose.write_text("In the beginning God created the heaven and the earth. " * 200)
    before = prose.read_bytes()
    refused(run("corpus", "build", "--tokenizer", TINY, "--depths", "32", "--segments-per-depth", "1",
                "--decode-last", "4", "--prose", prose, "-o", prose), "refusing to overwrite it")
    kept(prose, before)


# ---- compare: shapes and dtypes ---------------------------------------------------------------------------------
def test_a_transposed_layout_is_not_the_same_tensor(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a.reshape(4, 3))  # same bytes, another shape
    refused(run("compare", tmp_path / "a.npy", tmp_path / "b.npy"), "a.npy: shape: expected [4, 3]", "got [3, 4]",
            "--flat")
    assert run("compare", tmp_path / "a.npy", tmp_path / "b.npy", "--flat").returncode == 0
    # Case files: the same rule, and the flat column.
    csv = tmp_path / "cases.csv"
    csv.write_text("name,actual,golden,flat\nt,a.npy,b.npy,\n")
    refused(run("compare", "-i", csv), "cases.csv:2", "shape: expected [4, 3]")
    csv.write_text("name,actual,golden,flat\nt,a.npy,b.npy,true\n")
    assert run("compare", "-i", csv).returncode == 0
    csv.write_text("name,actual,golden,flat\nt,a.npy,b.npy,yes\n")
    refused(run("compare", "-i", csv), "column flat", "true or false")
    # A third party of another shape too.
    np.save(tmp_path / "c.npy", a.reshape(2, 6))
    refused(run("compare", tmp_path / "a.npy", tmp_path / "a.npy", "--third", tmp_path / "c.npy", "--compare",
                "cross_check"), "c.npy: shape: expected [3, 4]")


def test_a_dtype_that_contradicts_the_file_is_refused(tmp_path):
    a = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "bf.npy", a.astype(ml_dtypes.bfloat16))    # '<V2': numpy cannot name bfloat16
    np.save(tmp_path / "bf2.npy", a.astype(ml_dtypes.bfloat16))
    save_file({"x": a.astype(ml_dtypes.bfloat16)}, str(tmp_path / "bf.safetensors"))
    np.save(tmp_path / "f16.npy", a.astype(np.float16))
    refused(run("compare", tmp_path / "bf.npy", tmp_path / "bf2.npy", "--dtype", "float16"),
            "bf.npy: descr: expected '<f2' for float16")
    refused(run("compare", tmp_path / "bf.safetensors", tmp_path / "bf.safetensors", "--dtype", "float16"),
            "dtype: expected float16", "got bfloat16 declared by the file")
    refused(run("compare", tmp_path / "f16.npy", tmp_path / "f16.npy", "--dtype", "bfloat16"), "f16.npy",
            "float16")
    # What the files leave open is still resolved by --dtype, and a dtype that restates the file's is fine.
    assert run("compare", tmp_path / "bf.npy", tmp_path / "bf2.npy", "--dtype", "bfloat16").returncode == 0
    assert run("compare", tmp_path / "bf.safetensors", tmp_path / "bf.safetensors", "--dtype",
               "bfloat16").returncode == 0
    a.astype(ml_dtypes.bfloat16).tofile(tmp_path / "raw.bin")
    assert run("compare", tmp_path / "raw.bin", tmp_path / "bf.npy", "--dtype", "bfloat16", "--shape",
               "3,4").returncode == 0


# ---- corpus build: an explicit value is used or refused ------------------------------------------------------------
def test_decode_last_zero_is_prefill_only(tmp_path):
    prose = tmp_path / "p.txt"
    prose.write_text("In the beginning God created the heaven and the earth. " * 200)
    run("corpus", "build", "--tokenizer", TINY, "--preset", "quick", "--depths", "64", "--decode-last", "0",
        "--prose", prose, "-o", tmp_path / "c.kcc", rc=0)
    meta, _ = load(tmp_path / "c.kcc")
    segs = json.loads(meta["segments"])
    assert segs and all(s["decode_last"] == 0 for s in segs)
    run("record", "--model", TINY, "--corpus", tmp_path / "c.kcc", "-o", tmp_path / "g.kcg", rc=0)
    _, g = load(tmp_path / "g.kcg")
    assert (g["phase"] == 0).all() and len(g["phase"]) == 64 * len(segs)
    # Without the flag and with --depths: the preset's 128, capped at half the shallowest depth (32 here).
    run("corpus", "build", "--tokenizer", TINY, "--preset", "quick", "--depths", "64", "--prose", prose,
        "-o", tmp_path / "d.kcc", rc=0)
    meta, _ = load(tmp_path / "d.kcc")
    assert {s["decode_last"] for s in json.loads(meta["segments"])} == {32}
    # An explicit value is used as given, or refused: never capped.
    refused(run("corpus", "build", "--tokenizer", TINY, "--preset", "quick", "--depths", "64", "--decode-last", "64",
                "--prose", prose, "-o", tmp_path / "d2.kcc"), "--decode-last: expected at most depth − 1 = 63")
    refused(run("corpus", "build", "--tokenizer", TINY, "--depths", "64", "--segments-per-depth", "0", "--prose",
                prose, "-o", tmp_path / "e.kcc"), "--segments-per-depth: expected 1 … 4096, got 0")


# ---- terminal escapes --------------------------------------------------------------------------------------------
def no_raw_escapes(p):
    out = p.stdout + p.stderr
    assert not any(c in out for c in "\x1b\x07\x9b"), repr(out[:2000])


def test_segment_and_file_names_are_printed_escaped(files, tmp_path):
    evil = tmp_path / "c\x1b[31m.st"
    shutil.copy(files / "bad.st", evil)
    p = run("test", files / "g.st", evil, "--noise", files / "noise.st")
    assert p.returncode in (1, 2), p.stderr
    no_raw_escapes(p)
    assert "c\\x1b[31m.st" in p.stdout
    assert "evil\\x1b[2J\\x1b]0;owned\\x07" in p.stdout  # the worst positions name their segment


def test_cli_and_error_messages_are_printed_escaped(files, tmp_path):
    p = run("test", tmp_path / "nope\x1b]0;owned\x07", files / "cand.st")  # CLI11: "File does not exist"
    assert p.returncode == 3
    no_raw_escapes(p)
    assert "nope\\x1b]0;owned\\x07" in p.stderr
    bad = tmp_path / "x\x1b[2J.npy"
    bad.write_bytes(b"\x93NUMPY garbage")
    p = run("compare", bad, bad)  # kerncheck's own error names the file
    assert p.returncode == 3
    no_raw_escapes(p)
    p = run("record", "--bogus\x1b[2J")
    assert p.returncode == 3
    no_raw_escapes(p)


# ---- pins of behaviours a single-line change broke -------------------------------------------------------------------
def without_checksum(src, dst):
    meta, t = load(src)
    meta.pop("checksum")
    save_file(t, str(dst), meta)
    return dst


@pytest.mark.parametrize("kind", ["golden", "candidate", "shard"])
def test_files_without_a_checksum_are_refused_like_a_wrong_one(files, tmp_path, kind):
    d = files
    if kind == "golden":
        f = without_checksum(d / "g.st", tmp_path / "g.st")
        p = run("record", "--from-logits", d / "cand.npy", "--golden", f, "-o", tmp_path / "x.st")
    elif kind == "candidate":
        f = without_checksum(d / "cand.st", tmp_path / "c.st")
        p = run("test", d / "g.st", f)
    else:
        run("test", d / "g.st", d / "cand.st", "--noise", d / "noise.st", "--partial", tmp_path / "p.part", rc=0)
        f = without_checksum(tmp_path / "p.part", tmp_path / "s.part")
        p = run("merge", f)
    refused(p, f"{f}: metadata checksum: expected xxh3:", "got nothing")


def test_record_model_checkpoint_without_checksum_is_recomputed(tmp_path):
    prose = tmp_path / "p.txt"
    prose.write_text("In the beginning God created the heaven and the earth. " * 200)
    run("corpus", "build", "--tokenizer", TINY, "--depths", "32", "--segments-per-depth", "2", "--decode-last", "4",
        "--prose", prose, "-o", tmp_path / "c.kcc", rc=0)
    run("record", "--model", TINY, "--corpus", tmp_path / "c.kcc", "-o", tmp_path / "ref.kcg", rc=0)
    env = dict(os.environ, KC_RECORD_STOP_AFTER="1")
    p = subprocess.run([KC_BIN, "record", "--model", TINY, "--corpus", tmp_path / "c.kcc", "-o", tmp_path / "g.kcg"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 3 and "interrupted" in p.stderr
    seg = tmp_path / "g.kcg.partial" / "seg-00000.safetensors"
    meta, t = load(seg)
    t["top_logprobs"] = t["top_logprobs"] - np.float32(0.5)  # lower log-probs: still a distribution
    meta.pop("checksum")
    save_file(t, str(seg), meta)
    p = run("record", "--model", TINY, "--corpus", tmp_path / "c.kcc", "-o", tmp_path / "g.kcg")
    assert p.returncode == 0, p.stderr
    assert "metadata checksum" in p.stderr and "got nothing" in p.stderr and "segment 0 is recomputed" in p.stderr
    _, a = load(tmp_path / "g.kcg")
    _, b = load(tmp_path / "ref.kcg")
    np.testing.assert_array_equal(a["top_logprobs"], b["top_logprobs"])


@pytest.mark.parametrize("errors,passes", [(200, True), (201, False)])
def test_cross_check_small_value_ratio_limit_is_two(tmp_path, errors, passes):
    """Only small values (|g| < 2^-14, f32): the candidate's error count over the third party's (100) is
    2.00 (pass) or 2.01 (fail). A limit moved to 3.0 passes both."""
    n = 10000
    g = np.zeros(n, np.float32)
    third = g.copy()
    third[:100] = 1e-7  # > small_value_atol 2^-30: an error
    a = g.copy()
    a[n - errors:] = 1e-7
    for name, x in [("a", a), ("g", g), ("b", third)]:
        np.save(tmp_path / f"{name}.npy", x)
    p = run("compare", tmp_path / "a.npy", tmp_path / "g.npy", "--third", tmp_path / "b.npy", "--compare",
            "cross_check", "--json", tmp_path / "r.json")
    assert p.returncode == (0 if passes else 1), p.stdout + p.stderr
    case = json.loads((tmp_path / "r.json").read_text())["cases"][0]
    figs = {f["name"]: f for f in case["figures"]}
    assert figs["small_error_ratio"]["value"] == pytest.approx(errors / 100)
    assert figs["small_error_ratio"]["limit"] == 2.0
    assert figs["small_errors_actual"]["value"] == errors and figs["small_errors_third"]["value"] == 100
