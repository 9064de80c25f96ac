"""Settings: a fully defaulted tree; bad values fall back to defaults with a warning."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 120.0
MIN_THINKING_BUDGET = 1024  # the API's floor for `thinking.budget_tokens`

# Environment variables a face reads under its own settings (editor settings and CLI
# flags win). `ANTHROPIC_MODEL` is what other Anthropic tools read; ours wins over it.
ENV_SETTINGS: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_MODEL", "model"),
    ("SYNAPSE_MODEL", "model"),
    ("SYNAPSE_MAX_TOKENS", "maxTokens"),
    ("SYNAPSE_THINKING_BUDGET", "thinkingBudget"),
)


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
    thinking_budget: int = 0  # extended thinking's token budget; 0 = off
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

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> tuple[Settings, list[str]]:
        """Defaults, then the variables of `ENV_SETTINGS` that are set (and not empty).

        Returns the settings and the problems found (a bad value keeps the default).
        """
        source = os.environ if env is None else env
        base = cls(synapse_home=synapse_home(dict(source)))
        values: dict[str, Any] = {}
        problems: list[str] = []
        for var, key in ENV_SETTINGS:
            raw = source.get(var, "").strip()
            if not raw:
                continue
            if isinstance(getattr(base, _snake(key)), int):
                try:
                    values[key] = int(raw)
                except ValueError:
                    problems.append(f"${var}: expected a whole number, got {raw!r}")
                    continue
            else:
                values[key] = raw
        settings, found = base.with_overrides(values)
        return settings, problems + found

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
                changes[name] = _coerce(current, value, zero_ok=name in _ZERO_OK)
            except (TypeError, ValueError) as exc:
                problems.append(f"setting {key!r}: {exc}; keeping {current!r}")
        out = replace(self, **changes)
        budget = out.thinking_budget
        if budget and not MIN_THINKING_BUDGET <= budget < out.max_tokens:
            keep = self.thinking_budget if 0 < self.thinking_budget < out.max_tokens else 0
            problems.append(
                f"setting 'thinkingBudget': {budget} must be at least {MIN_THINKING_BUDGET} "
                f"and less than maxTokens ({out.max_tokens}); thinking "
                + (f"stays at {keep}" if keep else "is off")
            )
            out = replace(out, thinking_budget=keep)
        return out, problems


_ZERO_OK = {"thinking_budget"}  # integer settings where 0 means "off"


def _snake(key: str) -> str:
    out = []
    for ch in key:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out).replace("-", "_")


def _coerce(current: Any, value: Any, *, zero_ok: bool = False) -> Any:
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
        low = 0 if zero_ok else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"expected a whole number >= {low}")
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
