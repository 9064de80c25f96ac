"""Workspace trust: whether a folder's own extension config may run.

Opening a folder must not run what the folder says. A folder's own
`mcp_servers.json` and Claude Code's `.mcp.json` start programs, its Claude Code
skills (`.claude/skills/`) are scripts, its custom commands and sub-agents
(`.claude/commands/`, `.claude/agents/`) are prompts and tool grants, and its hooks
(`HOOK_FILES`: the `hooks` of `.synapse/settings.json` and of Claude Code's
`.claude/settings.json` and `.claude/settings.local.json`) run commands, so they are
used only once the user trusts that folder; an untrusted folder gets the home
configuration only, and is told so.
Its `.synapse/settings.json` is read either way: it may only set workspace-safe
keys (`config.WORKSPACE_SAFE`: limits, model, deny rules; never commands,
permissions, endpoints or secrets), so it stays safe untrusted.

The decision, in order (`decide`):

1. the face's own word — VS Code's Workspace Trust (`initializationOptions.
   trustedWorkspace`), `--trust` on the command line;
2. `SYNAPSE_TRUST_WORKSPACE=1` in the environment (0 = untrusted, whatever is stored);
3. the answer remembered for the folder in `$SYNAPSE_HOME/trusted_folders.json`
   (keyed by the folder's real path; the REPL asks and remembers; `synapse trust`
   sets it);
4. otherwise untrusted.

Only this module decides; `extensions.mcp_client.config_paths(…, trusted=…)` says what an
untrusted folder loses, and `core.Workspace` wires the two.

Changed since loaded: a trusted folder's files and folders that trust unlocks
(policy/folder_files.py: `TRUSTED_FILES`, `FOLDER_DIRS`) are fingerprinted (SHA-256)
in its entry each time Synapse loads them; one that changed since, or appeared, is
not used until the user confirms it (`synapse trust`, the REPL's
question): in every mode, so an agent that writes `.claude/settings.json` with a
native command in full-access (where nothing stops the write) gains nothing
(`unconfirmed`, `record_loaded`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synapse_lsp.policy.folder_files import (
    ABSENT,
    FOLDER_CONFIGS,
    FOLDER_DIRS,
    HOOK_FILES,
    fingerprints,
    hook_files,
    small_regular_text,
)

log = logging.getLogger(__name__)

ENV = "SYNAPSE_TRUST_WORKSPACE"
STORE_NAME = "trusted_folders.json"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Trust:
    """The decision for one folder and where it came from."""

    trusted: bool
    source: str  # "face", "flag", "environment", "remembered", "default"

    def __bool__(self) -> bool:
        return self.trusted


def folder_key(root: Path) -> str:
    """The folder's real path: a symlink and its target are one folder."""
    return os.path.realpath(root)


def store_path(home: Path) -> Path:
    return home / STORE_NAME


def needs_trust(root: Path) -> list[Path]:
    """The folder's own config files and folders (`.claude/skills`, `commands`,
    `agents`) that trust would let run or load (empty: nothing to ask)."""
    found = [root / name for name in FOLDER_CONFIGS if (root / name).is_file()]
    folders = [root / name for name in FOLDER_DIRS if (root / name).is_dir()]
    return found + folders + hook_files(root)


def names(root: Path, files: list[Path]) -> str:
    """How a question or a notice names the folder's files: relative to it."""
    shown = [str(p.relative_to(root)) for p in files]
    return ", ".join(name + (" (hooks)" if name in HOOK_FILES else "") for name in shown)


