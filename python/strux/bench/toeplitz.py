"""toeplitz benchmark cases: BlockToeplitz matvec / rmatvec vs the plain numpy FFT recipe.

Both sides precompute the operator spectrum once (outside the timed call):
    Fhat = np.fft.rfft(blocks, n=2*Nt, axis=0)                       (complex64)
    matvec:  np.fft.irfft(np.einsum('fdm,fm->fd', Fhat, np.fft.rfft(m, n=2*Nt, axis=0)),
                          n=2*Nt, axis=0)[:Nt]
    rmatvec: np.fft.irfft(np.einsum('fdm,fd->fm', Fhat.conj(), np.fft.rfft(d, n=2*Nt, axis=0)),
                          n=2*Nt, axis=0)[:Nt]
(the conjugate is precomputed too). A second baseline does the same with scipy.fft (workers=-1,
every core) and a batched np.matmul per frequency. The float64 reference is the numpy recipe in
float64.
Bytes: the stored spectrum (nfreq*Nd*Nm complex) plus the vector read and the vector written,
the least any product must move.
"""
from __future__ import annotations

import math

import numpy as np

from .case import Case


def _fft_flops(n: int) -> float:
    return 2.5 * n * math.log2(max(n, 2))  # real FFT of length n, the usual 5/2 n log2 n count


def _case(op_name: str, Nt: int, Nd: int, Nm: int, dtype=np.float32, seed=0) -> Case:
    import strux

    rng = np.random.default_rng(seed)
    blocks = (rng.standard_normal((Nt, Nd, Nm)) / math.sqrt(Nm * Nt)).astype(dtype)
    n = 2 * Nt
    cdt = np.complex64 if np.dtype(dtype) == np.float32 else np.complex128
    Fhat = np.fft.rfft(blocks, n=n, axis=0).astype(cdt)
    Fhat_conj = Fhat.conj()
    Fhat64 = np.fft.rfft(blocks.astype(np.float64), n=n, axis=0)
    op = strux.BlockToeplitz(blocks)
    adjoint = op_name == "rmatvec"
    x = rng.standard_normal((Nt, Nd if adjoint else Nm)).astype(dtype)
    x64 = x.astype(np.float64)

    if adjoint:
        run = lambda: op.rmatvec(x)  # noqa: E731
        baseline = lambda: np.fft.irfft(np.einsum("fdm,fd->fm", Fhat_conj, np.fft.rfft(x, n=n, axis=0)),  # noqa: E731
                                        n=n, axis=0)[:Nt]
        reference = lambda: np.fft.irfft(np.einsum("fdm,fd->fm", Fhat64.conj(), np.fft.rfft(x64, n=n, axis=0)),  # noqa: E731
                                         n=n, axis=0)[:Nt]
    else:
        run = lambda: op.matvec(x)  # noqa: E731
        baseline = lambda: np.fft.irfft(np.einsum("fdm,fm->fd", Fhat, np.fft.rfft(x, n=n, axis=0)),  # noqa: E731
                                        n=n, axis=0)[:Nt]
        reference = lambda: np.fft.irfft(np.einsum("fdm,fm->fd", Fhat64, np.fft.rfft(x64, n=n, axis=0)),  # noqa: E731
                                         n=n, axis=0)[:Nt]

    import scipy.fft as sf

    F_sp = Fhat_conj.transpose(0, 2, 1) if adjoint else Fhat  # (nfreq, n_out, n_in)
    scipy_recipe = lambda: sf.irfft(np.matmul(F_sp, sf.rfft(x, n=n, axis=0, workers=-1)[:, :, None])[:, :, 0],  # noqa: E731
                                    n=n, axis=0, workers=-1)[:Nt]
    nfft = op._plan.nfft
    nfreq = nfft // 2 + 1
    item = np.dtype(dtype).itemsize
    nbytes = 2 * item * nfreq * Nd * Nm + item * Nt * (Nd + Nm)
    flops = 8.0 * nfreq * Nd * Nm + (Nd + Nm) * _fft_flops(nfft)
    return Case(
        family="toeplitz",
        name=f"{op_name} Nt={Nt} Nd={Nd} Nm={Nm} R=1 time-major {np.dtype(dtype).name}",
        strux=run,
        baseline=baseline,
        baseline_name="numpy rfft(2Nt) + einsum over precomputed Fhat",
        bytes=nbytes,
        flops=flops,
        tol=1e-4,
        reference=reference,
        extra={"nfft": nfft, "Nt": Nt, "Nd": Nd, "Nm": Nm},
        more_baselines=[("scipy.fft rfft(2Nt) workers=-1 + matmul over precomputed Fhat", scipy_recipe)],
    )


def cases(quick: bool = False) -> list[Case]:
    Nt, Nd, Nm = (64, 4, 32) if quick else (512, 16, 256)
    return [_case("matvec", Nt, Nd, Nm), _case("rmatvec", Nt, Nd, Nm)]
