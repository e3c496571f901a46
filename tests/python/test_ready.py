"""Instances made ahead of their calls (runtime/src/sandbox/ready.rs): every
call still sees exactly its own grants, because what a call reaches is
bound at hand-over, and a component that reads the host while it is
instantiated never gets an instance made ahead."""

import json

import pytest

from conftest import ERAS, session, text_of

pytestmark = pytest.mark.anyio

# Both stdio layouts: in the one-thread one the next instance is made on the
# serving thread after the reply (moving to the worker pool if it yields).
LAYOUTS = pytest.mark.parametrize("stdio", ["[stdio]\none_thread = false\n", "[stdio]\none_thread = true\n"])


@LAYOUTS
async def test_a_constructor_sees_each_calls_own_environment(setup, stdio):
    """The C tool's constructor reads GREETING when the component is
    instantiated. Were it instantiated ahead of a call with nothing bound,
    the next call would see the placeholder's empty environment; each call
    must see the value granted when it runs, including after the grant
    changes between calls."""
    setup.add("ctor-c")
    setup.write_config('[tools.greeting_at_start]\nenv = { GREETING = "hello" }\n' + stdio)
    async with session(setup, ERAS[0]) as client:
        for _ in range(4):
            result = await client.call_tool("greeting_at_start", {})
            assert text_of(result) == "hello", text_of(result)
        setup.write_config('[tools.greeting_at_start]\nenv = { GREETING = "changed" }\n' + stdio)
        import anyio

        for _ in range(100):
            result = await client.call_tool("greeting_at_start", {})
            if text_of(result) == "changed":
                break
            await anyio.sleep(0.05)
        assert text_of(result) == "changed"
        for _ in range(3):
            assert text_of(await client.call_tool("greeting_at_start", {})) == "changed"
    assert "calls the host while it is instantiated" in setup.stderr()


@LAYOUTS
async def test_calls_on_ready_instances_see_their_own_roots(setup, tmp_path, stdio):
    """The filesystem tool's instances are made ahead (its instantiation
    reads nothing); the roots are bound per call: a call sees the folder
    granted when it runs, not the one of the call before."""
    setup.add("fs")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "only-in-a.txt").write_text("a")
    (b / "only-in-b.txt").write_text("b")
    setup.write_config(f'[defaults]\nroots = [{{ path = "{a}" }}]\n' + stdio)
    async with session(setup, ERAS[0]) as client:
        for _ in range(3):
            listing = text_of(await client.call_tool("list_directory", {"path": str(a)}))
            assert "only-in-a.txt" in listing
            refused = await client.call_tool("list_directory", {"path": str(b)})
            assert refused.is_error
        setup.write_config(f'[defaults]\nroots = [{{ path = "{b}" }}]\n' + stdio)
        import anyio

        for _ in range(100):
            result = await client.call_tool("list_directory", {"path": str(b)})
            if not result.is_error:
                break
            await anyio.sleep(0.05)
        assert "only-in-b.txt" in text_of(result)
        for _ in range(3):
            assert (await client.call_tool("list_directory", {"path": str(a)})).is_error
            assert "only-in-b.txt" in text_of(await client.call_tool("list_directory", {"path": str(b)}))
    assert "made ahead" in setup.stderr()
