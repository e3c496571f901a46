"""The SDK example tools in Python (the same six in every language's
example): structured output, an exception, logs and progress, a
confirmation, and two that hit the limits; and `where`, which shows what
contract 0.2.0 added (an icon, task support, a client need, the client's
roots, a keyed question), as the JavaScript and C examples do. Test-only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

from toolcage import Icon, RootsQuestion, Schema, Tool, ask_batch, confirm, info, progress, roots, tool  # noqa: F401 (Tool is the export)


@dataclass
class WordCount:
    """How many words a text has."""

    words: int
    unique_words: Optional[int] = None


@tool(read_only=True, idempotent=True)
def word_count(text: Annotated[str, Schema(min_length=1)], unique: bool = False) -> WordCount:
    """Count the words in a text.

    Args:
        text: The text to count the words of.
        unique: Also count distinct words, ignoring case.
    """
    words = text.split()
    if unique:
        return WordCount(words=len(words), unique_words=len({w.lower() for w in words}))
    return WordCount(words=len(words))


@tool
def fail(message: str) -> str:
    """Fail with the given message.

    Args:
        message: What the error says.
    """
    raise ValueError(message)


@tool
def chatty(steps: Annotated[int, Schema(minimum=1, maximum=10)]) -> str:
    """Log each step and report progress.

    Args:
        steps: How many steps to take.
    """
    for i in range(1, steps + 1):
        info(f"step {i}")
        progress(i, steps, f"step {i}")
    return f"done after {steps} steps"


@tool
def archive(name: str) -> str:
    """Archive something, once the user confirms.

    Args:
        name: What to archive.
    """
    if not confirm(f"Archive {name}?"):
        raise ValueError("not archived: the user said no")
    return f"archived {name}"


@tool
def spin() -> str:
    """Loop forever (for the limits)."""
    n = 0
    while True:
        n += 1


@tool
def hog(mib: int) -> str:
    """Allocate and touch memory.

    Args:
        mib: How many MiB.
    """
    blocks = [bytearray(1024 * 1024) for _ in range(mib)]
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])
    return f"allocated {mib} MiB"


@tool(
    icons=[Icon("data:image/svg+xml;base64,PHN2Zy8+", mime_type="image/svg+xml", sizes=["any"])],
    task_support="optional",
    needs=["roots"],
)
def where(key: Optional[str] = None) -> str:
    """List the folders the user works in (the client's roots), one URI a line.

    Args:
        key: Ask for them as a question under this key instead.
    """
    if key is None:
        shared = roots()
    else:
        shared = ask_batch({key: RootsQuestion()})[key]
        if isinstance(shared, Exception):
            raise shared
    return "\n".join(root.uri for root in shared) or "no roots"
