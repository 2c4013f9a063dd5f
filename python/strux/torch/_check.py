"""The argument checks at the top of every strux.torch entry, with the plain API's messages.

Each tensor argument is a torch.Tensor (None only where the argument is optional), of a dtype
the op computes, on the device of the call's reference tensor. torch.library's schema would
otherwise answer None with a RuntimeError, and Python attribute reads with AttributeError;
int / bool / complex tensors would reach kernels that cast them. The entries call these only
where the eager fast path did not take the call (valid CUDA tensors never pay for them); under
torch.compile they are traced once and become guards.
"""
import torch
from torch import Tensor

REAL = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
COMPLEX = (torch.complex64, torch.complex128)
REAL_OR_COMPLEX = REAL + COMPLEX
_WANT = {REAL: "a real floating dtype (float16, bfloat16, float32 or float64)",
         COMPLEX: "a complex dtype (complex64 or complex128)",
         REAL_OR_COMPLEX: "a real floating or complex dtype (float16, bfloat16, float32, float64, complex64 "
                          "or complex128)"}


def tensor(name: str, t, dtypes, ref: Tensor = None, ref_name: str = "", optional: bool = False) -> None:
    """t is a Tensor of one of `dtypes` on ref's device (None allowed when optional)."""
    if t is None:
        if optional:
            return
        raise TypeError(f"argument '{name}': expected a torch.Tensor, got None")
    if not isinstance(t, Tensor):
        raise TypeError(f"argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"argument '{name}': expected {_WANT[dtypes]}, got {t.dtype}")
    if ref is not None and t.device != ref.device:
        raise ValueError(f"argument '{name}': expected a tensor on {ref.device} (the device of '{ref_name}'), "
                         f"got {t.device}")


def tensors(dtypes, ref_name: str, ref, optional=(), **others) -> None:
    """ref (required) and each of `others` (None allowed for the names in `optional`) as in
    tensor(), all of `dtypes` and on ref's device."""
    tensor(ref_name, ref, dtypes)
    for name, t in others.items():
        tensor(name, t, dtypes, ref, ref_name, name in optional)


def tensor_list(name: str, ts, dtypes, ref: Tensor, ref_name: str) -> None:
    """A non-empty list or tuple of tensors, each as in tensor() (named name[q])."""
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"argument '{name}': expected a list of tensors, got {type(ts).__name__}")
    if len(ts) == 0:
        raise ValueError(f"argument '{name}': expected a non-empty list of tensors, got an empty one")
    for q, t in enumerate(ts):
        tensor(f"{name}[{q}]", t, dtypes, ref, ref_name)
