"""kerncheck: does a kernel change hurt an LLM's accuracy? (docs/python.md)

    kerncheck.compare(actual, golden)              tensor level (docs/compare.md): routed precision criteria
    kerncheck.testing.assert_close(actual, expected) as torch.testing's (shape, dtype), with kerncheck's methods
    pytest -p kerncheck.pytest_plugin             the `kerncheck` fixture and marker (auto-loaded when installed)
    kerncheck.test(golden, candidate, noise=[...]) model level (docs/judge.md): the judge
    kerncheck.torch.record_golden(model, corpus)   goldens/candidates from HF transformers models
    python -m kerncheck compare -i cases.csv --plugin assets.py

A thin layer over the C++ core (kerncheck._core): no method, metric or routing logic lives in Python.
"""
from . import _core
from ._compare import METHODS, CompareResult, Figure, compare
from ._judge import Report, test
from .plugin import Plugin, candidate, list_ops, load_plugin

Error = _core.Error  # bad input (a file, a field, an expected value): a ValueError
__version__ = "0.1.0"


def round_mantissa_(x, bits):
    """Rounds a C-contiguous float32 numpy array in place to `bits` explicit mantissa bits (RNE, exponent
    range unchanged, saturating at the largest finite value): the lab's precision knob."""
    _core.round_mantissa_(x, bits)
    return x


__all__ = ["compare", "METHODS", "CompareResult", "Figure", "test", "Report", "candidate", "load_plugin", "Plugin",
           "list_ops", "Error", "round_mantissa_"]
