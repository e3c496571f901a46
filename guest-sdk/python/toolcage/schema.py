"""JSON Schema from Python type hints, and arguments back into those types.

Pure Python (the standard library only), so it runs under componentize-py
and, for tests, on any CPython 3.10+.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``,
``list[T]``, ``tuple[T, ...]``, ``dict[str, T]``, ``Optional[T]`` /
``T | None``, unions, ``Literal[...]``, ``enum.Enum`` subclasses,
``TypedDict`` and dataclasses (nested), ``Any``, and ``Annotated[T, ...]``
whose metadata is a description (a ``str``) or a :class:`Schema` of extra
JSON Schema keywords.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from typing import Any

__all__ = ["Schema", "schema_of", "parameters_schema", "convert", "split_docstring", "SchemaError"]


class SchemaError(TypeError):
    """A type hint that cannot be turned into JSON Schema."""


class Schema:
    """Extra JSON Schema keywords for ``Annotated`` hints.

    ``Annotated[int, Schema(minimum=1, maximum=10)]``,
    ``Annotated[str, Schema(pattern="^[a-z]+$", description="a slug")]``.
    Keyword names are JSON Schema's; ``min_length``-style snake case is
    accepted too and turned into camel case.
    """

    def __init__(self, **keywords: Any):
        self.keywords = {_camel(k): v for k, v in keywords.items()}

    def __repr__(self) -> str:
        return f"Schema({self.keywords!r})"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_NONE = type(None)


def _hints(owner: Any) -> dict:
    """``owner``'s type hints, resolved (``Annotated`` kept)."""
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except NameError as problem:
        raise SchemaError(f"cannot resolve the type hints of {getattr(owner, '__name__', owner)!r}: {problem}") from None


def _is_typeddict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__total__")


def schema_of(hint: Any, _seen: tuple = ()) -> dict:
    """The JSON Schema of values of type ``hint``."""
    if hint in _seen:
        raise SchemaError(f"{hint!r} refers to itself; recursive types are not supported")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = dict(schema_of(args[0], _seen))
        for meta in args[1:]:
            if isinstance(meta, str):
                schema["description"] = meta
            elif isinstance(meta, Schema):
                schema.update(meta.keywords)
        return schema
    if hint is Any or hint is object:
        return {}
    if hint is _NONE or hint is None:
        return {"type": "null"}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is str:
        return {"type": "string"}
    if hint is bytes:
        raise SchemaError("bytes cannot travel as JSON; take a base64 `str` instead")
    if origin is typing.Literal:
        values = list(args)
        schema: dict = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1:
            schema["type"] = _json_type(next(iter(kinds)))
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not _NONE]
        nullable = len(options) != len(args)
        if len(options) == 1:
            inner = schema_of(options[0], _seen)
            return {"anyOf": [inner, {"type": "null"}]} if nullable else inner
        any_of = [schema_of(a, _seen) for a in options]
        if nullable:
            any_of.append({"type": "null"})
        return {"anyOf": any_of}
    if origin in (list, typing.List, tuple) or hint in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {
                "type": "array",
                "prefixItems": [schema_of(a, _seen) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        item = args[0] if args else Any
        return {"type": "array", "items": schema_of(item, _seen)}
    if origin in (set, frozenset):
        return {"type": "array", "items": schema_of(args[0] if args else Any, _seen), "uniqueItems": True}
    if origin is dict or hint is dict:
        if args and args[0] is not str:
            raise SchemaError("dictionary keys must be `str` (JSON object keys are strings)")
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": schema_of(value, _seen)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        schema = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1:
            schema["type"] = _json_type(next(iter(kinds)))
        if hint.__doc__ and hint.__doc__ != enum.Enum.__doc__:
            schema["description"] = inspect.cleandoc(hint.__doc__)
        return schema
    if _is_typeddict(hint):
        hints = _hints(hint)
        required = sorted(getattr(hint, "__required_keys__", set(hints)))
        return _object(hint, hints, required, {}, _seen + (hint,))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = _hints(hint)
        required = []
        defaults = {}
        for f in dataclasses.fields(hint):
            if f.default is not dataclasses.MISSING:
                defaults[f.name] = f.default
            elif f.default_factory is dataclasses.MISSING:
                required.append(f.name)
        descriptions = {f.name: f.metadata["description"] for f in dataclasses.fields(hint) if "description" in f.metadata}
        return _object(hint, {f.name: hints[f.name] for f in dataclasses.fields(hint)}, required, defaults, _seen + (hint,), descriptions)
    raise SchemaError(f"cannot describe {hint!r} as JSON Schema")


def _json_type(kind: type) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", _NONE: "null"}.get(kind, "string")


def _object(owner, hints: dict, required: list, defaults: dict, seen: tuple, descriptions: dict | None = None) -> dict:
    properties = {}
    field_docs = _attribute_docs(owner)
    field_docs.update(descriptions or {})
    for name, hint in hints.items():
        prop = schema_of(hint, seen)
        if name in field_docs and "description" not in prop:
            prop["description"] = field_docs[name]
        if name in defaults and _jsonable(defaults[name]):
            prop["default"] = _plain(defaults[name])
        properties[name] = prop
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    doc = owner.__doc__
    if doc and not doc.startswith(owner.__name__ + "(") and doc != dict.__doc__:
        schema["description"] = inspect.cleandoc(doc).split("\n\n")[0]
    return schema


def _attribute_docs(owner) -> dict:
    """Field descriptions from an ``Attributes:`` section of a class docstring."""
    doc = owner.__doc__ or ""
    return split_docstring(doc.replace("Attributes:", "Args:"))[1] if "Attributes:" in doc else {}


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None), enum.Enum)) or (
        isinstance(value, (list, tuple)) and all(_jsonable(v) for v in value)
    )


