"""The model-free part of bench/e2e_ks_mlp.py on the CPU (its models, timm's ViT-S/16 and a
transformers GPT-2 layer, exist only on the GPU machine): the patterns, and the replacement of a
hand-made MLP's projections by KSLinear chains (forward, backward, weight sharing)."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from bench_module import bench_module  # noqa: E402
from strux.patterns import monarch  # noqa: E402

def _mod():
    return bench_module("e2e_ks_mlp")


def test_mlp_pair_patterns():
    E = _mod()
    assert E.mlp_pair(1024, 1024, 32) == monarch(1024, 32)
    for (n_in, n_out), s in E.BLOCK.items():
        p1, p2 = E.mlp_pair(n_in, n_out, s)
        assert p2[0] * p2[2] * p2[3] == n_in and p1[0] * p1[1] * p1[3] == n_out
        assert p1[0] * p1[2] * p1[3] == p2[0] * p2[1] * p2[3]
        assert all(p[1] % 16 == 0 and p[2] % 16 == 0 for p in (p1, p2))  # the fused kernel's shapes
    with pytest.raises(ValueError, match="'s'"):
        E.mlp_pair(384, 1536, 7)


class Conv1D(nn.Module):
    """transformers' Conv1D: weight (in, out), y = x W + b."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return x @ self.weight + self.bias


class _Mlp(nn.Module):
    def __init__(self, conv=False):
        super().__init__()
        self.fc1 = Conv1D(1536, 384) if conv else nn.Linear(384, 1536)
        self.act = nn.GELU()
        self.fc2 = Conv1D(384, 1536) if conv else nn.Linear(1536, 384)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _Attn(nn.Module):
    """A projection of the same name outside an MLP (GPT-2's attn.c_proj): left alone."""

    def __init__(self):
        super().__init__()
        self.fc2 = nn.Linear(384, 384)

    def forward(self, x):
        return self.fc2(x)


@pytest.mark.parametrize("conv", [False, True])
def test_replace_projections_cpu(conv):
    pytest.importorskip("strux.torch")
    E = _mod()
    from strux.torch import KSLinear
    torch.manual_seed(0)
    model = nn.Sequential(_Mlp(conv), _Mlp(conv), _Attn())
    dense_out = model(torch.randn(2, 5, 384)).shape
    ks = nn.Sequential(_Mlp(conv), _Mlp(conv), _Attn())
    assert E.replace_projections(ks, ("fc1", "fc2")) == 4  # not the attention's fc2
    assert all(isinstance(m, KSLinear) for n, m in ks.named_modules() if n.endswith(("fc1", "fc2")) and n[0] != "2")
    assert isinstance(ks[2].fc2, nn.Linear)
    assert ks[0].fc1.in_features == 384 and ks[0].fc1.out_features == 1536
    x = torch.randn(2, 5, 384, requires_grad=True)
    y = ks(x)
    assert y.shape == dense_out
    y.square().sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in ks.parameters())
    fused = nn.Sequential(_Mlp(conv), _Mlp(conv), _Attn())
    E.replace_projections(fused, ("fc1", "fc2"), options={"chain": "fused"}, share_from=ks)
    fused[2].load_state_dict(ks[2].state_dict())  # not replaced: its own random weights
    with torch.no_grad():
        assert torch.allclose(fused(x), ks(x))  # the CPU ignores GPU options: the same weights
