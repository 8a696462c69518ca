"""UPDATE_NAMESRV_CONFIG and UPDATE_BROKER_CONFIG: one rule for a config changed at runtime."""

from __future__ import annotations

import copy
from collections.abc import Collection

from .config import Settings, parse_properties
from .errors import ConfigError, RequestRefused
from .protocol.codes import ResponseCode


def apply_config_update(
    settings: Settings,
    body: bytes | None,
    *,
    black_list: Collection[str],
    read_only: Collection[str] = (),
    source: str,
) -> dict[str, str]:
    """UPDATE_NAMESRV_CONFIG and UPDATE_BROKER_CONFIG: the body's ``key=value`` lines
    applied to the running ``settings``, all or nothing; returns what was applied.

    Refusals are RequestRefused naming the keys: NO_PERMISSION for a key in the black
    list (as RocketMQ) or one only read at startup; SYSTEM_ERROR for an unknown key or a
    value the settings cannot take (RocketMQ skips those silently, so a typo would
    look applied). An empty body changes nothing.
    """
    if not body:
        return {}
    try:
        values = parse_properties(bytes(body).decode())
    except UnicodeDecodeError:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, "string2Properties error") from None
    refused = sorted(values.keys() & set(black_list))
    if refused:
        raise RequestRefused(
            ResponseCode.NO_PERMISSION,
            f"Can not update config in black list: {', '.join(refused)}",
        )
    fixed = sorted(values.keys() & set(read_only))
    if fixed:
        raise RequestRefused(
            ResponseCode.NO_PERMISSION,
            f"Can not update config read at startup only: {', '.join(fixed)};"
            " change the config file and restart",
        )
    candidate = copy.copy(settings)  # try on a copy: a value validate() refuses changes nothing
    try:
        candidate.update(values, source=source, strict=True)
        candidate.validate()
    except ConfigError as exc:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, str(exc)) from None
    settings.update(values, source=source)
    return values
