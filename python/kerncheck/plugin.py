"""Plugins (`--plugin assets.py`): TestSpec classes and op candidates written in Python.

TestSpec classes: any class with a string `__spec__` (the operator) and a dict `tolerance`
{dtype: {"standard": ..., overrides}}. They are turned into the TOML of `kerncheck compare --spec`, so the
C++ spec parser validates them and the C++ router applies them (docs/compare.md), with no routing in Python.

Op candidates: @kerncheck.candidate("matmul") makes a Python function a candidate of a built-in op;
kerncheck generates the inputs (C++), calls the function and compares its output with the op's f64
reference (C++).
"""
import importlib.util
import inspect
import json
import math
import pathlib
import sys

import numpy as np

from . import _core


def _dtype_key(k):
    """A tolerance key as a dtype name: strings as given, numpy/torch dtypes by their names."""
    if isinstance(k, str):
        return k
    mod = type(k).__module__
    if mod.startswith("torch"):
        return str(k).removeprefix("torch.")
    try:
        return np.dtype(k).name
    except TypeError:
        raise TypeError(f"tolerance key {k!r}: expected a dtype name") from None


def _toml_value(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    raise TypeError(f"{where}: expected a number or a string, got {type(v).__name__}")


def is_test_spec(obj):
    return inspect.isclass(obj) and isinstance(getattr(obj, "__spec__", None), str) and \
        isinstance(getattr(obj, "tolerance", None), dict)


def test_specs_to_toml(classes):
    """The TOML spec text of TestSpec classes (checked and applied by the C++ spec reader)."""
    lines = []
    for cls in classes:
        op = cls.__spec__
        for key, entry in cls.tolerance.items():
            dt = _dtype_key(key)
            where = f"{cls.__name__}.tolerance[{dt!r}]"
            if not isinstance(entry, dict):
                raise TypeError(f"{where}: expected a dict like {{'standard': 'mix_tolerance'}}, "
                                f"got {type(entry).__name__}")
            lines.append(f"# {cls.__module__}.{cls.__qualname__}")
            lines.append(f"[{json.dumps(op)}.{json.dumps(dt)}]")
            for f, v in entry.items():
                lines.append(f"{json.dumps(str(f))} = {_toml_value(v, where + '.' + str(f))}")
            lines.append("")
    return "\n".join(lines)


class Plugin:
    """A loaded plugin file: its module, TestSpec classes and the TOML they make."""

    def __init__(self, path, module, specs):
        self.path, self.module, self.specs = str(path), module, specs
        self.toml = test_specs_to_toml(specs) if specs else None


def load_plugin(path):
    """Imports a plugin file; candidates register as it runs; returns a Plugin."""
    p = pathlib.Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{path}: plugin: expected a Python file, got nothing there")
    name = f"kerncheck_plugin_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    specs = [v for v in vars(mod).values() if is_test_spec(v) and v.__module__ == name]
    return Plugin(p, mod, specs)


def spec_toml(spec):
    """(TOML text or None, label for messages, operator) from the `spec` argument of compare()."""
    if spec is None:
        return None, "", None
    if isinstance(spec, Plugin):
        return spec.toml, spec.path, None
    if is_test_spec(spec):
        return test_specs_to_toml([spec]), f"{spec.__module__}.{spec.__qualname__}", spec.__spec__
    if isinstance(spec, (list, tuple)) and all(is_test_spec(s) for s in spec):
        ops = {s.__spec__ for s in spec}
        return test_specs_to_toml(spec), "TestSpec classes", ops.pop() if len(ops) == 1 else None
    if isinstance(spec, (str, pathlib.Path)):
        p = pathlib.Path(spec)
        if isinstance(spec, pathlib.Path) or ("\n" not in str(spec) and p.suffix == ".toml"):
            return p.read_text(encoding="utf-8"), str(p), None
        return str(spec), "<spec text>", None
    raise TypeError(f"spec: expected a TestSpec class, a list of them, a TOML path or TOML text, got "
                    f"{type(spec).__name__}")


def _to_f64(y, where):
    t = sys.modules.get("torch")
    if t is not None and isinstance(y, t.Tensor):
        y = y.detach().to("cpu", t.float64).numpy()
    a = np.asarray(y)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{where}: expected a real numeric array, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float64)


def candidate(op, name=None, summary=""):
    """Decorator: makes fn(*inputs, **params) a candidate of the built-in op `op` (see `list_ops()`).

    inputs are float64 numpy arrays holding the generated values (already rounded to the op's input
    dtype); params are the CSV row's `params`; a parameter named `out_dtype` receives the output dtype's
    name. The function returns the output (numpy array, torch tensor, anything np.asarray takes); kerncheck
    rounds it to the output dtype once (like a kernel's epilogue) and compares it with the f64 reference.
    """
    def deco(fn):
        cname = name or fn.__name__
        wants_dtype = "out_dtype" in inspect.signature(fn).parameters

        def call(inputs, params, out_dtype):
            kw = dict(params)
            if wants_dtype:
                kw["out_dtype"] = out_dtype
            return _to_f64(fn(*inputs, **kw), f"{op} candidate {cname}")

        _core.register_candidate(op, cname, call, summary or (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return deco


def list_ops():
    """The built-in ops: name, summary, inputs, params, candidates (Python ones included)."""
    return _core.list_ops()
