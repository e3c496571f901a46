"""The Python SDK's schema derivation and argument conversion, on the host's
CPython (the same pure-Python module runs inside the component)."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional, TypedDict

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "guest-sdk" / "python"))

from toolcage.schema import Schema, SchemaError, convert, parameters_schema, schema_of, split_docstring, to_json_data  # noqa: E402


class Color(enum.Enum):
    """A colour."""

    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    """A point.

    Attributes:
        x: Across.
        y: Down.
    """

    x: float
    y: float = 0.0


class Options(TypedDict, total=False):
    depth: int
    color: Color


@dataclass
class Loop:
    next: Optional[Loop] = None


def example(
    name: Annotated[str, Schema(min_length=1, max_length=10)],
    count: Annotated[int, "How many.", Schema(minimum=1)] = 1,
    tags: list[str] | None = None,
    mode: Literal["fast", "slow"] = "fast",
    where: Optional[Point] = None,
    options: Options | None = None,
    pairs: tuple[int, str] = (1, "a"),
) -> Point:
    """Do an example thing.

    Longer text.

    Args:
        name: The name,
            continued.
        tags: Labels.
    """


def test_parameters_become_an_object_schema():
    schema, hints = parameters_schema(example)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["name"]
    props = schema["properties"]
    assert props["name"] == {"type": "string", "minLength": 1, "maxLength": 10, "description": "The name, continued."}
    assert props["count"] == {"type": "integer", "description": "How many.", "minimum": 1, "default": 1}
    assert props["tags"] == {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "description": "Labels."}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    point = props["where"]["anyOf"][0]
    assert point["required"] == ["x"] and point["properties"]["x"] == {"type": "number", "description": "Across."}
    assert point["properties"]["y"]["default"] == 0.0
    options = props["options"]["anyOf"][0]
    assert "required" not in options and options["properties"]["color"]["enum"] == ["red", "blue"]
    assert props["pairs"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert set(hints) == set(props)


def test_docstrings_split_into_description_and_parameters():
    description, params = split_docstring(example.__doc__)
    assert description == "Do an example thing.\n\nLonger text."
    assert params == {"name": "The name, continued.", "tags": "Labels."}
    sphinx = "Summary.\n\n:param a: First.\n:param int b: Second\n    line.\n"
    assert split_docstring(sphinx) == ("Summary.", {"a": "First.", "b": "Second line."})


def test_what_cannot_be_described_is_refused_with_a_reason():
    def no_hint(x):
        pass

    def var_kw(**kw: int):
        pass

    with pytest.raises(SchemaError, match="no type hint"):
        parameters_schema(no_hint)
    with pytest.raises(SchemaError, match=r"\*\*kwargs"):
        parameters_schema(var_kw)
    with pytest.raises(SchemaError, match="base64"):
        schema_of(bytes)
    with pytest.raises(SchemaError, match="keys must be"):
        schema_of(dict[int, str])

    with pytest.raises(SchemaError, match="itself"):
        schema_of(Loop)

    def unresolvable(x: "NoSuchType"):  # noqa: F821
        pass

    with pytest.raises(SchemaError, match="cannot resolve"):
        parameters_schema(unresolvable)


def test_arguments_are_converted_into_the_hinted_types():
    _, hints = parameters_schema(example)
    assert convert({"x": 1, "y": 2}, hints["where"]) == Point(1.0, 2.0)
    assert isinstance(convert({"x": 1}, hints["where"]).x, float)
    assert convert({"color": "red", "depth": 2}, hints["options"]) == {"color": Color.RED, "depth": 2}
    assert convert([3, "b"], hints["pairs"]) == (3, "b")
    assert convert(None, hints["where"]) is None


def test_return_values_become_json_data():
    @dataclass
    class Out:
        a: int
        b: Optional[str] = None
        items: list = field(default_factory=list)

    assert to_json_data(Out(1)) == {"a": 1, "items": []}
    assert to_json_data(Out(1, "x", [Color.BLUE])) == {"a": 1, "b": "x", "items": ["blue"]}


# --- the SDK against the real generated bindings, with a stand-in host -----

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    """The SDK with the bindings componentize-py generates for the
    `tool-component` world, the host's functions replaced by recorders."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolcage" / "components"
    out = tmp_path_factory.mktemp("bindings")
    wit = Path(__file__).resolve().parents[2] / "guest-sdk" / "wit"
    subprocess.run(
        [str(cache / "componentize-py-0.25.1" / "bin" / "componentize-py"), "-d", str(wit), "-w", "tool-component", "bindings", str(out)],
        check=True,
        capture_output=True,
    )
    sys.path.insert(0, str(out))
    import toolcage
    from wit_world.imports import host

    yield toolcage, host
    sys.path.remove(str(out))


