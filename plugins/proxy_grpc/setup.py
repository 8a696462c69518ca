"""The protobuf and gRPC modules are generated from the .proto files at build time (an
editable install included), never committed: grpcio-tools' protoc writes them beside
the .proto files, and build_py then packages them like any module."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
PROTOS = ("rocketmq_proxy_grpc/v2/definition.proto", "rocketmq_proxy_grpc/v2/service.proto")


def generate_grpc_modules() -> None:
    from grpc_tools import protoc  # a build requirement (pyproject.toml)

    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    arguments = [
        "protoc",
        f"-I{HERE}",
        f"-I{include}",
        f"--python_out={HERE}",
        f"--pyi_out={HERE}",  # the messages' types, for mypy
        f"--grpc_python_out={HERE}",
        *(str(HERE / proto) for proto in PROTOS),
    ]
    if protoc.main(arguments) != 0:
        raise SystemExit(f"protoc failed on {', '.join(PROTOS)}")


class BuildWithProtos(build_py):
    def run(self) -> None:
        generate_grpc_modules()
        super().run()


setup(cmdclass={"build_py": BuildWithProtos})
