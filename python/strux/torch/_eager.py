"""When an eager call may skip the custom-op dispatch (strux.torch's fftconv, ks and scan functions).

The dispatch costs tens of microseconds of Python per call; a direct kernel call is
indistinguishable from the op when not under torch.compile (checked first, so Dynamo folds it
and traces the op), with no torch function or dispatch mode (tracers, fake tensors,
functionalization, device contexts), no functorch transform and no TorchScript trace. Gradients
then come from torch.autograd.Functions with the registered backward ops' kernels and formulas;
anything else takes the registered ops.
"""
import torch

from .. import _ext

compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
_tf_len = getattr(torch._C, "_len_torch_function_stack", None)
_td_len = getattr(torch._C, "_len_torch_dispatch_stack", None)
_ft_on = getattr(torch._C, "_are_functorch_transforms_active", None)
_tracing = getattr(torch._C, "_get_tracing_state", None)
#: Whether this torch has every query above and strux its GPU backend (no device query here: it
#: would initialise CUDA at import).
LEAN = None not in (compiling, _tf_len, _td_len, _ft_on, _tracing) and bool(_ext.has_cuda)


def plain_eager() -> bool:
    return _tf_len() == 0 and _td_len() == 0 and not _ft_on() and _tracing() is None
