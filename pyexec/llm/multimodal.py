"""ExecuTorch's multimodal runner API over pyexec: Image, Audio, RawAudio,
MultimodalInput, the make_*_input helpers and MultimodalRunner, with
ExecuTorch's names, arguments, checks and error messages.

The program layout is the one ExecuTorch's multimodal exports (Llava,
Gemma 3, Voxtral) write: methods `token_embedding` (token ids [1, S] ->
embeddings [1, S, D]), `text_decoder` (embeddings, positions -> logits, the
KV cache in its mutable buffers), and `vision_encoder` (image -> [1, N, D])
and/or `audio_encoder` (audio -> [1, N, D]), plus the metadata methods of a
text program. Each input of a generate() or prefill() call goes through its
encoder (text through the tokenizer and token_embedding) and then through
text_decoder as one call; decoding feeds one token's embedding at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

from .._errors import Error
from .._method import Method
from ._tokenizer import StreamDecoder
from .runner import GenerationConfig, StatsCallback, TokenCallback, _Runner, time_in_ms

Number = Union[int, float]

_TOKEN_EMBEDDING = "token_embedding"
_TEXT_DECODER = "text_decoder"
_VISION_ENCODER = "vision_encoder"
_AUDIO_ENCODER = "audio_encoder"


def _data(data: Any, what: str) -> np.ndarray:
    """A list of ints (uint8) or floats (float32) as ExecuTorch's overloads take them."""
    if isinstance(data, np.ndarray):
        array = data.reshape(-1)
    else:
        values = list(data)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            array = np.asarray(values, dtype=np.int64)
        elif all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in values):
            array = np.asarray(values, dtype=np.float32)
        else:
            raise TypeError(f"{what} data must be a list of ints (uint8) or of floats (float32)")
    if array.dtype.kind in "iu":
        if array.size and (array.min() < 0 or array.max() > 255):
            raise TypeError(f"{what} data holds ints outside 0..255 (uint8)")
        return array.astype(np.uint8)
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    raise TypeError(f"{what} data must be uint8 or float32, got {array.dtype}")


class Image:
    """An image as the vision encoder takes it: data in (channels, height,
    width) order, uint8 or float32."""

    def __init__(self, data: Sequence[Number] | np.ndarray | None = None, width: int = 0, height: int = 0,
                 channels: int = 0) -> None:
        self._data = np.zeros(0, np.uint8) if data is None else _data(data, "image")
        self._width, self._height, self._channels = int(width), int(height), int(channels)

    def is_uint8(self) -> bool:
        return self._data.dtype == np.uint8

    def is_float(self) -> bool:
        return self._data.dtype == np.float32

    @property
    def width(self) -> int:
        return self._width

    @property
    def height(self) -> int:
        return self._height

    @property
    def channels(self) -> int:
        return self._channels

    @property
    def uint8_data(self) -> list[int]:
        if not self.is_uint8():
            raise TypeError("the image holds float data (float_data)")
        return [int(v) for v in self._data]

    @property
    def float_data(self) -> list[float]:
        if not self.is_float():
            raise TypeError("the image holds uint8 data (uint8_data)")
        return [float(v) for v in self._data]

    def tensor(self, with_batch: bool = False) -> np.ndarray:
        """The data as a (channels, height, width) array ((1, C, H, W) with_batch)."""
        shape = (self._channels, self._height, self._width)
        return self._data.reshape(((1,) if with_batch else ()) + shape)

    def __repr__(self) -> str:
        dtype = "uint8" if self.is_uint8() else "float32"
        return f"<Image height={self._height} width={self._width} channels={self._channels} dtype={dtype}>"


class Audio:
    """Preprocessed audio (e.g. a mel spectrogram) as the audio encoder takes
    it: (batch_size, n_bins, n_frames), uint8 or float32."""

    def __init__(self, data: Sequence[Number] | np.ndarray | None = None, batch_size: int = 0, n_bins: int = 0,
                 n_frames: int = 0) -> None:
        self._data = np.zeros(0, np.uint8) if data is None else _data(data, "audio")
        self.batch_size, self.n_bins, self.n_frames = int(batch_size), int(n_bins), int(n_frames)

    def is_uint8(self) -> bool:
        return self._data.dtype == np.uint8

    def is_float(self) -> bool:
        return self._data.dtype == np.float32

    @property
    def data(self) -> list[Number]:
        return [v.item() for v in self._data]

    @property
    def uint8_data(self) -> list[int]:
        return [int(v) for v in self._data] if self.is_uint8() else []

    @property
    def float_data(self) -> list[float]:
        return [float(v) for v in self._data] if self.is_float() else []

    def tensor(self, with_batch: bool = False) -> np.ndarray:
        shape = (self.batch_size, self.n_bins, self.n_frames)
        return self._data.reshape(((1,) if with_batch else ()) + shape)

    def __repr__(self) -> str:
        dtype = "uint8" if self.is_uint8() else "float32"
        return (f"<Audio batch_size={self.batch_size} n_bins={self.n_bins} n_frames={self.n_frames} "
                f"dtype={dtype}>")


