"""The send fast path's compiled helper is optional: without a C compiler the broker
runs send_fast.py's Python code, which does the same work (and is what the helper is
tested against)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketmq_core.broker.processors._send_fast",
            ["rocketmq_core/broker/processors/_send_fast.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
