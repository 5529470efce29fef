"""Choosing the next token from a step's logits."""

from __future__ import annotations

import math

import numpy as np


class Sampler:
    """Picks a token id from float logits.

    temperature 0: greedy, the argmax (the lowest id among equal maxima, as
    ExecuTorch's sampler). Otherwise softmax(logits / temperature), cut to the
    `top_k` most likely tokens (0: no cut), then to the smallest set whose
    probability reaches `top_p` (1.0: no cut), drawn with numpy's PCG64
    generator seeded by `seed` (None: a fresh seed from the OS). The same seed
    and logits give the same tokens.

    Raises ValueError for a negative or non-finite temperature, a negative
    top_k or a top_p outside (0, 1]."""

    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None) -> None:
        temperature = float(temperature)
        if not math.isfinite(temperature) or temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise ValueError(f"top_k must be an int >= 0 (0: no limit), got {top_k!r}")
        top_p = float(top_p)
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))

    def sample(self, logits: np.ndarray) -> int:
        """The next token for one position's logits ([vocab]; any leading
        dims of size 1 are dropped)."""
        x = np.asarray(logits).reshape(-1)
        if x.size == 0:
            raise ValueError("logits are empty")
        if self.temperature == 0.0:
            return int(np.argmax(x))
        z = x.astype(np.float64) / self.temperature
        z -= np.max(z)
        p = np.exp(z)
        order = np.argsort(-p, kind="stable")
        if self.top_k and self.top_k < order.size:
            order = order[: self.top_k]
        probs = p[order]
        probs /= probs.sum()
        if self.top_p < 1.0:
            cumulative = np.cumsum(probs)
            keep = int(np.searchsorted(cumulative, self.top_p)) + 1
            order, probs = order[:keep], probs[:keep]
            probs = probs / probs.sum()
        return int(order[self._rng.choice(order.size, p=probs)])

    def __repr__(self) -> str:
        return (f"Sampler(temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p}, "
                f"seed={self.seed})")
