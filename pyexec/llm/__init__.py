"""pyexec.llm: generation with LLM programs exported by ExecuTorch.

ExecuTorch's runner API (TextLLMRunner, GenerationConfig, Stats, ...: see
pyexec.llm.runner) and the engine under it (LLMProgram, Session, Sampler).
The engine needs only numpy; tokenizers need the optional dependencies
(`pip install pyexec[llm]`)."""

from ._engine import LLMProgram, Session
from ._sampling import Sampler
from ._tokenizer import StreamDecoder, Tokenizer, apply_chat_template, load_tokenizer
from .multimodal import (
    Audio,
    Image,
    MultimodalInput,
    MultimodalRunner,
    RawAudio,
    make_audio_input,
    make_image_input,
    make_raw_audio_input,
    make_text_input,
    make_token_input,
)
from .runner import GenerationConfig, Stats, TextLLMRunner

__all__ = [
    "Audio",
    "GenerationConfig",
    "Image",
    "MultimodalInput",
    "MultimodalRunner",
    "RawAudio",
    "LLMProgram",
    "Sampler",
    "Session",
    "Stats",
    "StreamDecoder",
    "TextLLMRunner",
    "Tokenizer",
    "apply_chat_template",
    "load_tokenizer",
    "make_audio_input",
    "make_image_input",
    "make_raw_audio_input",
    "make_text_input",
    "make_token_input",
]
