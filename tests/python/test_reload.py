"""Hot reload through real MCP clients: tools and config change under a
running server with no failed call, and clients of both eras are told."""

from __future__ import annotations

import os
import re
import shutil
import time

import anyio
import mcp.types as types
import pytest
from mcp.client.subscriptions import listen

from conftest import ERAS, GUEST_FILES, GUESTS, LEGACY, MODERN, RawServer, raw_text, session, text_of

pytestmark = pytest.mark.anyio

V1 = (GUESTS / GUEST_FILES["v1"]).read_bytes()
V2 = (GUESTS / GUEST_FILES["v2"]).read_bytes()


class Changes:
    """Counts `notifications/tools/list_changed` (and log warnings) a
    2025-11-25 client receives."""

    def __init__(self):
        self.count = 0
        self.warnings: list[str] = []

    async def on_message(self, message):
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1

    async def on_log(self, params):
        if params.level == "warning":
            self.warnings.append(str(params.data))

    async def wait_for(self, n: int, timeout: float = 30):
        with anyio.fail_after(timeout):
            while self.count < n:
                await anyio.sleep(0.02)


async def version(client, sleep_ms: int = 0) -> str:
    result = await client.call_tool("which_version", {"sleep_ms": sleep_ms})
    assert not result.is_error, text_of(result)
    return result.structured_content["version"]


