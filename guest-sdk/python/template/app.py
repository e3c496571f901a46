"""The `{{name}}` tool: a toolcage tool in Python.

Edit the function below (its type hints are its input schema, its
docstring its description), then build with `./build.sh`.
"""

from dataclasses import dataclass

from toolcage import Tool, tool  # noqa: F401 (Tool is the component's export)


@dataclass
class Greeting:
    """What the tool answers."""

    message: str


@tool(read_only=True, idempotent=True)
def {{name}}(name: str) -> Greeting:
    """Greet someone by name.

    Args:
        name: Who to greet.
    """
    if not name.strip():
        raise ValueError("`name` must not be empty")
    return Greeting(message=f"Hello, {name}!")
