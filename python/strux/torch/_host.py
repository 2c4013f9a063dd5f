"""CPU tensors to strux's CPU backend and back, without copies where the memory allows.

The ops' CPU kernels hand torch CPU tensors to the public strux functions (strux.ks_matmul,
strux.diag_scan, strux.fftconv, strux.BlockToeplitz, ...) as numpy views of the same memory and
wrap the numpy results as tensors over the same memory. A copy happens only where the memory
cannot be read as it is: a lazy conjugate / negative view is resolved, a non-contiguous tensor
is made contiguous, and float16 / bfloat16 (numpy has no bfloat16) are cast to float32, which
is what strux computes them in anyway; results are cast back to the caller's dtype.
"""
from typing import Optional

import numpy as np
import torch

_HALF = (torch.float16, torch.bfloat16)


def np_in(t: Optional[torch.Tensor]):
    """A numpy array over t's memory (None stays None); see the module docstring for copies."""
    if t is None:
        return None
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.dtype in _HALF:
        t = t.float()
    return t.contiguous().numpy()


def t_out(a, dtype: torch.dtype) -> Optional[torch.Tensor]:
    """A numpy result as a tensor over the same memory, in `dtype` (a cast copies)."""
    if a is None:
        return None
    a = np.asarray(a)
    if not (a.flags.c_contiguous and a.flags.writeable and a.dtype.isnative):
        a = np.array(a, order="C", dtype=a.dtype.newbyteorder("="))
    t = torch.from_numpy(a)
    return t if t.dtype == dtype else t.to(dtype)


def empty(ref: torch.Tensor) -> torch.Tensor:
    """The 0-element tensor that stands for an absent optional output (custom ops return tensors)."""
    return ref.new_empty(0)


def same_dtype(ref_name: str, ref: torch.Tensor, **others) -> None:
    """The dtype check strux's CPU functions make, before np_in's float32 cast of half types
    could hide a mismatch."""
    for name, t in others.items():
        if t is not None and t.dtype != ref.dtype:
            raise TypeError(f"argument '{name}': expected dtype {ref.dtype} (the dtype of '{ref_name}'), got {t.dtype}")