class Recorder:
    def __init__(self, host, answers):
        self.host = host
        self.calls = []
        self.answers = list(answers)

    def __call__(self, name):
        def record(*args):
            self.calls.append((name, args))
            answer = self.answers.pop(0) if name in ("elicit", "sample") else None
            if isinstance(answer, Exception):
                raise answer
            return answer

        return record


def test_results_errors_and_host_services_through_the_bindings(sdk, monkeypatch, capsys):
    toolcage, host = sdk
    from componentize_py_types import Err

    recorder = Recorder(
        host,
        [
            host.ElicitResponse_Accept('{"age": 30, "name": "Ada"}'),
            host.ElicitResponse_Decline(),
            Err("the client cannot elicit"),
            host.SamplingResponse(text="a summary", model="m", stop_reason=None),
        ],
    )
    for name in ["log", "progress", "elicit", "sample"]:
        monkeypatch.setattr(host, name, recorder(name))

    @dataclass
    class Person:
        name: str
        age: int

    @toolcage.tool(name="sdk_probe", destructive=True)
    def probe(step: int) -> dict:
        """Probe the host services."""
        toolcage.info("starting")
        toolcage.progress(1, 2, "half")
        who = toolcage.ask("Who?", Person)
        again = toolcage.confirm("Again?")
        try:
            toolcage.elicit("More?", {"type": "object", "properties": {}})
            failed = None
        except toolcage.HostError as problem:
            failed = str(problem)
        summary = toolcage.sample("Summarise", 64)
        return {"who": [who.name, who.age], "again": again, "failed": failed, "summary": summary}

    (descriptor,) = [d for d in toolcage.Tool().describe() if d.name == "sdk_probe"]
    assert descriptor.annotations.destructive and json.loads(descriptor.input_schema)["required"] == ["step"]
    result = toolcage.Tool().call("sdk_probe", '{"step": 1}')
    assert not result.is_error, result
    assert json.loads(result.structured) == {"who": ["Ada", 30], "again": False, "failed": "the client cannot elicit", "summary": "a summary"}
    names = [name for name, _ in recorder.calls]
    assert names == ["log", "progress", "elicit", "elicit", "elicit", "sample"]
    assert recorder.calls[0][1] == (host.Level.INFO, "starting")
    assert json.loads(recorder.calls[2][1][1]) == {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
    request = recorder.calls[5][1][0]
    assert request.max_tokens == 64 and request.messages[0].role == host.Role.USER

    @toolcage.tool(name="sdk_raises")
    def raises() -> str:
        """Raise."""
        raise KeyError("missing thing")

    failed = toolcage.Tool().call("sdk_raises", "{}")
    assert failed.is_error and failed.content[0].value == "'missing thing'"
    assert "Traceback" in capsys.readouterr().err
    assert toolcage.Tool().call("nope", "{}").content[0].value == "this component has no tool `nope`"
    assert toolcage.Tool().call("sdk_raises", "[1]").content[0].value == "the arguments must be a JSON object"
    with pytest.raises(ValueError, match="two tools"):
        toolcage.tool(name="sdk_raises")(raises)


def test_icons_tasks_and_needs_reach_the_descriptor(sdk):
    toolcage, _host = sdk
    from wit_world.imports import types

    @toolcage.tool(
        name="sdk_decorated",
        icons=[toolcage.Icon("https://example.com/d.png", mime_type="image/png", sizes=["48x48"], theme="dark"), toolcage.Icon("data:image/svg+xml;base64,PHN2Zy8+")],
        task_support="optional",
        task_start="on-begin-task",
        needs=["elicitation", "roots"],
    )
    def decorated() -> str:
        """Has everything 0.2.0 adds."""
        return "ok"

    @toolcage.tool(name="sdk_plain")
    def plain() -> str:
        """Has the defaults."""
        return "ok"

    described = {d.name: d for d in toolcage.Tool().describe()}
    d = described["sdk_decorated"]
    assert d.icons == [
        types.Icon(src="https://example.com/d.png", mime_type="image/png", sizes=["48x48"], theme=types.IconTheme.DARK),
        types.Icon(src="data:image/svg+xml;base64,PHN2Zy8+", mime_type=None, sizes=[], theme=None),
    ]
    assert d.task_support == types.TaskSupport.OPTIONAL and d.task_start == types.TaskStart.ON_BEGIN_TASK
    assert d.needs == types.ClientNeeds.ELICITATION | types.ClientNeeds.ROOTS
    p = described["sdk_plain"]
    assert p.icons == [] and p.task_support == types.TaskSupport.FORBIDDEN and p.task_start == types.TaskStart.WITH_CALL
    assert p.needs == types.ClientNeeds(0)

    for bad, problem in [
        ({"task_support": "sometimes"}, "`task_support` is 'sometimes'"),
        ({"task_start": "on_begin_task"}, "`task_start`"),
        ({"needs": ["telepathy"]}, "`needs` is 'telepathy'"),
        ({"needs": "roots"}, "not the string"),
        ({"icons": ["https://example.com/x.png"]}, "is not an Icon"),
    ]:
        with pytest.raises(ValueError, match=problem):
            toolcage.tool(name="sdk_bad", **bad)(plain)
    with pytest.raises(ValueError, match="theme"):
        toolcage.Icon("https://example.com/x.png", theme="blue")


def test_roots_ask_batch_elicit_as_and_begin_task_through_the_bindings(sdk, monkeypatch):
    toolcage, host = sdk
    from componentize_py_types import Err, Ok

    calls = []

    def fake_ask(questions):
        calls.append(("ask", questions))
        answers = {
            "who": Ok(host.Answer_Elicit(host.ElicitResponse_Accept('{"name": "Ada"}'))),
            "say": Ok(host.Answer_Sample(host.SamplingResponse(text="hi", model="m", stop_reason=None))),
            "where": Ok(host.Answer_Roots([host.Root(uri="file:///work", name="work")])),
            "again": Err("the client cannot sample"),
        }
        return [answers[q.key] for q in questions]

    def fake_roots():
        calls.append(("roots",))
        return [host.Root(uri="file:///a", name=None)]

    monkeypatch.setattr(host, "ask", fake_ask)
    monkeypatch.setattr(host, "roots", fake_roots)
    monkeypatch.setattr(host, "begin_task", lambda: calls.append(("begin_task",)))

    answers = toolcage.ask_batch(
        {
            "who": toolcage.ElicitQuestion("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
            "say": toolcage.SampleQuestion("hello", 5),
            "where": toolcage.RootsQuestion(),
            "again": toolcage.SampleQuestion("more", 1),
        }
    )
    assert list(answers) == ["who", "say", "where", "again"]
    assert answers["who"] == {"action": "accept", "content": {"name": "Ada"}}
    assert answers["say"] == "hi"
    assert answers["where"] == [toolcage.Root("file:///work", "work")]
    assert isinstance(answers["again"], toolcage.HostError) and str(answers["again"]) == "the client cannot sample"
    (_, asked) = calls[0]
    assert [q.key for q in asked] == ["who", "say", "where", "again"]
    assert asked[0].question == host.Question_Elicit(host.Elicitation(message="Name?", requested_schema='{"type": "object", "properties": {"name": {"type": "string"}}}'))
    assert asked[1].question.value.max_tokens == 5 and asked[1].question.value.messages[0].text == "hello"
    assert asked[2].question == host.Question_Roots()
    with pytest.raises(ValueError, match="1 to 64 characters"):
        toolcage.ask_batch({"bad key": toolcage.RootsQuestion()})

    assert toolcage.elicit_as("who", "Name?", {"type": "object", "properties": {}}) == {"action": "accept", "content": {"name": "Ada"}}
    assert calls[-1][1][0].key == "who"
    with pytest.raises(toolcage.HostError, match="cannot sample"):
        toolcage.elicit_as("again", "More?", {"type": "object", "properties": {}})

    assert toolcage.roots() == [toolcage.Root("file:///a", None)]
    monkeypatch.setattr(host, "roots", lambda: (_ for _ in ()).throw(Err("the client does not share its roots")))
    with pytest.raises(toolcage.HostError, match="does not share its roots"):
        toolcage.roots()
    toolcage.begin_task()
    assert calls[-1] == ("begin_task",)
