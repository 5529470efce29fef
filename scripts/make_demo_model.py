"""Regenerates pyexec/demo/decoder.pte, the small decoder the demo runs.

A two-layer decoder (RMSNorm, rotary embeddings, attention over a KV cache,
SiLU MLP) exported by executorch with its KV caches as unplanned graph inputs
(alloc_graph_input=False) updated in place (run_reinplace_pass=True), so the
caller owns the caches and each step writes one row of them. The weights are
random (seeded): the demo is about the runtime, not the text. Before writing
the file the script checks a few decode steps against torch eager.

    python scripts/make_demo_model.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.export import export_program  # noqa: E402

VOCAB, DIM, HEADS, LAYERS, MAX_SEQ = 96, 64, 4, 2, 128
HEAD_DIM = DIM // HEADS


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2 = RMSNorm(DIM), RMSNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        self.up = nn.Linear(DIM, 2 * DIM, bias=False)
        self.gate = nn.Linear(DIM, 2 * DIM, bias=False)
        self.down = nn.Linear(2 * DIM, DIM, bias=False)

    def forward(self, x, pos, cos, sin, mask, k_cache, v_cache):  # type: ignore[no-untyped-def]
        q, k, v = self.qkv(self.n1(x)).view(1, 1, 3, HEADS, HEAD_DIM).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [1, H, 1, Dh]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(1, 1, DIM))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM // 2).float() / (HEAD_DIM // 2)))
        self.register_buffer("freqs", torch.outer(torch.arange(MAX_SEQ).float(), inv), persistent=False)

    def forward(self, token, pos, k0, v0, k1, v1):  # type: ignore[no-untyped-def]
        x = self.emb(token)  # [1, 1, DIM]
        f = self.freqs.index_select(0, pos)  # [1, Dh/2]
        cos, sin = f.cos(), f.sin()
        mask = (torch.arange(MAX_SEQ) <= pos).view(1, 1, 1, MAX_SEQ)
        x = self.layers[0](x, pos, cos, sin, mask, k0, v0)
        x = self.layers[1](x, pos, cos, sin, mask, k1, v1)
        return self.head(self.norm(x)).view(VOCAB)


def example_inputs() -> tuple[torch.Tensor, ...]:
    cache = [torch.zeros(1, HEADS, MAX_SEQ, HEAD_DIM) for _ in range(2 * LAYERS)]
    return (torch.tensor([[1]]), torch.tensor([0]), *cache)


def main() -> None:
    import pyexec

    torch.manual_seed(0)
    model = Decoder().eval().requires_grad_(False)
    pte = export_program(model, example_inputs(), alloc_graph_input=False, alloc_graph_output=False, reinplace=True)
    # Check a few greedy steps against torch eager before shipping the file.
    method = pyexec.load(pte).load_method("forward")
    ours, ref = list(example_inputs()[2:]), list(example_inputs()[2:])
    token = 1
    for step in range(8):
        args = (torch.tensor([[token]]), torch.tensor([step]))
        *_, logits = method.execute([*args, *ours])
        expected = model(*args, *ref)
        torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
        token = int(expected.argmax())
    out = ROOT / "pyexec" / "demo" / "decoder.pte"
    out.write_bytes(pte)
    print(f"{out.relative_to(ROOT)}: {len(pte)} bytes; 8 steps match torch eager")


if __name__ == "__main__":
    main()
