"""Tensor I/O against the reference writers and readers: numpy (np.save / np.load), ml_dtypes, en_dtypes and
the safetensors package (its Rust loader is the stock one). kc_tensor_dump (tests/tools/tensor_dump.cpp)
reads files through kc::load_tensor and writes them back as .npy (values as float64, or the same dtype) or
.safetensors."""

import os
import subprocess
import zlib
from pathlib import Path

import en_dtypes
import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy as stn
from safetensors import TensorSpec

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))
DUMP = BUILD / "tests" / "kc_tensor_dump"

pytestmark = pytest.mark.skipif(not DUMP.exists(), reason=f"{DUMP} not built")


def _codes(n, dtype):
    """Every code of an 8-bit type (or of a 4-bit type, one per byte), as an array of that type."""
    return np.arange(n, dtype=np.uint8).view(dtype)


def _hifloat32_values():
    # float32 patterns with the low 12 mantissa bits clear are exactly representable in hifloat32.
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) & np.uint32(0xFFFFF000)
    return np.concatenate([bits.view(np.float32), np.array([0, -0.0, 1, np.inf, -np.inf, np.nan], np.float32)])


def _values(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name in ("float64", "float32", "float16"):
        v = np.concatenate([rng.standard_normal(40) * 100, [0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 65504]])
        with np.errstate(over="ignore"):
            return v.astype(name)
    if name == "bfloat16":
        return np.arange(0, 65536, 97, dtype=np.uint16).view(ml_dtypes.bfloat16)
    if name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(name)
        # int64/uint64 extremes do not survive float64: keep them within 2^53 for the f64 comparison.
        lo, hi = max(info.min, -(2**53)), min(info.max, 2**53)
        return np.concatenate([[lo, hi, 0, 1], rng.integers(lo, hi, 40, dtype=name, endpoint=True)]).astype(name)
    if name == "bool":
        return rng.integers(0, 2, 37).astype(bool)
    if name == "complex64":
        return (rng.standard_normal(9) + 1j * rng.standard_normal(9)).astype(np.complex64)
    if name == "complex128":
        return rng.standard_normal(9) + 1j * rng.standard_normal(9)
    if name == "complex32":
        return (rng.standard_normal(9) + 1j * rng.standard_normal(9)).astype(ml_dtypes.complex32)
    if name == "hifloat32":
        return _hifloat32_values()
    return _codes(16 if NP_TYPES[name] in (ml_dtypes.int4, ml_dtypes.float4_e2m1fn) else 256, NP_TYPES[name])


# kerncheck name → the numpy / ml_dtypes / en_dtypes type holding it in Python.
NP_TYPES = {
    "float64": np.float64,
    "float32": np.float32,
    "hifloat32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "hifloat8": en_dtypes.hifloat8,
    "float8_e8m0": ml_dtypes.float8_e8m0fnu,
    "float4_e2m1": ml_dtypes.float4_e2m1fn,
    "int4": ml_dtypes.int4,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
    "complex32": ml_dtypes.complex32,
    "complex64": np.complex64,
    "complex128": np.complex128,
}
# Types np.load reads without help; the others are saved by numpy as void types (or '<f1', '<W4').
NATIVE = {"float64", "float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool", "complex64", "complex128"}
STOCK_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
               "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0": "F8_E8M0",
               "float4_e2m1": "F4", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
               "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64", "bool": "BOOL",
               "complex64": "C64"}
PACKED = {"float4_e2m1", "int4"}