def _read_all(home: Path) -> dict[str, Any]:
    try:
        raw = json.loads(store_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _read(home: Path) -> dict[str, Any]:
    folders = _read_all(home).get("folders")
    return folders if isinstance(folders, dict) else {}


# ---------------------------------------------------------------- $SYNAPSE_HOME's own

# $SYNAPSE_HOME's files that decide what the agent may do or what runs outside the
# sandbox. In full-access (or without bubblewrap) nothing stops a native command from
# writing them, so the parts that govern are fingerprinted each time Synapse loads
# them and when Synapse writes them itself; a change since is not honoured until the
# user confirms it (`synapse trust --home`, the REPL's question).
HOME_SETTINGS = "settings.json"
HOME_PERMISSIONS = "permissions.json"
HOME_MCP = "mcp/mcp_servers.json"
HOME_FILES = (HOME_SETTINGS, HOME_PERMISSIONS, HOME_MCP)
# The settings that decide what the agent may do or what runs (folded: case, `_` and
# `-` ignored); the others (model, limits, output) are the user's to change without a
# question. config.py applies a change to these at once only where it tightens.
GOVERNING_SETTINGS = (
    "hooks", "allow", "deny", "permission", "sandbox", "network", "secretEnv",
    "mcpEnvAllowCredentials", "skillEnhance", "skillEnhanceMinTools", "baseUrl", "apiKeyEnv",
)  # fmt: skip


def fold(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


_GOVERNING_FOLDED = frozenset(fold(k) for k in GOVERNING_SETTINGS)


def governing_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a settings object that govern (`GOVERNING_SETTINGS`)."""
    return {k: v for k, v in data.items() if fold(k) in _GOVERNING_FOLDED}


def digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def settings_digest(data: Mapping[str, Any]) -> str:
    """The fingerprint of a settings object: its governing keys, as canonical JSON."""
    return digest(json.dumps(governing_settings(data), sort_keys=True))


def home_fingerprints(home: Path) -> dict[str, str]:
    """The fingerprint of each of `HOME_FILES` there is: the governing keys of
    settings.json (`settings_digest`), the whole text of the others."""
    found: dict[str, str] = {}
    for name in HOME_FILES:
        path = home / name
        if not path.exists() and not path.is_symlink():
            continue
        try:
            text = small_regular_text(path, 4 << 20)
        except (OSError, UnicodeError):
            found[name] = "unreadable"
            continue
        if name == HOME_SETTINGS:
            with contextlib.suppress(ValueError, RecursionError):
                data = json.loads(text) if text.strip() else {}
                if isinstance(data, dict):
                    found[name] = settings_digest(data)
                    continue
        found[name] = digest(text)
    return found


def home_record(home: Path) -> dict[str, Any]:
    """What was last confirmed of $SYNAPSE_HOME's files. The first load ever (nothing
    recorded) records what is there now: the user set up their home before Synapse
    ever ran in it (and a log line says so)."""
    stored = _read_all(home).get("home")
    if isinstance(stored, dict):
        return stored
    if any((home / name).exists() for name in HOME_FILES):
        log.info("%s: first load; its settings, permissions and MCP config are recorded", home)
    record_home(home)
    stored = _read_all(home).get("home")
    return stored if isinstance(stored, dict) else home_fingerprints(home)


def home_unconfirmed(home: Path) -> list[str]:
    """The `HOME_FILES` whose governing part changed (or appeared) since Synapse last
    loaded or wrote it (a file removed since is not listed: nothing in it is honoured)."""
    stored = home_record(home)
    now = home_fingerprints(home)
    return [name for name, value in now.items() if stored.get(name) != value]


def changed_since_confirmed(home: Path, name: str, fingerprint: str | None) -> bool:
    """Whether `fingerprint` (of the bytes the caller read and uses: no second read in
    between) differs from what was last confirmed of `name` (None: the file is gone)."""
    return home_record(home).get(name) != fingerprint


def record_home(
    home: Path, names: tuple[str, ...] = HOME_FILES, *, settings: Mapping[str, Any] | None = None
) -> bool:
    """`names` of `HOME_FILES` as they are now are confirmed (loaded, written by Synapse
    itself, or confirmed by the user); the others keep their recorded state. `settings`:
    the settings object the caller read (recorded as is, not read again). False when
    the record could not be written."""
    raw = _read_all(home)
    stored = raw.get("home")
    entry = dict(stored) if isinstance(stored, dict) else {}
    now = home_fingerprints(home)
    if settings is not None:
        now[HOME_SETTINGS] = settings_digest(settings)
    for name in names:
        if name in now:
            entry[name] = now[name]
        else:
            entry.pop(name, None)
    if HOME_SETTINGS in names:  # what stays in force while a later change is unconfirmed
        data = settings if settings is not None else _settings_object(home)
        entry[_CONFIRMED_SETTINGS] = governing_settings(data)
    if entry == stored:
        return True
    try:
        _write(home, _read(home), home_files=entry)
    except OSError:
        return False
    return True


_CONFIRMED_SETTINGS = "settings.json:governing"


def _settings_object(home: Path) -> dict[str, Any]:
    try:
        data = json.loads(small_regular_text(home / HOME_SETTINGS) or "{}")
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def confirmed_settings(home: Path) -> dict[str, Any]:
    """The governing settings last confirmed (loaded, or confirmed by the user)."""
    kept = home_record(home).get(_CONFIRMED_SETTINGS)
    return dict(kept) if isinstance(kept, dict) else {}


def home_unconfirmed_notice(home: Path, names: list[str]) -> str:
    shown = ", ".join(str(home / n) for n in names)
    return (
        f"{shown}: changed since Synapse last loaded it and not honoured until you "
        "confirm the change (an agent may have written it); check it, then run "
        "`synapse trust --home`"
    )


def remembered(home: Path, root: Path) -> bool | None:
    """The stored answer for `root` (None: never answered)."""
    entry = _read(home).get(folder_key(root))
    if isinstance(entry, dict) and isinstance(entry.get("trusted"), bool):
        return bool(entry["trusted"])
    return None


def remember(home: Path, root: Path, trusted: bool) -> None:
    """Store the answer for `root`; trusted, its files as they are now are confirmed."""
    folders = _read(home)
    entry: dict[str, Any] = {"trusted": trusted, "decided": int(time.time())}
    if trusted:
        entry["files"] = fingerprints(root)
    folders[folder_key(root)] = entry
    _write(home, folders)


def unconfirmed(home: Path, root: Path) -> list[Path]:
    """The folder's `TRUSTED_FILES` and `FOLDER_DIRS` that changed (or appeared) since
    Synapse last loaded them; [] when nothing was ever recorded for the folder (its first
    load: the trust decision itself is the confirmation). A record made before folders
    were fingerprinted has none of them: theirs is a first load too."""
    entry = _read(home).get(folder_key(root))
    stored = entry.get("files") if isinstance(entry, dict) else None
    if not isinstance(stored, dict):
        return []
    now = fingerprints(root)
    old = not any(name in stored for name in FOLDER_DIRS)
    return [
        root / name
        for name, digest in now.items()
        if digest != ABSENT and not (old and name in FOLDER_DIRS) and stored.get(name) != digest
    ]


def record_loaded(home: Path, root: Path, only: tuple[str, ...] | None = None) -> None:
    """The folder's `TRUSTED_FILES` and `FOLDER_DIRS` (`only` these) as they are now are
    what Synapse loaded."""
    folders = _read(home)
    key = folder_key(root)
    entry = folders.get(key)
    entry = dict(entry) if isinstance(entry, dict) else {}
    now = fingerprints(root)
    if only is not None:
        kept = entry.get("files")
        files = dict(kept) if isinstance(kept, dict) else {}
        for name in only:
            if name in now:
                files[name] = now[name]
            else:
                files.pop(name, None)
        now = files
    if entry.get("files") == now:
        return
    entry["files"] = now
    folders[key] = entry
    with contextlib.suppress(OSError):
        _write(home, folders)


def unconfirmed_notice(root: Path, files: list[Path], how: str = "") -> str:
    """What a trusted folder whose files changed since they were loaded is told."""
    hint = how or f"run `synapse trust {root}` to confirm and use them"
    verb, it = ("was", "it") if len(files) == 1 else ("were", "them")
    return (
        f"{names(root, files)} changed since Synapse last loaded {it} and {verb} not "
        f"loaded (an agent may have written {it}); {hint}"
    )


def forget(home: Path, root: Path) -> bool:
    """Drop the stored answer for `root`; whether there was one."""
    folders = _read(home)
    if folders.pop(folder_key(root), None) is None:
        return False
    _write(home, folders)
    return True


def _write(
    home: Path, folders: dict[str, Any], *, home_files: dict[str, Any] | None = None
) -> None:
    """Atomically: a reader never sees half a file. `home_files`: the recorded
    fingerprints of $SYNAPSE_HOME's own files (None: keep what is stored)."""
    home.mkdir(parents=True, exist_ok=True)
    if home_files is None:
        kept = _read_all(home).get("home")
        home_files = kept if isinstance(kept, dict) else None
    whole: dict[str, Any] = {"version": 1, "folders": folders}
    if home_files is not None:
        whole["home"] = home_files
    text = json.dumps(whole, indent=2, sort_keys=True) + "\n"
    fd, name = tempfile.mkstemp(prefix=".trusted_folders.", dir=home)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        tmp.replace(store_path(home))
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def trusted_folders(home: Path) -> dict[str, bool]:
    return {
        key: bool(entry["trusted"])
        for key, entry in sorted(_read(home).items())
        if isinstance(entry, dict) and isinstance(entry.get("trusted"), bool)
    }


def env_trust(env: Mapping[str, str] | None = None) -> bool | None:
    value = (os.environ if env is None else env).get(ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def decide(
    home: Path,
    root: Path,
    *,
    face: bool | None = None,
    flag: bool = False,
    env: Mapping[str, str] | None = None,
) -> Trust:
    """Whether `root`'s own config may run: the face's word, a `--trust` flag, the
    environment, the remembered answer, else no (see the module docstring)."""
    if face is not None:
        return Trust(face, "face")
    if flag:
        return Trust(True, "flag")
    from_env = env_trust(env)
    if from_env is not None:
        return Trust(from_env, "environment")
    stored = remembered(home, root)
    if stored is not None:
        return Trust(stored, "remembered")
    return Trust(False, "default")


def untrusted_notice(root: Path, how: str = "") -> str | None:
    """What an untrusted folder is told (None when it has nothing trust would unlock)."""
    files = needs_trust(root)
    if not files:
        return None
    hint = how or (f"run `synapse trust {root}` (or pass --trust, or set {ENV}=1) to trust it")
    verb = "was" if len(files) == 1 else "were"
    return f"folder not trusted: its {names(root, files)} {verb} not loaded; {hint}"


# What a listing of the folder's MCP servers says when they are not loaded.
NOT_TRUSTED_HINT = "this folder is not trusted: run `synapse trust`"
CHANGED_HINT = "it changed since Synapse last loaded it: run `synapse trust` to confirm it"
# The same, as the model reads it: trusting is the user's decision, not the agent's.
NOT_TRUSTED_FOR_MODEL = (
    "this folder is not trusted (the user's decision: they can run `synapse trust`)"
)
CHANGED_FOR_MODEL = (
    "it changed since Synapse last loaded it (the user confirms it with `synapse trust`)"
)


def mcp_withheld_reason(
    root: Path, trusted: bool, unconfirmed_files: list[Path], how: str
) -> str | None:
    """Why a folder's own MCP configs (`FOLDER_CONFIGS`) are not loaded (None: they are,
    or there are none): what listings of the folder's servers say (`how`: a face's own
    words for how to trust the folder)."""
    own = [root / name for name in FOLDER_CONFIGS]
    if not any(path.is_file() for path in own):
        return None
    if not trusted:
        return f"this folder is not trusted: {how}" if how else NOT_TRUSTED_FOR_MODEL
    return CHANGED_FOR_MODEL if set(own) & set(unconfirmed_files) else None


def changed_mcp_configs(home: Path, root: Path, trusted: bool) -> list[Path]:
    """The MCP config files changed since the user confirmed them, as they are now
    (asked again at every reload: a file an agent writes mid-session stays unused):
    home's, and a trusted folder's own."""
    changed = [home / n for n in home_unconfirmed(home) if n == HOME_MCP]
    return changed + (unconfirmed(home, root) if trusted else [])
