"""`toolcage agent`: the loop around a model behind an OpenAI-compatible
Chat Completions API, driven against a scripted model (model_server.py:
no model weights can be had here, so the model's turns are a script; every
request the agent sends is checked with the official `openai` package's
types). The tools run in the sandbox like any other call: the real weather
tool against the Open-Meteo fixture, the filesystem tool with a confirmation
on a real terminal (a pty), the misbehaving tools for limits."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from datetime import date, timedelta

import pytest

from conftest import BIN, read_journal
from model_server import ScriptedModel, Turn
from openmeteo_server import OpenMeteoServer, expected_day, openmeteo  # noqa: F401 (fixture)

KEY = "sk-test-0123456789abcdef"
UMBRELLA = "I'm flying to the Maldives tomorrow: should I take an umbrella?"


@pytest.fixture
def journal(setup, tmp_path):
    """A config with a journal, for `setup.write_config` to extend."""
    path = tmp_path / "journal.jsonl"
    setup.journal = path
    setup.base_config = f'[journal]\npath = "{path}"\n'
    setup.write_config(setup.base_config)
    return path


def agent(setup, model, *args, prompt=UMBRELLA, env=None, stdin=subprocess.DEVNULL, timeout=120):
    """Run `toolcage agent` to its end; the API key in the environment
    unless `env` says otherwise."""
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOOLCAGE_LOG")}
    command = [str(BIN), *setup.args("agent"), "--model", "scripted-model", "--base-url", model.base_url, *args]
    if prompt is not None:
        command.append(prompt)
    return subprocess.run(
        command,
        env={**base, "OPENAI_API_KEY": KEY, **(env or {})},
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def calls_of(lines):
    return [line for line in lines if "event" not in line]


def runs_of(lines):
    return [line for line in lines if line.get("event") == "agent"]


def tool_messages(body):
    return [m for m in body["messages"] if m["role"] == "tool"]


def weather_config(api: OpenMeteoServer) -> str:
    return f"""
[tools.get_weather]
network = ["{api.authority}"]

