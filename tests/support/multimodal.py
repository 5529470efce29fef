"""A tiny multimodal program in the layout ExecuTorch's multimodal exports
(Llava, Gemma 3, Voxtral) write and its MultimodalRunner reads: methods
token_embedding (ids [1, S] -> [1, S, D]), vision_encoder (image [1, 3, H, W]
-> [1, N, D]), text_decoder (embeddings [1, S, D], cache_position [S] ->
logits [1, S, vocab], its KV cache in mutable buffers) and the metadata
methods, exported from one nn.Module through to_edge_transform_and_lower
with several methods. Random weights; the output rows of the tokenizer's
partial-UTF-8 tokens are zero (support.llm_runner's whole_chars)."""

from __future__ import annotations

import math

import torch

from support.llm_runner import VOCAB, partial_utf8_ids

DIM = 32
MAX_SEQ_LEN = 48
PATCH = 4


class TinyMultimodal(torch.nn.Module):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embedding = torch.nn.Parameter(torch.randn(VOCAB, DIM, generator=g))
        self.patch = torch.nn.Parameter(torch.randn(DIM, 3, PATCH, PATCH, generator=g) / (3 * PATCH * PATCH) ** 0.5)
        self.wq, self.wk, self.wv, self.wo = (
            torch.nn.Parameter(torch.randn(DIM, DIM, generator=g) / DIM ** 0.5) for _ in range(4))
        out = torch.randn(VOCAB, DIM, generator=g) / DIM ** 0.5
        out[partial_utf8_ids()] = 0.0
        self.out = torch.nn.Parameter(out)
        self.register_buffer("k_cache", torch.zeros(1, MAX_SEQ_LEN, DIM))
        self.register_buffer("v_cache", torch.zeros(1, MAX_SEQ_LEN, DIM))

    def token_embedding(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(tokens, self.embedding)

    def vision_encoder(self, image: torch.Tensor) -> torch.Tensor:
        patches = torch.nn.functional.conv2d(image, self.patch, stride=PATCH)  # [1, D, H/P, W/P]
        return patches.flatten(2).transpose(1, 2)  # [1, N, D]

    def text_decoder(self, embeddings: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        q, k, v = embeddings @ self.wq, embeddings @ self.wk, embeddings @ self.wv
        self.k_cache.index_copy_(1, cache_position, k)
        self.v_cache.index_copy_(1, cache_position, v)
        scores = q @ self.k_cache.transpose(1, 2) / math.sqrt(DIM)  # [1, S, MAX]
        visible = torch.arange(MAX_SEQ_LEN).unsqueeze(0) <= cache_position.unsqueeze(1)  # causal, filled part
        scores = scores.masked_fill(~visible, float("-inf"))
        h = embeddings + torch.softmax(scores, dim=-1) @ self.v_cache @ self.wo
        return h @ self.out.t()


class _TokenEmbedding(torch.nn.Module):
    def __init__(self, model: TinyMultimodal) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model.token_embedding(tokens)


class _VisionEncoder(_TokenEmbedding):
    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.model.vision_encoder(image)


class _TextDecoder(_TokenEmbedding):
    def forward(self, embeddings: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.model.text_decoder(embeddings, cache_position)


def multimodal_program(image_size: int = 8, seed: int = 0) -> bytes:
    from executorch.exir import to_edge_transform_and_lower

    model = TinyMultimodal(seed).eval()
    s = torch.export.Dim("s", min=1, max=MAX_SEQ_LEN - 1)
    with torch.no_grad():
        programs = {
            "token_embedding": torch.export.export(
                _TokenEmbedding(model), (torch.zeros(1, 4, dtype=torch.long),),
                dynamic_shapes=({1: s},)),
            "vision_encoder": torch.export.export(
                _VisionEncoder(model), (torch.zeros(1, 3, image_size, image_size),)),
            "text_decoder": torch.export.export(
                _TextDecoder(model), (torch.zeros(1, 4, DIM), torch.arange(4)),
                dynamic_shapes=({1: s}, {0: s})),
        }
    constants = {"get_max_seq_len": MAX_SEQ_LEN, "get_max_context_len": MAX_SEQ_LEN, "get_vocab_size": VOCAB,
                 "use_kv_cache": True, "enable_dynamic_shape": True, "get_eos_ids": [1]}
    edge = to_edge_transform_and_lower(programs, constant_methods=constants)
    return edge.to_executorch().buffer
