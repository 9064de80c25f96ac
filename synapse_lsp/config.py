"""Settings: a fully defaulted tree; bad values fall back to defaults with a warning.

Every setting is validated here, the same for CLI flags, the REPL and editors.
`LiveSettings` is the one live source: components keep it (a `SettingsSource`, any
callable returning `Settings`) and read it at use time, so a change reaches a shell,
router, gate or registry that already exists. Sources and precedence, lowest first:

    defaults < $SYNAPSE_HOME/settings.json < <folder>/.synapse/settings.json
             (WORKSPACE_SAFE keys only) < environment (ENV_SETTINGS) < the face
             (LSP initializationOptions / workspace/configuration, CLI flags)
"""

from __future__ import annotations

import difflib
import json
import os
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from synapse_lsp.policy import trust

DEFAULT_TIMEOUT_S = 120.0
# Below this a command cannot even reach bash before it is interrupted (the interrupt
# then hits bash at its prompt, and a session would be replaced for nothing).
MIN_TIMEOUT_S = 0.1
DEFAULT_PERMISSION_TIMEOUT_S = 120.0
DEFAULT_MAX_COMMAND_BYTES = 4 * 1024 * 1024
MIN_THINKING_BUDGET = 1024  # the API's floor for `thinking.budget_tokens`

# Environment variables a face reads under its own settings (editor settings and CLI
# flags win). `ANTHROPIC_MODEL` is what other Anthropic tools read; ours wins over it.
ENV_SETTINGS: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_MODEL", "model"),
    ("SYNAPSE_MODEL", "model"),
    ("SYNAPSE_MAX_TOKENS", "maxTokens"),
    ("SYNAPSE_THINKING_BUDGET", "thinkingBudget"),
    ("SYNAPSE_SANDBOX", "sandbox"),
    ("SYNAPSE_NETWORK", "network"),
)


POLICIES = ("auto", "ask-writes-outside-workspace", "ask-all-native")
# Sandbox modes (docs/user-guide.md "Sandbox and permissions"): what the agent's shell
# may write, enforced by the kernel (bubblewrap) where it works.
SANDBOX_MODES = ("read-only", "workspace-write", "full-access")
NETWORK_MODES = ("on", "off")
LOG_LEVELS = ("error", "warning", "info", "debug")
SETTINGS_FILE = "settings.json"
WORKSPACE_DIR = ".synapse"
# What a folder's own `.synapse/settings.json` may set. A repository is not trusted
# to loosen permissions, add allow rules, move $SYNAPSE_HOME, point the API key at
# another endpoint or name another key variable: those keys are refused there.
WORKSPACE_SAFE = frozenset(
    {
        "commandTimeout",
        "output",
        "maxTurns",
        "model",
        "maxTokens",
        "thinkingBudget",
        "deny",
        "logLevel",
    }
)
# Honoured only from $SYNAPSE_HOME/settings.json: not a folder's, nor the face's (a repo's).
HOME_ONLY = frozenset({"mcpEnvAllowCredentials", "pricing", "hooks", "claudeUserHooks"}) | {
    "skillEnhance",
    "skillEnhanceMinTools",
}
# Keys a folder's own settings file may hold that are read elsewhere, and only once the
# folder is trusted (hooks.py reads its `hooks`): neither applied nor refused here.
FOLDER_TRUSTED = frozenset({"hooks"})
# Settings that restrict the agent. A misspelt key near one of these, or a bad value
# for one, is refused (the face does not start) instead of warned about and ignored:
# ignoring it would silently drop a restriction the user meant to set.
RESTRICTIVE = frozenset(
    {"deny", "sandbox", "network", "permission", "permissionTimeout", "secretEnv", "hooks"}
)
_CHOICES: dict[str, tuple[str, ...]] = {
    "permission": POLICIES,
    "log_level": LOG_LEVELS,
    "sandbox": SANDBOX_MODES,
    "network": NETWORK_MODES,
}


def default_sandbox(env: Mapping[str, str] | None = None) -> str:
    """`$SYNAPSE_SANDBOX` when it names a mode, else `workspace-write` (a bad value is
    reported where the environment's settings are read: `Settings.from_env`)."""
    value = (os.environ if env is None else env).get("SYNAPSE_SANDBOX", "")
    return value if value in SANDBOX_MODES else "workspace-write"


