"""State-space layers on strux's scans: CirculantSSM (circulant and block-circulant transitions,
parameterized directly in the Fourier domain) and DiagonalSSM (the diagonal baselines).

Both map x (B, T, d) to y (B, T, d) with a state h_t (B, n) per sequence and run the recurrence
through strux.torch's differentiable scans (strux's CPU backend for CPU tensors, its GPU kernels
for CUDA tensors). Residual connections, normalization and the rest of a model are the caller's.
"""
import math

import torch
from torch import Tensor, nn

from ._scan import block_circulant_scan, circulant_scan, diag_scan

__all__ = ["CirculantSSM", "DiagonalSSM", "reference_states"]


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"argument '{name}': expected an int >= {lo}, got {value!r}")
    return value


def _decay_init(bias: Tensor, lo: float = 0.9, hi: float = 0.999) -> None:
    """A sigmoid gate's bias so that the gate starts spread over [lo, hi] (long memory at init,
    as Mamba and LRU initialize their decays)."""
    with torch.no_grad():
        r = torch.linspace(lo, hi, bias.numel(), dtype=torch.float64)
        bias.copy_(torch.log(r / (1 - r)).to(bias.dtype))


class CirculantSSM(nn.Module):
    r"""Input-dependent circulant (p = 1) or block-circulant (p > 1) state-space layer.

    With k = n / p and F = k // 2 + 1 frequencies, per step t and input x_t (d,):

      u_t = W_u x_t                                   (n,)   input projection (B_t x_t)
      r_t = sigmoid(W_r x_t + b_r)                    (p, F) magnitudes in (0, 1)
      s_t = softmax_j(W_s x_t + b_s)                  (p, p) block mixing, rows summing to 1 (p > 1)
      θ_t = W_θ x_t + b_θ                             (p, p, F) phases
      Â_t[i, j, f] = r_t[i, f] · s_t[i, j] · exp(i θ_t[i, j, f])
      A_t = the p x p grid of k x k circulant blocks, block (i, j) = circ(irfft(Â_t[i, j], k))
      h_t = A_t h_{t-1} + u_t,  h_{-1} = h0 (zeros)                (n,), state index i·k + r
      y_t = W_y h_t                                   (d,)   output projection

    For p = 1 (s = 1) this is the proposal's direct Fourier parameterization â_t = r_t e^{iθ_t}:
    A_t = circ(irfft(â_t)), whose eigenvalues are â_t (the real parts at frequency 0 and, for
    even n, n/2, where a real circulant's eigenvalues are real). In the Fourier basis the
    recurrence is n // 2 + 1 independent complex scalar recurrences ĥ_t = â_t ĥ_{t-1} + û_t
    (strux.torch.circulant_scan with fourier=True). For p > 1 it is k // 2 + 1 independent p x p
    complex recurrences ĥ_t[:, f] = Â_t[:, :, f] ĥ_{t-1}[:, f] + û_t[:, f]
    (strux.torch.block_circulant_scan on the blocks' defining vectors irfft(Â_t)).

    Stability by construction: every row of Â_t[:, :, f] has absolute sum r_t[i, f] < 1, so
    ‖Â_t[:, :, f]‖_∞ < 1 at every frequency and products of transitions contract. The block
    mixing s can express block permutations (s one-hot, θ = 0): non-commuting transitions,
    which the pure circulant (a commutative algebra) cannot.

    Args: d_model d, state n, blocks p (n % p == 0), dtype / device of the parameters.
    forward(x, h0=None, return_state=False): y (B, T, d), or (y, h) with h (B, T, n).
    """

    def __init__(self, d_model: int, n: int = 64, p: int = 1, *, dtype=None, device=None):
        super().__init__()
        d, n, p = _check_int("d_model", d_model, 1), _check_int("n", n, 2), _check_int("p", p, 1)
        if n % p:
            raise ValueError(f"argument 'p': expected a divisor of n = {n}, got {p}")
        kw = {"dtype": dtype, "device": device}
        self.d_model, self.n, self.p, self.k = d, n, p, n // p
        self.nfreq = self.k // 2 + 1
        self.in_proj = nn.Linear(d, n, bias=False, **kw)
        self.r_proj = nn.Linear(d, p * self.nfreq, **kw)
        self.theta_proj = nn.Linear(d, p * p * self.nfreq, **kw)
        self.mix_proj = nn.Linear(d, p * p, **kw) if p > 1 else None
        self.out_proj = nn.Linear(n, d, bias=False, **kw)
        _decay_init(self.r_proj.bias)
        with torch.no_grad():
            self.theta_proj.weight.mul_(0.1)
            self.theta_proj.bias.zero_()
            if self.mix_proj is not None:  # starts near the block identity
                self.mix_proj.weight.mul_(0.1)
                self.mix_proj.bias.copy_(4.0 * torch.eye(p, **kw).flatten())

    def _spectra(self, x: Tensor) -> Tensor:
        """p = 1: â = r e^{iθ} (B, T, F) complex, contiguous, as the scan takes it (no views,
        broadcast or copy: each is a host-side op per call, and the layer's forward at small n is
        bound by those, bench/NOTES-gpu-scan-circulant.md "Fourier form")."""
        return torch.polar(torch.sigmoid(self.r_proj(x)), self.theta_proj(x))

    def transition(self, x: Tensor) -> Tensor:
        """Â (B, T, p, p, F) complex: the blocks' half spectra (p = 1: â, (B, T, 1, 1, F))."""
        B, T, _ = x.shape
        p, F = self.p, self.nfreq
        if p == 1:
            return self._spectra(x).view(B, T, 1, 1, F)
        r = torch.sigmoid(self.r_proj(x)).view(B, T, p, 1, F)
        if self.mix_proj is not None:
            r = r * torch.softmax(self.mix_proj(x).view(B, T, p, p), dim=-1).unsqueeze(-1)
        theta = self.theta_proj(x).view(B, T, p, p, F)
        return torch.polar(r.expand(B, T, p, p, F), theta)

    def states(self, x: Tensor, h0: Tensor = None) -> Tensor:
        """h (B, T, n): the spatial states of the recurrence (the scan's output)."""
        u = self.in_proj(x)
        if self.p == 1:
            return circulant_scan(self._spectra(x), u, h0, fourier=True)
        a = torch.fft.irfft(self.transition(x), n=self.k, dim=-1).contiguous()
        return block_circulant_scan(a, u, h0)

    def forward(self, x: Tensor, h0: Tensor = None, return_state: bool = False):
        h = self.states(x, h0)
        y = self.out_proj(h)
        return (y, h) if return_state else y

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n={self.n}, p={self.p}"