class RawAudio:
    """Raw audio samples (uint8), (batch_size, n_channels, n_samples)."""

    def __init__(self, data: Sequence[int] | None = None, batch_size: int = 0, n_channels: int = 0,
                 n_samples: int = 0) -> None:
        self.data: list[int] = [] if data is None else [int(v) for v in _data(data, "raw audio")]
        self.batch_size, self.n_channels, self.n_samples = int(batch_size), int(n_channels), int(n_samples)

    def __repr__(self) -> str:
        return (f"<RawAudio batch_size={self.batch_size} n_channels={self.n_channels} "
                f"n_samples={self.n_samples}>")


class MultimodalInput:
    """One piece of a multimodal prompt: text (a str), pre-tokenized ids (a
    list of ints), an Image, an Audio or a RawAudio."""

    def __init__(self, value: str | Sequence[int] | Image | Audio | RawAudio) -> None:
        if isinstance(value, (str, Image, Audio, RawAudio)):
            self._value: Any = value
        elif isinstance(value, (list, tuple)) and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in value):
            self._value = [int(v) for v in value]
        else:
            raise TypeError(f"MultimodalInput takes a str, a list of token ids, an Image, an Audio or a RawAudio, "
                            f"not {type(value).__name__}")

    def is_text(self) -> bool:
        return isinstance(self._value, str)

    def is_tokens(self) -> bool:
        return isinstance(self._value, list)

    def is_image(self) -> bool:
        return isinstance(self._value, Image)

    def is_audio(self) -> bool:
        return isinstance(self._value, Audio)

    def is_raw_audio(self) -> bool:
        return isinstance(self._value, RawAudio)

    def get_text(self) -> str | None:
        return self._value if self.is_text() else None

    def get_tokens(self) -> list[int] | None:
        return list(self._value) if self.is_tokens() else None

    def get_image(self) -> Image | None:
        return self._value if self.is_image() else None

    def get_audio(self) -> Audio | None:
        return self._value if self.is_audio() else None

    def get_raw_audio(self) -> RawAudio | None:
        return self._value if self.is_raw_audio() else None

    def __repr__(self) -> str:
        if self.is_text():
            text = self._value
            return f'<MultimodalInput type=text content="{text[:50]}{"..." if len(text) > 50 else ""}">'
        kind = {Image: "image", Audio: "audio", RawAudio: "raw_audio"}.get(type(self._value), "tokens")
        return f"<MultimodalInput type={kind}>"


# ---- helpers: tensors (torch or numpy) to inputs -----------------------------------


def _array(tensor: Any, what: str) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """(values, shape, strides in elements) of a torch tensor or numpy array."""
    if hasattr(tensor, "stride") and callable(tensor.stride) and hasattr(tensor, "detach"):
        if getattr(tensor, "device", None) is not None and str(tensor.device) != "cpu":
            raise RuntimeError(f"{what} tensor must be on CPU")
        strides = tuple(int(s) for s in tensor.stride())
        dtype = str(tensor.dtype).replace("torch.", "")
        if dtype not in ("uint8", "float32"):
            return np.zeros(0), tuple(tensor.shape), strides  # the dtype check reports it
        array = tensor.detach().contiguous().numpy()
        return array, tuple(int(s) for s in tensor.shape), strides
    if isinstance(tensor, np.ndarray):
        strides = tuple(s // tensor.itemsize for s in tensor.strides)
        return tensor, tuple(tensor.shape), strides
    raise TypeError(f"{what} must be a torch.Tensor or numpy.ndarray, got {type(tensor).__name__}")


def _dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).replace("torch.", "")


