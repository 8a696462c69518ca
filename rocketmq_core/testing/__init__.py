"""Public test kit: golden frames, conformance suites, a pytest plugin.

A transport plugin subclasses ``TransportConformance`` (``rocketmq_core.testing.transport``)
and provides only a ``transport`` fixture; a store plugin subclasses ``StoreConformance``
(``rocketmq_core.testing.store``) and provides only a ``store_factory`` fixture.
"""

import pytest

# Failures in the conformance suites explain themselves only when pytest rewrites their
# asserts; editable installs list no files, so pytest cannot find them on its own.
pytest.register_assert_rewrite(
    "rocketmq_core.testing.store",
    "rocketmq_core.testing.store_crash",
    "rocketmq_core.testing.transport",
)
