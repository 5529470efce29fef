"""The FastAPI application of `pyexec serve` (imported only when serving:
FastAPI is the optional extra pyexec[serve])."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from ._backend import Backend
from ._openai import Prepared, chunk, new_id, response
from ._scheduler import DoneEvent, ErrorEvent, Event, QueueFull, Request, ServeError, TextEvent

# Text events a generation may run ahead of the client's connection: a slow
# reader pauses its generation (freeing the steps for others), and a client
# that leaves stops it within this many tokens.
MAX_AHEAD = 16


class _Run:
    """One request submitted to the scheduler, its events read on the event loop."""

    def __init__(self, backend: Backend, p: Prepared) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self.queue = queue

        def emit(event: Event) -> None:      # (holds no reference to this object: see below)
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # the loop has closed (shutdown)
                pass

        self.req = Request(p.prompt, p.max_tokens, backend.sampler(p), emit, stop=p.stop, max_ahead=MAX_AHEAD)
        # A response dropped before its body was ever read (the client gone
        # before the stream began) never runs events()'s finally: the
        # generation is cancelled when this object goes.
        weakref.finalize(self, self.req.cancel)
        backend.scheduler.submit(self.req)   # QueueFull -> 429 before any byte is sent

    async def events(self) -> AsyncIterator[Event]:
        try:
            while True:
                event = await self.queue.get()
                if isinstance(event, TextEvent):
                    self.req.consumed()
                yield event
                if not isinstance(event, TextEvent):
                    return
        finally:
            self.req.cancel()   # a no-op once done; else the client went away


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def build_app(backend: Backend) -> Any:
    """The FastAPI application over `backend`."""
    app = FastAPI(title="pyexec LLM server")
    model = backend.model

    def error(exc: ServeError) -> JSONResponse:
        headers = {"Retry-After": "1"} if isinstance(exc, QueueFull) else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(HTTPException)
    async def _http_error(_: HTTPRequest, exc: HTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "method_not_allowed" if exc.status_code == 405 else None
        return error(ServeError(exc.status_code, str(exc.detail), code=kind))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: HTTPRequest, exc: RequestValidationError) -> JSONResponse:
        return error(ServeError(400, f"Invalid request: {exc.errors()}"))

    @app.get("/health")
    async def health() -> Any:
        if not backend.scheduler.alive:
            return JSONResponse({"status": "unavailable"}, status_code=503)
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics() -> dict[str, Any]:
        """Counters: requests, tokens prefilled and served from cached
        sessions, tokens generated, active and waiting requests."""
        return backend.scheduler.stats()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return model.models()

    @app.get("/v1/models/{model_id:path}")
    async def one_model(model_id: str) -> Any:
        if model_id != model.model_id:
            return error(ServeError(404, f"The model '{model_id}' does not exist. This server serves "
                                    f"'{model.model_id}'.", param="model", code="model_not_found"))
        return model.model_card()

    async def body_of(request: HTTPRequest) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ServeError(400, f"The request body is not valid JSON ({exc}).", code="invalid_json") from None

    async def generate(request: HTTPRequest, kind: str) -> Any:
        try:
            body = await body_of(request)
            p = model.chat(body) if kind == "chat" else model.completion(body)
            run = _Run(backend, p)
        except ServeError as exc:
            return error(exc)
        rid = new_id("chatcmpl" if kind == "chat" else "cmpl")
        if p.stream:
            return StreamingResponse(_stream(p, rid, run), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return await _complete(request, p, rid, run)

    async def _complete(request: HTTPRequest, p: Prepared, rid: str, run: _Run) -> Any:
        async def watch() -> None:     # cancels the generation when the client goes away
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    run.req.cancel()
                    return

        watcher = asyncio.create_task(watch())
        try:
            parts: list[str] = []
            async for event in run.events():
                if isinstance(event, TextEvent):
                    parts.append(event.text)
                elif isinstance(event, ErrorEvent):
                    return error(event.error)
                elif isinstance(event, DoneEvent):
                    return JSONResponse(response(p, rid, model.model_id, "".join(parts), event))
            return error(ServeError(500, "generation ended without a result", type="server_error"))
        finally:
            watcher.cancel()

    async def _stream(p: Prepared, rid: str, run: _Run) -> AsyncIterator[str]:
        mid = model.model_id
        if p.kind == "chat":
            yield _sse(chunk(p, rid, mid, None, None, role=True))
        elif p.echo:
            yield _sse(chunk(p, rid, mid, p.echo, None))
        async for event in run.events():
            if isinstance(event, TextEvent):
                yield _sse(chunk(p, rid, mid, event.text, None))
            elif isinstance(event, ErrorEvent):
                yield _sse(event.error.body())
            elif isinstance(event, DoneEvent):
                yield _sse(chunk(p, rid, mid, None if p.kind == "chat" else "", event.finish_reason))
                if p.include_usage:
                    yield _sse(chunk(p, rid, mid, None, None, usage_of=event))
        yield "data: [DONE]\n\n"

    @app.post("/v1/chat/completions")
    async def chat_completions(request: HTTPRequest) -> Any:
        return await generate(request, "chat")

    @app.post("/v1/completions")
    async def completions(request: HTTPRequest) -> Any:
        return await generate(request, "text")

    return app
