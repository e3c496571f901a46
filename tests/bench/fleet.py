"""Fleet throughput: the same load through nginx (the documented
configuration, docs/deploy/nginx-toolcage.conf) to one replica and to
three, alternating, for several passes; prints calls per second for each
and the medians.

    TOOLCAGE_BIN=target/release/toolcage \\
    TOOLCAGE_GUESTS=target/wasm32-wasip2/release \\
    target/test-venv/bin/python tests/bench/fleet.py [--calls 10000] [--clients 32] [--passes 3]

The load is `tools/call get_current_time` (2026-07-28, stateless) over
HTTP/1.1 keep-alive from `--clients` threads of this process (tests/python/
fleet.py `Load`), which shares the machine's CPUs with nginx and the
replicas: on a small machine the client is part of what is measured.
Needs nginx (TOOLCAGE_NGINX_BIN or on PATH), as the fleet tests do."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from conftest import MODERN  # noqa: E402
from fleet import Fleet, Load  # noqa: E402


def one_run(replicas: int, calls: int, clients: int, cache: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="toolcage-fleet-bench-") as root:
        fleet = Fleet(Path(root), cache, ["time"], replicas=replicas)
        try:
            # Warm: the compile cache, pooled instances, nginx's keep-alive.
            Load(fleet.port, 500, clients, MODERN).start().join()
            load = Load(fleet.port, calls, clients, MODERN).start().join()
        finally:
            fleet.stop()
    ok = sum(1 for o in load.outcomes.values() if o == "ok")
    return {"replicas": replicas, "calls": calls, "ok": ok, "seconds": round(load.seconds, 3),
            "calls_per_second": round(ok / load.seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    results: dict[int, list[float]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="toolcage-fleet-cache-") as cache:
        for _ in range(args.passes):
            for replicas in (1, 3):
                run = one_run(replicas, args.calls, args.clients, Path(cache))
                print(json.dumps(run), flush=True)
                if run["ok"] != run["calls"]:
                    sys.exit(f"{run['calls'] - run['ok']} calls failed")
                results[replicas].append(run["calls_per_second"])
    for replicas, rates in results.items():
        print(f"{replicas} replica(s): median {statistics.median(rates):.0f} calls/s "
              f"(min {min(rates):.0f}, max {max(rates):.0f}, {len(rates)} runs)")


if __name__ == "__main__":
    main()
