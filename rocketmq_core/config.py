"""RocketMQ-style configuration: ``key=value`` files read into typed settings.

The files are ``java.util.Properties`` text, as ``namesrv.conf`` and ``broker.conf``
are: ``#`` and ``!`` comments, ``=``, ``:`` or blanks between key and value, backslash
continuations and escapes. Keys are RocketMQ's camelCase names; a settings class is a
dataclass whose snake_case attributes map to them (``listen_port`` <-> ``listenPort``).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import logging
import typing
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import anyio

from .errors import ConfigError
from .persist import SECRET_FILE_MODE, atomic_write
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


def add_allow_unknown_keys_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-unknown-keys``: start although the config file has a misspelt-looking key."""
    parser.add_argument(
        "--allow-unknown-keys",
        action="store_true",
        help="warn about a config key that looks like a misspelling of a known one,"
        " instead of refusing to start",
    )


def format_properties(values: Mapping[str, Any]) -> str:
    """``key=value`` lines, as ``-p`` prints them and GET_*_CONFIG returns them."""
    return "".join(f"{key}={_text(value)}\n" for key, value in values.items())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def setting(
    default: Any,
    *,
    key: str | None = None,
    help: str = "",
    minimum: float | None = None,
    maximum: float | None = None,
    secret: bool = False,
) -> Any:
    """A settings field; ``key`` overrides the camelCase name, ``help`` documents it;
    ``validate`` refuses a number below ``minimum`` or above ``maximum``; a ``secret``
    stays out of repr and of what others may read (``to_text(secrets=False)``)."""
    bounds = {"minimum": minimum, "maximum": maximum}
    metadata = {"key": key, "help": help, "secret": secret, **bounds}
    return dataclasses.field(default=default, repr=not secret, metadata=metadata)


