"""A plain component in Python (componentize-py): its WIT world's exported
functions are toolcage tools, with no toolcage SDK. Test-only."""

import wit_world
import wit_world.exports
from componentize_py_types import Err
from wit_world.exports import text


class WitWorld(wit_world.WitWorld):
    def add(self, a: int, b: int) -> int:
        return a + b

    def divide(self, a: float, b: float) -> float:
        if b == 0:
            raise Err(f"cannot divide {a} by zero")
        return a / b

    def fail(self, why: str) -> str:
        raise ValueError(f"failed on purpose: {why}")

    def words(self, text: str, shout: bool | None) -> list[str]:
        words = text.split()
        return [w.upper() for w in words] if shout else words


class Text(wit_world.exports.Text):
    def stats(self, text_: str) -> text.Counts:
        return text.Counts(words=len(text_.split()), chars=len(text_))
