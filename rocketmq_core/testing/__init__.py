"""Public test kit: golden frames, conformance suites, a pytest plugin.

A transport plugin subclasses ``TransportConformance`` (``rocketmq_core.testing.transport``)
and provides only a ``transport`` fixture.
"""
