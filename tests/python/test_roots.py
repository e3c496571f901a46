"""Filesystem roots: the escape matrix, through a real MCP client, in both
eras. Every test snapshots the files outside the roots (and the read-only
root) before, and proves afterwards that nothing there was read into a
result, created, changed or deleted."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import threading
import time
from pathlib import Path

import anyio
import mcp.types as types
import pytest

from conftest import ERAS, LEGACY, MODERN, session, text_of

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-outside-the-roots"


class Tree:
    """outside/ (never granted), rw/ (granted read-write), ro/ (granted
    read-only), with symlinks inside rw/ pointing outside."""

    def __init__(self, root: Path):
        self.root = root
        self.outside = root / "outside"
        self.rw = root / "rw"
        self.ro = root / "ro"
        for d in [self.outside / "dir", self.rw / "sub", self.rw / "other", self.ro / "inner"]:
            d.mkdir(parents=True)
        (self.outside / "secret.txt").write_text(SECRET)
        (self.outside / "dir" / "secret-in-dir.txt").write_text(SECRET)
        (self.rw / "hello.txt").write_text("hello from rw\n")
        (self.rw / "sub" / "in-sub.txt").write_text("in sub\n")
        (self.rw / "other" / "in-other.txt").write_text("in other\n")
        (self.ro / "readonly.txt").write_text("read-only content\n")
        (self.ro / "inner" / "deep.txt").write_text("deep\n")
        os.symlink(self.outside / "secret.txt", self.rw / "link-to-file")
        os.symlink(self.outside / "dir", self.rw / "link-to-dir")
        os.symlink(self.rw / "chain-2", self.rw / "chain-1")
        os.symlink(self.outside / "secret.txt", self.rw / "chain-2")
        os.symlink("../outside/secret.txt", self.rw / "relative-link")
        self.before = self.snapshot()

    def snapshot(self) -> dict:
        """Every entry under outside/ and ro/: type, content hash, mtime."""
        state = {}
        for base in [self.outside, self.ro]:
            for dirpath, dirnames, filenames in os.walk(base):
                for name in dirnames + filenames:
                    p = Path(dirpath) / name
                    st = p.lstat()
                    digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
                    state[str(p)] = (st.st_mode, digest, st.st_mtime_ns)
        return state

    def assert_untouched(self):
        assert self.snapshot() == self.before, "files outside the roots (or in the read-only root) changed"

    def config(self) -> str:
        # Confirmation of destructive calls is tested in
        # test_least_privilege; here every write must be stopped by the roots.
        return f"""
