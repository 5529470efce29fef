"""The loaded model behind the server and the worker: program (one weight
load), tokenizer, chat template and the scheduler that runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._openai import Prepared, ServeModel
from ._scheduler import Scheduler


class Backend:
    """The loaded model: program, tokenizer, chat template and scheduler."""

    def __init__(self, model_path: str, tokenizer_path: str, *, data_path: str | None = None,
                 model_id: str | None = None, chat_template: str | None = None, max_sessions: int = 4,
                 max_queue: int = 64, prefill_chunk: int = 128,
                 max_named: int | None = None) -> None:
        from ._engine import LLMProgram
        from ._sampling import Sampler
        from ._tokenizer import StreamDecoder, apply_chat_template, load_tokenizer

        self.program = LLMProgram(model_path, data_path)
        self.tokenizer = load_tokenizer(tokenizer_path)
        self._sampler_cls = Sampler
        template_text = Path(chat_template).read_text() if chat_template else None
        tokenizer_dir = str(Path(tokenizer_path).resolve().parent)
        vocab = self.program.vocab_size
        # BOS: the program's (its export metadata), else the tokenizer's; one outside the vocabulary is none
        valid = [b for b in (self.program.bos_id, self.tokenizer.bos_id)
                 if b is not None and b >= 0 and (vocab is None or b < vocab)]
        bos = valid[0] if valid else None
        eos = {e for e in self.program.eos_ids if vocab is None or e < vocab}
        if self.tokenizer.eos_id is not None:
            eos.add(self.tokenizer.eos_id)
        self.eos_ids = eos
        tok = self.tokenizer

        def render(messages: list[dict[str, Any]]) -> str:
            return apply_chat_template(messages, template_text, tokenizer_dir, add_generation_prompt=True)

        self.model = ServeModel(
            model_id=model_id or Path(model_path).stem,
            max_context=int(self.program.max_context_len),
            vocab_size=vocab,
            encode=lambda text: list(tok.encode(text, bos=0, eos=0)),
            decode=lambda ids: tok.decode(ids),
            render_chat=render,
            bos_id=bos,
        )
        self.scheduler = Scheduler(self.program, tok, lambda: StreamDecoder(tok), eos_ids=eos,
                                   max_sessions=max_sessions, max_queue=max_queue, prefill_chunk=prefill_chunk,
                                   max_named=max_named)

    def sampler(self, p: Prepared) -> Any:
        return self._sampler_cls(temperature=p.temperature, top_k=p.top_k, top_p=p.top_p, seed=p.seed)

    def close(self) -> None:
        self.scheduler.close()