_KINDS = ("real01", "real11", "complex")


class DiagonalSSM(nn.Module):
    r"""Input-dependent diagonal state-space layer (the baselines of CirculantSSM), on
    strux.torch.diag_scan. Per step t and input x_t (d,), state h_t, h_{-1} = h0 (zeros):

      kind="real01"  (Mamba-style, eigenvalues in [0, 1]), n real channels:
          a_t = sigmoid(W_a x_t + b_a),        h_t = a_t ⊙ h_{t-1} + W_u x_t,   y_t = W_y h_t
      kind="real11"  (eigenvalues in [-1, 1], Grazzi et al.), n real channels:
          a_t = 2 sigmoid(W_a x_t + b_a) - 1,  h_t = a_t ⊙ h_{t-1} + W_u x_t,   y_t = W_y h_t
      kind="complex" (complex diagonal with input-dependent phase), m = n // 2 complex channels
      (the same n real numbers of state as the other kinds and as CirculantSSM):
          a_t = sigmoid(W_r x_t + b_r) · exp(i (W_θ x_t + b_θ)),
          h_t = a_t ⊙ h_{t-1} + (W_u x_t + i W_v x_t),   y_t = W_y [Re h_t, Im h_t]

    forward(x, h0=None, return_state=False): y (B, T, d), or (y, h) with h (B, T, n) real
    ((B, T, m) complex for kind="complex"); h0 like one step of h.
    """

    def __init__(self, d_model: int, n: int = 64, kind: str = "real01", *, dtype=None, device=None):
        super().__init__()
        d, n = _check_int("d_model", d_model, 1), _check_int("n", n, 2)
        if kind not in _KINDS:
            raise ValueError(f"argument 'kind': expected one of {_KINDS}, got {kind!r}")
        kw = {"dtype": dtype, "device": device}
        self.d_model, self.n, self.kind = d, n, kind
        m = n // 2 if kind == "complex" else n
        self.channels = m
        self.in_proj = nn.Linear(d, n if kind != "complex" else 2 * m, bias=False, **kw)
        self.a_proj = nn.Linear(d, m, **kw)
        self.theta_proj = nn.Linear(d, m, **kw) if kind == "complex" else None
        self.out_proj = nn.Linear(2 * m if kind == "complex" else n, d, bias=False, **kw)
        if kind == "real11":  # 2 sigmoid - 1 in [0.9, 0.999] at init, like the others
            with torch.no_grad():
                r = torch.linspace(0.95, 0.9995, m, dtype=torch.float64)
                self.a_proj.bias.copy_(torch.log(r / (1 - r)).to(self.a_proj.bias.dtype))
        else:
            _decay_init(self.a_proj.bias)
        if self.theta_proj is not None:
            with torch.no_grad():
                self.theta_proj.weight.mul_(0.1)
                self.theta_proj.bias.copy_(torch.linspace(0, math.pi, m, dtype=torch.float64).to(
                    self.theta_proj.bias.dtype))

    def scan_inputs(self, x: Tensor):
        """(a, b): the scan's transition and input, (B, T, channels), real or complex."""
        g = torch.sigmoid(self.a_proj(x))
        u = self.in_proj(x)
        if self.kind == "real01":
            return g, u
        if self.kind == "real11":
            return 2 * g - 1, u
        m = self.channels
        return torch.polar(g, self.theta_proj(x)), torch.complex(u[..., :m], u[..., m:]).contiguous()

    def forward(self, x: Tensor, h0: Tensor = None, return_state: bool = False):
        a, b = self.scan_inputs(x)
        h = diag_scan(a, b, h0)
        y = self.out_proj(torch.cat([h.real, h.imag], dim=-1) if h.is_complex() else h)
        return (y, h) if return_state else y

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n={self.n}, kind={self.kind!r}"


