"""How fast ``rocketmq namesrv`` is ready, and how much memory it holds once ready.

Starts the server N times as an operator would (the CLI, a config file, port 0),
timing from exec to the "boot success" line, and reads VmRSS from /proc when ready.
Prints a table and writes JSON.

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

import orjson
from loadgen import machine, pinned

READY = "boot success"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_once(config: Path, core: int | None) -> tuple[float, float]:
    command = [sys.executable, "-m", "rocketmq_core.cli", "namesrv", "-c", str(config)]
    started = time.perf_counter()
    process = subprocess.Popen(
        pinned([*command, "--listen", "127.0.0.1:0"], core), stderr=subprocess.PIPE, text=True
    )
    try:
        for line in process.stderr:
            if READY in line:
                ready = time.perf_counter() - started
                return ready, rss_mib(process.pid)
        raise SystemExit("the name server exited before it was ready")
    finally:
        process.terminate()
        process.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--core", type=int, default=1, help="pin the server here (-1: don't)")
    parser.add_argument("--output", default="benchmarks/results/startup.json")
    args = parser.parse_args()
    core = None if args.core < 0 else args.core
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch, "namesrv.conf")
        config.write_text(
            f"kvConfigPath={scratch}/kv.json\nconfigStorePath={scratch}/namesrv.properties\n"
        )
        start_once(config, core)  # warm the page cache: imports come from disk once
        runs = [start_once(config, core) for _ in range(args.runs)]
    ready = sorted(seconds for seconds, _ in runs)
    rss = [mib for _, mib in runs]
    result = {
        "runs": args.runs,
        "ready_median_ms": round(statistics.median(ready) * 1000, 1),
        "ready_max_ms": round(ready[-1] * 1000, 1),
        "rss_median_mib": round(statistics.median(rss), 1),
    }
    print(f"rocketmq namesrv startup over {args.runs} runs (pinned to core {core})")
    print(f"{'ready median ms':>16}  {'ready max ms':>12}  {'RSS MiB':>8}")
    print(
        f"{result['ready_median_ms']:>16}  {result['ready_max_ms']:>12}"
        f"  {result['rss_median_mib']:>8}"
    )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_bytes(
        orjson.dumps(
            {"setup": {"benchmark": "startup", **machine()}, "results": [result]},
            option=orjson.OPT_INDENT_2,
        )
    )
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
