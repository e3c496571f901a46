"""Resources and prompts served from a component (the conformance fixture),
through the official Python SDK, in both eras; and tool-only components
(built against the `tool-component` world) still loading beside it."""

import base64

import pytest
from mcp import MCPError
import mcp.types as types

from conftest import ERAS, LEGACY, MODERN, session, text_of

pytestmark = pytest.mark.anyio

PNG_PREFIX = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("era", ERAS)
async def test_lists_resources_and_templates(setup, era):
    setup.add("conformance")
    async with session(setup, era) as client:
        caps = client.initialize_result or client.discover_result
        assert caps.capabilities.resources is not None
        assert caps.capabilities.prompts is not None
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        templates = (await client.list_resource_templates()).resource_templates
    assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= set(resources)
    assert resources["test://static-text"].mime_type == "text/plain"
    assert resources["test://static-binary"].mime_type == "image/png"
    assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
    assert templates[0].mime_type == "application/json"


@pytest.mark.parametrize("era", ERAS)
async def test_reads_text_binary_and_templated_resources(setup, era):
    setup.add("conformance")
    async with session(setup, era) as client:
        text = (await client.read_resource("test://static-text")).contents
        binary = (await client.read_resource("test://static-binary")).contents
        templated = (await client.read_resource("test://template/123/data")).contents
    assert len(text) == 1
    assert str(text[0].uri) == "test://static-text"
    assert text[0].mime_type == "text/plain"
    assert text[0].text == "This is the content of the static text resource."

    assert binary[0].mime_type == "image/png"
    assert base64.b64decode(binary[0].blob).startswith(PNG_PREFIX)

    assert str(templated[0].uri) == "test://template/123/data"
    assert templated[0].mime_type == "application/json"
    import json

    assert json.loads(templated[0].text) == {
        "id": "123",
        "templateTest": True,
        "data": "Data for ID: 123",
    }


@pytest.mark.parametrize("era", ERAS)
async def test_unknown_resource_is_invalid_params_with_the_uri(setup, era):
    setup.add("conformance")
    async with session(setup, era) as client:
        for uri in ["test://nope", "test://template/1/2/data", "test://template//data"]:
            with pytest.raises(MCPError) as error:
                await client.read_resource(uri)
            assert error.value.code == types.INVALID_PARAMS
            assert error.value.error.data == {"uri": uri}
        # Still serving.
        assert (await client.read_resource("test://static-text")).contents


@pytest.mark.parametrize("era", ERAS)
async def test_lists_and_gets_prompts(setup, era):
    setup.add("conformance")
    async with session(setup, era) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        simple = await client.get_prompt("test_simple_prompt")
        with_args = await client.get_prompt(
            "test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"}
        )
        embedded = await client.get_prompt(
            "test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"}
        )
        image = await client.get_prompt("test_prompt_with_image")
    assert {
        "test_simple_prompt",
        "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource",
        "test_prompt_with_image",
        "test_input_required_result_prompt",
    } == set(prompts)
    arguments = {a.name: a for a in prompts["test_prompt_with_arguments"].arguments}
    assert set(arguments) == {"arg1", "arg2"}
    assert arguments["arg1"].required is True
    assert arguments["arg1"].description == "First test argument"
    assert not prompts["test_simple_prompt"].arguments
    assert prompts["test_simple_prompt"].description

    assert simple.messages[0].role == "user"
    assert simple.messages[0].content.text == "This is a simple prompt for testing."
    assert with_args.messages[0].content.text == "Prompt with arguments: arg1='hello', arg2='world'"

    resource = embedded.messages[0].content
    assert resource.type == "resource"
    assert str(resource.resource.uri) == "test://example-resource"
    assert resource.resource.mime_type == "text/plain"
    assert resource.resource.text == "Embedded resource content for testing."
    assert embedded.messages[1].content.type == "text"

    picture = image.messages[0].content
    assert picture.type == "image"
    assert picture.mime_type == "image/png"
    assert base64.b64decode(picture.data).startswith(PNG_PREFIX)


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_errors_are_invalid_params(setup, era):
    setup.add("conformance")
    async with session(setup, era) as client:
        with pytest.raises(MCPError) as error:
            await client.get_prompt("no_such_prompt")
        assert error.value.code == types.INVALID_PARAMS
        assert "no_such_prompt" in error.value.message
        with pytest.raises(MCPError) as error:
            await client.get_prompt("test_prompt_with_arguments", {"arg1": "only one"})
        assert error.value.code == types.INVALID_PARAMS
        assert "arg2" in error.value.message


@pytest.mark.parametrize("era", ERAS)
async def test_tool_only_components_load_beside_resources(setup, era):
    # `liar` is built against the tools-only `tool-component` world.
    setup.add("conformance")
    setup.add("liar")
    async with session(setup, era) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"bad_output", "test_simple_text"} <= names
        result = await client.call_tool("test_simple_text", {})
        assert not result.is_error, text_of(result)
        assert len((await client.list_prompts()).prompts) == 5


