"""The core's compiled helpers are optional: without a C compiler the broker runs the
Python code they mirror, which does the same work (and is what each is tested against):
the send fast path's (send_fast.py), the frame decoder's (protocol/codec.py) and the ACL
signature's (acl/signing.py, which also needs OpenSSL's headers)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketmq_core.broker.processors._send_fast",
            ["rocketmq_core/broker/processors/_send_fast.c"],
            depends=["rocketmq_core/acl/_signature_api.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
        Extension(
            "rocketmq_core.protocol._frames",
            ["rocketmq_core/protocol/_frames.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
        Extension(
            "rocketmq_core.acl._signature",
            ["rocketmq_core/acl/_signature.c"],
            depends=["rocketmq_core/acl/_signature_api.h"],
            libraries=["crypto"],  # OpenSSL's SHA-1 (Debian: libssl-dev)
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
    ]
)
