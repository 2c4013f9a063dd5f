"""The models of the experiment: token embedding, L pre-norm residual blocks (sequence mixer,
then a 2x MLP), a classifier per position. The mixer is one of strux.torch's state-space layers
(CirculantSSM, DiagonalSSM) or, for the LSTM baseline, the whole stack is an nn.LSTM."""
from torch import nn

import strux.torch as st

# name -> (description, mixer factory (d, n) -> module); "lstm" is handled by Net
MIXERS = {
    "circ": ("CirculantSSM p=1 (Fourier form)", lambda d, n: st.CirculantSSM(d, n, p=1)),
    "block4": ("CirculantSSM p=4 (block-circulant, k=n/4)", lambda d, n: st.CirculantSSM(d, n, p=4)),
    "real01": ("DiagonalSSM real [0,1] (Mamba-style)", lambda d, n: st.DiagonalSSM(d, n, kind="real01")),
    "real11": ("DiagonalSSM real [-1,1]", lambda d, n: st.DiagonalSSM(d, n, kind="real11")),
    "complex": ("DiagonalSSM complex, input-dependent phase (n/2 channels)",
                lambda d, n: st.DiagonalSSM(d, n, kind="complex")),
    "lstm": ("LSTM (nn.LSTM, hidden d)", None),
}


class Block(nn.Module):
    def __init__(self, mixer, d):
        super().__init__()
        self.norm1, self.mixer = nn.LayerNorm(d), mixer
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Net(nn.Module):
    def __init__(self, model: str, vocab: int = 8, classes: int = 8, d: int = 64, n: int = 64, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        if model == "lstm":
            self.lstm = nn.LSTM(d, d, num_layers=layers, batch_first=True)
            self.blocks = None
        else:
            self.lstm = None
            self.blocks = nn.ModuleList(Block(MIXERS[model][1](d, n), d) for _ in range(layers))
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.lstm is not None:
            x = self.lstm(x)[0]
        else:
            for b in self.blocks:
                x = b(x)
        return self.head(x)


def count_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())
