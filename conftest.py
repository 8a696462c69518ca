"""Every async test runs on both anyio backends (docs/design.md rule 10), and the order in
which `tox` hands test files to its two workers."""

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


# Test files by their cost in seconds on CI, roughly. `--dist loadfile` hands out the
# slowest first so that the two workers end together (files not named here count 0.2 s a
# test). A stale figure only costs balance, never a result.
SLOW_FILES = {
    "plugins/spark/tests": 130,  # one work unit: one Spark session, started on one worker
    "tests/test_readme_examples.py": 60,
    "plugins/store_mmap/tests/test_conformance.py": 45,
    "plugins/store_rocksdb/tests/test_rocksdb_crash.py": 45,
    "plugins/store_rocksdb/tests/test_rocksdb_conformance.py": 30,
    "plugins/store_rocksdb/tests/test_rocksdb_full_disk.py": 25,
    "plugins/transport_quic/tests/test_quic_transport.py": 25,
    "plugins/store_mmap/tests/test_append_kernel.py": 20,
    "tests/test_cli_user_errors.py": 20,
    "plugins/store_mmap/tests/test_crash.py": 20,
    # its venv builds in the background on gw0 (tests/conftest.py): mid-queue, so that gw0
    # is there to take it
    "tests/test_fresh_install.py": 10,
}
SECONDS_PER_TEST = 0.2
ON_THE_INSTALLING_WORKER = ("tests/test_fresh_install.py", "gw0")


def unit_cost(unit: tuple[str, dict[str, bool]]) -> float:
    scope, tests = unit
    return SLOW_FILES.get(scope, SECONDS_PER_TEST * len(tests))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SlowestFilesFirst(LoadFileScheduling):
        """loadfile, with Spark's test files as one unit and the slowest units first."""

        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "plugins/spark/tests" if path.startswith("plugins/spark/tests/") else path

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is complete when the first unit goes out
                units = sorted(self.workqueue.items(), key=unit_cost, reverse=True)
                self.workqueue.clear()
                self.workqueue.update(units)
                self.ordered = True
            scope, worker = ON_THE_INSTALLING_WORKER
            units = list(self.workqueue)
            if units[0] == scope and node.gateway.id != worker and len(units) > 1:
                self.workqueue.move_to_end(units[1], last=False)  # this node takes the next
            super()._assign_work_unit(node)

    return SlowestFilesFirst(config, log)