def synapse_home(env: Mapping[str, str] | None = None) -> Path:
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
class ModelPrice:
    """What a model costs, in USD per million tokens (agent/pricing.py has the table)."""

    input: float
    output: float
    cache_write: float
    cache_read: float


@dataclass(frozen=True)
class PriceOverrides:
    """The `pricing` setting: model name -> price, over the package's table. In JSON
    `{"MODEL": {"input": 3, "output": 15, "cacheWrite": 3.75, "cacheRead": 0.3}}`;
    `cacheWrite`/`cacheRead` default to 1.25x and 0.1x `input` (the API's ratios)."""

    entries: tuple[tuple[str, ModelPrice], ...] = ()

    def get(self, model: str) -> ModelPrice | None:
        return next((price for name, price in self.entries if name == model), None)

    @classmethod
    def parse(cls, value: Any) -> PriceOverrides:
        if not isinstance(value, dict):
            raise TypeError("expected an object: model name -> {input, output, ...}")
        entries: list[tuple[str, ModelPrice]] = []
        for name, raw in value.items():
            if not isinstance(raw, dict):
                raise TypeError(f"{name!r}: expected an object of prices per million tokens")
            unknown = set(raw) - {"input", "output", "cacheWrite", "cacheRead"}
            if unknown or not {"input", "output"} <= set(raw):
                raise TypeError(
                    f"{name!r}: keys are input, output (required), cacheWrite, cacheRead"
                )
            numbers: dict[str, float] = {}
            for key, number in raw.items():
                if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
                    raise ValueError(f"{name!r}: `{key}` must be a number >= 0 (USD per MTok)")
                numbers[key] = float(number)
            entries.append(
                (
                    str(name),
                    ModelPrice(
                        input=numbers["input"],
                        output=numbers["output"],
                        cache_write=numbers.get("cacheWrite", numbers["input"] * 1.25),
                        cache_read=numbers.get("cacheRead", numbers["input"] * 0.1),
                    ),
                )
            )
        return cls(tuple(entries))


