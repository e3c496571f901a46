"""The README's promises: its "Writing a tool" example is the code of the
`greet` test guest, verbatim, and that tool works as the README says."""

import json
import re
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_example_is_the_tested_guest():
    readme = (ROOT / "README.md").read_text()
    example = re.search(r"`src/lib.rs`:\n\n```rust\n(.*?)```", readme, re.S).group(1)
    assert example == (ROOT / "tests/guests/greet/src/lib.rs").read_text()


def test_the_readme_example_works(setup):
    setup.add("greet")
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
