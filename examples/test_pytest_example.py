"""A pytest file to copy: a bf16 matmul kernel checked against an f32 golden with kerncheck's pytest
plugin (installed with the package; from a source tree: `pytest -p kerncheck.pytest_plugin`).

    pytest examples/test_pytest_example.py                       # 3 passed, 1 skipped
    KERNCHECK_GOLDEN=g.safetensors KERNCHECK_CANDIDATE=c.safetensors KERNCHECK_NOISE=n1.safetensors,n2.safetensors \\
        pytest examples/test_pytest_example.py -k model          # the model-level check (kerncheck record files)

docs/python.md, "pytest", shows what a failure prints.
"""
import os

import pytest

torch = pytest.importorskip("torch")


def my_bf16_matmul(a, b):
    """The kernel under test: bf16 inputs and output, f32 accumulation (torch's CPU bf16 GEMM)."""
    return a @ b


def bf16_accumulating_matmul(a, b):
    """A broken kernel: it keeps the running sum in bf16 (rounded after every rank-1 update)."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
    for k in range(a.shape[1]):
        acc = (acc.float() + a[:, k:k + 1].float() * b[k:k + 1, :].float()).to(torch.bfloat16)
    return acc


@pytest.fixture
def inputs():
    """bf16 inputs: the golden is computed from the very values the kernel reads."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 512, generator=g).bfloat16(), torch.randn(512, 32, generator=g).bfloat16()


def golden_of(a, b):
    return a.double() @ b.double()  # the exact product of the bf16 inputs


def test_bf16_matmul(kerncheck, inputs):
    a, b = inputs
    # The golden is f64; rounded to the kernel's output dtype, the tolerances are bf16's (the expected
    # dtype's: with check_dtype=False an f32/f64 expected would apply f32/f64 tolerances).
    kerncheck.assert_close(my_bf16_matmul(a, b), golden_of(a, b).bfloat16())


def test_bf16_accumulation_is_caught(kerncheck, inputs):
    a, b = inputs
    with pytest.raises(AssertionError, match="Mismatched elements"):
        kerncheck.assert_close(bf16_accumulating_matmul(a, b), golden_of(a, b).bfloat16())


@pytest.mark.kerncheck(rtol=1e-2, atol=1e-2)  # torch's rule: every element within atol + rtol*|expected|
def test_with_torch_tolerances(kerncheck, inputs):
    a, b = inputs
    kerncheck.assert_close(my_bf16_matmul(a, b).float(), golden_of(a, b).float())


@pytest.mark.skipif(not os.environ.get("KERNCHECK_GOLDEN"), reason="set KERNCHECK_GOLDEN, KERNCHECK_CANDIDATE "
                                                                   "and KERNCHECK_NOISE to run the model check")
def test_model(kerncheck):
    # A model-level check: the candidate's next-token distributions against the golden, read against the
    # noise floor (equally correct implementations). FAIL fails the test; INCONCLUSIVE skips it.
    noise = [p for p in os.environ.get("KERNCHECK_NOISE", "").split(",") if p]
    kerncheck.test(os.environ["KERNCHECK_CANDIDATE"], golden=os.environ["KERNCHECK_GOLDEN"], noise=noise)
