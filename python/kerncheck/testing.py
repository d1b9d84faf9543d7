"""pytest helpers: kerncheck.testing.assert_close(actual, golden, ...)."""
from ._compare import compare


def assert_close(actual, golden, *, rtol=None, atol=None, method=None, dtype=None, third=None, spec=None,
                 op=None, msg=None):
    """Raises AssertionError with kerncheck's report when `actual` fails against `golden`.

    Arguments as kerncheck.compare. Like torch.testing.assert_close: rtol and atol go together, and
    `msg` (a string, or a callable taking the default message) replaces the message. Returns the
    CompareResult when it passes.
    """
    r = compare(actual, golden, method=method, dtype=dtype, third=third, spec=spec, op=op, rtol=rtol, atol=atol,
                name="assert_close")
    if not r.passed:
        text = r.text.rstrip("\n")
        if callable(msg):
            text = msg(text)
        elif msg is not None:
            text = msg
        raise AssertionError(text)
    return r
