"""Runs `kerncheck compare` over every method and the dtypes it applies to and saves what it prints.

    python tests/tools/compare_outputs.py --kerncheck BUILD/src/kerncheck --inputs DIR --out OUT

Writes deterministic tensors (raw little-endian, numpy seed 0) under DIR, then one case per
(method, dtype, data kind): passing noise, failing noise, NaN/inf mismatches, a wider golden; the
routed defaults (no --compare); spec overrides of every key; the refusals (unknown method, unknown spec
key or standard, a method on a dtype it cannot take); examples/cases.csv in op mode; `compare --help`
and `--list-ops`.
For each case OUT/NAME.{txt,err,rc,json,xml} hold stdout, stderr, the exit code and the JSON/JUnit
reports. Two builds are the same for compare when `diff -r OUT1 OUT2` is empty (use the same DIR: the
reports name the input files). A refactoring check, not a test: it has no expectations of its own.
"""
import argparse
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]

VALUE_DTYPES = {
    "float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
    "complex64": np.complex64,
}
CODE_DTYPES = {  # dtype: bytes per element (4-bit types: packed, half a byte)
    "hifloat8": 1, "float8_e8m0": 1, "float4_e2m1": 0.5, "int4": 0.5, "int8": 1, "uint8": 1, "int16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "bool": 1, "hifloat32": 4, "complex32": 4,
}
FLOAT_METHODS = ["mixed", "stat_rel_err", "close", "cosine"]


def value_pair(rng, dt, n, noise, special=False):
    g = rng.normal(0, 1, n)
    if dt == "complex64":
        g = g + 1j * rng.normal(0, 1, n)
    a = g * (1 + noise * rng.normal(0, 1, n))
    if special:
        a[3], a[10], g[17], a[25], g[25] = np.nan, np.inf, np.nan, -np.inf, np.inf
        g[40] = a[40] = np.nan
    t = VALUE_DTYPES[dt]
    return a.astype(t), g.astype(t)


def code_pair(rng, dt, n, flips):
    nb = int(n * CODE_DTYPES[dt])
    g = rng.integers(0, 256, nb, dtype=np.uint8)
    if dt == "bool":
        g &= 1
    a = g.copy()
    idx = rng.choice(nb, size=min(flips, nb), replace=False)
    a[idx] = (a[idx] ^ (1 if dt == "bool" else rng.integers(1, 4, idx.size))).astype(np.uint8)
    return a, g


