"""pytest helpers: kerncheck.testing.assert_close(actual, expected, ...) (docs/python.md).

Checks shape and dtype as torch.testing.assert_close does, then compares with kerncheck's routed method
(C++). The failure message leads with torch's figures (mismatched elements, greatest absolute and
relative difference at an N-d index), then kerncheck's; the whole report is on the exception.
"""
import sys

import numpy as np

from . import _core
from ._compare import compare
from ._tensors import is_torch_tensor, tensor_arg

# ml_dtypes' names of the core's dtypes where they differ.
_ML_NAMES = {"float8_e8m0": "float8_e8m0fnu", "float4_e2m1": "float4_e2m1fn"}
# torch dtypes without a numpy twin: read their bytes through an integer view, then as the ml_dtypes type.
_TORCH_VIEW = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8", "float8_e8m0fnu": "uint8"}


class CloseError(AssertionError):
    """assert_close's failure: `result` is the CompareResult (None when shape or dtype differ), `report`
    the full text (torch-style headline, then the CLI's report)."""

    def __init__(self, message, result=None, report=None):
        super().__init__(message)
        self.result, self.report = result, report if report is not None else message


def _np_dtype(name):
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bf16/fp8/fp4 arrays need it; kerncheck[ml] installs it

        return np.dtype(getattr(ml_dtypes, _ML_NAMES.get(name, name)))


def _is_array(x):
    return is_torch_tensor(x) or isinstance(x, np.ndarray) or hasattr(x, "__dlpack__") or \
        hasattr(x, "__array_interface__")


def _host(x, role):
    """A C-contiguous array or CPU tensor the core can read: torch tensors on any device (one copy to the
    host), DLPack producers (read in place where they are on the CPU), numpy, ml_dtypes; non-contiguous
    inputs are copied (assert_close favours convenience; kerncheck.compare reads strictly in place)."""
    if is_torch_tensor(x):
        x = x.detach()
        x = x if x.device.type == "cpu" else x.to("cpu")  # once, here: the core reads host memory
        return x if x.is_contiguous() else x.contiguous()
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
        try:
            x = np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):
            torch = sys.modules.get("torch")
            if torch is None:
                raise TypeError(f"{role}: a DLPack tensor on a device numpy cannot read ({type(x).__name__}); "
                                f"import torch (it copies it to the host) or pass a host array") from None
            return torch.from_dlpack(x).detach().contiguous()
    if isinstance(x, np.ndarray):
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)
    return x


def _as_numpy(x, name):
    """x (array or tensor of core dtype `name`) as a numpy array (ml_dtypes for bf16/fp8)."""
    if is_torch_tensor(x):
        tname = str(x.dtype).removeprefix("torch.")
        x = x.cpu()
        if tname in _TORCH_VIEW:
            torch = sys.modules["torch"]
            return x.view(getattr(torch, _TORCH_VIEW[tname])).numpy().view(_np_dtype(name))
        return x.numpy()
    return np.asarray(x)


def _fmt(v):
    return f"{float(v):.6g}"  # every figure, NaN and ±inf included ("nan", "inf")


def _index(flat, shape):
    return str(tuple(int(i) for i in np.unravel_index(flat, shape))) if shape else "()"


def _headline(a_arg, g_arg, r, shape):
    """torch.testing's three lines, for the tolerances kerncheck applied (0, 0: methods without an
    element-wise rule), computed by the core (compare/extremes.cpp)."""
    p = r.params
    rtol, atol = p.get("rtol"), p.get("atol")
    elementwise = rtol is not None and atol is not None
    numel, bad, max_abs, i_abs, max_rel, i_rel = _core.extremes(a_arg, g_arg, rtol if elementwise else 0.0,
                                                                atol if elementwise else 0.0, True)
    what = "Mismatched elements" if elementwise else f"Differing elements ({r.method} has no element-wise tolerance)"
    lines = [f"{what}: {bad} / {numel} ({bad / numel:.1%})" if numel else f"{what}: 0 / 0"]
    if bad:
        lines.append(f"Greatest absolute difference: {_fmt(max_abs)} at index {_index(i_abs, shape)}"
                     + (f" (up to {_fmt(atol)} allowed)" if elementwise and atol > 0 else ""))
        lines.append(f"Greatest relative difference: {_fmt(max_rel)} at index {_index(i_rel, shape)}"
                     + (f" (up to {_fmt(rtol)} allowed)" if elementwise and rtol > 0 else ""))
    return lines