def _plain(value: Any) -> Any:
    """``value`` as JSON data: dataclasses and enums turned into dicts and
    their values."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # An optional field left at its default of None is left out, as
        # an unset optional property.
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (getattr(value, f.name) is None and f.default is None)
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")


def split_docstring(doc: str | None) -> tuple[str, dict]:
    """A docstring's description (everything before its sections) and its
    parameter descriptions, from a Google-style ``Args:`` section or
    Sphinx-style ``:param name:`` lines."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section = None
    current = None
    for line in lines:
        sphinx = re.match(r"^\s*:param\s+(?:\S+\s+)?(\w+):\s*(.*)$", line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters", "Params"):
            entry = re.match(r"^\s{0,8}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry and not line.startswith(" " * 9):
                current = entry.group(1)
                params[current] = entry.group(2).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "sphinx" and current and line.strip() and not line.lstrip().startswith(":"):
            params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(description).strip(), params


def parameters_schema(function) -> tuple[dict, dict]:
    """The input schema of ``function``'s parameters (an object, unknown
    properties refused) and the hints by parameter name."""
    signature = inspect.signature(function)
    hints = _hints(function)
    _, param_docs = split_docstring(function.__doc__)
    properties = {}
    required = []
    by_name = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise SchemaError(f"`{function.__name__}`: *args and **kwargs cannot be described; name each parameter")
        if name not in hints:
            raise SchemaError(f"`{function.__name__}`: parameter `{name}` has no type hint")
        hint = hints[name]
        by_name[name] = hint
        prop = schema_of(hint)
        if name in param_docs and "description" not in prop:
            prop["description"] = param_docs[name]
        if parameter.default is parameter.empty:
            required.append(name)
        elif _jsonable(parameter.default) and parameter.default is not None:
            prop["default"] = _plain(parameter.default)
        properties[name] = prop
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, by_name


def convert(value: Any, hint: Any) -> Any:
    """JSON data ``value`` (already checked against ``hint``'s schema by the
    host) as a value of ``hint``: dataclasses and enums built, tuples and
    sets made, everything else as it is."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return convert(value, args[0])
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        for option in args:
            if option is _NONE:
                continue
            try:
                return convert(value, option)
            except (TypeError, ValueError, KeyError):
                continue
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type) and isinstance(value, dict):
        hints = _hints(hint)
        known = {f.name for f in dataclasses.fields(hint)}
        return hint(**{k: convert(v, hints[k]) for k, v in value.items() if k in known})
    if _is_typeddict(hint) and isinstance(value, dict):
        hints = _hints(hint)
        return {k: convert(v, hints[k]) if k in hints else v for k, v in value.items()}
    if origin in (list, typing.List) and isinstance(value, list):
        return [convert(v, args[0]) for v in value] if args else value
    if origin is tuple and isinstance(value, list):
        if args and args[-1] is Ellipsis:
            return tuple(convert(v, args[0]) for v in value)
        return tuple(convert(v, a) for v, a in zip(value, args)) if args else tuple(value)
    if origin in (set, frozenset) and isinstance(value, list):
        return origin(convert(v, args[0]) for v in value) if args else origin(value)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return {k: convert(v, args[1]) for k, v in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def to_json_data(value: Any) -> Any:
    """A tool's return value as JSON data."""
    return _plain(value)