@dataclass(frozen=True)
class Settings:
    """Every knob Synapse has. Faces build one from env, CLI flags or LSP settings."""

    synapse_home: Path = field(default_factory=synapse_home)
    command_timeout: float = DEFAULT_TIMEOUT_S
    output: OutputLimits = field(default_factory=OutputLimits)
    # Disk for full outputs under $SYNAPSE_HOME/outputs/: at most this much per command
    # (stdout and stderr together; past it the command runs on and the rest is dropped,
    # the result says how much), and this much for the whole directory (oldest evicted).
    spill_max_bytes: int = 64 << 20
    spill_total_bytes: int = 1 << 30
    model: str = "claude-sonnet-5-5"
    max_tokens: int = 8192
    thinking_budget: int = 0  # extended thinking's token budget; 0 = off
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    max_turns: int = 50
    # Adjacent `task:*` calls of one model response run at most this many at once.
    max_parallel_tasks: int = 5
    # The breaker: after this many failing tool calls in a row the turn winds down (0 = off).
    max_tool_failures: int = 5
    # A turn that ends with plan items not completed gets one reminder to the model.
    todo_reminder: bool = True
    # A snapshot of the folder before and after each turn, for /rewind (checkpoints/).
    checkpoints: bool = True
    # Stored sessions kept (oldest pruned when a new one starts; 0 = no cap).
    max_sessions: int = 0
    # The editor's problems and the user's changes in files the agent edited, noted to
    # the model once (agent/feedback.py).
    editor_feedback: bool = True
    permission: str = "ask-writes-outside-workspace"
    # What the agent's commands may write (`SANDBOX_MODES`) and whether they reach the
    # network; `workspace-write` falls back to the parsing gate alone where bubblewrap
    # cannot run (reported as not sandboxed).
    sandbox: str = field(default_factory=default_sandbox)
    network: str = "off"
    # How long a permission question waits for an answer before the command is denied.
    permission_timeout: float = DEFAULT_PERMISSION_TIMEOUT_S
    # The longest command line accepted (bytes, UTF-8); longer ones get a clear error.
    max_command_bytes: int = DEFAULT_MAX_COMMAND_BYTES
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    log_level: str = "info"
    # Environment variables no child (shell, skill, MCP server) inherits, as names or
    # fnmatch globs, besides the model credentials (`api_key_env`, every ANTHROPIC_*).
    secret_env: tuple[str, ...] = ()
    # Lets `$VAR` in $SYNAPSE_HOME/mcp/mcp_servers.json expand to a model credential.
    # HOME_ONLY: honoured from $SYNAPSE_HOME/settings.json only.
    mcp_env_allow_credentials: bool = False
    # Model prices over the package's table (agent/pricing.py); HOME_ONLY.
    pricing: PriceOverrides = field(default_factory=PriceOverrides)
    # Commands run at points of a session, in Claude Code's `hooks` shape, checked by
    # hooks.py; with `claude_user_hooks`, ~/.claude/settings.json's too. Both HOME_ONLY.
    hooks: Mapping[str, Any] = field(default_factory=dict)
    claude_user_hooks: bool = True
    # After a turn that ended with at least `skill_enhance_min_tools` tool calls, a
    # background task:skill:enhance improves or creates a skill (agent/skill_enhance.py);
    # both HOME_ONLY (the run writes under $SYNAPSE_HOME/skills with nobody watching).
    skill_enhance: bool = False
    skill_enhance_min_tools: int = 5

    @property
    def bin_dir(self) -> Path:
        return self.synapse_home / "bin"

    @property
    def skills_dir(self) -> Path:
        return self.synapse_home / "skills"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> tuple[Settings, list[str]]:
        """Defaults, then the variables of `ENV_SETTINGS` that are set (and not empty).

        Returns the settings and the problems found (a bad value keeps the default).
        """
        source = os.environ if env is None else env
        values, problems = env_values(source)
        settings, found = cls(synapse_home=synapse_home(source)).with_overrides(values)
        return settings, problems + found

    def with_overrides(self, values: dict[str, Any]) -> tuple[Settings, list[str]]:
        """Return a copy with `values` applied and the list of rejected keys/values.

        Unknown keys and values of the wrong type are reported, never raised:
        config must not crash a server.
        """
        problems: list[str] = []
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}

        def bad(key: str, text: str, current: Any) -> Problem:
            if _camel(_snake(key)) in RESTRICTIVE:
                return Problem.refusing(
                    f"{text}: refused, since keeping {current!r} could drop a restriction "
                    "you meant to set; fix the value"
                )
            return Problem(f"{text}; keeping {current!r}")

        for key, value in values.items():
            name = _snake(key)
            if name not in known:
                problems.append(_unknown_key(key, (_camel(n) for n in known)))
                continue
            current = getattr(self, name)
            try:
                changes[name] = _coerce(current, value, zero_ok=name in _ZERO_OK)
            except (TypeError, ValueError) as exc:
                problems.append(bad(key, f"setting {key!r}: {exc}", current))
                continue
            if name == "command_timeout" and changes[name] < MIN_TIMEOUT_S:
                problems.append(
                    f"setting {key!r}: must be at least {MIN_TIMEOUT_S:g} s; keeping {current!r}"
                )
                del changes[name]
                continue
            choices = _CHOICES.get(name)
            if choices is not None and changes[name] not in choices:
                problems.append(
                    bad(
                        key,
                        f"setting {key!r}: {changes[name]!r} is not one of {', '.join(choices)}",
                        current,
                    )
                )
                del changes[name]
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


