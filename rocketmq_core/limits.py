"""Process limits a server raises for itself at start."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("rocketmq")


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft open-files limit (RLIMIT_NOFILE) to the hard limit, where allowed:
    connections and store files then fail at the limit the administrator set, not at a
    shell's default of 1,024. Returns the (soft, hard) limits in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard:
        return soft, hard  # unlimited hard limits cannot be the soft one on Linux
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # a hard limit beyond the kernel's nr_open
        log.info("open-files limit stays %d (raising it to %d failed: %s)", soft, hard, exc)
        return soft, hard
    log.debug("open-files limit raised from %d to %d", soft, hard)
    return hard, hard
