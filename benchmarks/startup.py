"""How fast ``rocketmq namesrv`` and ``rocketmq standalone`` are ready, and how much
memory they hold once ready.

Starts each server N times as an operator would (the CLI, a config file, port 0),
timing from exec to its ready line, and reads VmRSS from /proc when ready. The
standalone server opens a fresh mmap store each run (a new data directory). Prints a
table and writes JSON.

    python benchmarks/startup.py --runs 10
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen import machine, pinned, write_results

READY = {"namesrv": "boot success", "standalone": "rocketmq standalone ready"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def command_for(server: str, scratch: Path, run: int) -> list[str]:
    base = [sys.executable, "-m", "rocketmq_core.cli", server]
    if server == "namesrv":
        config = scratch / "namesrv.conf"
        config.write_text(
            f"kvConfigPath={scratch}/kv.json\nconfigStorePath={scratch}/namesrv.properties\n"
        )
        return [*base, "-c", str(config), "--listen", "127.0.0.1:0"]
    config = scratch / f"broker-{run}.conf"
    config.write_text(f"storePathRootDir={scratch}/store-{run}\nlistenPort=0\n")
    return [*base, "-c", str(config), "--namesrv-listen", "127.0.0.1:0"]


def start_once(server: str, scratch: Path, run: int, core: int | None) -> tuple[float, float]:
    command = command_for(server, scratch, run)
    started = time.perf_counter()
    process = subprocess.Popen(pinned(command, core), stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if READY[server] in line:
                ready = time.perf_counter() - started
                return ready, rss_mib(process.pid)
        raise SystemExit(f"rocketmq {server} exited before it was ready")
    finally:
        process.terminate()
        process.wait(20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--core", type=int, default=1, help="pin the server here (-1: don't)")
    parser.add_argument("--servers", default="namesrv,standalone")
    parser.add_argument("--output", default="benchmarks/results/startup.json")
    args = parser.parse_args()
    core = None if args.core < 0 else args.core
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for server in args.servers.split(","):
            start_once(server, Path(scratch), -1, core)  # warm the page cache: imports
            runs = [start_once(server, Path(scratch), run, core) for run in range(args.runs)]
            ready = sorted(seconds for seconds, _ in runs)
            rss = [mib for _, mib in runs]
            results.append(
                {
                    "server": server,
                    "runs": args.runs,
                    "ready_median_ms": round(statistics.median(ready) * 1000, 1),
                    "ready_max_ms": round(ready[-1] * 1000, 1),
                    "rss_median_mib": round(statistics.median(rss), 1),
                }
            )
    print(f"startup over {args.runs} runs each (pinned to core {core})")
    print(f"{'server':>10}  {'ready median ms':>16}  {'ready max ms':>12}  {'RSS MiB':>8}")
    for result in results:
        print(
            f"{result['server']:>10}  {result['ready_median_ms']:>16}"
            f"  {result['ready_max_ms']:>12}  {result['rss_median_mib']:>8}"
        )
    write_results(args.output, {"benchmark": "startup", **machine()}, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
