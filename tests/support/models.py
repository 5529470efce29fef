"""The reference models of the core release, each a zero-argument factory
returning a ``ModelSpec``; ``export_spec`` lowers one with the real ExecuTorch
exporter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from support.export import export_program


@dataclass
class ModelSpec:
    module: nn.Module
    inputs: tuple
    dynamic_shapes: Any | None = None
    reinplace: bool = False


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


# Programs the profiling and ETDump tests both profile: two outputs of mixed
# operators, and a torch.cond whose taken branch decides what executes.
class Mixed(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(x + y) * 2, torch.cat([x, y])


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def positive(y: torch.Tensor) -> torch.Tensor:
            return y * 2 + 1

        def negative(y: torch.Tensor) -> torch.Tensor:
            return torch.tanh(y) - 3

        return torch.cond(x.sum() > 0, positive, negative, (x,))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=-1)


def mlp() -> ModelSpec:
    torch.manual_seed(0)
    return ModelSpec(MLP().eval(), (torch.randn(4, 16),))


class EncoderBlock(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def transformer() -> ModelSpec:
    torch.manual_seed(0)
    return ModelSpec(EncoderBlock().eval(), (torch.randn(2, 8, 32),))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.adaptive_avg_pool2d(F.relu(self.conv2(x)), 1)
        return self.fc(torch.flatten(x, 1))


def cnn() -> ModelSpec:
    torch.manual_seed(0)
    m = CNN()
    # Non-trivial running stats so batch norm actually does something.
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 1.5)
    return ModelSpec(m.eval(), (torch.randn(2, 3, 16, 16),))


class GRUCellModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(8, 16)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.cell(x, h)


def gru_cell() -> ModelSpec:
    torch.manual_seed(0)
    return ModelSpec(GRUCellModel().eval(), (torch.randn(3, 8), torch.randn(3, 16)))


class DecodeStep(nn.Module):
    """One-token decode step with a caller-owned KV cache (mutated in place)."""

    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 2, max_seq: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = d // heads
        self.max_seq = max_seq
        self.emb = nn.Embedding(vocab, d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab)

    def forward(
        self,
        tokens: torch.Tensor,  # int64 [1, 1]
        pos: torch.Tensor,  # int64 [1]
        k_cache: torch.Tensor,  # float32 [1, H, S, Dh]
        v_cache: torch.Tensor,  # float32 [1, H, S, Dh]
    ) -> torch.Tensor:
        x = self.emb(tokens)  # [1, 1, d]
        b, t, _ = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # [1,H,1,Dh]
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        mask = torch.arange(self.max_seq) <= pos  # bool [S]
        o = F.scaled_dot_product_attention(
            q, k_cache, v_cache, attn_mask=mask.view(1, 1, 1, self.max_seq)
        )  # [1,H,1,Dh]
        o = o.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        return self.out(o)


def decode_step() -> ModelSpec:
    torch.manual_seed(0)
    m = DecodeStep().eval()
    # Frozen weights: with requires_grad=True parameters, to_executorch's
    # LegalizePortableDimOrder pass re-traces `k_cache.copy_(index_put(...))`
    # on fake tensors and autograd rejects the in-place copy into the input
    # ("a leaf Variable that requires grad is being used in an in-place op").
    m.requires_grad_(False)
    tokens = torch.tensor([[7]], dtype=torch.int64)
    pos = torch.tensor([3], dtype=torch.int64)
    k_cache = torch.randn(1, 2, 16, 16)
    v_cache = torch.randn(1, 2, 16, 16)
    return ModelSpec(m, (tokens, pos, k_cache, v_cache))


class CatCumsum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x * 2], dim=0).cumsum(0)


def cat_cumsum_dynamic() -> ModelSpec:
    torch.manual_seed(0)
    n = torch.export.Dim("n", min=1, max=8)
    return ModelSpec(CatCumsum(), (torch.randn(4, 3),), dynamic_shapes=({0: n},))


class CacheUpdate(nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True)


def cache_update() -> ModelSpec:
    torch.manual_seed(0)
    return ModelSpec(
        CacheUpdate(),
        (torch.randn(8, 4), torch.tensor([5], dtype=torch.int64), torch.randn(1, 4)),
        reinplace=True,
    )


class XAndXPlus1(nn.Module):
    def forward(self, x: torch.Tensor):
        return x, x + 1


def x_and_x_plus_1() -> ModelSpec:
    torch.manual_seed(0)
    return ModelSpec(XAndXPlus1(), (torch.randn(3),))


MODELS: dict[str, Callable[[], ModelSpec]] = {
    "mlp": mlp,
    "transformer": transformer,
    "cnn": cnn,
    "gru_cell": gru_cell,
    "decode_step": decode_step,
    "cat_cumsum_dynamic": cat_cumsum_dynamic,
    "cache_update": cache_update,
    "x_and_x_plus_1": x_and_x_plus_1,
}


# ---------------------------------------------------------------------------
# Export / reference execution
# ---------------------------------------------------------------------------


def clone_inputs(inputs: tuple) -> tuple:
    """Copies tensor inputs (execution may mutate cache inputs)."""
    return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)


def export_spec(spec: ModelSpec, *, alloc_graph_input: bool = True, alloc_graph_output: bool = True) -> bytes:
    """Exports a spec with the real ExecuTorch exporter; returns .pte bytes."""
    return export_program(
        spec.module,
        spec.inputs,
        dynamic_shapes=spec.dynamic_shapes,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        reinplace=spec.reinplace,
    )
