"""GGUF reader and dequantization against the `gguf` PyPI package (gguf-py, llama.cpp's own Python reader).

- The ggml type table (block size, bytes per block) equals gguf.constants.GGML_QUANT_SIZES.
- For every type we dequantize: small GGUFs written with gguf.GGUFWriter (data from gguf.quants.quantize
  where the package can quantize, else random blocks with valid f16 scales); our f32 values equal
  gguf.quants.dequantize bit for bit.
- Metadata of every value type (arrays of strings, nested arrays) reads back as written; version 2 too.
- The real SmolLM2-135M-Instruct Q4_1 file: types and metadata as gguf.GGUFReader sees them, and every
  one of its 272 tensors dequantizes bit-identically (compared by SHA-256 of the f32 bytes).
- Malformed files (truncated anywhere, bad magic/version, overflowing counts, lengths past EOF, tensors
  out of range, unknown and unsupported types) fail with exit 3 and a message naming file and field.
"""

from kc_env import smollm2_path
import hashlib
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
import gguf.quants as Q  # noqa: E402

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))
DUMP = BUILD / "tests" / "kc_gguf_dump"

QUANTIZABLE = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
RANDOM_ONLY = ["Q4_K", "Q5_K", "Q6_K"]  # the package dequantizes these but cannot quantize them
# Byte offsets of the f16 scale fields inside one block (random blocks get finite f16 there).
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q4_K": [0, 2],
              "Q5_K": [0, 2], "Q6_K": [208]}


