"""pyexec.llm: generation with LLM programs exported by ExecuTorch.

The engine (LLMProgram, Session, Sampler) needs only numpy; tokenizers need
the optional dependencies (`pip install pyexec[llm]`)."""

from ._engine import LLMProgram, Session
from ._sampling import Sampler
from ._tokenizer import StreamDecoder, Tokenizer, apply_chat_template, load_tokenizer

__all__ = [
    "LLMProgram",
    "Sampler",
    "Session",
    "StreamDecoder",
    "Tokenizer",
    "apply_chat_template",
    "load_tokenizer",
]
