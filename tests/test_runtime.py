"""rocketmq_core.runtime, what every server process does at start: it keeps freed
memory for its next allocations (reading sockets 256 KiB at a time must not fault in
freshly zeroed pages for each read), and takes the parent it follows out of the
environment."""

from __future__ import annotations

import os
import subprocess
import sys

# Eight 256 KiB reads alive at once, then freed, fifty times over: the minor page faults
# of the last forty rounds (after the first rounds have sized the heap)
ROUNDS = """
import resource, sys
from rocketmq_core import runtime
if sys.argv[1] == "kept":
    runtime.keep_freed_memory()
def round_():
    chunks = [b"x" * (256 * 1024 - n) for n in range(8)]
    del chunks
for _ in range(10):
    round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def minor_faults(mode: str, **environment: str) -> int:
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MALLOC_") and name != "GLIBC_TUNABLES"
    }
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**inherited, **environment},
    )
    return int(done.stdout)


def test_freed_read_buffers_are_reused_without_page_faults():
    # glibc's defaults hand the 2 MiB back each round: 512 pages faulted in again
    assert minor_faults("default") >= 40 * 256
    assert minor_faults("kept") < 100


def test_the_environment_settings_win():
    assert minor_faults("kept", MALLOC_TRIM_THRESHOLD_=str(128 * 1024)) >= 40 * 256
    tunables = "glibc.malloc.trim_threshold=131072"
    assert minor_faults("kept", GLIBC_TUNABLES=tunables) >= 40 * 256


def test_a_large_message_body_freed_and_made_again_is_not_mapped_afresh():
    """Blocks up to 32 MiB come from the heap (glibc's own adaptive limit, which a fixed
    setting would otherwise turn off): 4 MiB bodies freed and made again fault nothing."""
    rounds = ROUNDS.replace(
        "256 * 1024 - n) for n in range(8)", "4 * 1024 * 1024 - n) for n in range(2)"
    )
    done = subprocess.run(
        [sys.executable, "-c", rounds, "kept"], capture_output=True, text=True, check=True
    )
    assert int(done.stdout) < 100


def test_the_parent_to_follow_is_taken_out_of_the_environment(monkeypatch):
    """What a server started by ``rocketmq cluster up`` starts itself must not follow a
    parent that is not its own: the variable leaves the environment once read."""
    from rocketmq_core import runtime

    monkeypatch.setenv(runtime.STOP_WITH_PARENT, "4242")
    monkeypatch.setattr(runtime, "_followed_parent", None)
    runtime.follow_parent()
    assert runtime.STOP_WITH_PARENT not in os.environ
    assert runtime._followed_parent == 4242