def _dense_transitions(layer, x: Tensor) -> Tensor:
    """A_t (B, T, n, n) (complex (B, T, m, m) for the complex diagonal) in float64, built from the
    layer's parameterization as plain matrices (gathered circulant blocks, no FFT of the state)."""
    if isinstance(layer, DiagonalSSM):
        a, _ = layer.scan_inputs(x)
        return torch.diag_embed(a.detach().to(torch.complex128 if a.is_complex() else torch.float64))
    k = layer.k
    a = torch.fft.irfft(layer.transition(x).detach().to(torch.complex128), n=k, dim=-1)  # (B, T, p, p, k)
    idx = (torch.arange(k, device=x.device)[:, None] - torch.arange(k, device=x.device)[None, :]) % k
    blocks = a[..., idx]                                 # (B, T, p, p, k, k), circ(v)[r, c] = v[(r - c) mod k]
    B, T, p = a.shape[:3]
    return blocks.permute(0, 1, 2, 4, 3, 5).reshape(B, T, p * k, p * k)


@torch.no_grad()
def reference_states(layer, x: Tensor, h0: Tensor = None) -> Tensor:
    """The layer's states by a plain float64 time loop in the spatial domain, h_t = A_t h_{t-1} +
    b_t with dense A_t (O(T n^2): for checking the scans, not for use)."""
    A = _dense_transitions(layer, x)
    b = layer.scan_inputs(x)[1] if isinstance(layer, DiagonalSSM) else layer.in_proj(x)
    b = b.to(A.dtype)
    h = b.new_zeros(b.shape[0], b.shape[2]) if h0 is None else h0.to(A.dtype)
    out = []
    for t in range(b.shape[1]):
        h = torch.einsum("bij,bj->bi", A[:, t], h) + b[:, t]
        out.append(h)
    return torch.stack(out, 1)