def _run(*args, ok=True):
    p = subprocess.run([str(DUMP), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def _expected_f64(name, arr):
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn in the cast
        if name.startswith("complex"):
            return arr.astype(np.complex128)
        return arr.astype(np.float64)


def _storage(name, arr):
    """kerncheck's storage bytes: 4-bit types packed two per byte, low nibble first."""
    if name in PACKED:
        codes = arr.view(np.uint8) & 0xF
        if len(codes) % 2:
            codes = np.append(codes, 0)
        return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).tobytes()
    return arr.tobytes()


def _check_f64(name, out, arr, shape):
    got = np.load(out)
    assert got.dtype == (np.complex128 if name.startswith("complex") else np.float64)
    assert got.shape == shape
    np.testing.assert_array_equal(got, _expected_f64(name, arr).reshape(shape))


@pytest.mark.parametrize("name", list(NP_TYPES))
def test_npy_from_numpy(name, tmp_path):
    arr = _values(name)
    shape = (1, len(arr)) if len(arr) % 2 else (2, len(arr) // 2)
    np.save(tmp_path / "a.npy", arr.reshape(shape))
    hint = "-" if name in NATIVE else name
    info = _run("info", tmp_path / "a.npy", hint).stdout
    assert f"dtype={name} shape=[{shape[0]}, {shape[1]}] numel={len(arr)}" in info
    _run("f64", tmp_path / "a.npy", tmp_path / "out.npy", hint)
    _check_f64(name, tmp_path / "out.npy", arr, shape)
    if name == "hifloat32":  # saved from a float32 array: without a hint it is float32
        assert "dtype=float32" in _run("info", tmp_path / "a.npy").stdout
    elif name == "complex32" and np.dtype(NP_TYPES[name]).str == "<c4":
        # ml_dtypes >= 0.7 gives complex32 kind 'c', so numpy writes '<c4': unambiguous, read without a hint.
        assert "dtype=complex32" in _run("info", tmp_path / "a.npy").stdout
    elif name not in NATIVE and name != "float8_e5m2":  # ml_dtypes writes e5m2 as '<f1', unambiguous
        p = _run("info", tmp_path / "a.npy", ok=False)
        assert p.returncode == 3 and "descr" in p.stderr and "pass --dtype" in p.stderr, p.stderr


def _npy_with_descr(path, descr, payload, shape):
    """An .npy file (version 1.0) with the given descr string, as numpy's writer lays it out."""
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    head += b" " * (63 - (10 + len(head)) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head + payload)


@pytest.mark.parametrize("descr", ["<c4", "<W4"])
def test_npy_complex32_as_each_ml_dtypes_writes_it(descr, tmp_path):
    """complex32 (float16 real, imaginary parts) as ml_dtypes >= 0.7 writes it ('<c4', numpy's name for a
    complex of two 2-byte floats) and as earlier versions did ('<W4', needs the hint), whichever ml_dtypes
    is installed here; a conflicting hint is refused."""
    parts = np.array([1.5, -2.0, 0.0, 65504.0, -0.25, 1024.0], dtype=np.float16)
    _npy_with_descr(tmp_path / "a.npy", descr, parts.tobytes(), (3,))
    hint = "-" if descr == "<c4" else "complex32"
    _run("f64", tmp_path / "a.npy", tmp_path / "out.npy", hint)
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(got, parts[0::2].astype(np.float64) + 1j * parts[1::2].astype(np.float64))
    p = _run("info", tmp_path / "a.npy", "float32", ok=False)
    assert p.returncode == 3 and "descr" in p.stderr, p.stderr


@pytest.mark.parametrize("name", list(NP_TYPES))
def test_raw_and_our_npy(name, tmp_path):
    arr = _values(name)
    (tmp_path / "a.raw").write_bytes(_storage(name, arr))
    _run("f64", tmp_path / "a.raw", tmp_path / "f.npy", name, len(arr))
    _check_f64(name, tmp_path / "f.npy", arr, (len(arr),))
    # Same dtype written by write_npy: np.load reads it; void types come back with .view(type).
    _run("npy", tmp_path / "a.raw", tmp_path / "same.npy", name, f"[{len(arr)}]")
    back = np.load(tmp_path / "same.npy")
    if name not in NATIVE:
        assert back.dtype.kind == "V" and back.dtype.itemsize == np.dtype(NP_TYPES[name]).itemsize
        back = back.view(NP_TYPES[name])
    assert back.dtype == np.dtype(NP_TYPES[name])
    want = (arr.view(np.uint8) & 0xF).tobytes() if name in PACKED else arr.tobytes()
    assert back.tobytes() == want
    # Raw size must match exactly.
    p = _run("info", tmp_path / "a.raw", name, len(arr) + 2, ok=False)
    assert p.returncode == 3 and "a.raw: size: expected" in p.stderr, p.stderr


def _stock_save(path, tensors, metadata=None):
    """safetensors' own writer; float4 goes through the torch-style float4_e2m1fn_x2 spec (two per byte)."""
    plain = {k: v for k, v in tensors.items() if v.dtype != np.dtype(ml_dtypes.float4_e2m1fn)}
    fp4 = {k: v for k, v in tensors.items() if k not in plain}
    if not fp4:
        stn.save_file(plain, str(path), metadata=metadata)
        return
    keep, specs = [], {}
    for k, v in plain.items():
        v = np.ascontiguousarray(v)
        keep.append(v)
        specs[k] = TensorSpec(dtype=v.dtype.name, shape=list(v.shape), data_ptr=v.ctypes.data, data_len=v.nbytes)
    for k, v in fp4.items():
        b = np.frombuffer(_storage("float4_e2m1", v.reshape(-1)), np.uint8).copy()
        keep.append(b)
        specs[k] = TensorSpec(dtype="float4_e2m1fn_x2", shape=[v.size // 2], data_ptr=b.ctypes.data,
                              data_len=b.nbytes)
    safetensors.serialize_file(specs, str(path), metadata=metadata)


def test_safetensors_from_stock_writer(tmp_path):
    path = tmp_path / "m.safetensors"
    arrs = {name: _values(name) for name in STOCK_CODES}
    arrs = {n: (a[: len(a) // 2 * 2] if n == "float4_e2m1" else a) for n, a in arrs.items()}
    _stock_save(path, {f"t.{n}": a for n, a in arrs.items()}, metadata={"k": "v"})
    for n, a in arrs.items():
        info = _run("info", f"{path}:t.{n}").stdout
        assert f"dtype={n} shape=[{len(a)}]" in info
        _run("f64", f"{path}:t.{n}", tmp_path / "o.npy")
        _check_f64(n, tmp_path / "o.npy", a, (len(a),))
    p = _run("info", path, ok=False)
    assert p.returncode == 3 and "tensor name: expected FILE:NAME" in p.stderr


def test_our_safetensors_load_in_stock_loader(tmp_path):
    srcs = []
    for name in NP_TYPES:
        arr = _values(name)
        if name == "float4_e2m1":
            arr = arr[:16]
        (tmp_path / f"{name}.raw").write_bytes(_storage(name, arr))
        srcs.append((name, arr))
    stock = [(n, a) for n, a in srcs if n in STOCK_CODES]
    out = tmp_path / "ours.safetensors"
    _run("safetensors", out, "--meta", "who=kerncheck",
         *[f"w.{n}={tmp_path / (n + '.raw')}@{n}@{len(a)}" for n, a in stock])
    # The stock (Rust) loader validates the whole file and hands back every tensor's bytes.
    data = out.read_bytes()
    got = {k: v for k, v in safetensors.deserialize(data)}
    assert set(got) == {f"w.{n}" for n, _ in stock}
    for n, a in stock:
        t = got[f"w.{n}"]
        assert t["dtype"] == STOCK_CODES[n] and list(t["shape"]) == [len(a)]
        assert bytes(t["data"]) == _storage(n, a)
    with safetensors.safe_open(str(out), framework="np") as f:
        assert f.metadata() == {"who": "kerncheck"}
    # safetensors.numpy.load_file knows only numpy's own types: a file of those loads with equal values.
    out2 = tmp_path / "native.safetensors"
    _run("safetensors", out2, *[f"{n}={tmp_path / (n + '.raw')}@{n}@{len(a)}" for n, a in stock if n in NATIVE])
    for n, v in stn.load_file(str(out2)).items():
        np.testing.assert_array_equal(v, dict(stock)[n])
    # Our X_ extensions must be refused by the stock loader rather than misread.
    for n, a in srcs:
        if n in STOCK_CODES:
            continue
        ext = tmp_path / f"x_{n}.safetensors"
        _run("safetensors", ext, f"a={tmp_path / (n + '.raw')}@{n}@{len(a)}")
        with pytest.raises(Exception, match="unknown variant `X_"):
            safetensors.deserialize(ext.read_bytes())
        _run("f64", f"{ext}:a", tmp_path / "o.npy")
        _check_f64(n, tmp_path / "o.npy", a, (len(a),))


def test_npy_errors(tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(np.zeros((2, 3))))
    p = _run("info", tmp_path / "f.npy", ok=False)
    assert p.returncode == 3 and f"{tmp_path / 'f.npy'}: fortran_order: expected False" in p.stderr
    np.save(tmp_path / "b.npy", np.zeros(3, ">f4"))
    p = _run("info", tmp_path / "b.npy", ok=False)
    assert p.returncode == 3 and "descr" in p.stderr and "big-endian '>f4'" in p.stderr
    np.save(tmp_path / "s.npy", np.zeros(3, [("a", "<f4"), ("b", "<i4")]))
    p = _run("info", tmp_path / "s.npy", ok=False)
    assert p.returncode == 3 and "structured" in p.stderr
    full = (tmp_path / "f.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(full[:-1])
    p = _run("info", tmp_path / "t.npy", ok=False)
    assert p.returncode == 3 and "t.npy: fortran_order" in p.stderr  # the header is checked before the data
    np.save(tmp_path / "c.npy", np.zeros((2, 3)))
    (tmp_path / "t2.npy").write_bytes((tmp_path / "c.npy").read_bytes()[:-1])
    p = _run("info", tmp_path / "t2.npy", ok=False)
    assert p.returncode == 3 and "t2.npy: data: expected 48 bytes" in p.stderr and "got 47 bytes" in p.stderr


def test_npy_scalars_and_empty_arrays(tmp_path):
    for arr in (np.float32(2.5), np.zeros((0, 3), np.int16), np.array(7, np.int64)):
        np.save(tmp_path / "a.npy", arr)
        _run("f64", tmp_path / "a.npy", tmp_path / "o.npy")
        got = np.load(tmp_path / "o.npy")
        assert got.shape == np.shape(arr)
        np.testing.assert_array_equal(got, np.asarray(arr, np.float64))
        _run("npy", tmp_path / "a.npy", tmp_path / "same.npy")
        again = np.load(tmp_path / "same.npy")
        assert again.dtype == np.asarray(arr).dtype and again.shape == np.shape(arr)
