"""The store test kit loads without hypothesis (a test extra): only its model test needs it."""

from __future__ import annotations

import subprocess
import sys

# hypothesis made unimportable before the kit is imported, in a fresh interpreter (pytest's
# own process has it loaded already)
WITHOUT_HYPOTHESIS = """
import sys
sys.modules["hypothesis"] = None
import rocketmq_core.testing.store as kit
print(kit.StoreConformance.__name__, "hypothesis" in sys.modules and sys.modules["hypothesis"])
"""


def test_the_store_kit_imports_without_hypothesis():
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_HYPOTHESIS], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "StoreConformance None\n"
