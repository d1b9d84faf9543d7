"""Tensors to the C++ core without copies: numpy arrays (ml_dtypes bf16/fp8/fp4/int4 too) and CPU torch
tensors are viewed as bytes plus a dtype name; the core parses the name and reads the bytes in place."""
import sys

import numpy as np

# torch dtypes whose bytes the core reads as the named kerncheck dtype (float4_e2m1fn_x2: packed, low
# nibble first, the core's order).
_TORCH_NAMES = {
    "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool",
    "complex32": "complex32", "complex64": "complex64", "complex128": "complex128",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "float8_e8m0fnu": "float8_e8m0",
    "float4_e2m1fn_x2": "float4_e2m1",
}


def _torch():
    return sys.modules.get("torch")


def is_torch_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def tensor_arg(x, role):
    """(uint8 view, dtype name, shape, origin, packed) for _core; TypeError/ValueError when unsupported."""
    if is_torch_tensor(x):
        return _torch_arg(x, role)
    if isinstance(x, np.ndarray):
        a = x
    else:
        try:
            a = np.asarray(x)
        except Exception as e:  # noqa: BLE001 - any failure to convert is a type problem for the caller
            raise TypeError(f"{role}: expected a numpy array, a torch tensor or a sequence of numbers, got "
                            f"{type(x).__name__} ({e})") from None
    if a.dtype.kind == "O" and not isinstance(x, np.ndarray):
        raise TypeError(f"{role}: expected a numpy array, a torch tensor or a sequence of numbers, got "
                        f"{type(x).__name__}")
    origin = f"<{role} ndarray {a.dtype.name}{list(a.shape)}>"
    # ml_dtypes types (bfloat16, float8_*, …) have kind "V"; the core parses their names.
    if a.dtype.kind in "OUSMm" or a.dtype.fields is not None:
        raise TypeError(f"{role}: unsupported dtype {a.dtype} (numeric arrays only)")
    if a.dtype.byteorder == ">":
        raise ValueError(f"{role}: big-endian array ({a.dtype.str}); pass a.astype(a.dtype.newbyteorder('<'))")
    if not a.flags.c_contiguous:
        raise ValueError(f"{role}: array is not C-contiguous (strides {a.strides} for shape {a.shape}); pass "
                         f"np.ascontiguousarray(x) (kerncheck reads tensors in place, without copying)")
    return (a.reshape(-1).view(np.uint8), a.dtype.name, list(a.shape), origin, False)


def _torch_arg(x, role):
    torch = _torch()
    name = str(x.dtype).removeprefix("torch.")
    if name not in _TORCH_NAMES:
        raise TypeError(f"{role}: unsupported torch dtype {x.dtype}; supported: "
                        + ", ".join(f"torch.{n}" for n in _TORCH_NAMES))
    if x.layout != torch.strided:
        raise ValueError(f"{role}: unsupported layout {x.layout}; pass a dense (strided) tensor")
    if x.is_conj() or x.is_neg():
        x = x.resolve_conj().resolve_neg()
    if not x.is_contiguous():
        raise ValueError(f"{role}: tensor is not contiguous (stride {tuple(x.stride())} for shape "
                         f"{tuple(x.shape)}); pass x.contiguous() (kerncheck reads tensors in place)")
    origin = f"<{role} torch.{name}{list(x.shape)} on {x.device}>"
    x = x.detach()
    if x.device.type != "cpu":
        # The core reads host memory: the whole tensor crosses once (kerncheck.torch reduces logits on the
        # device instead; a tensor comparison needs every element).
        x = x.to("cpu")
    shape = list(x.shape)
    if name == "float4_e2m1fn_x2":
        shape = shape[:-1] + [shape[-1] * 2] if shape else [2]
    flat = x.reshape(-1)
    b = flat.view(torch.uint8) if flat.element_size() != 1 or name != "uint8" else flat
    return (b.numpy(), _TORCH_NAMES[name], shape, origin, True)