# Integer settings where 0 means "off".
_ZERO_OK = {"thinking_budget", "max_tool_failures", "max_sessions"}


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
    if isinstance(current, Mapping):  # `hooks`: the shape is hooks.py's to check
        if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
            raise TypeError("expected an object of events, each a list of {matcher, hooks}")
        return dict(value)
    if isinstance(current, PriceOverrides):
        return PriceOverrides.parse(value)
    if isinstance(current, tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError("expected a list of strings")
        return tuple(value)
    if isinstance(current, OutputLimits):
        if not isinstance(value, dict):
            raise TypeError("expected an object")
        unknown = set(value) - {"maxBytes", "maxLines"}
        if unknown:
            raise TypeError(f"unknown keys {', '.join(sorted(unknown))} (maxBytes, maxLines)")
        limits = {}
        for key, default in (("maxBytes", current.max_bytes), ("maxLines", current.max_lines)):
            raw = value.get(key, default)
            if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
                raise ValueError(f"`{key}` must be a whole number >= 1")
            limits[key] = raw
        return OutputLimits(max_bytes=limits["maxBytes"], max_lines=limits["maxLines"])
    if current is None or isinstance(current, str):
        if not isinstance(value, str):
            raise TypeError("expected a string")
        return value
    raise TypeError(f"cannot set a {type(current).__name__}")


class Problem(str):
    """A settings problem, as text; `refuses` when the face must not start with it
    (a misspelt or bad restrictive setting: `RESTRICTIVE`). Otherwise the key or value
    is ignored and the layer below wins, with this as the warning."""

    refuses: bool = False

    @classmethod
    def refusing(cls, text: str) -> Problem:
        problem = cls(text)
        problem.refuses = True
        return problem

    @classmethod
    def of(cls, text: str) -> Problem:
        return text if isinstance(text, Problem) else cls(text)

    def located(self, where: str) -> Problem:
        """The same problem, naming where the setting came from."""
        out = Problem(f"{where}: {self}") if where else Problem(self)
        out.refuses = self.refuses
        return out


def _unknown_key(key: str, known: Iterable[str]) -> Problem:
    """`unknown setting 'commandTimout' (did you mean 'commandTimeout'?)`; refusing when
    the nearest known key is a restrictive one."""
    names = sorted(known)
    folded = {k.lower().replace("_", "").replace("-", ""): k for k in names}
    near = folded.get(key.lower().replace("_", "").replace("-", ""))
    if near is None:
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
        near = close[0] if close else None
    if near is None:
        return Problem(f"unknown setting {key!r}; ignored")
    text = f"unknown setting {key!r} (did you mean {near!r}?)"
    if near in RESTRICTIVE:
        return Problem.refusing(
            f"{text}: refused, since ignoring it could drop a restriction "
            f"({near!r} restricts what the agent may do); fix the name"
        )
    return Problem(f"{text}; ignored")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


SettingsSource = Callable[[], Settings]


def as_source(settings: Settings | SettingsSource) -> SettingsSource:
    """A plain `Settings` as a source that always answers it (tests, one-shot tools)."""
    if isinstance(settings, Settings):
        fixed = settings
        return lambda: fixed
    return settings


def env_values(env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The settings named by the variables of `ENV_SETTINGS` that are set and not empty."""
    source = os.environ if env is None else env
    values: dict[str, Any] = {}
    problems: list[str] = []
    defaults = Settings(synapse_home=Path("/"))
    for var, key in ENV_SETTINGS:
        raw = source.get(var, "").strip()
        if not raw:
            continue
        if isinstance(getattr(defaults, _snake(key)), int):
            try:
                values[key] = int(raw)
            except ValueError:
                problems.append(f"${var}: expected a whole number, got {raw!r}")
        else:
            values[key] = raw
    return values, problems


def read_settings_file(path: Path, *, workspace: bool) -> tuple[dict[str, Any], list[str]]:
    """The object in a settings file (absent = empty); in a folder's file only the
    WORKSPACE_SAFE keys count, the others are reported and ignored."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # a file in the path: none here
        return {}, []
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [f"{path}: cannot read: {exc}"]
    try:
        data = json.loads(text) if text.strip() else {}
    except (json.JSONDecodeError, RecursionError) as exc:
        return {}, [f"{path}: not valid JSON: {exc}"]
    if not isinstance(data, dict):
        return {}, [f"{path}: expected a JSON object of settings"]
    problems: list[str] = []
    if workspace:
        data = {k: v for k, v in data.items() if k not in FOLDER_TRUSTED}
        known = {_camel(f.name) for f in fields(Settings)}
        for key in sorted(k for k in data if _camel(_snake(k)) not in known):
            problems.append(_unknown_key(key, WORKSPACE_SAFE).located(str(path)))
        data = {k: v for k, v in data.items() if _camel(_snake(k)) in known}
        refused = sorted(k for k in data if k not in WORKSPACE_SAFE)
        if refused:
            problems.append(
                f"{path}: {', '.join(refused)} cannot be set by a folder's own settings "
                f"(only {', '.join(sorted(WORKSPACE_SAFE))}); set them in "
                f"$SYNAPSE_HOME/{SETTINGS_FILE} or in the editor"
            )
        data = {k: v for k, v in data.items() if k in WORKSPACE_SAFE}
    elif "synapseHome" in data:
        problems.append(f"{path}: synapseHome cannot be set inside $SYNAPSE_HOME itself")
        data = {k: v for k, v in data.items() if k != "synapseHome"}
    return data, problems


# For the keys a change may tighten: their values, loosest first.
_STRICTNESS: dict[str, tuple[str, ...]] = {
    "sandbox": ("full-access", "workspace-write", "read-only"),
    "network": ("on", "off"),
    "permission": ("auto", "ask-writes-outside-workspace", "ask-all-native"),
}
_UNIONS = frozenset({"deny", "secretenv"})  # lists where more entries restrict more
_SUBSETS = frozenset({"allow"})  # lists where fewer entries restrict more
_OFF_IS_STRICTER = frozenset({"mcpenvallowcredentials", "skillenhance"})


def guard_settings(
    now: dict[str, Any], confirmed: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A home settings object changed since it was confirmed: (what to apply, the keys
    whose change is withheld). A change that tightens applies at once (a `deny` added,
    a stricter `sandbox`, `allow` entries removed); one that loosens or runs something
    (`hooks`, a looser mode, an endpoint) keeps the confirmed value."""
    defaults = Settings(synapse_home=Path("/"))
    folded_now = {trust.fold(k): k for k in trust.governing_settings(now)}
    folded_kept = {trust.fold(k): k for k in trust.governing_settings(confirmed)}
    out = {k: v for k, v in now.items() if trust.fold(k) not in folded_now}
    withheld: list[str] = []
    for key in sorted(set(folded_now) | set(folded_kept)):
        name = folded_now.get(key) or folded_kept[key]
        new = now.get(folded_now[key]) if key in folded_now else None
        old = confirmed.get(folded_kept[key]) if key in folded_kept else None
        default = getattr(defaults, _snake(_camel_of(key)), None)
        chosen, tighter = _tighter(key, new, old, default)
        if chosen is not None:
            out[name] = chosen
        if not tighter:
            withheld.append(name)
    return out, withheld


def _camel_of(folded: str) -> str:
    for name in trust.GOVERNING_SETTINGS:
        if trust.fold(name) == folded:
            return name
    return folded


def _tighter(key: str, new: Any, old: Any, default: Any) -> tuple[Any, bool]:
    """(the value to apply, whether the change from `old` to `new` is no looser)."""
    if new == old:
        return new, True
    choices = _STRICTNESS.get(key)
    if choices is not None:
        rank = {v: i for i, v in enumerate(choices)}
        a, b = (
            rank.get(new if new is not None else default),
            rank.get(old if old is not None else default),
        )
        if a is not None and b is not None and a >= b:
            return new, True
        return old, False
    if key in _UNIONS and isinstance(new, list | type(None)) and isinstance(old, list | type(None)):
        merged = list(new or []) + [x for x in (old or []) if x not in (new or [])]
        return merged, set(map(str, old or [])) <= set(map(str, new or []))
    if (
        key in _SUBSETS
        and isinstance(new, list | type(None))
        and isinstance(old, list | type(None))
    ):
        if set(map(str, new or [])) <= set(map(str, old or [])):
            return new, True
        return old, False
    if key in _OFF_IS_STRICTER and not new:
        return new, True
    return old, False


class LiveSettings:
    """The one live source of settings for a face, or for one workspace folder.

    Call it for the current `Settings`. `set_face()` replaces what the face says
    (editor settings, CLI flags) and `reload()` re-reads the settings files; either
    recomputes the layers and updates every folder derived with `for_folder()`.
    Problems (bad values, refused keys) are returned and kept in `problems`; a bad
    value never crashes anything, the layer below it wins.
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        folder: Path | None = None,
        base: Settings | None = None,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        self._folder = folder
        self._base = base
        self._face: tuple[dict[str, Any], ...] = ()
        self._files: list[dict[str, Any]] = []
        self._file_problems: list[str] = []
        self._children: weakref.WeakSet[LiveSettings] = weakref.WeakSet()
        self._parent: LiveSettings | None = None
        self._listeners: list[Callable[[Settings], None]] = []
        self.problems: list[str] = []
        self._value = Settings()
        self.reload()

    def __call__(self) -> Settings:
        return self._value

    @property
    def refusals(self) -> list[str]:
        """The problems a face must not start with (`Problem.refuses`)."""
        return [p for p in self.problems if isinstance(p, Problem) and p.refuses]

    @property
    def folder(self) -> Path | None:
        return self._folder

    def for_folder(self, folder: Path) -> LiveSettings:
        """A source for one workspace folder: this one's layers plus the folder's own
        `.synapse/settings.json`; it follows every later change of this one."""
        child = LiveSettings(self._env, folder=folder, base=self._base)
        child._parent = self
        child._face = self._face
        self._children.add(child)
        child.reload()
        return child

    def subscribe(self, listener: Callable[[Settings], None]) -> None:
        """Called with the new settings after every recomputation (log levels...)."""
        self._listeners.append(listener)

    def set_face(self, *sources: Mapping[str, Any]) -> list[str]:
        """Replace the face's layer (later sources win) and recompute."""
        self._face = tuple(dict(s) for s in sources)
        return self._recompute()

    def reload(self) -> list[str]:
        """Re-read the settings files, then recompute."""
        home = (self._base.synapse_home if self._base else None) or synapse_home(self._env)
        files: list[dict[str, Any]] = []
        problems: list[str] = []
        data, found = read_settings_file(home / SETTINGS_FILE, workspace=False)
        exists = (home / SETTINGS_FILE).exists()
        fingerprint = trust.settings_digest(data) if exists else None
        if trust.changed_since_confirmed(home, trust.HOME_SETTINGS, fingerprint):
            # Changed since Synapse last loaded it, maybe by an agent: what tightens
            # applies at once; what loosens or runs stays as last confirmed.
            data, withheld = guard_settings(data, trust.confirmed_settings(home))
            if withheld:
                problems.append(
                    f"{home / SETTINGS_FILE}: {', '.join(withheld)} changed since Synapse "
                    "last loaded it and the change loosens or runs something: not applied "
                    "until you confirm it (an agent may have made it); check the file, "
                    "then run `synapse trust --home`"
                )
            else:  # only tighter than before: nothing to confirm
                trust.record_home(home, (trust.HOME_SETTINGS,), settings=data)
        files.append(data)
        problems += found
        if self._folder is not None:
            path = self._folder / WORKSPACE_DIR / SETTINGS_FILE
            data, found = read_settings_file(path, workspace=True)
            files.append(data)
            problems += found
        self._files = files
        self._file_problems = problems
        found = self._recompute(children=False)
        for child in list(self._children):
            child.reload()
        return found

    def _recompute(self, *, children: bool = True) -> list[str]:
        settings = self._base or Settings(synapse_home=synapse_home(self._env))
        problems = list(self._file_problems)
        env, found = env_values(self._env)
        # A variable set for this run is meant now: a bad one stops the face, like a flag.
        problems += [Problem.refusing(p) for p in found]
        home_only = {_snake(k) for k in HOME_ONLY}
        home = (self._base.synapse_home if self._base else None) or synapse_home(self._env)
        places = [str(home / SETTINGS_FILE)]
        if self._folder is not None:
            places.append(str(self._folder / WORKSPACE_DIR / SETTINGS_FILE))
        places += ["environment"] + [""] * len(self._face)
        for index, layer in enumerate((*self._files, env, *self._face)):
            if index > 0:  # only the first layer is $SYNAPSE_HOME/settings.json
                refused = sorted(k for k in layer if _snake(k) in home_only)
                if refused:
                    problems.append(
                        f"{', '.join(refused)} can be set only in $SYNAPSE_HOME/{SETTINGS_FILE}; "
                        "ignored here"
                    )
                    layer = {k: v for k, v in layer.items() if _snake(k) not in home_only}
            settings, found = settings.with_overrides(layer)
            if places[index] == "environment":
                found = [Problem.refusing(p) for p in found]
            problems += [Problem.of(p).located(places[index]) for p in found]
        self._value = settings
        self.problems = problems
        for listener in list(self._listeners):
            listener(settings)
        if children:
            for child in list(self._children):
                child._face = self._face
                child._recompute()
        return problems
