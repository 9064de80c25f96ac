"""The folder's own files that trust unlocks (policy/trust.py decides whether it may
use them, and keeps their fingerprints), read without trusting them.

Files: the folder's MCP configs (`FOLDER_CONFIGS`: Synapse's `mcp_servers.json`,
Claude Code's `.mcp.json`) and the settings files whose `hooks` run (`HOOK_FILES`).
Folders (`FOLDER_DIRS`): Claude Code's skills (`.claude/skills`: scripts), custom
slash commands (`.claude/commands`: prompts sent as the user's) and sub-agent
definitions (`.claude/agents`: a sub-agent's prompt and tools). A file is
fingerprinted by its SHA-256; a folder by one SHA-256 over its tree (`tree_digest`),
so a file added, removed or changed anywhere in it changes the folder's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

# The folder's own files that only a trusted folder may use.
FOLDER_CONFIGS = ("mcp_servers.json", ".mcp.json")
FOLDER_SKILLS = ".claude/skills"  # Claude Code's skills of the folder (a folder)
FOLDER_COMMANDS = ".claude/commands"  # its custom slash commands (a folder)
FOLDER_AGENTS = ".claude/agents"  # its sub-agent definitions (a folder)
FOLDER_DIRS = (FOLDER_SKILLS, FOLDER_COMMANDS, FOLDER_AGENTS)
# The folder's settings files whose `hooks` (hooks.py) only a trusted folder may use.
HOOK_FILES = (".synapse/settings.json", ".claude/settings.json", ".claude/settings.local.json")
# Every file trust unlocks, fingerprinted whether or not it holds hooks today.
TRUSTED_FILES = (*FOLDER_CONFIGS, *HOOK_FILES)
# A folder of `FOLDER_DIRS` that is not there: recorded too, so one that appears after
# the user confirmed the folder is a change (a record without it predates folders).
ABSENT = "absent"
MAX_ENTRIES = 5000  # of a folder's tree: past it, more entries are counted, not read
WHOLE_BYTES = 1 << 20  # a larger file of a tree is fingerprinted by size and mtime


def small_regular_text(path: Path, limit: int = 1 << 20) -> str:
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
            data = json.loads(small_regular_text(path))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("hooks"):
            found.append(path)
    return found


def fingerprints(root: Path) -> dict[str, str]:
    """SHA-256 of each of the folder's `TRUSTED_FILES` there is (as a small regular
    file; another kind of file counts by its kind), and of each of `FOLDER_DIRS`
    (`tree_digest`; `ABSENT` when there is none)."""
    found: dict[str, str] = {}
    for name in TRUSTED_FILES:
        path = root / name
        if not path.exists() and not path.is_symlink():
            continue
        try:
            data = small_regular_text(path, 4 << 20).encode("utf-8", "surrogatepass")
            found[name] = hashlib.sha256(data).hexdigest()
        except (OSError, UnicodeError):
            found[name] = "unreadable"
    for name in FOLDER_DIRS:
        path = root / name
        if path.is_dir():
            found[name] = tree_digest(path)
        else:
            found[name] = "not a folder" if path.exists() or path.is_symlink() else ABSENT
    return found


def tree_digest(folder: Path) -> str:
    """One SHA-256 over `folder`'s tree, links not followed: each entry's relative path
    and kind, a regular file's bytes (one over `WHOLE_BYTES` by its size and mtime), a
    link's target; past `MAX_ENTRIES` entries only their number counts."""
    total = hashlib.sha256()
    count = 0
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(dirs + files):
            count += 1
            if count > MAX_ENTRIES:
                continue
            path = Path(top, name)
            rel = str(path.relative_to(folder))
            total.update(f"\0{rel}\0".encode("utf-8", "surrogateescape"))
            total.update(_entry(path).encode("utf-8", "surrogateescape"))
    total.update(f"\0entries {count}".encode())
    return total.hexdigest()


def _entry(path: Path) -> str:
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return f"link {path.readlink()}"
        if stat.S_ISDIR(info.st_mode):
            return "dir"
        if not stat.S_ISREG(info.st_mode):
            return f"kind {stat.S_IFMT(info.st_mode)}"
        if info.st_size > WHOLE_BYTES:
            return f"large {info.st_size} {info.st_mtime_ns}"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            return "file " + hashlib.sha256(file.read(WHOLE_BYTES + 1)).hexdigest()
    except OSError:
        return "unreadable"


def folder_server_names(root: Path, files: tuple[str, ...] = FOLDER_CONFIGS) -> list[str]:
    """The server names in the folder's own MCP configs (`files` of `FOLDER_CONFIGS`),
    read without trusting them (none from one missing, unreadable or not
    `{"mcpServers": {…}}`)."""
    servers: dict[str, object] = {}
    for name in files:
        try:
            data = json.loads(small_regular_text(root / name))
        except (OSError, ValueError, RecursionError):
            continue
        table = data.get("mcpServers") if isinstance(data, dict) else None
        servers.update(table if isinstance(table, dict) else {})
    # Names an untrusted repository chose, shown to the user and the model: only
    # plain ones, a few, short (no newline can forge a line of a tool result).
    plain = sorted(n for n in map(str, servers) if _PLAIN_NAME.fullmatch(n))
    odd = len(servers) - len(plain)
    shown = plain[:MAX_SHOWN_NAMES]
    more = len(plain) - len(shown) + odd
    return shown + ([f"{more} more"] if more else [])


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
MAX_SHOWN_NAMES = 10


def withheld_servers_note(
    root: Path, reason: str, by: str = "", files: tuple[str, ...] = FOLDER_CONFIGS[:1]
) -> str:
    """`this folder's mcp_servers.json (a, b) is not loaded<by>: <reason>` (`files`:
    those of `FOLDER_CONFIGS` withheld; several: "… and .mcp.json (a, b) are not …")."""
    found = folder_server_names(root, files)
    listed = f" ({', '.join(found)})" if found else ""
    verb = "is" if len(files) == 1 else "are"
    return f"this folder's {' and '.join(files)}{listed} {verb} not loaded{by}: {reason}"
