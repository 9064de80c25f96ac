"""Workspace trust: whether a folder's own extension config may run.

Opening a folder must not run what the folder says. A folder's own
`mcp_servers.json` starts programs and its hooks (`HOOK_FILES`: the `hooks` of
`.synapse/settings.json` and of Claude Code's `.claude/settings.json` and
`.claude/settings.local.json`) run commands, so they are used only once the user
trusts that folder; an untrusted folder gets the home configuration only, and is told
so.
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

Changed since loaded: a trusted folder's files that trust unlocks (`TRUSTED_FILES`) are
fingerprinted (SHA-256) in its entry each time Synapse loads them; one that changed
since, or appeared, is not used until the user confirms it (`synapse trust`, the REPL's
question): in every mode, so an agent that writes `.claude/settings.json` with a
native command in full-access (where nothing stops the write) gains nothing
(`unconfirmed`, `record_loaded`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "SYNAPSE_TRUST_WORKSPACE"
STORE_NAME = "trusted_folders.json"
# The folder's own files that only a trusted folder may use.
FOLDER_CONFIGS = ("mcp_servers.json",)
# The folder's settings files whose `hooks` (hooks.py) only a trusted folder may use.
HOOK_FILES = (".synapse/settings.json", ".claude/settings.json", ".claude/settings.local.json")
# Every file trust unlocks, fingerprinted whether or not it holds hooks today.
TRUSTED_FILES = (*FOLDER_CONFIGS, *HOOK_FILES)
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
    """The folder's own config files that trust would let run (empty: nothing to ask)."""
    return [root / name for name in FOLDER_CONFIGS if (root / name).is_file()] + hook_files(root)


def _small_regular_text(path: Path, limit: int = 1 << 20) -> str:
    """A settings file of an untrusted folder, read without trusting it: a FIFO, a
    device or a link to `/dev/zero` is refused, not read forever (OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise OSError(f"{path}: not a small regular file")
        return os.read(fd, limit + 1)[:limit].decode("utf-8")
    finally:
        os.close(fd)


def hook_files(root: Path) -> list[Path]:
    """The folder's settings files of `HOOK_FILES` that hold a `hooks` key."""
    found: list[Path] = []
    for name in HOOK_FILES:
        path = root / name
        try:
            data = json.loads(_small_regular_text(path))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("hooks"):
            found.append(path)
    return found


def names(root: Path, files: list[Path]) -> str:
    """How a question or a notice names the folder's files: relative to it."""
    shown = [str(p.relative_to(root)) for p in files]
    return ", ".join(name + (" (hooks)" if name in HOOK_FILES else "") for name in shown)


def _read(home: Path) -> dict[str, Any]:
    try:
        raw = json.loads(store_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    folders = raw.get("folders") if isinstance(raw, dict) else None
    return folders if isinstance(folders, dict) else {}


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


def fingerprints(root: Path) -> dict[str, str]:
    """SHA-256 of each of the folder's `TRUSTED_FILES` there is (as a small regular
    file; another kind of file counts by its kind)."""
    import hashlib

    found: dict[str, str] = {}
    for name in TRUSTED_FILES:
        path = root / name
        if not path.exists() and not path.is_symlink():
            continue
        try:
            data = _small_regular_text(path, 4 << 20).encode("utf-8", "surrogatepass")
            found[name] = hashlib.sha256(data).hexdigest()
        except (OSError, UnicodeError):
            found[name] = "unreadable"
    return found


def unconfirmed(home: Path, root: Path) -> list[Path]:
    """The folder's `TRUSTED_FILES` that changed (or appeared) since Synapse last loaded
    them; [] when nothing was ever recorded for the folder (its first load: the trust
    decision itself is the confirmation)."""
    entry = _read(home).get(folder_key(root))
    stored = entry.get("files") if isinstance(entry, dict) else None
    if not isinstance(stored, dict):
        return []
    now = fingerprints(root)
    return [root / name for name, digest in now.items() if stored.get(name) != digest]


def record_loaded(home: Path, root: Path) -> None:
    """The folder's `TRUSTED_FILES` as they are now are what Synapse loaded."""
    folders = _read(home)
    key = folder_key(root)
    entry = folders.get(key)
    entry = dict(entry) if isinstance(entry, dict) else {}
    now = fingerprints(root)
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


def _write(home: Path, folders: dict[str, Any]) -> None:
    """Atomically: a reader never sees half a file."""
    home.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": 1, "folders": folders}, indent=2, sort_keys=True) + "\n"
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
