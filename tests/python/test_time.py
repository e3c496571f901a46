"""The bundled time tool through the official Python SDK, in both eras."""

import pytest
from mcp import MCPError
import mcp.types as types

from conftest import ERAS, session, text_of

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("era", ERAS)
async def test_lists_the_time_tools_with_schemas(setup, era):
    setup.add("time")
    async with session(setup, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"get_current_time", "convert_timezone"}

    current = tools["get_current_time"]
    assert "IANA" in current.description
    assert current.input_schema["type"] == "object"
    assert "timezone" in current.input_schema["properties"]
    assert current.input_schema.get("required", []) == []
    assert current.output_schema["type"] == "object"
    assert {"datetime", "utc_offset", "timezone"} <= set(current.output_schema["properties"])
    assert current.annotations.read_only_hint is True

    convert = tools["convert_timezone"]
    assert sorted(convert.input_schema["required"]) == ["time", "timezone"]
    assert "utc_offset" in convert.output_schema["properties"]


@pytest.mark.parametrize("era", ERAS)
async def test_calls_both_tools_and_gets_structured_output(setup, era):
    setup.add("time")
    async with session(setup, era) as client:
        await client.list_tools()
        now = await client.call_tool("get_current_time", {"timezone": "Asia/Kolkata"})
        assert not now.is_error, text_of(now)
        assert now.structured_content["timezone"] == "Asia/Kolkata"
        assert now.structured_content["datetime"].endswith("+05:30")
        assert now.structured_content["utc_offset"] == "+05:30"

        utc = await client.call_tool("get_current_time", {})
        assert utc.structured_content["timezone"] == "UTC"

        converted = await client.call_tool(
            "convert_timezone", {"time": "2026-07-01T12:00:00Z", "timezone": "America/New_York"}
        )
        assert not converted.is_error, text_of(converted)
        assert converted.structured_content["converted"]["datetime"] == "2026-07-01T08:00:00-04:00"
        assert converted.structured_content["utc_offset"] == "-04:00"
        assert converted.structured_content["converted"]["is_dst"] is True
        # Clients that ignore structured output still see the answer as text.
        assert "2026-07-01T08:00:00-04:00" in text_of(converted)


@pytest.mark.parametrize("era", ERAS)
async def test_bad_zone_and_bad_time_are_error_results_naming_the_value(setup, era):
    setup.add("time")
    async with session(setup, era) as client:
        await client.list_tools()
        zone = await client.call_tool("get_current_time", {"timezone": "Mars/Olympus_Mons"})
        assert zone.is_error
        assert "`Mars/Olympus_Mons`" in text_of(zone)

        when = await client.call_tool("convert_timezone", {"time": "next tuesday", "timezone": "UTC"})
        assert when.is_error
        assert "`next tuesday`" in text_of(when)


@pytest.mark.parametrize("era", ERAS)
async def test_unknown_tool_is_an_invalid_params_error(setup, era):
    setup.add("time")
    async with session(setup, era) as client:
        with pytest.raises(MCPError) as error:
            await client.call_tool("no_such_tool", {})
        assert error.value.code == types.INVALID_PARAMS
        assert "no_such_tool" in error.value.message
        # Still serving.
        ok = await client.call_tool("get_current_time", {})
        assert not ok.is_error


@pytest.mark.parametrize("era", ERAS)
async def test_arguments_that_break_the_schema_are_refused_before_the_tool_runs(setup, era):
    setup.add("time")
    async with session(setup, era) as client:
        await client.list_tools()
        result = await client.call_tool(
            "convert_timezone", {"time": 12, "timezone": "UTC", "extra": True}
        )
        assert result.is_error
        message = text_of(result)
        assert "do not match the input schema of tool `convert_timezone`" in message
        assert "/time" in message and "not of type" in message
        assert "extra" in message  # additional properties are listed too

        missing = await client.call_tool("convert_timezone", {"timezone": "UTC"})
        assert missing.is_error and '"time" is a required property' in text_of(missing)
    # The audit log records both calls as refused: the tool never ran.
    audit = [
        line
        for line in setup.stderr().splitlines()
        if "toolcage::audit" in line and "tool=convert_timezone" in line
    ]
    assert len(audit) == 2, audit
    assert all("outcome=refused" in line and "input schema" in line and "fuel_used=0" in line for line in audit)
