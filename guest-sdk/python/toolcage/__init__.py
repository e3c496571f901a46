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

Build it against toolcage's WIT (``toolcage:tool@0.2.0``), world
``tool-component`` (tools only: this SDK offers no resources, prompts or
completions)::

    componentize-py -d wit -w tool-component componentize app -o word_count.wasm

``@tool`` also takes ``icons`` (:class:`Icon`), ``task_support``,
``task_start`` and ``needs`` (what the client must be able to do).

Host services for a running call: :func:`log` (and :func:`debug`,
:func:`info`, :func:`warning`, :func:`error`), :func:`progress`,
:func:`elicit`, :func:`confirm`, :func:`ask`, :func:`sample`,
:func:`roots`, :func:`ask_batch`, :func:`elicit_as` and :func:`begin_task`.

Every call runs in a fresh instance: module-level state set during a call
does not carry over to the next.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
import traceback
import typing
from typing import Any, Callable

from .schema import Schema, SchemaError, convert, parameters_schema, schema_of, split_docstring, to_json_data

__all__ = [
    "Tool",
    "tool",
    "Icon",
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
    "Root",
    "roots",
    "ElicitQuestion",
    "SampleQuestion",
    "RootsQuestion",
    "ask_batch",
    "elicit_as",
    "begin_task",
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

_ICON_THEMES = ("light", "dark")
_TASK_SUPPORT = ("forbidden", "optional", "required")
_TASK_START = ("with-call", "on-begin-task")
_NEEDS = ("sampling", "elicitation", "roots")


@dataclasses.dataclass(frozen=True)
class Icon:
    """An icon a client may show beside a tool (MCP ``Icon``).

    ``src`` is an ``https:`` URL (the client fetches it) or a
    ``data:image/...`` URI (at most 64 KiB); ``mime_type`` says what it is
    (``image/png``, ``image/svg+xml``) when the URL does not; ``sizes`` are
    ``"48x48"`` or ``"any"``; ``theme`` is ``"light"``, ``"dark"`` or
    ``None`` (any). The host refuses a tool whose icons break these rules,
    and lists at most 8."""

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: str | None = None

    def __post_init__(self):
        if not isinstance(self.src, str) or not self.src:
            raise ValueError("an icon's `src` must be an https: URL or a data:image/ URI")
        if isinstance(self.sizes, str):
            raise ValueError(f"an icon's `sizes` must be a list of sizes, not the string {self.sizes!r}")
        object.__setattr__(self, "sizes", tuple(self.sizes))
        if self.theme is not None and self.theme not in _ICON_THEMES:
            raise ValueError(f"an icon's `theme` is {self.theme!r} (expected 'light', 'dark' or None)")


def _one_of(value: str, allowed: tuple, what: str, tool_name: str) -> str:
    if value not in allowed:
        raise ValueError(f"tool `{tool_name}`: `{what}` is {value!r} (expected one of {', '.join(map(repr, allowed))})")
    return value


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
    icons: tuple[Icon, ...] = ()
    task_support: str = "forbidden"
    task_start: str = "with-call"
    needs: frozenset[str] = frozenset()


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
    icons: typing.Iterable[Icon] = (),
    task_support: str = "forbidden",
    task_start: str = "with-call",
    needs: typing.Iterable[str] = (),
):
    """Make ``function`` a tool (``@tool`` or ``@tool(read_only=True, ...)``).

    ``name`` defaults to the function's name, ``description`` to its
    docstring. ``input_schema``/``output_schema`` replace the derived ones
    (then the function takes the arguments as keyword arguments, unconverted).
    The annotations are hints for clients; toolcage asks the user before
    running a ``destructive`` tool unless the operator says otherwise.

    ``icons`` are :class:`Icon` s for clients to show. ``task_support`` says
    whether calls may run as MCP tasks (protocol 2026-07-28): ``"forbidden"``
    (the default), ``"optional"`` (when the client accepts tasks) or
    ``"required"``; ``task_start`` when such a call becomes a task: as it
    starts (``"with-call"``, the default) or when it calls
    :func:`begin_task` (``"on-begin-task"``). ``needs`` names what the
    client must be able to do (``"sampling"``, ``"elicitation"``,
    ``"roots"``): a 2026-07-28 request that does not declare it is refused
    (error -32021) before the call runs.
    """

    def register(function: Callable) -> Callable:
        tool_name = name or function.__name__
        if tool_name in _TOOLS:
            raise ValueError(f"two tools are named `{tool_name}`")
        tool_icons = tuple(icons)
        for icon in tool_icons:
            if not isinstance(icon, Icon):
                raise ValueError(f"tool `{tool_name}`: {icon!r} is not an Icon (use toolcage.Icon(src, ...))")
        if isinstance(needs, str):
            raise ValueError(f"tool `{tool_name}`: `needs` must be a list of capabilities, not the string {needs!r}")
        tool_needs = frozenset(_one_of(need, _NEEDS, "needs", tool_name) for need in needs)
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
            icons=tool_icons,
            task_support=_one_of(task_support, _TASK_SUPPORT, "task_support", tool_name),
            task_start=_one_of(task_start, _TASK_START, "task_start", tool_name),
            needs=tool_needs,
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


def _wit_name(name: str) -> str:
    """A WIT case name as componentize-py spells its Python member."""
    return name.upper().replace("-", "_")


