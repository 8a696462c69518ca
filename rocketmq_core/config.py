"""RocketMQ-style configuration: ``key=value`` files read into typed settings.

The files are ``java.util.Properties`` text, as ``namesrv.conf`` and ``broker.conf``
are: ``#`` and ``!`` comments, ``=``, ``:`` or blanks between key and value, backslash
continuations and escapes. Keys are RocketMQ's camelCase names; a settings class is a
dataclass whose snake_case attributes map to them (``listen_port`` <-> ``listenPort``).
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import anyio

from .errors import ConfigError
from .persist import atomic_write
from .protocol.headers import camel_case

log = logging.getLogger("rocketmq.config")

S = TypeVar("S", bound="Settings")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``java.util.Properties`` text into an ordered dict."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_entry(line)
        result[key] = value
    return result


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")  # continuation lines lose their indent too
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd run of backslashes continues the line
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _split_entry(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\" and index + 1 < len(line):
            key_chars.append(line[index : index + 2])
            index += 2
            continue
        if char in "=: \t\f":
            break
        key_chars.append(char)
        index += 1
    rest = line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape("".join(key_chars)), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        following = text[index + 1]
        if following == "u" and index + 6 <= len(text):
            try:
                out.append(chr(int(text[index + 2 : index + 6], 16)))
                index += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(following, following))
        index += 2
    return "".join(out)


def format_properties(values: Mapping[str, Any]) -> str:
    """``key=value`` lines, as ``-p`` prints them and GET_*_CONFIG returns them."""
    return "".join(f"{key}={_text(value)}\n" for key, value in values.items())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def setting(default: Any, *, key: str | None = None, help: str = "") -> Any:
    """A settings field; ``key`` overrides the camelCase name, ``help`` documents it."""
    return dataclasses.field(default=default, metadata={"key": key, "help": help})


@dataclasses.dataclass
class Settings:
    """Base of typed settings read from properties.

    Subclasses are dataclasses of ``str``/``int``/``float``/``bool`` fields. Keys a
    settings class does not know are reported (a typo in a config file is a common
    mistake) but do not stop the server, as in RocketMQ.
    """

    # keys of the Java server that have no meaning here: accepted without a warning
    ignored_keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def fields_by_key(cls) -> dict[str, tuple[str, type]]:
        hints = typing.get_type_hints(cls)
        return {
            field.metadata.get("key") or camel_case(field.name): (field.name, hints[field.name])
            for field in dataclasses.fields(cls)
        }

    @classmethod
    def load(cls: type[S], path: str | Path | None = None, **overrides: Any) -> S:
        """Defaults, then ``overrides`` by attribute, then the file at ``path`` (if any)."""
        settings = cls()
        for name, value in overrides.items():
            setattr(settings, name, value)
        if path is not None:
            settings.update_from_file(path)
        return settings

    def update_from_file(self, path: str | Path) -> list[str]:
        """Apply a ``key=value`` file over the current values."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the config file {path}: {exc.strerror}") from None
        return self.update(parse_properties(text), source=str(path))

    def update(
        self, values: Mapping[str, str], *, source: str = "config", strict: bool = False
    ) -> list[str]:
        """Set fields from ``values`` (all or nothing); return the keys it did not know.

        ``strict``: a key it does not know (and does not ignore) is a ConfigError too.
        """
        known = self.fields_by_key()
        parsed: dict[str, Any] = {}
        unknown = []
        for key, raw in values.items():
            if key not in known:
                if key not in self.ignored_keys:
                    unknown.append(key)
                continue
            name, kind = known[key]
            parsed[name] = _convert(raw.strip(), kind, key, source)
        if unknown and strict:
            raise ConfigError(f"{source}: unknown config keys: {', '.join(unknown)}")
        for name, value in parsed.items():
            setattr(self, name, value)
        if unknown:
            log.warning("%s: ignoring unknown keys: %s", source, ", ".join(unknown))
        return unknown

    def validate(self) -> None:
        """ConfigError naming the key when a value cannot work (subclasses check)."""

    def to_properties(self) -> dict[str, Any]:
        return {key: getattr(self, name) for key, (name, _kind) in self.fields_by_key().items()}

    def to_text(self) -> str:
        """The settings as ``key=value`` lines (``-p``, GET_*_CONFIG, the persisted file)."""
        return format_properties(self.to_properties())

    async def save(self, path: str | Path) -> None:
        """Write the settings to ``path`` atomically, as RocketMQ persists a config update."""
        await anyio.to_thread.run_sync(atomic_write, path, self.to_text().encode())


def _convert(raw: str, kind: type, key: str, source: str) -> Any:
    if kind is str:
        return raw
    if kind is bool:
        lowered = raw.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ConfigError(f"{source}: {key} must be true or false, not {raw!r}")
    try:
        return kind(raw)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"{source}: {key} must be {noun}, not {raw!r}") from None
