"""A plain component's result can hold far more host memory, lifted, than
its size says: the host must refuse an oversized one without building its
JSON (a tree of millions of small values) first."""

from __future__ import annotations

import json

from conftest import RawServer, raw_text

# The lifted value is wasmtime's: a set flag is charged its name's length
# (1-2 bytes here) against the 16 MiB transfer cap, but held as a `String`
# (24 bytes and an allocation), so this result takes about 370 MiB before
# the host sees it. Building its JSON tree as well took the server to
# 1.2 GiB; measuring it along the value adds nothing.
PEAK_MIB = 600

# 200,000 values of 32 flags: about 67 MB of JSON, within the transfer cap
# as wasmtime counts it.
OVERSIZED = 200_000


def test_an_oversized_result_of_many_flags_is_refused_before_its_json_is_built(setup):
    setup.add("plain-bare")
    setup.write_config("[tools.all-flags]\nconfirm = false\n")
    raw = RawServer(setup)
    try:
        raw.initialize()
        result = raw.call("all-flags", {"n": OVERSIZED})
        assert result["isError"], result
        assert raw_text(result) == (
            "tool `all-flags` returned a result over the result size limit (limit 16777216 bytes)"
        )
        assert raw.peak_mib() < PEAK_MIB, raw.peak_mib()
        # The server serves on, and a result that fits is whole.
        small = raw.call("all-flags", {"n": 2})
        assert not small["isError"], small
        names = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["aa", "ab", "ac", "ad", "ae", "af"]
        assert small["structuredContent"] == {"result": [names, names]}
        assert json.loads(raw_text(small)) == [names, names]
    finally:
        raw.close()