class Runner:
    def __init__(self, exe, inputs, out):
        self.exe, self.inputs, self.out = exe, inputs, out
        self.count = 0

    def write(self, name, arr):
        p = self.inputs / f"{name}.bin"
        p.write_bytes(np.ascontiguousarray(arr).tobytes())
        return str(p)

    def run(self, name, args, reports=True):
        self.count += 1
        stem = self.out / f"{self.count:03d}_{name}"
        cmd = [self.exe, "compare", *args]
        if reports:
            cmd += ["--json", f"{stem}.json", "--junit", f"{stem}.xml"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        Path(f"{stem}.txt").write_text(r.stdout)
        Path(f"{stem}.err").write_text(r.stderr)
        Path(f"{stem}.rc").write_text(f"{r.returncode}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kerncheck", required=True)
    ap.add_argument("--inputs", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    for d in (args.inputs, args.out):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    R = Runner(args.kerncheck, args.inputs, args.out)

    # value dtypes: each float method, plus binary and (16/32-bit halves) cross_check
    for dt in VALUE_DTYPES:
        for n in (1000, (1 << 17) + 24) if dt in ("float32", "bfloat16", "float16") else (1001,):
            for kind, noise, special in (("ok", 1e-4, False), ("bad", 3e-2, False), ("nan", 1e-4, True)):
                a, g = value_pair(rng, dt, n, noise, special)
                base = f"{dt}_{n}_{kind}"
                fa, fg = R.write(base + "_a", a), R.write(base + "_g", g)
                raw = ["--dtype", dt, "--shape", str(n)]
                R.run(f"{base}_routed", [fa, fg, *raw])
                for m in FLOAT_METHODS + ["binary"]:
                    R.run(f"{base}_{m}", [fa, fg, *raw, "--compare", m])
                if dt in ("float32", "bfloat16", "float16"):
                    b = (g.astype(np.float64) * (1 + 3 * noise * rng.normal(0, 1, n))).astype(g.dtype)
                    fb = R.write(base + "_b", b)
                    for level in ("L0", "L1", "L2"):
                        spec = args.inputs / f"cross_{level}.toml"
                        spec.write_text(f'[op.{dt}]\nstandard = "cross_check"\nlevel = "{level}"\n')
                        R.run(f"{base}_cross_{level}",
                              [fa, fg, *raw, "--third", fb, "--spec", str(spec), "--op", "op"])
            if dt in ("bfloat16", "float16"):  # a wider golden (float32), as npy: the dtypes differ
                a, g = value_pair(rng, dt, 999, 1e-3)
                g32 = g.astype(np.float32)
                pa, pg = args.inputs / f"wide_{dt}_a.npy", args.inputs / f"wide_{dt}_g.npy"
                np.save(pa, a.view(np.uint16) if dt == "bfloat16" else a)
                np.save(pg, g32)
                extra = ["--dtype", dt] if dt == "bfloat16" else []
                for m in FLOAT_METHODS:
                    R.run(f"wide_{dt}_{m}", [str(pa), str(pg), *extra, "--compare", m])

    # code dtypes: routed default, binary, requant on the 8-bit ones, float methods where they decode
    for dt in CODE_DTYPES:
        n = 2000
        for kind, flips in (("eq", 0), ("few", 3), ("many", 300)):
            a, g = code_pair(rng, dt, n, flips)
            base = f"{dt}_{kind}"
            fa, fg = R.write(base + "_a", a), R.write(base + "_g", g)
            raw = ["--dtype", dt, "--shape", str(n)]
            R.run(f"{base}_routed", [fa, fg, *raw])
            R.run(f"{base}_binary", [fa, fg, *raw, "--compare", "binary"])
            R.run(f"{base}_requant", [fa, fg, *raw, "--compare", "requant"])
            if dt in ("hifloat8", "hifloat32", "complex32", "float8_e8m0", "float4_e2m1"):
                for m in FLOAT_METHODS:
                    R.run(f"{base}_{m}", [fa, fg, *raw, "--compare", m])
            if dt in ("int8", "int4"):
                spec = args.inputs / f"quant_{dt}.toml"
                spec.write_text(f'[q.{dt}]\nstandard = "quant"\nptol = 0.01\n')
                R.run(f"{base}_quant", [fa, fg, *raw, "--spec", str(spec), "--op", "q"])
                R.run(f"{base}_quant_over_cosine",
                      [fa, fg, *raw, "--spec", str(spec), "--op", "q", "--compare", "cosine"])
                R.run(f"{base}_quant_binary", [fa, fg, *raw, "--spec", str(spec), "--op", "q", "--compare",
                                               "binary"])
        for kind in ("requant8",):
            if CODE_DTYPES[dt] == 1 and dt != "bool":
                g = rng.integers(0, 256, n, dtype=np.uint8)
                a = (g.astype(np.int16) + rng.integers(-2, 3, n)).clip(0, 255).astype(np.uint8)
                fa, fg = R.write(f"{dt}_{kind}_a", a), R.write(f"{dt}_{kind}_g", g)
                for spec_text in ("", "ptol = 0.5\n", "ptol = 1\n"):
                    spec = args.inputs / "requant.toml"
                    spec.write_text(f'[r.{dt}]\nstandard = "requant"\n{spec_text}')
                    R.run(f"{dt}_{kind}_spec{len(spec_text)}",
                          [fa, fg, "--dtype", dt, "--shape", str(n), "--spec", str(spec), "--op", "r"])

    # spec overrides: every key of every standard (and its CLI name), on one float32 pair
    a, g = value_pair(rng, "float32", 4096, 2e-3)
    fa, fg = R.write("spec_a", a), R.write("spec_g", g)
    raw = ["--dtype", "float32", "--shape", "4096"]
    overrides = {
        "mix_tolerance": ["rtol = 0.004", "atol = 0.001", "limit = 0.5", "rtol = 0\natol = 0"],
        "mixed": ["rtol = 0.01\natol = 1e-5\nlimit = 2"],
        "stat_rel_err": ["threshold = 0.001", "threshold = 1e-6"],
        "close": ["rtol = 0.01", "atol = 0.1", "ptol = 0.5", "rtol = 1e-3\natol = 1e-3\nptol = 0.01"],
        "cosine": ["rtol = 1e-9", "rtol = 0.5"],
        "binary_equal": [""], "binary": [""],
    }
    for std, variants in overrides.items():
        for i, body in enumerate(variants):
            spec = args.inputs / f"ov_{std}_{i}.toml"
            spec.write_text(f'[op.float32]\nstandard = "{std}"\n{body}\n')
            R.run(f"spec_{std}_{i}", [fa, fg, *raw, "--spec", str(spec), "--op", "op"])
            R.run(f"spec_{std}_{i}_cli", [fa, fg, *raw, "--spec", str(spec), "--op", "op", "--compare", "close"])

    # refusals (exit 3): their messages
    bad_specs = {
        "key": '[op.float32]\nstandard = "mix_tolerance"\nrtoll = 1\n',
        "key2": '[op.float32]\nstandard = "stat_rel_err"\nthresold = 1\n',
        "key3": '[op.float32]\nstandard = "binary_equal"\nrtol = 1\n',
        "key4": '[op.float32]\nstandard = "cosine"\natol = 1\n',
        "std": '[op.float32]\nstandard = "mix_tolerence"\n',
        "nostd": '[op.float32]\nrtol = 1\n',
        "quant_f32": '[op.float32]\nstandard = "quant"\n',
        "cross_i8": '[op.int8]\nstandard = "cross_check"\n',
        "level": '[op.float32]\nstandard = "cross_check"\nlevel = "L3"\n',
        "ptol": '[op.float32]\nstandard = "close"\nptol = 2\n',
        "neg": '[op.float32]\nstandard = "mixed"\natol = -1\n',
        "requant_f32": '[op.float32]\nstandard = "requant"\n',
    }
    for k, text in bad_specs.items():
        spec = args.inputs / f"bad_{k}.toml"
        spec.write_text(text)
        R.run(f"badspec_{k}", [fa, fg, *raw, "--spec", str(spec), "--op", "op"])
    for m in ("mixd", "quant", "Mixed", "cross", ""):
        R.run(f"badmethod_{m or 'empty'}", [fa, fg, *raw, "--compare", m])
    R.run("requant_f32", [fa, fg, *raw, "--compare", "requant"])
    R.run("cross_f64", [fa, fg, "--dtype", "float64", "--shape", "2048", "--compare", "cross_check",
                        "--third", fg])
    R.run("cross_nothird", [fa, fg, *raw, "--compare", "cross_check"])
    i8a, i8g = code_pair(rng, "int8", 16384, 3)
    fi = R.write("i8_a", i8a)
    R.run("binary_f32_i8", [fa, fi, *raw, "--compare", "binary"])
    for m in FLOAT_METHODS:
        R.run(f"dtype_mismatch_{m}", [str(args.inputs / "wide_bfloat16_a.npy"),
                                      str(args.inputs / "wide_float16_a.npy"), "--compare", m])
    csv = args.inputs / "bad_method.csv"
    csv.write_text("actual,golden,dtype,shape,compare\nspec_a.bin,spec_g.bin,float32,4096,cosin\n")
    R.run("csv_bad_method", ["-i", str(csv)])
    csv = args.inputs / "quant_method.csv"
    csv.write_text("actual,golden,dtype,shape,compare\nspec_a.bin,spec_g.bin,float32,4096,quant\n")
    R.run("csv_quant_method", ["-i", str(csv)])
    csv = args.inputs / "methods.csv"
    csv.write_text("actual,golden,dtype,shape,compare,precision_tolerances,absolute_precision\n" +
                   "".join(f"spec_a.bin,spec_g.bin,float32,4096,{m},\"((0.01, 0.02),)\",0.001\n"
                           for m in ["", "mixed", "stat_rel_err", "close", "cosine", "binary"]))
    R.run("csv_methods", ["-i", str(csv)])
    R.run("csv_methods_cli", ["-i", str(csv), "--compare", "stat_rel_err"])

    # op mode: the example case file, with and without its spec
    R.run("examples", ["-i", str(ROOT / "examples/cases.csv"), "--spec", str(ROOT / "examples/spec.toml")])
    R.run("examples_nospec", ["-i", str(ROOT / "examples/cases.csv")])
    R.run("help", ["--help"], reports=False)
    R.run("list_ops", ["--list-ops"], reports=False)
    print(f"{R.count} runs written to {args.out}")


if __name__ == "__main__":
    main()
