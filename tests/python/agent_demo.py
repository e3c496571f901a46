"""The seed question, end to end: `toolcage agent` asked "I'm flying to the
Maldives tomorrow: should I take an umbrella?" against the scripted model
(model_server.py; no model weights here), with the real weather tool
granted to the Open-Meteo fixture (openmeteo_server.py) on loopback. Prints
the command, what it wrote to stdout and stderr, and the journal lines it
left. Its assertions are test_agent.py's; this is the transcript.

    TOOLCAGE_BIN=target/debug/toolcage TOOLCAGE_GUESTS=target/wasm32-wasip2/debug \\
    target/test-venv/bin/python tests/python/agent_demo.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from datetime import date, timedelta
from pathlib import Path

from conftest import BIN, GUEST_FILES, GUESTS
from model_server import ScriptedModel, Turn
from openmeteo_server import OpenMeteoServer

QUESTION = "I'm flying to the Maldives tomorrow: should I take an umbrella?"


def main() -> None:
    tomorrow = (date.today() + timedelta(days=1)).isoformat()

    def model(n: int, body: dict) -> Turn:
        if n == 0:
            return Turn(
                text="Let me look at tomorrow's forecast for Malé.\n",
                calls=[("get_weather", {"city": "Malé", "country": "MV", "start_date": tomorrow, "end_date": tomorrow})],
                usage=412,
            )
        # The second turn reads the tool's result the agent sent back.
        weather = json.loads([m for m in body["messages"] if m["role"] == "tool"][-1]["content"])
        day = weather["days"][0]
        advice = "Yes, take an umbrella." if day["rain_chance_percent"] >= 40 else "You can leave it at home."
        return Turn(text=f"Tomorrow in Malé there is a {day['rain_chance_percent']:.0f}% chance of rain. {advice}", usage=530)

    with tempfile.TemporaryDirectory() as root, OpenMeteoServer() as api, ScriptedModel(model) as scripted:
        root = Path(root)
        (root / "tools").mkdir()
        shutil.copyfile(GUESTS / GUEST_FILES["weather"], root / "tools" / GUEST_FILES["weather"])
        journal = root / "journal.jsonl"
        (root / "config.toml").write_text(
            f'[journal]\npath = "{journal}"\n\n[tools.get_weather]\nnetwork = ["{api.authority}"]\n\n'
            f'[tools.get_weather.env]\nFORECAST_API_URL = "{api.url}"\nGEOCODING_API_URL = "{api.url}/"\n'
        )
        command = ["toolcage", "agent", "--tools", "tools", "--config", "config.toml",
                   "--model", "gpt-4.1-mini", "--base-url", scripted.base_url, QUESTION]
        shown = " ".join(f'"{c}"' if " " in c else c for c in command)
        print(f"$ OPENAI_API_KEY=sk-... {shown}")
        result = subprocess.run(
            [str(BIN), *command[1:]],
            cwd=root,
            env={**os.environ, "OPENAI_API_KEY": "sk-demo"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        print(result.stderr + result.stdout, end="")
        print(f"(exit {result.returncode})\n\n$ cat journal.jsonl")
        print(journal.read_text(), end="")
        assert scripted.problems == [], scripted.problems


if __name__ == "__main__":
    main()
