"""One benchmark case: strux and its baselines on the same inputs, in the same process."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass
class Case:
    family: str                      # "fftconv", "toeplitz", "ks", "scan"
    name: str                        # what and at which size, e.g. "causal B=8 H=64 L=8192 float32"
    strux: Callable[[], object]      # runs strux once, returns its output (an array)
    baseline: Callable[[], object]   # runs the plain recipe once (numpy on CPU, PyTorch on GPU)
    baseline_name: str               # e.g. "numpy rfft(2N) recipe"
    bytes: int                       # fewest bytes the operation must move (inputs read + outputs written)
    flops: float = 0.0               # useful floating-point operations (0 when not meaningful)
    tol: float = 1e-4                # max relative error ||strux - ref|| / ||ref|| allowed
    # float64 reference for verification; defaults to the baseline's output
    reference: Optional[Callable[[], object]] = None
    device: str = "cpu"
    extra: dict = field(default_factory=dict)
    # More baselines, (name, fn) each, timed beside the first one; on the CPU the multi-threaded
    # ones (scipy.fft with workers=-1) belong here, so that strux is compared with all cores.
    more_baselines: list = field(default_factory=list)

    def baselines(self) -> list:
        return [(self.baseline_name, self.baseline)] + list(self.more_baselines)
