"""Network grants: outbound HTTP through wasi:http, per tool, to an
allow-list of hosts, against a local server on loopback (the fixture in
openmeteo_server.py). Everything not granted is refused with an error
that names the host and the tool, and the fixture proves nothing reached
it; raw sockets and name lookup stay denied even with HTTP granted."""

from __future__ import annotations

import json

import time

import pytest

from conftest import ERAS, LEGACY, RawServer, raw_text, read_journal, session, text_of, until
from openmeteo_server import OpenMeteoServer, expected_day, openmeteo  # noqa: F401 (fixture)

pytestmark = pytest.mark.anyio


def weather_config(api: OpenMeteoServer, grant: str | None = None) -> str:
    return f"""
[tools.get_weather]
network = ["{grant or api.authority}"]

[tools.get_weather.env]
FORECAST_API_URL = "{api.url}"
GEOCODING_API_URL = "{api.url}/"
"""


@pytest.mark.parametrize("era", ERAS)
async def test_get_weather_reads_the_granted_forecast_api(setup, openmeteo, era):
    setup.add("weather")
    setup.write_config(weather_config(openmeteo))
    async with session(setup, era) as c:
        result = await c.call_tool(
            "get_weather",
            {"city": "Berlin", "country": "DE", "start_date": "2026-12-01", "end_date": "2026-12-03"},
        )
        assert not result.is_error, text_of(result)
        weather = result.structured_content
    assert weather["place"]["name"] == "Berlin" and weather["place"]["timezone"] == "Europe/Berlin"
    assert [d["date"] for d in weather["days"]] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    for day in weather["days"]:
        expected = expected_day(day["date"])
        assert day["temperature_max_c"] == expected["temperature_2m_max"]
        assert day["temperature_min_c"] == expected["temperature_2m_min"]
        assert day["rain_chance_percent"] == expected["precipitation_probability_max"]
        assert day["wind_speed_max_kmh"] == expected["wind_speed_10m_max"]
    assert openmeteo.paths() == ["/v1/search", "/v1/forecast"]
    search = openmeteo.requests[0]
    assert search.query["name"] == "Berlin" and search.query["countryCode"] == "DE"


async def test_get_weather_errors_tell_the_model_what_to_do(setup, openmeteo):
    setup.add("weather")
    setup.write_config(weather_config(openmeteo))
    async with session(setup, LEGACY) as c:
        unknown = await c.call_tool(
            "get_weather", {"city": "Atlantis", "start_date": "2026-12-01", "end_date": "2026-12-01"}
        )
        assert unknown.is_error and "Atlantis" in text_of(unknown)
        backwards = await c.call_tool(
            "get_weather", {"city": "Paris", "start_date": "2026-12-05", "end_date": "2026-12-01"}
        )
        assert backwards.is_error
    # The reversed range was refused before any request.
    assert openmeteo.paths() == ["/v1/search"]


async def test_without_a_grant_get_weather_reaches_nothing(setup, openmeteo):
    setup.add("weather")
    setup.write_config(weather_config(openmeteo).replace(f'network = ["{openmeteo.authority}"]', ""))
    async with session(setup, LEGACY) as c:
        result = await c.call_tool(
            "get_weather", {"city": "Berlin", "start_date": "2026-12-01", "end_date": "2026-12-01"}
        )
        text = text_of(result)
        assert result.is_error and "toolcage refused" in text
        assert openmeteo.authority in text and "get_weather" in text and "no network grant" in text
    assert openmeteo.requests == []