async def names(client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def eventually(predicate, timeout: float = 30):
    with anyio.fail_after(timeout):
        while not await predicate():
            await anyio.sleep(0.05)


def reloads(log: str) -> int:
    return len(re.findall(r"toolcage::watch: reload", log))


async def test_a_new_tool_appears_and_a_removed_one_goes_with_a_notification(setup):
    setup.add("time")
    changes = Changes()
    async with session(setup, LEGACY, message_handler=changes.on_message) as client:
        assert await names(client) == {"get_current_time", "convert_timezone"}
        (setup.tools_dir / "versioned.wasm").write_bytes(V1)
        await changes.wait_for(1)
        assert "which_version" in await names(client)
        assert await version(client) == "v1"
        (setup.tools_dir / "versioned.wasm").unlink()
        await changes.wait_for(2)
        assert await names(client) == {"get_current_time", "convert_timezone"}
        # Files that are not *.wasm are ignored.
        (setup.tools_dir / "notes.txt").write_text("hello")
        (setup.tools_dir / ".versioned.wasm.swp").write_bytes(V1)
        await anyio.sleep(1)
        assert changes.count == 2


async def test_a_tools_folder_named_relative_to_the_working_directory_reloads(setup):
    """`serve --tools tools`, from the folder that holds it: the watcher
    saw the events (absolute paths) but never matched them with the
    relative folder, so nothing ever reloaded."""
    import mcp
    from mcp.client.stdio import stdio_client

    setup.add("time")
    args = setup.args()
    args[args.index(str(setup.tools_dir))] = "tools"
    params = mcp.StdioServerParameters(command=setup.params().command, args=args, cwd=str(setup.root))
    changes = Changes()
    with open(setup.stderr_path, "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with mcp.ClientSession(read, write, message_handler=changes.on_message) as client:
                await client.initialize()
                assert await names(client) == {"get_current_time", "convert_timezone"}
                (setup.tools_dir / "versioned.wasm").write_bytes(V1)
                await changes.wait_for(1)
                assert "which_version" in await names(client)


async def test_a_modern_client_hears_of_changes_on_subscriptions_listen(setup):
    setup.add("time")
    async with session(setup, MODERN) as client:
        async with listen(client, tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed
            (setup.tools_dir / "versioned.wasm").write_bytes(V1)
            with anyio.fail_after(30):
                event = await anext(aiter(subscription))
            assert event is not None
        assert "which_version" in await names(client)
        assert await version(client) == "v1"


async def test_a_component_copied_slowly_is_never_loaded_half_written(setup):
    changes = Changes()
    async with session(setup, LEGACY, message_handler=changes.on_message) as client:
        chunk = len(V1) // 12 + 1
        with open(setup.tools_dir / "versioned.wasm", "wb") as f:
            for i in range(0, len(V1), chunk):
                f.write(V1[i : i + chunk])
                f.flush()
                # Slower than the debounce: partial files do get looked at.
                await anyio.sleep(0.3)
                if i + chunk < len(V1):
                    assert "which_version" not in await names(client)
        await changes.wait_for(1)
        assert await version(client) == "v1"
    log = setup.stderr()
    loaded = re.findall(r"loaded tool component file=\S+versioned.wasm digest=(\w+)", log)
    assert len(set(loaded)) == 1, f"more than one version was loaded: {loaded}"


@pytest.mark.parametrize("era", ERAS)
async def test_v2_over_v1_under_continuous_calls_fails_no_call(setup, era):
    path = setup.tools_dir / "versioned.wasm"
    path.write_bytes(V1)
    seen: list[str] = []
    async with session(setup, era) as client:
        await client.list_tools()
        stop = anyio.Event()

        async def caller():
            while not stop.is_set():
                seen.append(await version(client))  # raises on any failed call

        async with anyio.create_task_group() as group:
            group.start_soon(caller)
            group.start_soon(caller)
            await anyio.sleep(0.3)
            # Overwritten in place, in pieces: the file is briefly truncated.
            with open(path, "wb") as f:
                f.write(V2[: len(V2) // 2])
                f.flush()
                await anyio.sleep(0.05)
                f.write(V2[len(V2) // 2 :])
            await eventually(lambda: _last_is(seen, "v2"))
            await anyio.sleep(0.3)
            stop.set()
    assert set(seen) <= {"v1", "v2"} and seen[0] == "v1" and seen[-1] == "v2"
    # Once v2 answers, v1 never does again (calls started after the swap).
    first_v2 = seen.index("v2")
    # Two callers: one call already in flight on v1 may finish after.
    assert seen[first_v2:].count("v1") <= 1, seen


async def _last_is(seen, value):
    return bool(seen) and seen[-1] == value


async def test_garbage_over_a_good_tool_keeps_the_good_one_and_says_why(setup):
    path = setup.tools_dir / "versioned.wasm"
    path.write_bytes(V1)
    changes = Changes()
    async with session(setup, LEGACY, message_handler=changes.on_message, logging_callback=changes.on_log) as client:
        assert await version(client) == "v1"
        path.write_bytes(b"\0asm garbage garbage garbage")
        with anyio.fail_after(30):
            while not changes.warnings:
                await anyio.sleep(0.05)
        assert any("versioned.wasm" in w and "previous version keeps serving" in w for w in changes.warnings)
        assert await version(client) == "v1"
        assert changes.count == 0, "the served tools did not change"
        # Fixed: the new version loads.
        path.write_bytes(V2)
        await changes.wait_for(1)
        assert await version(client) == "v2"
    listing = setup.run("--json")  # a fresh process reports the bad file
    path.write_bytes(b"garbage")
    listing = setup.run("--json")
    import json

    (report,) = json.loads(listing.stdout)["files"]
    assert report["status"] == "failed" and "not a WebAssembly component" in report["error"]


async def test_a_burst_of_rewrites_gives_a_handful_of_reloads_and_the_last_file(setup):
    path = setup.tools_dir / "versioned.wasm"
    path.write_bytes(V1)
    async with session(setup, LEGACY) as client:
        assert await version(client) == "v1"
        before = reloads(setup.stderr())
        for i in range(100):
            path.write_bytes(V2 if i % 2 == 0 else V1)
        path.write_bytes(V2)
        await eventually(lambda: _version_is(client, "v2"))
        await anyio.sleep(1)  # let any trailing reload finish
        assert await version(client) == "v2"
    count = reloads(setup.stderr()) - before
    assert 1 <= count <= 5, f"{count} reloads for one burst"


async def _version_is(client, expected):
    return await version(client) == expected


async def test_unchanged_content_is_not_recompiled(setup):
    path = setup.tools_dir / "versioned.wasm"
    path.write_bytes(V1)
    async with session(setup, LEGACY) as client:
        assert await version(client) == "v1"
        before = setup.stderr().count("loaded tool component")
        os.utime(path)
        path.write_bytes(V1)  # same bytes
        await anyio.sleep(1.5)
        assert await version(client) == "v1"
    log = setup.stderr()
    assert "unchanged; reusing the loaded component" in log
    # Logged as loaded again, but from the reused component, never compiled.
    assert "cached=false" not in log.split("reload")[-1] if "reload" in log else True
    assert log.count("loaded tool component") >= before


async def test_the_folder_deleted_and_recreated(setup):
    setup.add("time")
    changes = Changes()
    async with session(setup, LEGACY, message_handler=changes.on_message) as client:
        assert await names(client)
        shutil.rmtree(setup.tools_dir)
        await changes.wait_for(1)
        assert await names(client) == set()
        setup.tools_dir.mkdir()
        await anyio.sleep(0.5)
        setup.add("time")
        await changes.wait_for(2)
        assert await names(client) == {"get_current_time", "convert_timezone"}
        assert not (await client.call_tool("get_current_time", {})).is_error


async def test_a_symlinked_tool_file_loads(setup, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "v.wasm").write_bytes(V1)
    changes = Changes()
    async with session(setup, LEGACY, message_handler=changes.on_message) as client:
        os.symlink(elsewhere / "v.wasm", setup.tools_dir / "versioned.wasm")
        await changes.wait_for(1)
        assert await version(client) == "v1"


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_removed_during_a_call_finishes_that_call(setup, era):
    path = setup.tools_dir / "versioned.wasm"
    path.write_bytes(V1)
    async with session(setup, era) as client:
        await client.list_tools()
        results = []

        async def slow_call():
            results.append(await version(client, sleep_ms=1500))

        async with anyio.create_task_group() as group:
            group.start_soon(slow_call)
            await anyio.sleep(0.3)
            path.unlink()
        assert results == ["v1"]
        await eventually(lambda: _gone(client))


async def _gone(client):
    return "which_version" not in await names(client)


async def test_config_changes_apply_to_later_calls_and_bad_ones_are_refused(setup):
    setup.add("misbehave")
    setup.write_config("[tools.slow]\nfuel = 100000000\n")
    changes = Changes()
    async with session(setup, LEGACY, logging_callback=changes.on_log) as client:
        assert not (await client.call_tool("slow", {"ms": 1})).is_error
        setup.write_config("[tools.slow]\nfuel = 1000\n")

        async def starved():
            result = await client.call_tool("slow", {"ms": 1})
            return result.is_error and "limit 1000)" in text_of(result)

        await eventually(starved)
        setup.write_config("[tools.slow]\nfuel = \"not a number\"\n")
        with anyio.fail_after(30):
            while not any("keeping the previous configuration" in w for w in changes.warnings):
                await anyio.sleep(0.05)
        assert await starved(), "the previous (valid) config stays in force"


async def test_the_folder_replaced_within_one_burst_is_watched_again(setup):
    """Deleted and recreated faster than the debounce: the reload finds a
    folder where the old one was, but its watch ended with the old one; the
    new folder is watched, so a tool added later still appears."""
    setup.add("time")
    changes = Changes()
    async with session(setup, LEGACY, message_handler=changes.on_message) as client:
        assert await names(client)
        shutil.rmtree(setup.tools_dir)
        setup.tools_dir.mkdir()
        await changes.wait_for(1)
        assert await names(client) == set()
        # Well after the reload: only a watch on the new folder sees this.
        await anyio.sleep(1)
        setup.add("time")
        await changes.wait_for(2)
        assert await names(client) == {"get_current_time", "convert_timezone"}


# inotify's event bits (<sys/inotify.h>).
IN_ACCESS, IN_MODIFY, IN_CLOSE_NOWRITE, IN_OPEN = 0x1, 0x2, 0x10, 0x20


def inotify_watches(pid: int) -> dict[str, int]:
    """The server's inotify watches: each watched folder's inode number
    (as the kernel prints it, hexadecimal) → the events it asks for."""
    watches = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            info = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        for ino, mask in re.findall(r"^inotify wd:\S+ ino:([0-9a-f]+) .*?mask:([0-9a-f]+)", info, re.M):
            watches[ino] = watches.get(ino, 0) | int(mask, 16)
    return watches


def test_calls_reading_beside_the_tools_folder_raise_no_event(setup):
    """A root beside the tools folder, in the parent the server watches to
    see the folder deleted: the kernel is asked for no read or open event
    anywhere, so the calls that open and read it wake no watcher and queue
    nothing; the parent is watched for its entries only (not for writes
    to its files), the tools folder and the config's folder for changes."""
    data = setup.root / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello")
    setup.add("fs")
    setup.write_config(f'[defaults]\nroots = [{{ path = "{data}", mode = "ro" }}]\n')
    setup.config = setup.root / "etc" / "config.toml"
    setup.config.parent.mkdir()
    setup.config.write_text(setup.root.joinpath("config.toml").read_text())
    raw = RawServer(setup)
    try:
        raw.initialize()
        for _ in range(20):
            assert raw_text(raw.call("read_text_file", {"path": str(data / "a.txt")})) == "hello"
        watches = inotify_watches(raw.proc.pid)
        inode = lambda path: format(path.stat().st_ino, "x")
        assert set(watches) == {inode(setup.tools_dir), inode(setup.root), inode(setup.config.parent)}, watches
        for mask in watches.values():
            assert mask & (IN_ACCESS | IN_OPEN | IN_CLOSE_NOWRITE) == 0, hex(mask)
        assert watches[inode(setup.root)] & IN_MODIFY == 0, "the parent is watched for its entries only"
        assert watches[inode(setup.tools_dir)] & IN_MODIFY
        assert watches[inode(setup.config.parent)] & IN_MODIFY
    finally:
        raw.close()