@dataclasses.dataclass
class Settings:
    """Base of typed settings read from properties.

    Subclasses are dataclasses of ``str``/``int``/``float``/``bool`` fields. A key a
    settings class does not know is ignored with a warning, as RocketMQ ignores it,
    unless it looks like a misspelling of a key it knows: running on with the default
    (data in the default directory, another port) would hide the mistake, so that is
    a ConfigError with a "did you mean".
    """

    # keys of the Java server that have no meaning here: accepted without a warning
    ignored_keys: ClassVar[frozenset[str]] = frozenset()
    # keys the Java server reads that we do not implement: ignored with a warning
    java_keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def fields_by_key(cls) -> dict[str, tuple[str, type]]:
        hints = typing.get_type_hints(cls)
        return {
            field.metadata.get("key") or camel_case(field.name): (field.name, hints[field.name])
            for field in dataclasses.fields(cls)
        }

    @classmethod
    def load(
        cls: type[S],
        path: str | Path | None = None,
        *,
        allow_unknown: bool = False,
        **overrides: Any,
    ) -> S:
        """Defaults, then ``overrides`` by attribute, then the file at ``path`` (if any);
        ``allow_unknown``: a misspelt-looking key is a warning, not a ConfigError."""
        settings = cls()
        for name, value in overrides.items():
            setattr(settings, name, value)
        if path is not None:
            settings.update_from_file(path, allow_unknown=allow_unknown)
        return settings

    def update_from_file(self, path: str | Path, *, allow_unknown: bool = False) -> list[str]:
        """Apply a ``key=value`` file over the current values."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"cannot read the config file {path}: byte {exc.start} is not UTF-8;"
                " save it as UTF-8 text"
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot read the config file {path}: {exc.strerror};"
                " check the -c path and its permissions"
            ) from None
        return self.update(parse_properties(text), source=str(path), allow_unknown=allow_unknown)

    def update(
        self,
        values: Mapping[str, str],
        *,
        source: str = "config",
        strict: bool = False,
        allow_unknown: bool = False,
    ) -> list[str]:
        """Set fields from ``values`` (all or nothing); return the keys it did not know.

        A key it does not know that is close to one it knows is a ConfigError naming
        both ("did you mean"), unless ``allow_unknown``. ``strict``: any key it does not
        know (and does not ignore) is a ConfigError.
        """
        known = self.fields_by_key()
        parsed: dict[str, Any] = {}
        not_implemented: list[str] = []
        unknown: list[str] = []
        for key, raw in values.items():
            if key in known:
                name, kind = known[key]
                parsed[name] = _convert(raw.strip(), kind, key, source)
            elif key in self.ignored_keys:
                continue
            elif key in self.java_keys and not strict:
                not_implemented.append(key)
            else:
                unknown.append(key)
        misspelt = [key for key in unknown if _close_key(key, known)]
        if unknown and strict:
            described = ", ".join(_describe_unknown(key, known) for key in unknown)
            raise ConfigError(f"{source}: unknown config keys: {described}")
        if misspelt and not allow_unknown:
            described = ", ".join(_describe_unknown(key, known) for key in misspelt)
            raise ConfigError(
                f"{source}: unknown {_plural('key', misspelt)} {described}:"
                " correct the spelling, or pass --allow-unknown-keys to start anyway"
            )
        for name, value in parsed.items():
            setattr(self, name, value)
        if not_implemented:
            log.warning(
                "%s: ignoring RocketMQ keys this server does not implement: %s",
                source,
                ", ".join(not_implemented),
            )
        if unknown:
            described = ", ".join(_describe_unknown(key, known) for key in unknown)
            log.warning("%s: ignoring unknown keys: %s", source, described)
        return not_implemented + unknown

    def validate(self) -> None:
        """ConfigError naming the key when a value cannot work; subclasses add their
        checks and call this one (it checks each number against its bounds)."""
        hints = typing.get_type_hints(type(self))
        for field in dataclasses.fields(self):
            if hints[field.name] not in (int, float):
                continue
            value = getattr(self, field.name)
            low, high = field.metadata.get("minimum"), field.metadata.get("maximum")
            if (low is None or value >= low) and (high is None or value <= high):
                continue
            key = field.metadata.get("key") or camel_case(field.name)
            if high is None:
                wanted = f"{low} or more"
            elif low is None:
                wanted = f"{high} or less"
            else:
                wanted = f"between {low} and {high}"
            raise ConfigError(f"{key} must be {wanted}, not {value}")

    def to_properties(self, *, secrets: bool = True) -> dict[str, Any]:
        hidden = set() if secrets else self.secret_keys()
        return {
            key: getattr(self, name)
            for key, (name, _kind) in self.fields_by_key().items()
            if key not in hidden
        }

    @classmethod
    def secret_keys(cls) -> set[str]:
        return {
            field.metadata.get("key") or camel_case(field.name)
            for field in dataclasses.fields(cls)
            if field.metadata.get("secret")
        }

    def to_text(self, *, secrets: bool = True) -> str:
        """The settings as ``key=value`` lines (``-p``, GET_*_CONFIG, the persisted file);
        without the secret ones for a reader over the network."""
        return format_properties(self.to_properties(secrets=secrets))

    async def save(self, path: str | Path) -> None:
        """Write the settings to ``path`` atomically, as RocketMQ persists a config update."""
        # the file holds the secret settings too: owner-only when it is made
        text = self.to_text().encode()
        await anyio.to_thread.run_sync(
            functools.partial(atomic_write, path, text, mode=SECRET_FILE_MODE)
        )


# how alike (difflib ratio) an unknown key must be to a known one to be taken for a typo:
# one or two letters wrong or missing in a camelCase key
TYPO_SIMILARITY = 0.8


def _close_key(key: str, known: Collection[str], cutoff: float = TYPO_SIMILARITY) -> str | None:
    matches = difflib.get_close_matches(key, known, n=1, cutoff=cutoff)
    return matches[0] if matches else None


def _describe_unknown(key: str, known: Collection[str]) -> str:
    """``key``, with a "did you mean" when a known key is like it."""
    match = _close_key(key, known, cutoff=0.6)
    return f"{key} (did you mean {match}?)" if match else key


def _plural(noun: str, items: Collection[object]) -> str:
    return noun if len(items) == 1 else noun + "s"


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