def run(*args, check=True):
    r = subprocess.run([str(DUMP), *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"kc_gguf_dump {args} failed ({r.returncode}): {r.stderr}")
    return r


def ours(path, name, tmp_path):
    out = tmp_path / f"{name}.f32"
    run(path, "--dequant", name, out)
    return np.fromfile(out, dtype=np.float32)


def random_finite_f16(rng, n):
    h = rng.standard_normal(n).astype(np.float16) * np.float16(rng.choice([1e-3, 0.05, 1.0, 30.0]))
    h[:: max(1, n // 7)] = np.float16(6e-6)  # some subnormal scales
    return h.view(np.uint8).reshape(n, 2)


def random_blocks(rng, tname, n_blocks):
    qt = T[tname]
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    b = rng.integers(0, 256, (n_blocks, ts), dtype=np.uint8)
    for off in F16_FIELDS.get(tname, []):
        b[:, off:off + 2] = random_finite_f16(rng, n_blocks)
    return b


def write(path, tensors, kv=None, alignment=None):
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    for k, (kind, v) in (kv or {}).items():
        getattr(w, f"add_{kind}")(k, v)
    for name, (arr, raw_dtype) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_type_table_matches_gguf_py():
    ours_t = json.loads(run("--types").stdout)
    for qt, (bs, ts) in gguf.GGML_QUANT_SIZES.items():
        assert qt.name in ours_t, qt.name
        oid, obs, ots, _ = ours_t[qt.name]
        assert oid == qt.value, qt.name
        if qt.name == "Q8_1":  # gguf-py lists 40 bytes; ggml's block_q8_1 is fp16 d + fp16 s + 32 int8 = 36
            assert (obs, ots) == (32, 36)
            continue
        assert (obs, ots) == (bs, ts), qt.name
    supported = sorted(n for n, v in ours_t.items() if v[3])
    assert supported == sorted(QUANTIZABLE + RANDOM_ONLY)


@pytest.mark.parametrize("tname", QUANTIZABLE + RANDOM_ONLY)
def test_dequant_bitwise_equals_gguf_py(tname, tmp_path):
    rng = np.random.default_rng(abs(hash(tname)) % 2**32)
    qt = T[tname]
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    tensors = {}
    row = 4 * max(bs, 32) if bs > 1 else 96
    if tname in QUANTIZABLE:
        # quantized real-looking data (includes rows of zeros and of one constant, and huge outliers)
        x = rng.standard_normal((6, row)).astype(np.float32)
        x[1] = 0
        x[2] = 3.25
        x[3] *= 1e4
        if tname in ("F32", "F16", "BF16"):
            arr = x if tname == "F32" else Q.quantize(x, qt)
            if tname == "F16":
                arr = x.astype(np.float16)
            tensors["quantized"] = (arr, None if tname != "BF16" else qt)
        else:
            tensors["quantized"] = (Q.quantize(x, qt), qt)
    if bs > 1:
        tensors["random"] = (random_blocks(rng, tname, 8 * row // bs).reshape(8, -1), qt)
    else:  # plain floats: every bit pattern, NaN and inf included
        width = ts
        raw = rng.integers(0, 256, (5, row * width), dtype=np.uint8)
        tensors["random"] = (raw, qt)
    path = tmp_path / f"{tname}.gguf"
    write(path, tensors)
    reader = gguf.GGUFReader(str(path))
    for t in reader.tensors:
        want = Q.dequantize(t.data, t.tensor_type).astype(np.float32).ravel()
        got = ours(path, t.name, tmp_path)
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (
            f"{tname} {t.name}: {np.count_nonzero(got.view(np.uint32) != want.view(np.uint32))} differ")


def test_metadata_all_value_types_and_v2(tmp_path):
    kv = {
        "t.u8": ("uint8", 200), "t.i8": ("int8", -100), "t.u16": ("uint16", 60000), "t.i16": ("int16", -30000),
        "t.u32": ("uint32", 4000000000), "t.i32": ("int32", -2000000000), "t.u64": ("uint64", 2**63 + 5),
        "t.i64": ("int64", -2**62), "t.f32": ("float32", 0.1), "t.f64": ("float64", 0.1),
        "t.bool": ("bool", True), "t.str": ("string", "héllo ✓ 世界"),
        "t.strs": ("array", ["", "a", "Ġthe", "<|im_start|>", "🙂"]),
        "t.ints": ("array", [1, -2, 3]), "t.floats": ("array", [0.5, -1.25]),
        "t.nested": ("array", [[1, 2], [3]]),
    }
    path = tmp_path / "kv.gguf"
    write(path, {"w": (np.arange(64, dtype=np.float32).reshape(2, 32), None)}, kv, alignment=64)
    d = json.loads(run(path).stdout)
    md = d["metadata"]
    assert d["alignment"] == 64 and d["data_offset"] % 64 == 0
    reader = gguf.GGUFReader(str(path))
    for k in kv:
        f = reader.fields[k]
        assert md[k]["type"] == f.types[0].name, k
        want = f.contents() if k != "t.nested" else [[1, 2], [3]]  # gguf-py flattens nested arrays
        got = md[k]["value"]
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=0, abs=0), k
        else:
            assert got == want, k
    assert md["t.f32"]["value"] == float(np.float32(0.1))
    # Version 2 has the same layout (v3 only added big-endian files): patch the version field.
    b = bytearray(path.read_bytes())
    b[4:8] = struct.pack("<I", 2)
    v2 = tmp_path / "v2.gguf"
    v2.write_bytes(bytes(b))
    assert json.loads(run(v2).stdout)["version"] == 2
    got = ours(v2, "w", tmp_path)
    assert np.array_equal(got, np.arange(64, dtype=np.float32))


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("bad") / "good.gguf"
    rng = np.random.default_rng(5)
    write(p, {"blk.0.w": (Q.quantize(rng.standard_normal((2, 64)).astype(np.float32), T.Q8_0), T.Q8_0),
              "n": (np.ones(32, np.float32), None)},
          {"tokenizer.ggml.tokens": ("array", ["a", "b"]), "x": ("uint32", 3)})
    return p


def expect_error(path, *needles, args=()):
    r = run(path, *args, check=False)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert str(path) in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    return r.stderr


def test_every_truncation_is_an_error(small_file, tmp_path):
    data = small_file.read_bytes()
    header_end = json.loads(run(small_file).stdout)["data_offset"]
    p = tmp_path / "cut.gguf"
    for n in list(range(0, header_end + 1)) + [len(data) - 1]:
        p.write_bytes(data[:n])
        r = run(p, check=False)
        if n >= header_end and n < len(data):  # header whole, tensor data short
            assert r.returncode == 3 and "past the end" in r.stderr, (n, r.stderr)
        elif n < header_end - 31:  # padding after the infos may be cut without losing a field
            assert r.returncode == 3, (n, r.stderr)
        if r.returncode:
            assert r.returncode == 3 and str(p) in r.stderr, (n, r.stderr)


def patched(src, tmp_path, offset, fmt, value, name="bad.gguf"):
    b = bytearray(src.read_bytes())
    struct.pack_into(fmt, b, offset, value)
    p = tmp_path / name
    p.write_bytes(bytes(b))
    return p


def test_bad_headers(small_file, tmp_path):
    expect_error(patched(small_file, tmp_path, 0, "<4s", b"GGML"), "magic", "expected \"GGUF\"")
    expect_error(patched(small_file, tmp_path, 4, "<I", 1), "version", "expected 2 or 3, got 1")
    expect_error(patched(small_file, tmp_path, 8, "<Q", 2**64 - 1), "tensor_count", "got 18446744073709551615")
    expect_error(patched(small_file, tmp_path, 16, "<Q", 2**62), "metadata_kv_count")
    # first key's length (offset 24) far past EOF
    expect_error(patched(small_file, tmp_path, 24, "<Q", 2**40), "metadata key #0", "string length")


def find(data, needle):
    i = data.find(needle)
    assert i >= 0
    return i


def test_bad_arrays_and_tensors(small_file, tmp_path):
    data = small_file.read_bytes()
    # array of strings: key, u32 type 9, u32 elem type 8, u64 count
    k = find(data, b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens")
    expect_error(patched(small_file, tmp_path, k + 8, "<Q", 2**63), "tokenizer.ggml.tokens", "count")
    expect_error(patched(small_file, tmp_path, k + 16, "<Q", 2**33), "tokenizer.ggml.tokens", "string length")
    expect_error(patched(small_file, tmp_path, k + 4, "<I", 77), "element type", "0..12")
    # tensor info of "blk.0.w": name, u32 n_dims, u64 ne[2], u32 type, u64 offset
    t = find(data, b"blk.0.w") + len("blk.0.w")
    expect_error(patched(small_file, tmp_path, t, "<I", 9), "n_dims", "at most 4")
    expect_error(patched(small_file, tmp_path, t + 4, "<Q", 2**62), "blk.0.w")
    expect_error(patched(small_file, tmp_path, t + 4, "<Q", 48), "ne[0]", "multiple of 32")
    expect_error(patched(small_file, tmp_path, t + 20, "<I", 99), "tensor 'blk.0.w' type", "got 99")
    expect_error(patched(small_file, tmp_path, t + 24, "<Q", 2**60), "tensor 'blk.0.w' data", "past the end")
    expect_error(patched(small_file, tmp_path, t + 24, "<Q", 7), "offset", "multiple of the alignment 32")
    # Q3_K is a known type without a kernel: the header reads, dequantizing names the tensor and the list.
    q3 = patched(small_file, tmp_path, t + 20, "<I", 11, "q3.gguf")  # 2×64 Q8_0 bytes ≠ Q3_K size → range
    err = expect_error(q3, "blk.0.w")
    p = tmp_path / "q3k.gguf"
    write(p, {"blk.3.attn_q.weight": (random_blocks(np.random.default_rng(0), "Q4_K", 2)[:, :110].copy(), T.Q3_K)})
    run(p)  # header fine
    err = expect_error(p, "tensor 'blk.3.attn_q.weight' type: expected a supported type (F32, F16",
                       args=("--dequant", "blk.3.attn_q.weight", tmp_path / "o"))
    assert "Q4_1" in err and "Q6_K" in err and err.rstrip().endswith("got Q3_K"), err


def test_missing_tensor_and_key_messages(small_file, tmp_path):
    expect_error(small_file, "tensor 'nope'", "the file has 2 tensors", args=("--dequant", "nope", tmp_path / "o"))


# ------------------------------------------------------------------ the real model file
@pytest.fixture(scope="module")
def smollm2():
    p = smollm2_path()
    if not p.exists():
        pytest.skip(f"{p} not present (scripts/fetch_smollm2.sh fetches it)")
    return p


def test_smollm2_header_matches_gguf_py(smollm2):
    d = json.loads(run(smollm2).stdout)
    reader = gguf.GGUFReader(str(smollm2))
    assert d["version"] == 3 and d["alignment"] == 32
    md = d["metadata"]
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert sorted(md) == sorted(keys)
    for k in keys:
        assert md[k]["value"] == pytest.approx(reader.fields[k].contents()) if md[k]["type"] == "FLOAT32" \
            else md[k]["value"] == reader.fields[k].contents(), k
    assert md["tokenizer.ggml.pre"]["value"] == "smollm"
    assert len(md["tokenizer.ggml.tokens"]["value"]) == 49152
    assert len(md["tokenizer.ggml.merges"]["value"]) == 48900
    types = {}
    for ot, t in zip(d["tensors"], reader.tensors):
        assert ot["name"] == t.name and ot["type"] == t.tensor_type.name
        assert ot["ne"] == [int(x) for x in t.shape]
        assert d["data_offset"] + ot["offset"] == t.data_offset
        types[ot["type"]] = types.get(ot["type"], 0) + 1
    assert types == {"F32": 61, "Q8_0": 1, "Q4_1": 210}
    assert next(t for t in d["tensors"] if t["name"] == "token_embd.weight")["type"] == "Q8_0"


def test_smollm2_every_tensor_bitwise(smollm2):
    lines = run(smollm2, "--sha256").stdout.split("\n")
    got = dict((ln.split()[0], ln.split()[2]) for ln in lines if ln)
    reader = gguf.GGUFReader(str(smollm2))
    assert len(got) == len(reader.tensors) == 272
    for t in reader.tensors:
        v = np.ascontiguousarray(Q.dequantize(t.data, t.tensor_type).astype(np.float32))
        assert hashlib.sha256(v.tobytes()).hexdigest() == got[t.name], t.name
