"""A scripted stand-in for a model behind the OpenAI Chat Completions API
(`POST /v1/chat/completions`), for `toolcage agent`'s tests: there are no
model weights here, so the model's side of each turn is a script. Standard
library plus the official `openai` package, whose types check every
request the agent sends (`openai.types.chat.CompletionCreateParams*`) and
build every chunk and completion the script replies with. Bound to
127.0.0.1 on an ephemeral port; served from a background thread.

    with ScriptedModel([Turn(calls=[("get_weather", {"city": "Malé"})]),
                        Turn(text="Take an umbrella.")]) as model:
        model.base_url    # "http://127.0.0.1:PORT/v1"
        ...               # run `toolcage agent --base-url ...`
        model.requests    # every request body, validated, in order
        model.problems    # what was wrong with any of them (a test asserts [])

`script` is a list of turns (one per request, in order; a request past
the end is a 500) or a function `(n, body) -> Turn` for the n-th request
(from 0).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import pydantic
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)


@dataclass
class Turn:
    """What the model says to one request.

    `calls`: (name, arguments) pairs, arguments a dict (sent as JSON) or a
    string (sent as it is, to send broken JSON). `usage`: the
    `total_tokens` to report. `status`/`raw`: send this HTTP status or
    these bytes instead of a completion. `delay`: seconds to wait before
    answering; `stall`: seconds to wait after the head and first chunk.
    `cut`: end a streamed reply before `[DONE]`. `stream`: answer
    streamed or not regardless of what was asked."""

    text: str = ""
    calls: list[tuple[str, dict | str]] = field(default_factory=list)
    usage: int | None = None
    status: int = 200
    raw: bytes | None = None
    content_type: str = "application/json"
    delay: float = 0
    stall: float = 0
    cut: bool = False
    stream: bool | None = None


_STREAMING = pydantic.TypeAdapter(CompletionCreateParamsStreaming)
_NOT_STREAMING = pydantic.TypeAdapter(CompletionCreateParamsNonStreaming)


def _force(value):
    """pydantic validates an `Iterable` field lazily, as it is iterated:
    walk everything so every nested part is checked."""
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ValidatorIterator":
        return [_force(v) for v in value]
    return value


def check_request(body: dict) -> list[str]:
    """What is wrong with `body` as a Chat Completions request: the
    official types' errors, and the API's own rule that every tool call
    of an assistant message is answered by a `tool` message before the
    next other message."""
    adapter = _STREAMING if body.get("stream") else _NOT_STREAMING
    try:
        _force(adapter.validate_python(body))
    except pydantic.ValidationError as error:
        return [str(error)]
    problems = []
    waiting: set[str] = set()
    for message in body["messages"]:
        if message["role"] == "tool":
            if message["tool_call_id"] not in waiting:
                problems.append(f"a tool message answers no open call: {message['tool_call_id']}")
            waiting.discard(message["tool_call_id"])
            continue
        if waiting:
            problems.append(f"calls {sorted(waiting)} were not answered before a {message['role']} message")
            waiting = set()
        for call in message.get("tool_calls") or []:
            waiting.add(call["id"])
    for tool in body.get("tools", []):
        parameters = tool["function"].get("parameters", {})
        if parameters.get("type") != "object":
            problems.append(f"tool {tool['function']['name']} parameters are not an object schema")
    return problems


class ScriptedModel:
    def __init__(self, script: list[Turn] | Callable[[int, dict], Turn]):
        self.script = script
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def turn(self, body: dict) -> Turn:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
        if callable(self.script):
            return self.script(n, body)
        if n < len(self.script):
            return self.script[n]
        return Turn(status=500, raw=b'{"error": {"message": "the script has no more turns"}}')


def _chunk(n: int, delta: dict | None = None, usage: int | None = None, finish: str | None = None) -> bytes:
    chunk = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = {"prompt_tokens": usage // 2, "completion_tokens": usage - usage // 2, "total_tokens": usage}
    # Built through the official type, so the shape is the API's.
    text = ChatCompletionChunk.model_validate(chunk).model_dump_json(exclude_unset=True)
    return f"data: {text}\n\n".encode()


def _arguments(arguments: dict | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _stream(n: int, turn: Turn) -> list[bytes]:
    """The turn as server-sent events: the text in small pieces, each call
    split across chunks as the API streams them."""
    events = [_chunk(n, {"role": "assistant", "content": ""})]
    for i in range(0, len(turn.text), 5):
        events.append(_chunk(n, {"content": turn.text[i : i + 5]}))
    for index, (name, arguments) in enumerate(turn.calls):
        text = _arguments(arguments)
        head = {"index": index, "id": f"call_{n}_{index}", "type": "function", "function": {"name": name, "arguments": ""}}
        events.append(_chunk(n, {"tool_calls": [head]}))
        for i in range(0, len(text), 7):
            events.append(_chunk(n, {"tool_calls": [{"index": index, "function": {"arguments": text[i : i + 7]}}]}))
    events.append(_chunk(n, {}, finish="tool_calls" if turn.calls else "stop"))
    if turn.usage is not None:
        events.append(_chunk(n, None, usage=turn.usage))
    if not turn.cut:
        events.append(b"data: [DONE]\n\n")
    return events


def _completion(n: int, turn: Turn) -> bytes:
    message: dict = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": _arguments(a)}}
            for i, (name, a) in enumerate(turn.calls)
        ]
    completion = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.calls else "stop"}],
    }
    if turn.usage is not None:
        completion["usage"] = {"prompt_tokens": 0, "completion_tokens": turn.usage, "total_tokens": turn.usage}
    return ChatCompletion.model_validate(completion).model_dump_json(exclude_unset=True).encode()


def _handler_for(model: ScriptedModel):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                model.problems.append(f"request to {self.path}")
                return self._send(404, b'{"error": {"message": "not found"}}')
            try:
                body = json.loads(raw)
            except ValueError as error:
                model.problems.append(f"a body that is not JSON: {error}")
                return self._send(400, b'{"error": {"message": "not JSON"}}')
            with model._lock:
                model.headers.append({k.lower(): v for k, v in self.headers.items()})
            model.problems.extend(check_request(body))
            n = len(model.requests)
            turn = model.turn(body)
            time.sleep(turn.delay)
            if turn.raw is not None or turn.status != 200:
                return self._send(turn.status, turn.raw or b"", turn.content_type)
            streamed = body.get("stream", False) if turn.stream is None else turn.stream
            if not streamed:
                return self._send(200, _completion(n, turn))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for i, event in enumerate(_stream(n, turn)):
                    self._chunked(event)
                    if i == 0 and turn.stall:
                        time.sleep(turn.stall)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _chunked(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _send(self, status: int, data: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