async def test_cli_list_shows_tool_only_and_full_components(setup):
    setup.add("conformance")
    setup.add("time")
    result = setup.run()
    assert result.returncode == 0, result.stderr
    assert "test_simple_text" in result.stdout
    assert "get_current_time" in result.stdout


# ---------------------------------------------------------------- subscriptions

WATCHED = "test://watched-resource"
TEMPLATED = "test://template/7/data"


def rebuilt(data: bytes, mark: bytes) -> bytes:
    """The same component with a custom section appended: other bytes (a new
    digest, so a reload serves "another version"), the same behaviour."""
    name = b"toolcage-test"
    body = bytes([len(name)]) + name + mark
    size, leb = len(body), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        leb += bytes([byte | (0x80 if size else 0)])
        if not size:
            break
    return data + b"\x00" + leb + body


class Updates:
    def __init__(self):
        self.uris: list[str] = []

    async def on_message(self, message):
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def wait_for(self, n: int, timeout: float = 30):
        import anyio

        with anyio.fail_after(timeout):
            while len(self.uris) < n:
                await anyio.sleep(0.02)


def replace_file(path, data: bytes):
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    part.rename(path)


# The SDK warns that 2026-07-28 removed these methods; these sessions are 2025-11-25.
LEGACY_ONLY = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@LEGACY_ONLY
async def test_legacy_subscriptions_hear_of_a_reload_and_bad_requests_get_clear_errors(setup):
    import anyio

    setup.add("conformance")
    component = next(setup.tools_dir.glob("*.wasm"))
    original = component.read_bytes()
    updates = Updates()
    async with session(setup, LEGACY, message_handler=updates.on_message) as client:
        assert client.initialize_result.capabilities.resources.subscribe is True
        await client.subscribe_resource(WATCHED)
        await client.subscribe_resource(TEMPLATED)  # a template's URI
        await client.subscribe_resource(WATCHED)  # again: still one subscription
        await client.subscribe_resource("test://static-text")
        await client.unsubscribe_resource("test://static-text")
        # Unknown resources, unsubscribing twice: invalid params, with the URI.
        for bad in (
            lambda: client.subscribe_resource("test://no-such-resource"),
            lambda: client.unsubscribe_resource("test://static-text"),
        ):
            with pytest.raises(MCPError) as error:
                await bad()
            assert error.value.code == types.INVALID_PARAMS
            assert error.value.data["uri"].startswith("test://")
        with pytest.raises(MCPError) as error:
            await client.subscribe_resource("test://" + "x" * 9000)
        assert error.value.code == types.INVALID_PARAMS and "limit" in error.value.message
        # A new version of the file serving them: one update per URI held.
        replace_file(component, rebuilt(original, b"v2"))
        await updates.wait_for(2)
        await anyio.sleep(0.5)
        assert sorted(updates.uris) == sorted([WATCHED, TEMPLATED])
        # The file gone: served by nothing now, each subscriber is told.
        component.unlink()
        await updates.wait_for(4)
        await anyio.sleep(0.5)
        assert sorted(updates.uris[2:]) == sorted([WATCHED, TEMPLATED])
        # Still serving requests.
        assert (await client.list_resources()).resources == []


@LEGACY_ONLY
async def test_subscriptions_are_bounded_per_session(setup):
    setup.add("conformance")
    async with session(setup, LEGACY) as client:
        for i in range(1024):
            await client.subscribe_resource(f"test://template/{i}/data")
        with pytest.raises(MCPError) as error:
            await client.subscribe_resource("test://template/x/data")
        assert error.value.code == types.INVALID_PARAMS and "1024" in error.value.message
        # One already held is no new subscription, and a freed slot is usable.
        await client.subscribe_resource("test://template/0/data")
        await client.unsubscribe_resource("test://template/1/data")
        await client.subscribe_resource("test://template/x/data")


async def test_modern_clients_subscribe_on_their_listen_stream(setup):
    from mcp.client.subscriptions import listen
    import anyio

    setup.add("conformance")
    component = next(setup.tools_dir.glob("*.wasm"))
    async with session(setup, MODERN) as client:
        # The 2026-07-28 revision removed resources/subscribe.
        with pytest.raises(MCPError) as error:
            await client.send_request(
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=WATCHED)),
                types.EmptyResult,
            )
        assert error.value.code == types.METHOD_NOT_FOUND
        requested = [WATCHED, "test://no-such-resource"]
        async with listen(client, resource_subscriptions=requested) as subscription:
            # Only what is served is honoured.
            assert subscription.honored.resource_subscriptions == [WATCHED]
            replace_file(component, rebuilt(component.read_bytes(), b"v2"))
            with anyio.fail_after(30):
                event = await anext(aiter(subscription))
            assert WATCHED in str(event)
