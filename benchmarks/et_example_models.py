"""ExecuTorch's int8 example models (the list in executorch/examples/xnnpack,
with the quantization it names for each) at the sizes and inputs its
examples/models classes give them, built here with random weights, since
those classes download pretrained ones:

- resnet50, ic3 (Inception v3, torchvision, with the input transform its
  pretrained weights switch on), dl3 (DeepLabV3-ResNet50 with its auxiliary
  head: two outputs) at 1 x 3 x 224 x 224; ic4 (timm's Inception v4) at 299;
  edsr (torchsr's r16f64 at scale 2, rebuilt in tests/support/et_examples.py)
  at 224: static int8, per-channel weights.
- vit (torchvision's vit_b_16 at 224), w2l (torchaudio's Wav2Letter over
  waveforms, 4096 classes, a batch of 10 x 700 samples; rebuilt here, since
  torchaudio does not install beside this torch), mobilebert (transformers'
  MobileBertModel at its default configuration over the 8 tokens of the
  example's sentence) and llama2 (ExecuTorch's own Llama2Model at its
  defaults: one layer of dimension 4096 over its example's 127 tokens, no
  KV cache): dynamic int8.

Weights are re-initialised as tv_models.py does (kaiming-normal, measured
batch-norm statistics), so that every layer carries a signal. Each builder
raises RuntimeError naming what is missing when a package cannot be imported
(torchvision, timm, transformers: requirements-bench.txt)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import tv_models
from torch import nn

Built = tuple[nn.Module, tuple[torch.Tensor, ...]]


def _torchvision() -> Any:
    reason = tv_models.available()
    if reason:
        raise RuntimeError(f"torchvision is not available: {reason}")
    return tv_models._models()


def _image(side: int = 224) -> tuple[torch.Tensor, ...]:
    return (torch.randn(1, 3, side, side),)


def resnet50() -> Built:
    net = _torchvision().resnet50(weights=None)
    inputs = _image()
    tv_models.reinit(net, inputs[0])
    return net, inputs


def ic3() -> Built:
    # the auxiliary classifier only runs in training (and needs 299 x 299 there): left out
    net = _torchvision().inception_v3(weights=None, aux_logits=False, transform_input=True, init_weights=False)
    inputs = _image()
    tv_models.reinit(net, inputs[0])
    return net, inputs


def dl3() -> Built:
    models = _torchvision()
    net = models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, aux_loss=True)
    inputs = _image()
    tv_models.reinit(net, inputs[0])
    return net, inputs


def ic4() -> Built:
    _torchvision()  # timm imports torchvision
    try:
        import timm
    except ImportError as e:
        raise RuntimeError(f"timm is not available: {e}") from e
    net = timm.create_model("inception_v4", pretrained=False)
    inputs = _image(299)
    tv_models.reinit(net, inputs[0])
    return net, inputs


def edsr() -> Built:
    from support.et_examples import EDSR, initialise

    return initialise(EDSR(16, 64)), _image()


def vit() -> Built:
    net = _torchvision().vit_b_16(weights=None)
    inputs = _image()
    tv_models.reinit(net, inputs[0])
    return net, inputs


class Wav2Letter(nn.Module):
    """torchaudio's Wav2Letter for waveform input: a strided 250-tap
    front end, then its acoustic model (a 48-tap stride-2 convolution, seven
    7-tap ones, a 32-tap one to 2000 channels and two 1 x 1), each followed
    by a ReLU, and a log-softmax over the classes."""

    def __init__(self, classes: int = 4096, features: int = 1) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv1d(features, 250, 250, stride=160, padding=45), nn.ReLU()]
        layers += [nn.Conv1d(250, 250, 48, stride=2, padding=23), nn.ReLU()]
        for _ in range(7):
            layers += [nn.Conv1d(250, 250, 7, padding=3), nn.ReLU()]
        layers += [nn.Conv1d(250, 2000, 32, padding=16), nn.ReLU(), nn.Conv1d(2000, 2000, 1), nn.ReLU()]
        layers += [nn.Conv1d(2000, classes, 1), nn.ReLU()]
        self.acoustic_model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.log_softmax(self.acoustic_model(x), dim=1)


def w2l() -> Built:
    net = Wav2Letter()
    inputs = (torch.randn(10, 1, 700),)
    tv_models.reinit(net, inputs[0])
    return net, inputs


def mobilebert() -> Built:
    # transformers imports torchvision where it is installed: its workaround first
    tv_models.available()
    try:
        from transformers import MobileBertConfig, MobileBertModel
    except ImportError as e:
        raise RuntimeError(f"transformers is not available: {e}") from e
    net = MobileBertModel(MobileBertConfig(), add_pooling_layer=True)
    net.config.return_dict = False
    # the example's input: the tokenizer's ids for "Hello, my dog is cute" ([CLS] ... [SEP])
    ids = torch.tensor([[101, 7592, 1010, 2026, 3899, 2003, 10140, 102]])
    return net.eval(), (ids,)


def llama2() -> Built:
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model import Llama2Model

    # Without a checkpoint, Llama2Model builds its transformer on the meta
    # device and then leaves the norms' weights and the RoPE and mask buffers
    # uninitialised (NaN outputs); the same transformer built on the CPU has
    # torch's initialisation everywhere.
    example = Llama2Model()
    net: nn.Module = construct_transformer(example.get_eager_model().params)
    return net.eval(), tuple(example.get_example_inputs())


STATIC: dict[str, Callable[[], Built]] = {
    "resnet50": resnet50, "ic3": ic3, "ic4": ic4, "edsr": edsr, "dl3": dl3,
}
DYNAMIC: dict[str, Callable[[], Built]] = {
    "vit": vit, "w2l": w2l, "mobilebert": mobilebert, "llama2": llama2,
}
