"""`toolcage new`: each language's template builds with its own script, as
a new author would run it, and its tool answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolcage" / "components"
LANGS = ["rust", "python", "js", "c"]


def new(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "new", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def toolchains() -> dict:
    """The toolchains tests/components/build installed, so the templates'
    scripts do not install their own again."""
    return {
        # A target dir of its own: the template is a workspace of its own.
        "CARGO_TARGET_DIR": str(REPO / "target" / "templates"),
        "COMPONENTIZE_PY": str(CACHE / "componentize-py-0.25.1" / "bin" / "componentize-py"),
        "COMPONENTIZE_JS": str(componentize_js()),
    }


def componentize_js() -> Path:
    """The componentize-js tests/components/build installed (keyed by its
    lock's hash)."""
    import hashlib

    lock = (REPO / "tests" / "components" / "npm" / "package-lock.json").read_bytes()
    key = hashlib.sha256(lock).hexdigest()[:16]
    return CACHE / f"componentize-js-{key}" / "node_modules" / "@bytecodealliance" / "componentize-js" / "src" / "cli.js"


@pytest.mark.parametrize("lang", LANGS)
def test_a_new_project_builds_and_its_tool_answers(setup, tmp_path, lang):
    name = f"hello_{lang}"
    made = new(name, "--lang", lang, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / name
    assert "build.sh" in made.stdout and (project / "README.md").exists()
    readme = (project / "README.md").read_text()
    assert "./build.sh" in readme and f"cp {name}.wasm" in readme
    built = subprocess.run(
        [str(project / "build.sh")],
        cwd=tmp_path,
        env={**os.environ, **toolchains()},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert built.returncode == 0, (built.stdout[-2000:], built.stderr[-4000:])
    shutil.copy(project / f"{name}.wasm", setup.tools_dir)
    called = setup.run(name, '{"name": "Ada"}', command="call")
    assert called.returncode == 0, called.stderr[-2000:]
    assert json.loads(called.stdout)["structuredContent"] == {"message": "Hello, Ada!"}
    refused = setup.run(name, '{"name": " "}', command="call")
    assert refused.returncode == 1 and "must not be empty" in refused.stdout


def test_bad_names_and_folders_in_use_are_refused(tmp_path):
    for bad in ["Hello", "my-tool", "../escape", "2fast", ""]:
        result = new(bad, "--lang", "python", cwd=tmp_path)
        assert result.returncode != 0 and "cannot name a tool project" in result.stderr, (bad, result.stderr)
    assert list(tmp_path.iterdir()) == []
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep")
    result = new("taken", "--lang", "rust", cwd=tmp_path)
    assert result.returncode != 0 and "not empty" in result.stderr
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"], "nothing half-written left behind"