def _kerncheck_lines(r):
    p = r.params
    lines = [f"kerncheck: {r.method} (route: {r.route_source}; dtype {r.dtype}): {r.reason}"]
    if "required_matched_ratio" in p:
        lines.append(f"  {r.method} passes when >= {p['required_matched_ratio']:.0%} of the elements are within "
                     f"atol + rtol*|expected| and max_abs_error is within its limit (a few far-off elements can pass; "
                     f"rtol=, atol= ask for torch's rule: every element)")
    figs = " · ".join(f"{f.name} {_fmt(f.value)}" + (f" {f.relation} {_fmt(f.limit)}" if f.limit is not None else "")
                      + ("" if f.ok else " FAIL") for f in r.figures)
    lines.append(f"  {figs}")
    if r.min_passing:
        lines.append(f"  smallest passing: {r.min_passing}")
    return lines


def assert_close(actual, expected, *, method=None, rtol=None, atol=None, check_dtype=True, dtype=None, third=None,
                 spec=None, op=None, msg=None, full_report=False):
    """Raises CloseError (an AssertionError) when `actual` does not match `expected`; returns the
    CompareResult when it does.

    As torch.testing.assert_close: shapes must be equal, and so must dtypes unless check_dtype=False
    (then `actual` is converted to the expected dtype first, so tolerances and ULPs are the expected
    dtype's, whichever argument is wider); rtol and atol go together and mean torch's rule (every element
    within atol + rtol*|expected|); `msg` (a string, or a callable taking the default message) replaces the
    message. Without rtol/atol the method is routed as kerncheck.compare does (floats: the `mixed` criterion,
    which passes when >= 99 % of the elements are within the dtype's tolerance and the largest error is
    small, so a few far-off elements can pass). Tensors: torch tensors on any device (copied to the host),
    DLPack producers, numpy arrays (ml_dtypes too), lists and scalars (which take the other argument's
    dtype). The message is short (torch's headline, then kerncheck's figures); full_report=True appends
    the CLI's whole report, which is always on the exception's `.report` (and `.result.text`).
    """
    __tracebackhide__ = True
    a, g = _host(actual, "actual"), _host(expected, "expected")
    if not _is_array(a) and _is_array(g):
        a = np.asarray(a, dtype=_np_dtype(tensor_arg(g, "expected")[1]))
    elif not _is_array(g) and _is_array(a):
        g = np.asarray(g, dtype=_np_dtype(tensor_arg(a, "actual")[1]))
    a_arg, g_arg = tensor_arg(a, "actual"), tensor_arg(g, "expected")
    shape, gshape = tuple(a_arg[2]), tuple(g_arg[2])
    if shape != gshape:
        raise CloseError(_custom(msg, f"The values for attribute 'shape' do not match: {shape} != {gshape}."))
    if a_arg[1] != g_arg[1]:
        if check_dtype:
            raise CloseError(_custom(msg, f"The values for attribute 'dtype' do not match: {a_arg[1]} != {g_arg[1]}. "
                                          f"(check_dtype=False compares them with the expected dtype's tolerance)"))
        a = np.ascontiguousarray(_as_numpy(a, a_arg[1]).astype(_np_dtype(g_arg[1])))
        a_arg = tensor_arg(a, "actual")
    r = compare(a, g, method=method, dtype=dtype, third=third, spec=spec, op=op, rtol=rtol, atol=atol,
                name="assert_close")
    if r.passed:
        return r
    head = ["Tensor-likes are not close!", ""] + _headline(a_arg, g_arg, r, shape) + [""] + _kerncheck_lines(r)
    report = "\n".join(head) + "\n\n" + r.text.rstrip("\n")
    short = "\n".join(head) + "\n  full report: assert_close(..., full_report=True), or the exception's .report"
    raise CloseError(_custom(msg, report if full_report else short), r, report)


def _custom(msg, text):
    if callable(msg):
        return msg(text)
    return text if msg is None else msg


__all__ = ["assert_close", "CloseError"]
