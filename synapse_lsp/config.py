"""Settings: a fully defaulted tree; bad values fall back to defaults with a warning."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 120.0


def synapse_home(env: dict[str, str] | None = None) -> Path:
    """`$SYNAPSE_HOME`, else `~/.synapse`."""
    source = os.environ if env is None else env
    value = source.get("SYNAPSE_HOME")
    return Path(value).expanduser() if value else Path.home() / ".synapse"


@dataclass(frozen=True)
class OutputLimits:
    """What the model sees of one command's output: head + tail within these bounds."""

    max_bytes: int = 10 * 1024
    max_lines: int = 256


@dataclass(frozen=True)
class Settings:
    """Every knob Synapse has. Faces build one from env, CLI flags or LSP settings."""

    synapse_home: Path = field(default_factory=synapse_home)
    command_timeout: float = DEFAULT_TIMEOUT_S
    output: OutputLimits = field(default_factory=OutputLimits)
    model: str = "claude-sonnet-5-5"
    max_tokens: int = 8192
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    max_turns: int = 50
    permission: str = "ask-writes-outside-workspace"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    log_level: str = "info"

    @property
    def bin_dir(self) -> Path:
        return self.synapse_home / "bin"

    def with_overrides(self, values: dict[str, Any]) -> tuple[Settings, list[str]]:
        """Return a copy with `values` applied and the list of rejected keys/values.

        Unknown keys and values of the wrong type are reported, never raised:
        config must not crash a server.
        """
        problems: list[str] = []
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in values.items():
            name = _snake(key)
            if name not in known:
                problems.append(f"unknown setting {key!r}")
                continue
            current = getattr(self, name)
            try:
                changes[name] = _coerce(current, value)
            except (TypeError, ValueError) as exc:
                problems.append(f"setting {key!r}: {exc}; keeping {current!r}")
        return replace(self, **changes), problems


def _snake(key: str) -> str:
    out = []
    for ch in key:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out).replace("-", "_")


def _coerce(current: Any, value: Any) -> Any:
    if value is None and current is None:
        return None
    if isinstance(current, Path):
        if not isinstance(value, str) or not value:
            raise TypeError("expected a path string")
        return Path(value).expanduser()
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError("expected a positive number")
        return float(value)
    if isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError("expected a positive integer")
        return value
    if isinstance(current, tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError("expected a list of strings")
        return tuple(value)
    if isinstance(current, OutputLimits):
        if not isinstance(value, dict):
            raise TypeError("expected an object")
        return OutputLimits(
            max_bytes=int(value.get("maxBytes", current.max_bytes)),
            max_lines=int(value.get("maxLines", current.max_lines)),
        )
    if current is None or isinstance(current, str):
        if not isinstance(value, str):
            raise TypeError("expected a string")
        return value
    raise TypeError(f"cannot set a {type(current).__name__}")
