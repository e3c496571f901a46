"""The README's promises: its "Writing a tool" example is the code of the
`greet` test guest, verbatim, and that tool works as the README says; the
same tool in Python, JavaScript and C, as the README writes it, builds and
answers the same."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN
from test_new import toolchains


ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_example_is_the_tested_guest():
    readme = (ROOT / "README.md").read_text()
    example = re.search(r"`src/lib.rs`:\n\n```rust\n(.*?)```", readme, re.S).group(1)
    assert example == (ROOT / "tests/guests/greet/src/lib.rs").read_text()


def test_the_readme_example_works(setup):
    setup.add("greet")
    answers_as_the_readme_says(setup)


def answers_as_the_readme_says(setup):
    """The one `greet` in the tools folder lists and answers as the README's
    example does."""
    listing = json.loads(setup.run("--json").stdout)
    (tool,) = listing["files"][0]["tools"]
    assert tool["name"] == "greet"
    assert tool["description"] == "Greet someone by name. Returns the greeting."
    assert tool["inputSchema"]["properties"]["name"]["description"] == "Who to greet."
    assert tool["inputSchema"]["required"] == ["name"]
    assert tool["annotations"]["readOnlyHint"] is True
    assert tool["outputSchema"]["properties"]["message"]["type"] == "string"

    ok = setup.run("greet", '{"name": "Ada", "shout": true}', command="call")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["structuredContent"] == {"message": "HELLO, ADA!"}
    assert "[Info] greeting Ada" in ok.stderr

    empty = setup.run("greet", '{"name": " "}', command="call")
    assert empty.returncode == 1
    assert "`name` must not be empty" in json.loads(empty.stdout)["content"][0]["text"]


# The same `greet` in each of the other languages' README sections, built in
# a `toolcage new` project (the README's code in place of the template's),
# must answer as the Rust one does.
SECTIONS = {
    "python": ("### Python", "python", "app.py"),
    "js": ("### JavaScript and TypeScript", "js", "app.js"),
    "c": ("### C\n", "c", "tool.c"),
}


@pytest.mark.parametrize("lang", list(SECTIONS))
def test_the_readme_example_in_each_language_works(setup, tmp_path, lang):
    heading, fence, source = SECTIONS[lang]
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(heading) :]
    code = re.search(rf"```{fence}\n(.*?)```", section, re.S).group(1)
    made = subprocess.run(
        [str(BIN), "new", "greet", "--lang", lang, "--dir", str(tmp_path / "greet")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    (tmp_path / "greet" / source).write_text(code)
    built = subprocess.run(
        [str(tmp_path / "greet" / "build.sh")],
        env={**os.environ, **toolchains()},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    shutil.copy(tmp_path / "greet" / "greet.wasm", setup.tools_dir)
    answers_as_the_readme_says(setup)