[defaults]
roots = [{{ path = "{self.rw}", mode = "rw" }}, {{ path = "{self.ro}", mode = "ro" }}]
confirm = false
"""


@pytest.fixture
def tree(tmp_path) -> Tree:
    return Tree(tmp_path / "files")


def roots_callback(*paths: Path):
    async def on_roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in paths])

    return on_roots


def fs_session(setup, tree, era, client_roots=None, **kwargs):
    setup.add("fs")
    setup.add("misbehave")
    setup.write_config(tree.config())
    if era == LEGACY and client_roots is not None:
        kwargs["list_roots_callback"] = roots_callback(*client_roots)
    return session(setup, era, **kwargs)


def assert_refused(result, *needles):
    text = text_of(result)
    assert result.is_error, f"expected an error, got: {text[:300]}"
    assert SECRET not in text, "a secret leaked into the result"
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"


def assert_no_secret(result):
    assert SECRET not in text_of(result)
    assert SECRET not in str(result.structured_content)


# Each era: 2025-11-25 with client roots that cover both grants (so the
# narrowing code runs), and 2026-07-28 with the grants as configured.
ERA_ROOTS = [
    pytest.param(LEGACY, "covering", id=LEGACY + "-client-roots"),
    pytest.param(MODERN, None, id=MODERN),
]


def client_roots_for(tree, mode):
    return [tree.root] if mode == "covering" else None


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_reads_inside_the_roots_work(setup, tree, era, client):
    async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
        result = await c.call_tool("read_text_file", {"path": str(tree.rw / "hello.txt")})
        assert not result.is_error, text_of(result)
        assert "hello from rw" in text_of(result)
        allowed = await c.call_tool("list_allowed_directories", {})
        assert str(tree.rw) in text_of(allowed) and str(tree.ro) in text_of(allowed)
        written = await c.call_tool("write_file", {"path": str(tree.rw / "new.txt"), "content": "made"})
        assert not written.is_error, text_of(written)
    assert (tree.rw / "new.txt").read_text() == "made"
    tree.assert_untouched()


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_paths_that_leave_the_roots_are_refused(setup, tree, era, client):
    escapes = [
        str(tree.rw / ".." / "outside" / "secret.txt"),
        str(tree.rw / "sub" / ".." / ".." / "outside" / "secret.txt"),
        str(tree.outside / "secret.txt"),
        "/etc/passwd",
        "/proc/self/environ",
        str(tree.rw / "link-to-file"),
        str(tree.rw / "link-to-dir" / "secret-in-dir.txt"),
        str(tree.rw / "chain-1"),
        str(tree.rw / "relative-link"),
    ]
    async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
        for path in escapes:
            assert_refused(await c.call_tool("read_text_file", {"path": path}))
            assert_refused(await c.call_tool("get_file_info", {"path": path}))
        outside = await c.call_tool("read_text_file", {"path": "/etc/passwd"})
        assert "outside the allowed roots" in text_of(outside)
        listing = await c.call_tool("list_directory", {"path": str(tree.rw / "link-to-dir")})
        assert_refused(listing)
        multiple = await c.call_tool("read_multiple_files", {"paths": escapes})
        assert_no_secret(multiple)
        tree_result = await c.call_tool("directory_tree", {"path": str(tree.rw)})
        assert_no_secret(tree_result)
        assert "secret-in-dir.txt" not in text_of(tree_result)
        search = await c.call_tool("search_files", {"path": str(tree.rw), "pattern": "**/*secret*"})
        assert "secret-in-dir.txt" not in text_of(search)
        media = await c.call_tool("read_media_file", {"path": str(tree.rw / "link-to-file")})
        assert media.is_error
    tree.assert_untouched()


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_writes_through_escapes_and_into_read_only_are_refused(setup, tree, era, client):
    async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
        for path in [
            str(tree.rw / ".." / "outside" / "planted.txt"),
            str(tree.outside / "planted.txt"),
            str(tree.rw / "link-to-dir" / "planted.txt"),
            str(tree.ro / "planted.txt"),
            str(tree.ro / "readonly.txt"),
        ]:
            assert_refused(await c.call_tool("write_file", {"path": path, "content": "pwned"}))
        # Writing to a link's own path inside a read-write root may replace
        # the link (an atomic write renames over it) or be refused; either
        # way the file it pointed to outside is untouched (checked below).
        for path in [str(tree.rw / "link-to-file"), str(tree.rw / "chain-1")]:
            assert SECRET not in text_of(await c.call_tool("write_file", {"path": path, "content": "pwned"}))
        assert_refused(
            await c.call_tool(
                "edit_file",
                {"path": str(tree.ro / "readonly.txt"), "edits": [{"oldText": "read", "newText": "pwned"}]},
            )
        )
        assert_refused(await c.call_tool("delete_file", {"path": str(tree.ro / "readonly.txt")}))
        assert_refused(await c.call_tool("delete_file", {"path": str(tree.rw / "link-to-dir" / "secret-in-dir.txt")}))
        assert_refused(await c.call_tool("create_directory", {"path": str(tree.ro / "newdir")}))
        assert_refused(await c.call_tool("create_directory", {"path": str(tree.outside / "newdir")}))
        # Moves out of the roots, into the read-only root, and out of it.
        assert_refused(
            await c.call_tool(
                "move_file", {"source": str(tree.rw / "hello.txt"), "destination": str(tree.outside / "moved.txt")}
            )
        )
        assert_refused(
            await c.call_tool(
                "move_file", {"source": str(tree.rw / "hello.txt"), "destination": str(tree.ro / "moved.txt")}
            )
        )
        assert_refused(
            await c.call_tool(
                "move_file", {"source": str(tree.ro / "readonly.txt"), "destination": str(tree.rw / "stolen.txt")}
            )
        )
        assert_refused(
            await c.call_tool(
                "move_file", {"source": str(tree.outside / "secret.txt"), "destination": str(tree.rw / "stolen.txt")}
            )
        )
    assert (tree.rw / "hello.txt").read_text() == "hello from rw\n"
    assert not (tree.rw / "stolen.txt").exists()
    tree.assert_untouched()


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_symlinks_a_tool_creates_cannot_be_used_to_leave(setup, tree, era, client):
    async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
        for target, link in [
            (str(tree.outside / "secret.txt"), "abs-link"),
            ("../outside/secret.txt", "rel-link"),
            (str(tree.outside), "dir-link"),
            ("/etc", "etc-link"),
        ]:
            made = await c.call_tool("make_symlink", {"target": target, "link": str(tree.rw / link)})
            # Creating the link may be allowed or refused; using it must fail.
            assert SECRET not in text_of(made)
        links = [tree.rw / "abs-link", tree.rw / "rel-link"]
        through = [tree.rw / "dir-link" / "secret.txt", tree.rw / "etc-link" / "passwd"]
        for path in links + through:
            assert_refused(await c.call_tool("read_text_file", {"path": str(path)}))
        for path in through:
            assert_refused(await c.call_tool("write_file", {"path": str(path), "content": "pwned"}))
        for path in links:  # may replace the link itself; never its target
            assert SECRET not in text_of(await c.call_tool("write_file", {"path": str(path), "content": "pwned"}))
    tree.assert_untouched()


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_cannot_redirect_a_grant_nested_in_its_own(setup, tree, era):
    """One tool may write rw/; others are granted only rw/sub, inside it.
    The writer renames sub/ away and puts a symlink to outside/ in its
    place: the next calls of the others, and a server started afterwards,
    must not open the grant wherever the link leads (it once led to `/`)."""
    inner = tree.rw / "sub"
    setup.add("fs")
    setup.add("misbehave")
    grant = lambda path, mode: f'roots = [{{ path = "{path}", mode = "{mode}" }}]'
    setup.write_config(
        f"""
