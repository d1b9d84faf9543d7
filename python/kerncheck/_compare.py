"""kerncheck.compare: one tensor comparison through the C++ router and methods (docs/python.md)."""
import json

import numpy as np

from . import _core
from ._tensors import tensor_arg
from .plugin import spec_toml

# The method names compare(method=...) takes, in the CLI's order: the C++ method table's (_core.methods()).
METHODS = tuple(m["name"] for m in _core.methods() if m["cli"])
DEFAULT_METHOD = next(m["name"] for m in _core.methods() if m["default"])


def _number(x):
    return float(x) if isinstance(x, str) else x


class Figure:
    """A number the verdict used, with its limit (`ok`: whether it meets it)."""

    __slots__ = ("name", "value", "limit", "relation", "ok")

    def __init__(self, d):
        # The JSON report spells non-finite numbers "nan", "inf", "-inf" (JSON has none): floats here.
        self.name, self.value, self.limit = d["name"], _number(d["value"]), _number(d["limit"])
        self.relation, self.ok = d["relation"], d["ok"]

    def __repr__(self):
        lim = f" {self.relation} {self.limit}" if self.limit is not None else ""
        return f"Figure({self.name} = {self.value}{lim}, {'ok' if self.ok else 'FAIL'})"


class CompareResult:
    """The result of kerncheck.compare: the same facts as `kerncheck compare --json` (one case).

    Attributes: verdict ("PASS"/"FAIL"), passed, method, route_source (where the method came from),
    dtype, numel, reason, params (tolerances applied), figures (list of Figure), worst (largest errors:
    dicts with index, golden, actual, abs_err, rel_err, ulp_err), nonfinite, mismatch_indices,
    histogram, min_passing, notes, text (the CLI's text report), json (the dict).
    """

    def __init__(self, case_json, text):
        j = self.json = case_json
        self.text = text
        self.verdict = j["verdict"]
        self.passed = bool(j["pass"])
        self.method = j["method"]
        self.route_source = j["route_source"]
        self.dtype = j["dtype"]
        self.numel = j["numel"]
        self.reason = j["reason"]
        self.params = j["params"]
        self.figures = [Figure(f) for f in j["figures"]]
        self.worst = j["worst"]
        self.nonfinite = j["nonfinite"]
        self.mismatch_indices = j["mismatch_indices"]
        self.histogram = j["histogram"]
        self.min_passing = j["min_passing"]
        self.notes = j["notes"]

    def __bool__(self):
        return self.passed

    def figure(self, name):
        """The figure called `name` (e.g. "matched_ratio"), or KeyError."""
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(name)

    def __repr__(self):
        return f"<CompareResult {self.verdict} {self.method} ({self.route_source}): {self.reason}>"

    def __str__(self):
        return self.text


def _flat(arg):
    """tensor_arg's tuple with the shape of a vector of its elements (compare(..., flat=True))."""
    return (arg[0], arg[1], [int(np.prod(arg[2], dtype=np.int64))], *arg[3:])


def compare(actual, golden, method=None, dtype=None, third=None, spec=None, op=None, *, rtol=None, atol=None,
            name=None, flat=False):
    """Compares `actual` (the kernel's output) with `golden` as `kerncheck compare` does.

    actual, golden, third: numpy arrays (ml_dtypes bfloat16/float8/float4/int4 too) or torch tensors,
      C-contiguous; read in place. CUDA tensors are copied to the host once.
    method: one of kerncheck.METHODS, the CLI's --compare ({methods});
      default: routed by spec, then by dtype, then {default} (docs/compare.md).
    dtype: output dtype for routing; must be the arrays' own dtype, except that uint8/int8 arrays of raw
      codes are read as the 8-bit dtype named (e.g. "hifloat8").
    spec: a TestSpec class (`__spec__`, `tolerance`), a list of them, a TOML spec path or TOML text;
      op: the operator to look up (default: the TestSpec's __spec__).
    rtol, atol: both or neither (as torch.testing.assert_close); override the routed method's (mixed or
      close) tolerances.
    flat: compare the elements in order when the shapes differ (equal counts), as the CLI's --flat;
      without it a shape mismatch raises kerncheck.Error (a ValueError; the CLI's exit 3).
    """
    toml, label, spec_op = spec_toml(spec)
    op = op if op is not None else spec_op
    a = tensor_arg(actual, "actual")
    g = tensor_arg(golden, "golden")
    t = tensor_arg(third, "third") if third is not None else None
    if flat:
        a, g, t = _flat(a), _flat(g), _flat(t) if t is not None else None
    js, text, _ = _core.compare(a, g, t, method, dtype, toml, label, op, rtol, atol,
                                name if name is not None else a[3])
    return CompareResult(json.loads(js)["cases"][0], text)


compare.__doc__ = compare.__doc__.replace("{methods}", ", ".join(METHODS)).replace("{default}", DEFAULT_METHOD)
