"""Write toolcage tools in Python.

A tool is a plain function with type hints; ``@tool`` makes it an MCP tool:

- the **input schema** comes from the parameters' type hints (see
  :mod:`toolcage.schema`), their descriptions from the docstring's
  ``Args:`` section (or ``Annotated[T, "description"]``), constraints from
  ``Annotated[T, Schema(minimum=1)]``;
- the **description** is the docstring's text before its sections;
- the **output schema** comes from the return type when it is a
  dataclass or ``TypedDict``: the returned value becomes structured output
  plus a text item holding the same JSON. A returned ``str`` is one text
  item; other JSON values are a text item of their JSON; an
  :class:`Output` is sent as it is;
- a **raised exception** becomes an ``isError`` result whose text is the
  exception's message; its traceback goes to standard error, which
  toolcage logs, never to the model.

The module that componentize-py builds (``app.py``) defines the tools and
imports :class:`Tool`, which implements the component's ``tool`` export::

    from dataclasses import dataclass
    from toolcage import Tool, tool

    @dataclass
    class Count:
        words: int

    @tool(read_only=True, idempotent=True)
    def word_count(text: str) -> Count:
        \"\"\"Count the words in a text.

        Args:
            text: The text to count.
        \"\"\"
        return Count(words=len(text.split()))

Build it against toolcage's WIT, world ``tool-component``::

    componentize-py -d wit -w tool-component componentize app -o word_count.wasm

Host services for a running call: :func:`log` (and :func:`debug`,
:func:`info`, :func:`warning`, :func:`error`), :func:`progress`,
:func:`elicit`, :func:`confirm`, :func:`ask` and :func:`sample`.

Every call runs in a fresh instance: module-level state set during a call
does not carry over to the next.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import traceback
import typing
from typing import Any, Callable

from .schema import Schema, SchemaError, convert, parameters_schema, schema_of, split_docstring, to_json_data

__all__ = [
    "Tool",
    "tool",
    "Schema",
    "SchemaError",
    "Output",
    "text",
    "image",
    "audio",
    "ToolError",
    "HostError",
    "log",
    "debug",
    "info",
    "warning",
    "error",
    "progress",
    "elicit",
    "confirm",
    "ask",
    "sample",
]

__version__ = "0.1.0"


class ToolError(Exception):
    """Raise to end a call with an error result carrying only your message
    (no traceback is printed for it)."""


class HostError(Exception):
    """The host refused a service (elicitation or sampling not available,
    not allowed, or refused by the user); the message says which and is fit
    for the model."""


# --- content -----------------------------------------------------------------


@dataclasses.dataclass
class _Text:
    text: str


@dataclasses.dataclass
class _Media:
    kind: str
    data: bytes
    mime_type: str


def text(value: str) -> _Text:
    """A text content item."""
    return _Text(value)


def image(data: bytes, mime_type: str) -> _Media:
    """An image content item (``data`` is the raw bytes)."""
    return _Media("image", bytes(data), mime_type)


def audio(data: bytes, mime_type: str) -> _Media:
    """An audio content item."""
    return _Media("audio", bytes(data), mime_type)


@dataclasses.dataclass
class Output:
    """A result given in full: content items, and optional structured
    output (JSON data, checked against the tool's output schema)."""

    content: list
    structured: Any = None


# --- registry ------------------------------------------------------------------


@dataclasses.dataclass
class _Registered:
    name: str
    title: str | None
    description: str
    input_schema: dict
    output_schema: dict | None
    annotations: dict
    function: Callable
    hints: dict


_TOOLS: dict[str, _Registered] = {}


def tool(
    function: Callable | None = None,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    input_schema: dict | None = None,
    output_schema: dict | None = None,
):
    """Make ``function`` a tool (``@tool`` or ``@tool(read_only=True, ...)``).

    ``name`` defaults to the function's name, ``description`` to its
    docstring. ``input_schema``/``output_schema`` replace the derived ones
    (then the function takes the arguments as keyword arguments, unconverted).
    The annotations are hints for clients; toolcage asks the user before
    running a ``destructive`` tool unless the operator says otherwise.
    """

    def register(function: Callable) -> Callable:
        tool_name = name or function.__name__
        if tool_name in _TOOLS:
            raise ValueError(f"two tools are named `{tool_name}`")
        summary, _ = split_docstring(function.__doc__)
        if input_schema is None:
            schema, hints = parameters_schema(function)
        else:
            schema, hints = input_schema, {}
        out = output_schema
        if out is None:
            returned = typing.get_type_hints(function, include_extras=True).get("return")  # resolved above
            out = _output_schema(returned)
        _TOOLS[tool_name] = _Registered(
            name=tool_name,
            title=title,
            description=description or summary or f"The tool `{tool_name}`.",
            input_schema=schema,
            output_schema=out,
            annotations={
                "read_only": read_only,
                "destructive": destructive,
                "idempotent": idempotent,
                "open_world": open_world,
            },
            function=function,
            hints=hints,
        )
        return function

    return register(function) if function is not None else register


def _output_schema(returned: Any) -> dict | None:
    """An output schema for a return type that is an object (MCP output
    schemas are objects); ``None`` for anything else."""
    if returned is None:
        return None
    base = typing.get_args(returned)[0] if typing.get_origin(returned) is typing.Annotated else returned
    if dataclasses.is_dataclass(base) or (isinstance(base, type) and issubclass(base, dict) and hasattr(base, "__total__")):
        return schema_of(returned)
    return None


def _describe() -> list:
    from wit_world.imports import types

    return [
        types.Descriptor(
            name=t.name,
            title=t.title,
            description=t.description,
            input_schema=json.dumps(t.input_schema),
            output_schema=json.dumps(t.output_schema) if t.output_schema is not None else None,
            annotations=types.Annotations(**t.annotations),
        )
        for t in _TOOLS.values()
    ]


def _error(types, message: str):
    return types.CallResult(content=[types.Content_Text(message)], structured=None, is_error=True)


def _call(name: str, arguments: str):
    from wit_world.imports import types

    registered = _TOOLS.get(name)
    if registered is None:
        return _error(types, f"this component has no tool `{name}`")
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError as problem:
        return _error(types, f"the arguments are not JSON: {problem}")
    if not isinstance(parsed, dict):
        return _error(types, "the arguments must be a JSON object")
    try:
        if registered.hints:
            kwargs = {k: convert(v, registered.hints[k]) for k, v in parsed.items() if k in registered.hints}
        else:
            kwargs = parsed
        result = registered.function(**kwargs)
        if inspect.isawaitable(result):
            result = _run(result)
    except ToolError as problem:
        return _error(types, str(problem) or type(problem).__name__)
    except HostError as problem:
        return _error(types, str(problem))
    except MemoryError:
        # The host refused to grow memory past the call's limit.
        return _error(types, f"tool `{name}` exceeded its memory limit (Python raised MemoryError)")
    except Exception as problem:  # noqa: BLE001 - every failure becomes a result
        traceback.print_exc(file=sys.stderr)
        return _error(types, str(problem) or type(problem).__name__)
    try:
        return _result(types, registered, result)
    except (TypeError, ValueError) as problem:
        return _error(types, f"tool `{name}` returned a value that is not JSON: {problem}")


def _run(awaitable):
    """Run a coroutine to completion (an ``async def`` tool)."""
    import asyncio

    return asyncio.run(_await(awaitable))


async def _await(awaitable):
    return await awaitable


def _result(types, registered: _Registered, result: Any):
    if isinstance(result, Output):
        content = [_content(types, item) for item in result.content]
        structured = json.dumps(to_json_data(result.structured)) if result.structured is not None else None
        return types.CallResult(content=content, structured=structured, is_error=False)
    if isinstance(result, (_Text, _Media)):
        return types.CallResult(content=[_content(types, result)], structured=None, is_error=False)
    if isinstance(result, str):
        return types.CallResult(content=[types.Content_Text(result)], structured=None, is_error=False)
    data = to_json_data(result)
    body = json.dumps(data)
    if registered.output_schema is not None or isinstance(data, dict):
        return types.CallResult(content=[types.Content_Text(body)], structured=body, is_error=False)
    return types.CallResult(content=[types.Content_Text(body)], structured=None, is_error=False)


def _content(types, item):
    if isinstance(item, str):
        return types.Content_Text(item)
    if isinstance(item, _Text):
        return types.Content_Text(item.text)
    if isinstance(item, _Media):
        media = types.Media(data=item.data, mime_type=item.mime_type)
        return types.Content_Image(media) if item.kind == "image" else types.Content_Audio(media)
    raise TypeError(f"{item!r} is not a content item (use text(), image() or audio())")


class Tool:
    """The component's ``toolcage:tool/tool`` export: import it into the
    module componentize-py builds (``from toolcage import Tool``)."""

    def describe(self) -> list:
        return _describe()

    def call(self, name: str, arguments: str):
        return _call(name, arguments)


# --- host services ---------------------------------------------------------


def _host():
    from wit_world.imports import host

    return host


def log(level: str, message: str) -> None:
    """Send a log message (``debug``, ``info``, ``notice``, ``warning``,
    ``error``, ``critical``, ``alert``, ``emergency``) to the server's log
    and, where the client asked for them, to the client."""
    host = _host()
    host.log(host.Level[level.upper()], str(message))


def debug(message: str) -> None:
    """``log("debug", message)``."""
    log("debug", message)


def info(message: str) -> None:
    """``log("info", message)``."""
    log("info", message)


def warning(message: str) -> None:
    """``log("warning", message)``."""
    log("warning", message)


def error(message: str) -> None:
    """``log("error", message)``."""
    log("error", message)


def progress(done: float, total: float | None = None, message: str | None = None) -> None:
    """Report progress of the current call; clients that asked for progress
    see it as ``notifications/progress``."""
    _host().progress(float(done), None if total is None else float(total), message)


def _raise_host(problem) -> typing.NoReturn:
    value = getattr(problem, "value", problem)
    raise HostError(str(value)) from None


def elicit(message: str, schema: dict) -> dict:
    """Ask the user (MCP elicitation): ``schema`` is a flat JSON object
    schema of primitive properties. Returns ``{"action": "accept",
    "content": {...}}``, ``{"action": "decline"}`` or ``{"action":
    "cancel"}``; raises :class:`HostError` when the client cannot be asked.

    On 2026-07-28 clients the whole call is replayed from the start once
    the user answers, so ask the same questions in the same order."""
    host = _host()
    try:
        answer = host.elicit(message, json.dumps(schema))
    except Exception as problem:  # componentize_py_types.Err
        _raise_host(problem)
    if isinstance(answer, host.ElicitResponse_Accept):
        return {"action": "accept", "content": json.loads(answer.value or "{}")}
    if isinstance(answer, host.ElicitResponse_Decline):
        return {"action": "decline"}
    return {"action": "cancel"}


def confirm(message: str) -> bool:
    """Ask the user a yes/no question: ``True`` only if they accept."""
    return elicit(message, {"type": "object", "properties": {}})["action"] == "accept"


def ask(message: str, fields: Any) -> Any:
    """Ask the user for values: ``fields`` is a dataclass or ``TypedDict``
    of primitive fields (or a JSON object schema). Returns an instance (a
    dict for a ``TypedDict`` or a schema), or ``None`` if they decline or
    cancel."""
    if isinstance(fields, dict):
        schema, hint = fields, None
    else:
        full = schema_of(fields)
        schema = {k: full[k] for k in ("type", "properties", "required") if k in full}
        hint = fields
    answer = elicit(message, schema)
    if answer["action"] != "accept":
        return None
    return convert(answer["content"], hint) if hint is not None else answer["content"]


def sample(prompt: str, max_tokens: int = 512, *, system: str | None = None, temperature: float | None = None) -> str:
    """Ask the client's model to complete ``prompt``; raises
    :class:`HostError` when the operator has not allowed this tool to
    sample, the client cannot, or the user refuses."""
    host = _host()
    request = host.SamplingRequest(
        messages=[host.SamplingMessage(role=host.Role.USER, text=prompt)],
        system_prompt=system,
        max_tokens=int(max_tokens),
        temperature=temperature,
    )
    try:
        return host.sample(request).text
    except Exception as problem:  # componentize_py_types.Err
        _raise_host(problem)
