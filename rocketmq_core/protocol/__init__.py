"""Sans-IO RocketMQ remoting protocol: bytes in, commands out, and back.

Nothing here reads a socket or a clock; see docs/design.md "Rules of the house".
Import from the submodules: ``codes``, ``command``, ``codec``, ``headers``.
"""