def make_text_input(text: str) -> MultimodalInput:
    """A text input."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return MultimodalInput(text)


def make_token_input(tokens: Sequence[int]) -> MultimodalInput:
    """Pre-tokenized input: a sequence of token ids."""
    return MultimodalInput(list(tokens))


def make_image_input(image_tensor: Any) -> MultimodalInput:
    """An image input from a (C, H, W) or (1, C, H, W) tensor, uint8 or
    float32, laid out contiguously (ExecuTorch's rules).

    Raises RuntimeError naming the dtype, rank, batch, channel count or
    layout that does not fit."""
    if _dtype_name(image_tensor) not in ("uint8", "float32"):
        raise RuntimeError("Unsupported image tensor dtype. Only uint8 and float32 are supported.")
    values, shape, strides = _array(image_tensor, "Image")
    if len(shape) == 4:
        if shape[0] != 1:
            raise RuntimeError("Batch size for 4D image tensor must be 1")
        shape, strides = shape[1:], strides[1:]
    if len(shape) != 3:
        raise RuntimeError("Image tensor must be 3-dimensional (H, W, C) or 4-dimensional (1, H, W, C)")
    c, h, w = shape
    if c not in (3, 4):
        raise RuntimeError("Image must have 3 (RGB) or 4 (RGBA) channels")
    # ExecuTorch's binding takes the (C, H, W) layout only (a channels-last view is refused, whatever its message)
    expected = (h * w, w, 1)
    if any(size > 1 and stride != e for size, stride, e in zip(shape, strides, expected)):
        raise RuntimeError("Image tensor must be contiguous in either channels last (H, W, C) or contiguous "
                           "(C, H, W) format.")
    if isinstance(image_tensor, np.ndarray):
        chw = np.ascontiguousarray(values.reshape(c, h, w))
    else:
        chw = np.ascontiguousarray(values).reshape(c, h, w)
    return MultimodalInput(Image(chw.reshape(-1), w, h, c))


def make_audio_input(audio_tensor: Any) -> MultimodalInput:
    """Preprocessed audio from a (batch_size, n_bins, n_frames) uint8 or float32 tensor."""
    if _dtype_name(audio_tensor) not in ("uint8", "float32"):
        raise RuntimeError("Unsupported audio tensor dtype. Only uint8 and float32 are supported for "
                           "preprocessed audio.")
    values, shape, _ = _array(audio_tensor, "Audio")
    if len(shape) != 3:
        raise RuntimeError("Audio tensor must be 3-dimensional (batch_size, n_bins, n_frames)")
    return MultimodalInput(Audio(np.ascontiguousarray(values).reshape(-1), *shape))


def make_raw_audio_input(audio_tensor: Any) -> MultimodalInput:
    """Raw audio from a (batch_size, n_channels, n_samples) uint8 tensor."""
    shape = tuple(audio_tensor.shape)
    if len(shape) != 3:
        raise RuntimeError("Raw audio tensor must be 3-dimensional (batch_size, n_channels, n_samples)")
    if _dtype_name(audio_tensor) != "uint8":
        raise RuntimeError("Unsupported raw audio tensor dtype. Only uint8 is supported for raw audio.")
    values, shape, _ = _array(audio_tensor, "Raw audio")
    return MultimodalInput(RawAudio([int(v) for v in np.ascontiguousarray(values).reshape(-1)], *shape))


# ---- the runner -------------------------------------------------------------------


class MultimodalRunner(_Runner):
    """Generates text from text, image and audio inputs with a multimodal
    program (ExecuTorch's MultimodalRunner; the layout is described in this
    module's docstring).

    Raises RuntimeError ("Failed to load tokenizer from: ...", "Failed to
    create multimodal runner with model: ...") when a file cannot be used."""

    _kind = "multimodal runner"
    _forward = _TEXT_DECODER

    def __init__(self, model_path: str, tokenizer_path: str, data_path: str | None = None) -> None:
        super().__init__(model_path, tokenizer_path, data_path)
        missing = [m for m in (_TOKEN_EMBEDDING, _TEXT_DECODER) if m not in self.llm.method_names]
        if missing:
            raise RuntimeError(f"Failed to create multimodal runner with model: {model_path} (missing methods "
                               f"{', '.join(missing)}; it has {', '.join(sorted(self.llm.method_names))})")
        self._encoders: dict[str, Method] = {}

    def _method(self, name: str) -> Method:
        method = self._encoders.get(name)
        if method is None:
            method = self._encoders[name] = self.llm.program.load_method(name, output_type="numpy")
        return method

    # text_decoder takes embeddings, so the session's token steps go through token_embedding first
    def _embed(self, tokens: list[int]) -> np.ndarray:
        for t in tokens:
            self.llm.check_token(t)
        (embeddings, *_) = self._method(_TOKEN_EMBEDDING).execute([np.array([tokens], dtype=np.int64)])
        return np.asarray(embeddings)

    def _decode(self, embeddings: np.ndarray) -> np.ndarray:
        """embeddings [1, S, D] through text_decoder at the current position; the last logits."""
        n = int(embeddings.shape[1])
        if n == 0:
            raise ValueError("The encoder returned an empty output.")
        session = self.session
        if session.position + n > self.llm.max_context_len:
            raise ValueError(f"{n} positions at position {session.position} need {session.position + n}; "
                             f"the program's context holds {self.llm.max_context_len} (get_max_context_len)")
        positions = session._positions(session.position, n)
        self.stats.on_model_execution_begin()
        try:
            outputs = session.method.execute([embeddings, positions], clone_outputs=False)
        finally:
            self.stats.on_model_execution_end()
        session.tokens.extend([-1] * n)  # positions held (an image's or audio's have no token id)
        return session._logits(outputs)

    def _feed(self, tokens: list[int]) -> np.ndarray:
        return self._decode(self._embed(tokens))

    def _prefill_input(self, item: MultimodalInput, bos: int, eos: int) -> int:
        if not isinstance(item, MultimodalInput):
            raise TypeError(f"inputs must be MultimodalInput objects, got {type(item).__name__}")
        if item.is_text() or item.is_tokens():
            text = item.get_text()
            tokens = self.tokenizer.encode(text, bos=bos, eos=eos) if text is not None else item.get_tokens() or []
            if not tokens:
                raise ValueError("The encoder returned an empty output.")
            embeddings = self._embed(tokens)
        elif item.is_image():
            image = item.get_image()
            assert image is not None
            embeddings = self._encode_image(image)
        elif item.is_audio():
            audio = item.get_audio()
            assert audio is not None
            embeddings = self._encode_audio(audio)
        else:
            raise ValueError("Unsupported input type (raw audio needs a preprocessor this runner does not have)")
        return int(np.argmax(self._decode(embeddings)))

    def _encoder_input(self, name: str, what: str) -> Any:
        if name not in self.llm.method_names:
            raise ValueError(f"the program has no {name} method for the {what} input")
        info = self.llm.program.method_meta(name).inputs
        if not info or info[0] is None:
            raise ValueError(f"{name} should have at least 1 tensor input")
        return info[0]

    def _encode_image(self, image: Image) -> np.ndarray:
        info = self._encoder_input(_VISION_ENCODER, "image")
        if info.dtype == "float32" and not image.is_float():
            raise ValueError("Model expects float image data, but image has uint8_t data.")
        if info.dtype == "uint8" and not image.is_uint8():
            raise ValueError("Model expects uint8_t image data, but image has float data.")
        if info.dtype not in ("float32", "uint8"):
            raise ValueError(f"Unsupported image encoder input dtype: {info.dtype}")
        (out, *_) = self._method(_VISION_ENCODER).execute([image.tensor(with_batch=len(info.sizes) == 4)])
        return np.asarray(out)

    def _encode_audio(self, audio: Audio) -> np.ndarray:
        info = self._encoder_input(_AUDIO_ENCODER, "audio")
        data = audio.tensor()
        if str(data.dtype) != info.dtype:
            raise ValueError(f"Unsupported audio encoder input dtype: {data.dtype}. Expecting {info.dtype}")
        (out, *_) = self._method(_AUDIO_ENCODER).execute([data])
        return np.asarray(out)

    def _prefill_all(self, inputs: Sequence[MultimodalInput], num_bos: int, num_eos: int,
                     echo: Callable[[MultimodalInput, int], None] | None = None) -> int:
        last = 0
        for i, item in enumerate(inputs):
            if echo is not None:
                echo(item, i)
            first_of_conversation = i == 0 and self.session.position == 0
            bos = num_bos if first_of_conversation and (item.is_text() or item.is_tokens()) else 0
            eos = num_eos if first_of_conversation and (item.is_text() or item.is_tokens()) else 0
            if first_of_conversation and not (item.is_text() or item.is_tokens()) and num_bos > 0:
                bos_id = self.llm.metadata.get("get_bos_id", self.tokenizer.bos_id)
                if bos_id is not None:
                    last = self._prefill_input(MultimodalInput([int(bos_id)] * num_bos), 0, 0)
            last = self._prefill_input(item, bos, eos)
        return last

    def generate(
        self,
        inputs: list[MultimodalInput],
        config: GenerationConfig,
        token_callback: TokenCallback = None,
        stats_callback: StatsCallback = None,
    ) -> None:
        """Prefills each input in turn, then generates as TextLLMRunner does
        (config.echo passes a last text input to the callback).

        Raises RuntimeError("Generation failed: ...")."""
        if not isinstance(config, GenerationConfig):
            raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}")
        try:
            self._generate(list(inputs), config, token_callback, stats_callback)
        except (ValueError, Error) as exc:
            raise RuntimeError(f"Generation failed: {exc}") from exc

    def _generate(self, inputs: list[MultimodalInput], config: GenerationConfig, token_callback: TokenCallback,
                  stats_callback: StatsCallback) -> None:
        if not inputs:
            raise ValueError("MultimodalInput vector cannot be empty")
        _ = self.session  # loaded (and stamped) first
        stats = self.stats

        def emit(text: str) -> None:
            if text and token_callback is not None:
                token_callback(text)

        def echo(item: MultimodalInput, i: int) -> None:
            text = item.get_text()
            if config.echo and i == len(inputs) - 1 and text is not None:
                emit(text)

        stats.inference_start_ms = time_in_ms()
        self._sampler(config)
        first = self._prefill_all(inputs, config.num_bos, config.num_eos, echo)
        self._decode_loop(first, config, emit, StreamDecoder(self.tokenizer), stats_callback,
                          self.session.position)

    def generate_text(self, inputs: list[MultimodalInput], config: GenerationConfig) -> str:
        """generate() with the tokens' text collected and returned."""
        pieces: list[str] = []
        self.generate(inputs, config, pieces.append)
        return "".join(pieces)

    def prefill(self, inputs: list[MultimodalInput]) -> None:
        """Feeds `inputs` (e.g. a chat history) without generating.

        Raises RuntimeError("Prefill failed: ...")."""
        try:
            self._pending = self._prefill_all(list(inputs), 0, 0)
        except (ValueError, Error) as exc:
            raise RuntimeError(f"Prefill failed: {exc}") from exc

    def generate_hf(self, inputs: Any, config: GenerationConfig, image_token_id: int | None = None,
                    token_callback: TokenCallback = None, stats_callback: StatsCallback = None) -> None:
        """generate() on a Hugging Face processor's output (input_ids, and
        pixel_values with image_token_id) or a list of MultimodalInput; the
        arguments in the order of ExecuTorch's generate_hf."""
        self.generate(_hf_inputs(inputs, image_token_id), config, token_callback, stats_callback)

    def generate_text_hf(self, inputs: Any, config: GenerationConfig, image_token_id: int | None = None) -> str:
        return self.generate_text(_hf_inputs(inputs, image_token_id), config)

    def __repr__(self) -> str:
        return "<MultimodalRunner>"


def _hf_inputs(inputs: Any, image_token_id: int | None) -> list[MultimodalInput]:
    """A list of MultimodalInput as it is, else a processor's dict: input_ids
    split around the run of image_token_id, where pixel_values go."""
    if isinstance(inputs, list) and all(isinstance(i, MultimodalInput) for i in inputs):
        return list(inputs)
    if not hasattr(inputs, "__getitem__") or not hasattr(inputs, "__contains__") or "input_ids" not in inputs:
        raise RuntimeError("inputs must be either a BatchFeature (from HF AutoProcessor) or a list of "
                           "MultimodalInput")
    ids = np.asarray(inputs["input_ids"]).reshape(-1).astype(np.int64).tolist()
    if "pixel_values" not in inputs:
        return [make_token_input(ids)]
    if image_token_id is None:
        raise RuntimeError("'pixel_values' provided but missing 'image_token_id'")
    where = [i for i, t in enumerate(ids) if t == image_token_id]
    if not where or where != list(range(where[0], where[-1] + 1)):
        raise RuntimeError("'pixel_values' needs exactly one contiguous run of 'image_token_id' in input_ids")
    out = []
    if where[0] > 0:
        out.append(make_token_input(ids[:where[0]]))
    out.append(make_image_input(inputs["pixel_values"]))
    if where[-1] + 1 < len(ids):
        out.append(make_token_input(ids[where[-1] + 1:]))
    return out


__all__ = [
    "Audio",
    "Image",
    "MultimodalInput",
    "MultimodalRunner",
    "RawAudio",
    "make_audio_input",
    "make_image_input",
    "make_raw_audio_input",
    "make_text_input",
    "make_token_input",
]
