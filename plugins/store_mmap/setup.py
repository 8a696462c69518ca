"""The compiled append kernel is optional: without a C compiler the store runs its
Python path, which does the same work (and is what the kernel is tested against)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketmq_store_mmap._append",
            ["rocketmq_store_mmap/_append.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