[tools.get_weather.env]
FORECAST_API_URL = "{api.url}"
GEOCODING_API_URL = "{api.url}/"
"""


def test_the_umbrella_question_is_answered_from_the_sandboxed_weather_tool(setup, journal, openmeteo, tmp_path):
    setup.add("weather")
    setup.add("time")
    setup.write_config(setup.base_config + weather_config(openmeteo))
    tomorrow = (date.today() + timedelta(days=1)).isoformat()
    answer = "Rain is likely in Malé tomorrow, so take the umbrella."
    system = tmp_path / "system.txt"
    system.write_text("You answer travel questions with the tools you have.")
    with ScriptedModel(
        [
            Turn(
                text="Let me check the forecast.",
                calls=[("get_weather", {"city": "Malé", "country": "MV", "start_date": tomorrow, "end_date": tomorrow})],
                usage=120,
            ),
            Turn(text=answer, usage=200),
        ]
    ) as model:
        result = agent(setup, model, "--system-file", str(system))
    assert result.returncode == 0, result.stderr
    assert model.problems == []
    # The answer streamed to stdout; the call noted on stderr.
    assert result.stdout == "Let me check the forecast." + answer + "\n"
    assert "[tool] get_weather" in result.stderr
    first, second = model.requests
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == UMBRELLA
    assert first["stream"] is True
    declared = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(declared) == {"get_weather", "get_current_time", "convert_timezone"}
    assert "city" in declared["get_weather"]["parameters"]["properties"]
    # The tool's structured result, as JSON, answers the call it was for.
    (message,) = tool_messages(second)
    assert message["tool_call_id"] == "call_0_0"
    weather = json.loads(message["content"])
    assert weather["place"]["name"] == "Malé" and weather["place"]["timezone"] == "Indian/Maldives"
    (day,) = weather["days"]
    assert day["date"] == tomorrow
    assert day["rain_chance_percent"] == expected_day(tomorrow)["precipitation_probability_max"]
    assert openmeteo.paths() == ["/v1/search", "/v1/forecast"]
    # The key went in the Authorization header, and nowhere else.
    assert [h["authorization"] for h in model.headers] == [f"Bearer {KEY}"] * 2
    lines = read_journal(journal)
    assert KEY not in journal.read_text() and KEY not in result.stderr and KEY not in result.stdout
    (call,) = calls_of(lines)
    (run,) = runs_of(lines)
    assert call["tool"] == "get_weather" and call["outcome"] == "ok"
    assert call["client"]["transport"] == "agent"
    assert call["client"]["request"] == f"{run['run']}/1/call_0_0"
    assert run["model"] == "scripted-model" and run["base_url"] == model.base_url
    assert (run["steps"], run["calls"], run["tokens"], run["ending"]) == (2, 1, 320, "answered")
    assert run["turns"] == [{"calls": ["get_weather"], "tokens": 120}, {"calls": [], "tokens": 200}]
    shown = subprocess.run(
        [str(BIN), "journal", "--file", str(journal)], capture_output=True, text=True, timeout=60
    ).stdout.splitlines()
    assert "get_weather" in shown[0] and "[agent]" in shown[0]
    assert f"agent run {run['run']}  model scripted-model  2 turns, 1 calls, 320 tokens  answered" in shown[1]


def test_parallel_calls_run_together_and_answer_in_the_models_order(setup, journal):
    setup.add("misbehave")
    setup.add("time")
    with ScriptedModel(
        [
            Turn(
                calls=[
                    ("slow", {"ms": 1500}),
                    ("get_current_time", {"timezone": "Asia/Tokyo"}),
                    ("slow", {"ms": 300}),
                ]
            ),
            Turn(text="done"),
        ]
    ) as model:
        result = agent(setup, model, prompt="three things at once")
    assert result.returncode == 0, result.stderr
    assert model.problems == []
    messages = tool_messages(model.requests[1])
    assert [m["tool_call_id"] for m in messages] == ["call_0_0", "call_0_1", "call_0_2"]
    long, clock, short = (json.loads(m["content"]) for m in messages)
    assert clock["timezone"] == "Asia/Tokyo"
    # The short sleep started before the long one ended: they overlapped.
    assert short["start_ns"] < long["end_ns"] and long["start_ns"] < short["end_ns"]
    lines = read_journal(journal)
    assert sorted(c["tool"] for c in calls_of(lines)) == ["get_current_time", "slow", "slow"]
    assert runs_of(lines)[0]["calls"] == 3


def test_calls_the_model_got_wrong_are_answered_with_errors_and_nothing_runs(setup, journal):
    setup.add("time")
    with ScriptedModel(
        [
            Turn(
                calls=[
                    ("delete_everything", {}),
                    ("get_current_time", '{"timezone": "UTC"'),
                    ("get_current_time", '["UTC"]'),
                    ("get_current_time", {"timezone": 5}),
                    ("get_current_time", {"timezone": "Mars/Olympus_Mons"}),
                ]
            ),
            Turn(text="sorry"),
        ]
    ) as model:
        result = agent(setup, model, prompt="what time is it")
    assert result.returncode == 0, result.stderr
    assert model.problems == []
    unknown, not_json, not_object, bad_type, bad_zone = (m["content"] for m in tool_messages(model.requests[1]))
    assert unknown.startswith("Error: there is no tool named `delete_everything`") and "get_current_time" in unknown
    assert not_json.startswith("Error: the arguments are not JSON") and "not run" in not_json
    assert not_object.startswith("Error: the arguments are not a JSON object")
    assert bad_type.startswith("Error:") and "timezone" in bad_type
    assert bad_zone.startswith("Error:") and "Mars/Olympus_Mons" in bad_zone
    # Only the two with an object of arguments reached the dispatcher;
    # neither ran to a result.
    calls = calls_of(read_journal(journal))
    assert len(calls) == 2 and all(c["outcome"] != "ok" for c in calls), calls


def fs_setup(setup, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    victim = data / "notes.txt"
    victim.write_text("keep me")
    setup.add("fs")
    setup.write_config(setup.base_config + f'\n[defaults]\nroots = [{{ path = "{data}", mode = "rw" }}]\n')
    return victim


def delete_script(victim):
    return [Turn(calls=[("delete_file", {"path": str(victim)})]), Turn(text="finished")]


def on_a_terminal(setup, model, answer: bytes):
    """Run the agent with a pty as its stdin; answer the confirmation
    question with `answer` when it shows on stderr."""
    terminal, its_end = pty.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOOLCAGE_LOG")}
    process = subprocess.Popen(
        [str(BIN), *setup.args("agent"), "--model", "m", "--base-url", model.base_url, "clean up"],
        stdin=its_end,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=base,
    )
    os.close(its_end)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"[y/N]" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1)
            if ready:
                piece = os.read(process.stderr.fileno(), 4096)
                if not piece:
                    break
                seen += piece
        assert b"[y/N]" in seen, seen.decode(errors="replace")
        os.write(terminal, answer)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        os.close(terminal)
    return process.returncode, out.decode(), (seen + err).decode()


@pytest.mark.parametrize("answer", [b"n\n", b"y\n"])
def test_a_destructive_call_is_confirmed_on_the_terminal(setup, journal, tmp_path, answer):
    victim = fs_setup(setup, tmp_path)
    with ScriptedModel(delete_script(victim)) as model:
        code, out, err = on_a_terminal(setup, model, answer)
    assert code == 0, err
    assert model.problems == []
    assert "delete_file" in err and "Run it?" in err
    (message,) = tool_messages(model.requests[1])
    (call,) = calls_of(read_journal(journal))
    if answer == b"y\n":
        assert not victim.exists()
        assert "Successfully deleted" in message["content"] and call["outcome"] == "ok"
    else:
        assert victim.read_text() == "keep me"
        assert message["content"].startswith("Error:") and "declined" in message["content"], message
        assert call["outcome"] == "refused"


def test_without_a_terminal_a_destructive_call_is_refused_unless_yes(setup, journal, tmp_path):
    victim = fs_setup(setup, tmp_path)
    with ScriptedModel(delete_script(victim)) as model:
        refused = agent(setup, model, prompt="clean up")
    assert refused.returncode == 0, refused.stderr
    assert victim.read_text() == "keep me"
    (message,) = tool_messages(model.requests[1])
    assert "--yes" in message["content"], message
    with ScriptedModel(delete_script(victim)) as model:
        confirmed = agent(setup, model, "--yes", prompt="clean up")
    assert confirmed.returncode == 0, confirmed.stderr
    assert not victim.exists()


def test_an_endless_series_of_calls_ends_at_the_step_limit(setup, journal):
    setup.add("time")
    endless = lambda n, body: Turn(calls=[("get_current_time", {"timezone": "UTC"})])  # noqa: E731
    with ScriptedModel(endless) as model:
        result = agent(setup, model, "--max-steps", "4", prompt="loop")
    assert result.returncode == 1
    assert "stopped: the step limit of 4 model turns was reached (`--max-steps`)" in result.stderr
    assert len(model.requests) == 4 and model.problems == []
    lines = read_journal(journal)
    assert len(calls_of(lines)) == 4
    (run,) = runs_of(lines)
    assert (run["ending"], run["steps"]) == ("step_limit", 4)
    assert "step limit" in run["message"]


@pytest.mark.parametrize("where", ["model", "stream", "tool"])
def test_the_time_limit_ends_a_slow_model_or_a_slow_tool(setup, journal, where):
    setup.add("misbehave")
    turns = {
        # No answer at all; an answer that starts and then stalls; a tool
        # that runs past the limit.
        "model": [Turn(text="never", delay=60)],
        "stream": [Turn(text="thinking...", stall=60)],
        "tool": [Turn(calls=[("slow", {"ms": 60_000})]), Turn(text="never asked")],
    }[where]
    with ScriptedModel(turns) as model:
        result = agent(setup, model, "--max-seconds", "3", prompt="hurry", timeout=50)
    assert result.returncode == 1
    assert "stopped: the time limit of 3 s was reached (`--max-seconds`)" in result.stderr
    lines = read_journal(journal)
    (run,) = runs_of(lines)
    assert run["ending"] == "time_limit"
    if where == "tool":
        (call,) = calls_of(lines)
        assert call["tool"] == "slow" and call["outcome"] == "cancelled"
        assert len(model.requests) == 1


def test_usage_over_the_token_budget_ends_the_run_before_its_calls(setup, journal):
    setup.add("time")
    with ScriptedModel(
        [Turn(text="one", calls=[("get_current_time", {})], usage=60), Turn(calls=[("get_current_time", {})], usage=70)]
    ) as model:
        result = agent(setup, model, "--max-tokens", "100", prompt="count")
    assert result.returncode == 1
    assert "stopped: the token budget of 100 was used up (130 tokens; `--max-tokens`)" in result.stderr
    lines = read_journal(journal)
    # The first turn's call ran; the second turn's, over the budget, did not.
    assert len(calls_of(lines)) == 1
    assert runs_of(lines)[0]["tokens"] == 130


BAD_REPLIES = {
    "not JSON": (Turn(raw=b"<html>gateway</html>", stream=False), "not JSON"),
    "no choices": (Turn(raw=b'{"id": "x", "object": "chat.completion"}', stream=False), "no `choices[0].message`"),
    "a chunk that is not JSON": (
        Turn(raw=b"data: {oops\n\n", content_type="text/event-stream"),
        "a chunk that is not JSON",
    ),
    "cut before DONE": (Turn(calls=[("get_current_time", {})], cut=True), "ended before `[DONE]`"),
    "a call with no name": (
        Turn(
            raw=b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
            b'"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{}"}}]}}]}\n\ndata: [DONE]\n\n',
            content_type="text/event-stream",
        ),
        "a tool call without a name",
    ),
    "an error in the stream": (
        Turn(raw=b'data: {"error": {"message": "overloaded"}}\n\n', content_type="text/event-stream"),
        "the model reported an error: overloaded",
    ),
    "HTTP 401": (
        Turn(status=401, raw=b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}'),
        "the model answered HTTP 401 Unauthorized: Incorrect API key provided",
    ),
    "HTTP 429": (Turn(status=429, raw=b'{"error": {"message": "Rate limit reached"}}'), "HTTP 429"),
    "HTTP 500 text": (Turn(status=500, raw=b"upstream \x1b[31mbroke", content_type="text/plain"), "HTTP 500"),
    "over the size cap": (Turn(raw=b"x" * (17 * 1024 * 1024), stream=False), "over the cap"),
}


@pytest.mark.parametrize("case", BAD_REPLIES)
def test_a_bad_reply_ends_the_run_with_a_clear_message_and_runs_nothing(setup, journal, case):
    setup.add("time")
    turn, expected = BAD_REPLIES[case]
    with ScriptedModel([turn, Turn(text="unreachable")]) as model:
        result = agent(setup, model, prompt="what time is it")
    assert result.returncode == 1, result.stderr
    assert expected in result.stderr, result.stderr
    assert "\x1b" not in result.stderr
    assert len(model.requests) == 1
    lines = read_journal(journal)
    assert calls_of(lines) == []
    (run,) = runs_of(lines)
    assert run["ending"] == "model_error" and expected in run["message"]


def test_an_unreachable_model_and_bad_settings_are_clear_errors(setup, tmp_path):
    setup.add("time")

    class Nowhere:
        # A port nothing listens on.
        base_url = "http://127.0.0.1:9/v1"

    unreachable = agent(setup, Nowhere, prompt="hi")
    assert unreachable.returncode == 1 and "stopped: cannot reach the model" in unreachable.stderr

    class Remote:
        base_url = "http://api.example.com/v1"

    plain = agent(setup, Remote, prompt="hi")
    assert plain.returncode == 2 and "must use https" in plain.stderr
    missing = agent(setup, Nowhere, "--api-key-file", str(tmp_path / "absent"), prompt="hi")
    assert missing.returncode == 2 and "cannot read the API key file" in missing.stderr
    empty = agent(setup, Nowhere, prompt=None, stdin=subprocess.DEVNULL)
    assert empty.returncode == 2 and "no prompt" in empty.stderr


def test_the_key_from_a_file_the_prompt_from_stdin_and_a_non_streamed_model(setup, tmp_path):
    setup.add("time")
    key = tmp_path / "key"
    key.write_text("sk-from-file\n")
    with ScriptedModel(
        [Turn(calls=[("get_current_time", {"timezone": "UTC"})], stream=False), Turn(text="noon\x1b[2J", stream=False)]
    ) as model:
        base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOOLCAGE_LOG")}
        result = subprocess.run(
            [str(BIN), *setup.args("agent"), "--model", "m", "--base-url", model.base_url, "--api-key-file", str(key)],
            input="what time is it?\n",
            env=base,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert model.problems == []
    assert model.requests[0]["messages"][0] == {"role": "user", "content": "what time is it?\n"}
    assert [h["authorization"] for h in model.headers] == ["Bearer sk-from-file"] * 2
    # What the model writes cannot drive the terminal.
    assert result.stdout == "noon[2J\n"


def test_a_conversation_on_the_terminal_keeps_its_history(setup):
    setup.add("time")
    with ScriptedModel(
        [Turn(text="first answer"), Turn(calls=[("get_current_time", {})]), Turn(text="second answer")]
    ) as model:
        terminal, its_end = pty.openpty()
        base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOOLCAGE_LOG")}
        process = subprocess.Popen(
            [str(BIN), *setup.args("agent"), "--model", "m", "--base-url", model.base_url],
            stdin=its_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=base,
        )
        os.close(its_end)
        try:
            os.write(terminal, b"hello\n")
            deadline = time.monotonic() + 60
            while len(model.requests) < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            os.write(terminal, b"and now?\n")
            while len(model.requests) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            os.write(terminal, b"exit\n")
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
            os.close(terminal)
    assert process.returncode == 0, err.decode()
    assert out.decode() == "first answer\nsecond answer\n"
    assert model.problems == []
    roles = [m["role"] for m in model.requests[2]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "tool"]
    assert model.requests[2]["messages"][0]["content"] == "hello"
