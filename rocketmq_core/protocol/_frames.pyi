# The compiled helper of codec.py (_frames.c): what its function takes and gives.

from collections.abc import Callable

from .command import RemotingCommand

def decode_frames(
    source: bytes | bytearray,
    position: int,
    max_length: int,
    loads: Callable[[bytes], object],
    command_type: type[RemotingCommand],
    descriptors: tuple[object, ...],
    languages: dict[str, int],
    other_language: int,
    json_type: int,
    /,
) -> tuple[list[RemotingCommand], int]: ...
