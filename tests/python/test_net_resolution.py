"""What a host grant reaches, proven in a private network: the server runs
in a namespace with its own /etc/hosts, a stub DNS server that logs every
query, and HTTP servers that log every request (tests/python/netns.py).
For each trick, the server that must not be reached has an empty log."""

from __future__ import annotations

import pytest

from conftest import raw_text
from netns import NetnsRawServer, netns  # noqa: F401 (fixture)


@pytest.fixture
def world(netns, setup):
    """`api.test` is 127.0.0.2 in /etc/hosts and 127.0.0.3 in DNS: a request
    that reaches .3 skipped /etc/hosts. 127.0.0.4 is a server no grant names."""
    world = type("World", (), {})()
    world.ns = netns
    world.hosts_server = netns.add_http("127.0.0.2", 8080)
    world.dns_server = netns.add_http("127.0.0.3", 8080)
    world.other = netns.add_http("127.0.0.4", 8080)
    netns.set_hosts({"api.test": "127.0.0.2", "localhost": "127.0.0.1"})
    netns.set_dns({"api.test": "127.0.0.3", "evil.test": "127.0.0.4"})
    setup.add("misbehave")
    setup.add("hostile")
    world.setup = setup
    return world


def serve(world, config: str) -> NetnsRawServer:
    world.setup.write_config(config)
    server = NetnsRawServer(world.ns, world.setup)
    server.initialize()
    return server


def fetch(server, url: str) -> dict:
    return server.call("fetch", {"url": url})


def lookups(ns) -> list[str]:
    """The names the server asked DNS for (the fixture's own servers make
    reverse lookups of their addresses when they start; those are not the
    server's)."""
    return [q["name"] for q in ns.queries() if q["type"] in ("A", "AAAA")]


def test_a_trailing_dot_reaches_what_the_name_without_it_reaches(world):
    server = serve(world, '[tools.fetch]\nnetwork = ["api.test:8080"]\n')
    for url in ["http://api.test:8080/plain", "http://api.test.:8080/dotted", "http://API.Test.:8080/case"]:
        result = fetch(server, url)
        assert not result["isError"], (url, raw_text(result))
    server.close()
    # All three went where /etc/hosts says, with the Host the grant checked.
    seen = world.ns.requests(world.hosts_server)
    assert [r["target"] for r in seen] == ["/plain", "/dotted", "/case"]
    assert {r["host"] for r in seen} == {"api.test:8080"}
    assert world.ns.requests(world.dns_server) == []


def test_an_ip_with_a_trailing_dot_is_refused_and_asks_no_dns(world):
    server = serve(world, '[tools.fetch]\nnetwork = ["127.0.0.2:8080"]\n')
    result = fetch(server, "http://127.0.0.2.:8080/")
    assert result["isError"] and "trailing dot" in raw_text(result), raw_text(result)
    # An IP-literal grant never causes a DNS query.
    ok = fetch(server, "http://127.0.0.2:8080/literal")
    assert not ok["isError"], raw_text(ok)
    server.close()
    assert lookups(world.ns) == []
    assert [r["target"] for r in world.ns.requests()] == ["/literal"]


def test_names_pinned_in_the_config_are_not_resolved(world):
    server = serve(
        world,
        '[tools.fetch]\nnetwork = ["api.test:8080"]\n'
        '[tools.fetch.resolve]\n"api.test" = ["127.0.0.3"]\n',
    )
    result = fetch(server, "http://api.test:8080/pinned")
    assert not result["isError"], raw_text(result)
    server.close()
    assert lookups(world.ns) == []
    assert [r["host"] for r in world.ns.requests(world.dns_server)] == ["api.test:8080"]
    assert world.ns.requests(world.hosts_server) == []


@pytest.mark.parametrize(
    "authority,why",
    [
        ("user@api.test:8080", "user name or password"),
        ("user:pw@api.test:8080", "user name or password"),
        ("api.test:", "empty port"),
        ("api.test:0", "not a port"),
        ("2130706433:8080", "numeric"),
        ("0x7f000004:8080", "numeric"),
        ("127.4:8080", "numeric"),
        ("evil.test:8080", "not in the network grant"),
        ("api.test:8081", "not in the network grant"),
        ("127.0.0.2:8080", "not in the network grant"),
        ("[::ffff:127.0.0.2]:8080", "not in the network grant"),
    ],
)
def test_authorities_the_grant_does_not_name_reach_nothing(world, authority, why):
    # Straight through wasi:http, as a hostile tool sends it: no URL parser
    # in the guest smooths it first.
    server = serve(world, '[tools.raw_get]\nnetwork = ["api.test:8080"]\n')
    result = server.call("raw_get", {"authority": authority})
    assert result["isError"] and why in raw_text(result), (authority, raw_text(result))
    server.close()
    assert world.ns.requests() == [], authority
    # Nothing was resolved for a refused request.
    assert lookups(world.ns) == [], authority


def test_a_name_only_dns_knows_is_resolved_by_dns_once_per_request(world):
    world.ns.set_dns({"api.test": "127.0.0.3", "dns-only.test": "127.0.0.3"})
    server = serve(world, '[tools.fetch]\nnetwork = ["dns-only.test:8080"]\n')
    for _ in range(2):
        assert not fetch(server, "http://dns-only.test:8080/")["isError"]
    server.close()
    asked = [q["name"] for q in world.ns.queries() if q["type"] == "A"]
    # Re-resolved for every request (see docs/security.md on rebinding).
    assert asked == ["dns-only.test", "dns-only.test"], world.ns.queries()
    assert len(world.ns.requests(world.dns_server)) == 2