[defaults]
confirm = false
roots = []
[tools.move_file]
{grant(tree.rw, "rw")}
[tools.make_symlink]
{grant(tree.rw, "rw")}
[tools.list_directory]
{grant(inner, "ro")}
[tools.read_text_file]
{grant(inner, "ro")}
"""
    )

    async def through_the_grant(c):
        for name, args in [
            ("list_directory", {"path": str(inner)}),
            ("list_directory", {"path": str(inner / "dir")}),
            ("read_text_file", {"path": str(inner / "secret.txt")}),
            ("read_text_file", {"path": str(inner / "dir" / "secret-in-dir.txt")}),
        ]:
            result = await c.call_tool(name, args)
            assert_no_secret(result)
            assert "secret" not in text_of(result).replace(str(inner), ""), text_of(result)

    async with session(setup, era) as c:
        listed = await c.call_tool("list_directory", {"path": str(inner)})
        assert "in-sub.txt" in text_of(listed), text_of(listed)
        moved = await c.call_tool("move_file", {"source": str(inner), "destination": str(tree.rw / "moved")})
        assert not moved.is_error, text_of(moved)
        made = await c.call_tool("make_symlink", {"target": "../outside", "link": str(inner)})
        assert "created" in text_of(made), text_of(made)
        assert os.path.islink(inner) and (inner / "secret.txt").exists()
        await through_the_grant(c)
    # A config loaded with the link in place refuses the grant.
    async with session(setup, era) as c:
        await through_the_grant(c)
    tree.assert_untouched()


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_awkward_paths_are_reported_not_fatal(setup, tree, era, client):
    weird = os.fsencode(str(tree.rw)) + b"/bad-\xff\xfe-name.txt"
    with open(weird, "wb") as f:
        f.write(b"x")
    async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
        nul = await c.call_tool("read_text_file", {"path": str(tree.rw / "a\u0000b.txt")})
        assert nul.is_error
        long_path = str(tree.rw) + "/" + ("d" * 200 + "/") * 60 + "f.txt"
        assert (await c.call_tool("read_text_file", {"path": long_path})).is_error
        assert (await c.call_tool("write_file", {"path": str(tree.rw / ("n" * 5000)), "content": "x"})).is_error
        # WASI names are UTF-8: the host reports such an entry as an error
        # and never sends its name. The listing goes on and says so.
        listing = await c.call_tool("list_directory", {"path": str(tree.rw)})
        assert not listing.is_error, text_of(listing)
        assert "hello.txt" in text_of(listing)
        assert "not valid UTF-8" in text_of(listing)
        # Still serving.
        ok = await c.call_tool("read_text_file", {"path": str(tree.rw / "hello.txt")})
        assert not ok.is_error
    tree.assert_untouched()


async def test_whole_file_reads_answer_every_kind_of_path(setup, tree):
    # In the component a whole-file read is `open-at`, `stat` and `read` on
    # the file's own WASI descriptor (tools/fs/src/preopens.rs), not
    # wasi-libc's `open` and `fstat`: every answer it gives, for files of
    # every size and for what is not a file.
    big = bytes(range(256)) * 800 + b"tail"  # 200 KiB: more than one 64 KiB read
    (tree.rw / "big.bin").write_bytes(big)
    (tree.rw / "empty.txt").write_bytes(b"")
    (tree.rw / "latin1.txt").write_bytes(b"caf\xe9\n")
    (tree.rw / "huge.txt").write_bytes(b"y" * (4 * 1024 * 1024 + 1))
    (tree.rw / "limit.txt").write_bytes(b"z" * (4 * 1024 * 1024))
    os.symlink(tree.rw / "hello.txt", tree.rw / "link-inside")
    os.symlink("sub/in-sub.txt", tree.rw / "relative-inside")
    async with fs_session(setup, tree, MODERN) as c:

        async def read(path, tool="read_text_file"):
            return await c.call_tool(tool, {"path": str(path)})

        for path, expected in [
            (tree.rw / "hello.txt", "hello from rw\n"),
            (tree.rw / "empty.txt", ""),
            (tree.rw / "latin1.txt", "caf\ufffd\n"),
            (tree.rw / "relative-inside", "in sub\n"),
            (tree.rw / "sub" / ".." / "hello.txt", "hello from rw\n"),
            (tree.ro / "inner" / "deep.txt", "deep\n"),
            ("hello.txt", "hello from rw\n"),  # relative: against the first root
        ]:
            result = await read(path)
            assert not result.is_error, (path, text_of(result))
            assert text_of(result) == expected, path
            assert result.structured_content == {"content": expected}, path
        at_limit = await read(tree.rw / "limit.txt")
        assert not at_limit.is_error and len(text_of(at_limit)) == 4 * 1024 * 1024
        media = await read(tree.rw / "big.bin", "read_media_file")
        assert not media.is_error, text_of(media)
        assert base64.b64decode(media.content[0].resource.blob) == big
        for path, needle in [
            (tree.rw / "sub", "it is a directory (use list_directory or directory_tree)"),
            (tree.rw, "it is a directory (use list_directory or directory_tree)"),
            (tree.ro, "it is a directory (use list_directory or directory_tree)"),
            (tree.rw / "missing.txt", "it does not exist"),
            (tree.rw / "hello.txt" / "x", "a component of the path is not a directory"),
            (tree.rw / "huge.txt", "is 4.00 MB (4194305 bytes), over the 4.00 MB this tool returns at once"),
            (tree.rw / "link-to-file", "access denied"),
            # Resolved beneath the root's handle, where an absolute path
            # means nothing: refused even when it names a file inside.
            (tree.rw / "link-inside", "access denied"),
        ]:
            assert_refused(await read(path), str(path), needle)
        assert (await c.call_tool("get_file_info", {"path": str(tree.rw / "link-inside")})).is_error
        multiple = await c.call_tool(
            "read_multiple_files",
            {"paths": [str(tree.rw / "hello.txt"), str(tree.rw / "sub"), str(tree.rw / "missing.txt")]},
        )
        assert "hello from rw" in text_of(multiple) and "it is a directory" in text_of(multiple)
        assert "it does not exist" in text_of(multiple)
    tree.assert_untouched()


async def test_a_listing_gives_each_entry_the_type_the_file_system_reports(setup, tree):
    # The host reads a listing's entries as the guest asks for them, typed
    # from the directory entry itself (no stat per entry): every kind, and
    # more entries than one read of the folder returns.
    kinds = tree.rw / "kinds"
    kinds.mkdir()
    (kinds / "file").write_text("x")
    (kinds / "dir").mkdir()
    os.symlink(kinds / "file", kinds / "link-to-file")
    os.symlink(kinds / "dir", kinds / "link-to-dir")
    os.symlink(kinds / "nowhere", kinds / "dangling")
    os.mkfifo(kinds / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(kinds / "socket"))
    many = [f"many-{i:04}" for i in range(2000)]
    for name in many:
        (kinds / name).write_text("")
    async with fs_session(setup, tree, MODERN) as c:
        result = await c.call_tool("list_directory", {"path": str(kinds)})
        assert not result.is_error, text_of(result)
        entries = {e["name"]: e["type"] for e in result.structured_content["entries"]}
        assert {name: kind for name, kind in entries.items() if not name.startswith("many-")} == {
            "file": "file",
            "dir": "directory",
            "link-to-file": "symlink",
            "link-to-dir": "symlink",
            "dangling": "symlink",
            "fifo": "other",
            "socket": "other",
        }
        assert sorted(name for name in entries if name.startswith("many-")) == many
        assert result.structured_content["truncated"] is False
    sock.close()
    tree.assert_untouched()


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_a_directory_swapped_for_a_symlink_mid_walk_cannot_leak(setup, tree, era, client):
    walk = tree.rw / "walk"
    for i in range(30):
        (walk / f"d{i}").mkdir(parents=True)
        for j in range(20):
            (walk / f"d{i}" / f"f{j}.txt").write_text("ok")
    for j in range(50):
        (tree.outside / "dir" / f"secret-{j}.txt").write_text(SECRET)
    tree.before = tree.snapshot()
    stop = threading.Event()

    def swapper():
        # Flip walk/d0 between a real directory and a symlink to outside/dir.
        real, parked = walk / "d0", walk / "d0-parked"
        while not stop.is_set():
            real.rename(parked)
            os.symlink(tree.outside / "dir", real)
            time.sleep(0.0005)
            real.unlink()
            parked.rename(real)

    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
            for _ in range(15):
                for tool, args in [
                    ("directory_tree", {"path": str(walk)}),
                    ("search_files", {"path": str(walk), "pattern": "**/*"}),
                    ("list_directory", {"path": str(walk / "d0")}),
                    ("read_text_file", {"path": str(walk / "d0" / "secret-1.txt")}),
                ]:
                    result = await c.call_tool(tool, args)
                    assert_no_secret(result)
                    if tool != "read_text_file":  # its error names the path asked for
                        assert "secret-" not in text_of(result)
    finally:
        stop.set()
        thread.join()
    tree.assert_untouched()


async def test_client_roots_narrow_the_grants(setup, tree):
    async with fs_session(setup, tree, LEGACY, client_roots=[tree.rw / "sub"]) as c:
        allowed = text_of(await c.call_tool("list_allowed_directories", {}))
        assert str(tree.rw / "sub") in allowed
        assert str(tree.ro) not in allowed
        ok = await c.call_tool("read_text_file", {"path": str(tree.rw / "sub" / "in-sub.txt")})
        assert not ok.is_error, text_of(ok)
        assert_refused(await c.call_tool("read_text_file", {"path": str(tree.rw / "other" / "in-other.txt")}))
        assert_refused(await c.call_tool("read_text_file", {"path": str(tree.rw / "sub" / ".." / "hello.txt")}))
        # Narrowed roots keep the grant's mode.
        written = await c.call_tool("write_file", {"path": str(tree.rw / "sub" / "w.txt"), "content": "w"})
        assert not written.is_error, text_of(written)
    tree.assert_untouched()


async def test_a_client_root_outside_the_grants_grants_nothing(setup, tree):
    async with fs_session(setup, tree, LEGACY, client_roots=[tree.outside]) as c:
        allowed = await c.call_tool("list_allowed_directories", {})
        assert str(tree.outside) not in text_of(allowed)
        assert_refused(await c.call_tool("read_text_file", {"path": str(tree.outside / "secret.txt")}))
        assert_refused(await c.call_tool("read_text_file", {"path": str(tree.rw / "hello.txt")}))
    assert "outside every granted directory" in setup.stderr()
    tree.assert_untouched()


async def test_roots_list_changed_is_honoured(setup, tree):
    current = [tree.rw / "sub"]

    async def on_roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri()) for p in current])

    setup.add("fs")
    setup.write_config(tree.config())
    async with session(setup, LEGACY, list_roots_callback=on_roots) as c:
        other = {"path": str(tree.rw / "other" / "in-other.txt")}
        assert (await c.call_tool("read_text_file", other)).is_error
        current[:] = [tree.rw / "other"]
        await c.send_roots_list_changed()
        with anyio.fail_after(20):
            while (await c.call_tool("read_text_file", other)).is_error:
                await anyio.sleep(0.05)
        assert (await c.call_tool("read_text_file", {"path": str(tree.rw / "sub" / "in-sub.txt")})).is_error
    tree.assert_untouched()


def test_serve_root_flag_grants_every_tool(setup, tree):
    setup.add("fs")
    ok = setup.run("--root", f"{tree.rw}:rw", "read_text_file", f'{{"path": "{tree.rw / "hello.txt"}"}}', command="call")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    ro = setup.run(
        "--root", str(tree.rw), "--yes", "write_file", f'{{"path": "{tree.rw / "x.txt"}", "content": "x"}}', command="call"
    )
    assert ro.returncode == 1, "a root given without :rw must be read-only"
    assert not (tree.rw / "x.txt").exists()
    missing = setup.run("--root", str(tree.root / "nope"), "list_allowed_directories", command="call")
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_without_grants_a_tool_sees_no_files(setup, tree):
    setup.add("fs")
    result = setup.run("read_text_file", f'{{"path": "{tree.rw / "hello.txt"}"}}', command="call")
    assert result.returncode == 1
    assert "hello from rw" not in result.stdout


async def test_over_http_each_session_has_its_own_roots(setup, tree):
    from conftest import HttpServer, http_session

    setup.add("fs")
    setup.write_config(tree.config())
    srv = HttpServer(setup)
    try:
        sub = {"path": str(tree.rw / "sub" / "in-sub.txt")}
        other = {"path": str(tree.rw / "other" / "in-other.txt")}
        async with http_session(srv.url, LEGACY, list_roots_callback=roots_callback(tree.rw / "sub")) as a:
            async with http_session(srv.url, LEGACY, list_roots_callback=roots_callback(tree.rw / "other")) as b:
                for _ in range(3):
                    assert not (await a.call_tool("read_text_file", sub)).is_error
                    assert_refused(await a.call_tool("read_text_file", other))
                    assert not (await b.call_tool("read_text_file", other)).is_error
                    assert_refused(await b.call_tool("read_text_file", sub))
            # A 2026-07-28 request alongside gets the grants as configured.
            async with http_session(srv.url, MODERN) as c:
                assert not (await c.call_tool("read_text_file", sub)).is_error
                assert not (await c.call_tool("read_text_file", other)).is_error
    finally:
        srv.stop()
    tree.assert_untouched()


TRAILING = [
    # Trailing slashes and dots after symlinks that lead out (the class of
    # wasmtime-wasi advisory RUSTSEC-2026-0269: path resolution that
    # followed a symlink because of a trailing `/`).
    "link-to-dir/",
    "link-to-dir/.",
    "link-to-dir//secret-in-dir.txt",
    "link-to-dir/secret-in-dir.txt/",
    "link-to-dir/./secret-in-dir.txt",
    "link-to-file/",
    "link-to-file/.",
    "chain-1/",
    "relative-link/",
    "sub/../link-to-dir/secret-in-dir.txt",
    "sub/../link-to-file/",
]


@pytest.mark.parametrize("era,client", ERA_ROOTS)
async def test_trailing_slashes_after_symlinks_cannot_leave(setup, tree, era, client):
    setup.add("hostile")
    secret_bytes = str(list(SECRET.encode()[:16]))[1:-1]
    async with fs_session(setup, tree, era, client_roots_for(tree, client)) as c:
        for suffix in TRAILING:
            path = f"{tree.rw}/{suffix}"
            # Straight through WASI, as hostile code would.
            raw = await c.call_tool("open_path", {"path": path})
            assert secret_bytes not in text_of(raw), (suffix, text_of(raw))
            # And through the bundled tools.
            assert_refused(await c.call_tool("read_text_file", {"path": path}))
            listing = await c.call_tool("list_directory", {"path": path})
            assert_no_secret(listing)
            # An error names the path it refused; a listing must not list it.
            assert listing.is_error or "secret-in-dir.txt" not in text_of(listing), suffix
            written = await c.call_tool("write_file", {"path": path + "x", "content": "pwned"})
            assert written.is_error, (suffix, text_of(written))
            made = await c.call_tool("create_directory", {"path": path + "newdir/"})
            assert made.is_error, (suffix, text_of(made))
    tree.assert_untouched()
