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