def _describe() -> list:
    from wit_world.imports import types

    def icon(i: Icon):
        theme = None if i.theme is None else types.IconTheme[_wit_name(i.theme)]
        return types.Icon(src=i.src, mime_type=i.mime_type, sizes=list(i.sizes), theme=theme)

    def needs(names: frozenset[str]):
        flags = types.ClientNeeds(0)
        for need in _NEEDS:
            if need in names:
                flags |= types.ClientNeeds[_wit_name(need)]
        return flags

    return [
        types.Descriptor(
            name=t.name,
            title=t.title,
            description=t.description,
            input_schema=json.dumps(t.input_schema),
            output_schema=json.dumps(t.output_schema) if t.output_schema is not None else None,
            annotations=types.Annotations(**t.annotations),
            icons=[icon(i) for i in t.icons],
            task_support=types.TaskSupport[_wit_name(t.task_support)],
            task_start=types.TaskStart[_wit_name(t.task_start)],
            needs=needs(t.needs),
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
    return _elicit_response(host, answer)


def _elicit_response(host, answer) -> dict:
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
    request = _sampling_request(host, prompt, max_tokens, system, temperature)
    try:
        return host.sample(request).text
    except Exception as problem:  # componentize_py_types.Err
        _raise_host(problem)


def _sampling_request(host, prompt: str, max_tokens: int, system: str | None, temperature: float | None):
    return host.SamplingRequest(
        messages=[host.SamplingMessage(role=host.Role.USER, text=prompt)],
        system_prompt=system,
        max_tokens=int(max_tokens),
        temperature=temperature,
    )


@dataclasses.dataclass(frozen=True)
class Root:
    """A root the client shares (MCP ``Root``): a folder the user works in."""

    uri: str
    name: str | None = None


def roots() -> list[Root]:
    """The client's roots (MCP ``roots/list``): the folders the user works
    in. They say what the user is working on; they grant nothing (what the
    tool can open is the operator's decision). Raises :class:`HostError`
    when the client does not share its roots."""
    host = _host()
    try:
        listed = host.roots()
    except Exception as problem:  # componentize_py_types.Err
        _raise_host(problem)
    return [Root(uri=r.uri, name=r.name) for r in listed]


_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclasses.dataclass(frozen=True)
class ElicitQuestion:
    """For :func:`ask_batch`: ask the user, as :func:`elicit` does. The
    answer is what :func:`elicit` returns."""

    message: str
    schema: dict


@dataclasses.dataclass(frozen=True)
class SampleQuestion:
    """For :func:`ask_batch`: ask the client's model, as :func:`sample`
    does. The answer is the completion's text."""

    prompt: str
    max_tokens: int = 512
    system: str | None = None
    temperature: float | None = None


@dataclasses.dataclass(frozen=True)
class RootsQuestion:
    """For :func:`ask_batch`: the client's roots, as :func:`roots` gives
    them."""


def ask_batch(questions: dict[str, ElicitQuestion | SampleQuestion | RootsQuestion]) -> dict[str, Any]:
    """Ask several questions at once, each under a key of your choosing (1
    to 64 characters from ``A-Z a-z 0-9 _ - .``; ``elicit-N``, ``sample-N``,
    ``roots-N`` and ``toolcage-...`` are the host's): a 2026-07-28 client
    answers all of them in one round. Returns the answers under the same
    keys, in the same order; a question the client could not answer gets a
    :class:`HostError` (returned, not raised). A malformed batch (a bad key,
    more than 16 questions) ends the call with an error::

        answers = ask_batch({
            "user_name": ElicitQuestion("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
            "workspace": RootsQuestion(),
        })
    """
    host = _host()
    from componentize_py_types import Err

    asked = []
    for key, question in questions.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"the key {key!r} must be 1 to 64 characters from A-Z a-z 0-9 _ - .")
        if isinstance(question, ElicitQuestion):
            wit = host.Question_Elicit(host.Elicitation(message=question.message, requested_schema=json.dumps(question.schema)))
        elif isinstance(question, SampleQuestion):
            request = _sampling_request(host, question.prompt, question.max_tokens, question.system, question.temperature)
            wit = host.Question_Sample(request)
        elif isinstance(question, RootsQuestion):
            wit = host.Question_Roots()
        else:
            raise TypeError(f"question `{key}` is {question!r} (use ElicitQuestion, SampleQuestion or RootsQuestion)")
        asked.append(host.KeyedQuestion(key=key, question=wit))
    answers = {}
    for keyed, result in zip(asked, host.ask(asked)):
        if isinstance(result, Err):
            answers[keyed.key] = HostError(str(result.value))
            continue
        answer = result.value
        if isinstance(answer, host.Answer_Elicit):
            answers[keyed.key] = _elicit_response(host, answer.value)
        elif isinstance(answer, host.Answer_Sample):
            answers[keyed.key] = answer.value.text
        else:
            answers[keyed.key] = [Root(uri=r.uri, name=r.name) for r in answer.value]
    return answers


def elicit_as(key: str, message: str, schema: dict) -> dict:
    """:func:`elicit`, under a key of your choosing (see :func:`ask_batch`):
    the key a 2026-07-28 client sees in its ``inputRequests``. Raises
    :class:`HostError` as :func:`elicit` does."""
    answer = ask_batch({key: ElicitQuestion(message, schema)}).get(key)
    if isinstance(answer, HostError):
        raise answer
    if answer is None:
        raise HostError("the host gave no elicitation answer")
    return answer


def begin_task() -> None:
    """From here the call may take long: for a tool with
    ``task_start="on-begin-task"``, a client that accepts tasks gets its
    task now, and questions asked after this are the task's. Anywhere else
    it does nothing."""
    _host().begin_task()