async def test_everything_outside_the_grant_is_refused(setup, openmeteo, tmp_path):
    setup.add("misbehave")
    log = tmp_path / "journal.jsonl"
    other = OpenMeteoServer()
    setup.write_config(
        f"""
[journal]
path = "{log}"

[tools.fetch]
network = ["localhost:{openmeteo.port}"]
"""
    )
    try:
        async with session(setup, LEGACY) as c:

            async def fetch(url, **extra):
                return await c.call_tool("fetch", {"url": url, **extra})

            ok = await fetch(f"http://localhost:{openmeteo.port}/echo")
            assert not ok.is_error, text_of(ok)
            assert ok.structured_content["status"] == 200

            cases = {
                # The same server by IP literal: a literal matches only itself.
                f"http://127.0.0.1:{openmeteo.port}/echo": f"127.0.0.1:{openmeteo.port}",
                # Another port on the granted host.
                f"http://localhost:{other.port}/echo": f"localhost:{other.port}",
                # Another host, and the default port of the granted one.
                "http://evil.example/": "evil.example:80",
                "https://localhost/": "localhost:443",
                # A redirect from the granted host to one that is not.
                f"http://localhost:{openmeteo.port}/redirect?to=http://127.0.0.1:{other.port}/echo": f"127.0.0.1:{other.port}",
            }
            for url, host in cases.items():
                result = await fetch(url)
                text = text_of(result)
                assert result.is_error, f"{url} was not refused: {text}"
                assert "toolcage refused" in text and host in text and "`fetch`" in text, (url, text)
                assert f"localhost:{openmeteo.port}" in text  # what is granted
            # Forms a resolver reads as an IP address are refused outright.
            for url in ["http://2130706433/", "http://0x7f000001/", "http://127.0.0.1./"]:
                result = await fetch(url)
                assert result.is_error and "toolcage refused" in text_of(result), (url, text_of(result))
            # The only requests that arrived were to the granted authority.
            assert other.requests == []
            assert openmeteo.paths() == ["/echo", "/redirect"]

            # Raw sockets and name lookup stay denied with HTTP granted.
            tcp = await c.call_tool("tcp_connect", {"address": f"127.0.0.1:{other.port}"})
            assert tcp.is_error, text_of(tcp)
            lookup = await c.call_tool("resolve", {"address": f"localhost:{openmeteo.port}"})
            assert lookup.is_error, text_of(lookup)
            assert other.requests == []

        await until(lambda: sum(1 for e in read_journal(log) if e["tool"] == "fetch") == 9)
        fetches = [e for e in read_journal(log) if e["tool"] == "fetch"]
        assert fetches[0]["network"]["requests"] == 1 and fetches[0]["network"]["bytes_received"] > 0
        assert fetches[0]["network"]["hosts"] == [
            {"host": f"localhost:{openmeteo.port}", "sent": 1, "refused": 0}
        ]
        refused = {
            h["host"]: h["why"] for e in fetches for h in e.get("network", {}).get("hosts", []) if h["refused"]
        }
        assert refused[f"127.0.0.1:{openmeteo.port}"] == "not granted"
        assert refused["evil.example:80"] == "not granted"
    finally:
        other.close()


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_huge_response_is_cut_at_the_cap(setup, openmeteo, declared):
    setup.add("misbehave")
    setup.write_config(
        f'[tools.fetch]\nnetwork = ["{openmeteo.authority}"]\nhttp_max_response_kib = 256\n'
    )
    length = "" if declared else "&length=0"
    async with session(setup, LEGACY) as c:
        small = await c.call_tool("fetch", {"url": f"{openmeteo.url}/huge?bytes=100000{length}"})
        assert not small.is_error and small.structured_content["bytes"] == 100000, text_of(small)
        huge = await c.call_tool("fetch", {"url": f"{openmeteo.url}/huge?bytes=50000000{length}"})
        text = text_of(huge)
        assert huge.is_error and "cap of 262144 bytes" in text and "`fetch`" in text, text
        # The server keeps serving.
        assert not (await c.call_tool("fetch", {"url": f"{openmeteo.url}/echo"})).is_error


async def test_a_request_body_over_the_cap_is_not_sent(setup, openmeteo):
    setup.add("misbehave")
    setup.write_config(f'[tools.fetch]\nnetwork = ["{openmeteo.authority}"]\nhttp_max_request_kib = 1\n')
    async with session(setup, LEGACY) as c:
        result = await c.call_tool(
            "fetch", {"url": f"{openmeteo.url}/echo", "method": "POST", "body": "x" * 5000}
        )
        assert result.is_error and "cap of 1024 bytes" in text_of(result), text_of(result)
        fits = await c.call_tool("fetch", {"url": f"{openmeteo.url}/echo", "method": "POST", "body": "x" * 500})
        assert not fits.is_error, text_of(fits)
    assert [r.body_length for r in openmeteo.requests] == [500]


