"""torchvision's model definitions for the zoo benchmark (bench_zoo.py), with
random weights re-initialised so that every layer carries a signal.

The torchvision wheel that installs beside torch 2.13.0+cpu (0.28, from
requirements-bench.txt) is built for CUDA torch: its C extension does not
load, and `import torchvision` then fails registering a fake kernel for
`torchvision::nms`. Defining the schemas of `torchvision::nms` and
`torchvision::qnms` first (no kernels: nothing here calls them) lets the
pure-Python model definitions import. `available()` says whether that worked.

torchvision's default random initialisation leaves several nets vacuous
(googlenet's truncated normal at std 0.01 shrinks the signal to nothing, so it
returns its classifier's bias; convnext scales every block by 1e-6). `build`
draws convolution and linear weights kaiming-normal (fan in), biases and
normalisation affines small and random, sets layer scales to 0.5, and then
measures every batch norm's running statistics on a batch of random inputs,
so that in eval mode each one normalises real activations with non-trivial
statistics."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

# name -> (torchvision builder name, input side)
MODELS: dict[str, tuple[str, int]] = {
    "resnet18": ("resnet18", 224),
    "deeplabv3_mobilenet_v3_large": ("deeplabv3_mobilenet_v3_large", 224),
    "efficientnet_b0": ("efficientnet_b0", 224),
    "lraspp_mobilenet_v3_large": ("lraspp_mobilenet_v3_large", 224),
    "convnext_tiny": ("convnext_tiny", 128),
    "densenet121": ("densenet121", 160),
    "mobilenet_v3_small": ("mobilenet_v3_small", 224),
    "maxvit_t": ("maxvit_t", 224),
    "mobilenet_v2": ("mobilenet_v2", 224),
    "googlenet": ("googlenet", 224),
    "regnet_y_400mf": ("regnet_y_400mf", 224),
}

SEGMENTATION = ("deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large")


@functools.cache
def _models() -> Any:
    """torchvision.models, or the reason it cannot be imported (a string)."""
    try:
        library: Any = torch.library  # untyped
        lib = library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            try:
                lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            except RuntimeError:  # already defined (the C extension loaded after all)
                pass
        _models_lib.append(lib)  # a Library unregisters its definitions when collected
        import torchvision.models
    except Exception as e:  # noqa: BLE001 - any failure: the rows are skipped
        return f"{type(e).__name__}: {e}"
    return torchvision.models


_models_lib: list[Any] = []


def available() -> str | None:
    """None when torchvision's models import, else why they do not."""
    m = _models()
    return m if isinstance(m, str) else None


class _SegmentationOut(nn.Module):
    """The segmentation nets return a dict; this returns its "out" tensor."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)["out"]
        return out


def reinit(module: nn.Module, example: torch.Tensor) -> None:
    for m in module.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.uniform_(m.bias, -0.1, 0.1)
        elif isinstance(m, (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)):
            if m.weight is not None:
                nn.init.uniform_(m.weight, 0.5, 1.5)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -0.2, 0.2)
    for name, p in module.named_parameters():
        if name.endswith("layer_scale"):  # convnext: 1e-6 makes each block an identity
            nn.init.constant_(p, 0.5)
        elif "relative_position_bias_table" in name:  # maxvit: zeros
            nn.init.normal_(p, 0.0, 0.5)
    # Running statistics measured on random inputs (cumulative average).
    bns = [m for m in module.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    if bns:
        module.train()
        with torch.no_grad():
            module(torch.randn(4, *example.shape[1:]))
    module.eval().requires_grad_(False)


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model `name` (a key of MODELS), re-initialised and in eval mode,
    and an input of the issue's size. Raises RuntimeError when torchvision
    cannot be imported."""
    models = _models()
    if isinstance(models, str):
        raise RuntimeError(f"torchvision is not available: {models}")
    builder, side = MODELS[name]
    kwargs: dict[str, Any] = {"weights": None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=False)
    if name in SEGMENTATION:
        kwargs["weights_backbone"] = None
    where = models.segmentation if name in SEGMENTATION else models
    net: nn.Module = getattr(where, builder)(**kwargs)
    example = torch.randn(1, 3, side, side)
    reinit(net, example)
    if name in SEGMENTATION:
        net = _SegmentationOut(net).eval()
    return net, (example,)


def maker(name: str) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    return lambda: build(name)


def health(name: str) -> str:
    """A line on the signal: the output's spread, and how much it changes
    between two random inputs relative to that spread (near 0: vacuous)."""
    torch.manual_seed(0)
    net, (x,) = build(name)
    with torch.no_grad():
        a, b = net(x), net(torch.randn_like(x))
    spread = float(a.std())
    change = float((a - b).std()) / max(spread, 1e-30)
    return f"{name}: output std {spread:.3g}, change between inputs {change:.3g}, finite {math.isfinite(spread)}"


if __name__ == "__main__":
    import sys

    reason = available()
    if reason:
        sys.exit(f"torchvision unavailable: {reason}")
    for n in sys.argv[1:] or MODELS:
        print(health(n), flush=True)