async def test_a_slow_server_hits_the_request_timeout_not_the_call(setup, openmeteo):
    setup.add("misbehave")
    setup.write_config(
        f'[tools.fetch]\nnetwork = ["{openmeteo.authority}"]\nhttp_timeout_ms = 300\ndeadline_ms = 60000\n'
    )
    async with session(setup, LEGACY) as c:
        started = time.monotonic()
        result = await c.call_tool("fetch", {"url": f"{openmeteo.url}/slow?ms=8000"})
        assert result.is_error and "timeout" in text_of(result).lower(), text_of(result)
        stalled = await c.call_tool("fetch", {"url": f"{openmeteo.url}/slow?ms=8000&after=headers"})
        assert stalled.is_error, text_of(stalled)
        # Both ended on the 300 ms request timeout, long before the
        # server would have answered (this bounds behaviour, not speed).
        assert time.monotonic() - started < 15
        assert not (await c.call_tool("fetch", {"url": f"{openmeteo.url}/echo"})).is_error


def test_bad_grants_are_config_errors(setup):
    setup.add("misbehave")
    for entry, needle in [
        ("*", "every host"),
        ("https://api.example.com", "not a URL"),
        ("api.example.com:99999", "port"),
    ]:
        setup.write_config(f'[tools.fetch]\nnetwork = ["{entry}"]\n')
        result = setup.run()
        assert result.returncode == 2, result.stderr
        assert "tools.fetch.network[0]" in result.stderr and needle in result.stderr, result.stderr


SECRET_VALUE = "Sup3rSecret-Value-42"


@pytest.mark.parametrize("how", ["result", "error", "panic"])
@pytest.mark.parametrize("log", ["debug", "trace", "info,toolcage=trace"])
def test_a_secret_never_reaches_the_log_or_the_journal(setup, tmp_path, how, log):
    setup.add("hostile")
    key = tmp_path / "api.key"
    key.write_text(SECRET_VALUE + "\n")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(
        f"""
[tools.leak]
network = ["127.0.0.1:9"]
[tools.leak.env]
API_KEY = {{ file = "{key}" }}
[journal]
path = "{journal}"
"""
    )
    probe = RawServer(setup, log=log)
    probe.initialize()
    probe.request("logging/setLevel", {"level": "debug"})
    result = probe.call("leak", {"how": how})
    # The tool may hand its secret to its client (the model): that is the
    # tool's own business, and the only place it goes.
    assert SECRET_VALUE in raw_text(result) or how == "panic", result
    probe.close()
    log_text = setup.stderr()
    journal_text = journal.read_text()
    assert "guest output" in log_text and "network request refused" in log_text, log_text[-3000:]
    for where, text in [("the log", log_text), ("the journal", journal_text)]:
        assert SECRET_VALUE.lower() not in text.lower(), f"the secret reached {where}"
    assert "[secret]" in log_text


def test_thousands_of_refused_requests_leave_a_bounded_record(setup, tmp_path):
    setup.add("hostile")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{journal}"\n')
    probe = RawServer(setup)
    probe.initialize()
    assert raw_text(probe.call("many_requests", {"count": 5000})) == "5000 of 5000 refused"
    probe.close()
    (line,) = journal.read_text().splitlines()
    entry = json.loads(line)
    network = entry["network"]
    assert network["refused"] == 5000 and network["requests"] == 0
    assert len(network["hosts"]) == 16 and network["other_hosts"] == 5000 - 16
    assert len(line) < 8192, len(line)
    # One log line per host of the record, one for the rest: not 5000.
    refusals = [l for l in setup.stderr().splitlines() if "network request refused" in l]
    assert len(refusals) <= 17, len(refusals)
