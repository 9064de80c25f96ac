"""A skill's files: which files of its `scripts/` are commands, and a folder's fingerprint.

- A file directly in `scripts/` is `skill:<skill>:<stem>`; one in a sub-folder is
  `skill:<skill>:<folder>.<stem>` (`scripts/office/unpack.py` ->
  `skill:docx:office.unpack`: a `/` cannot be in a program's name on PATH). In a
  sub-folder only files meant to be run count: a shebang, the executable bit, a shell
  script, or a Python file with an `if __name__ == "__main__"` block (the rest are the
  package's modules: a `.py` or `.js` library is not a command). Folders starting
  with `.` or `_` (`__pycache__`) are not entered.
- Data files (`.json`, `.xsd`, fonts, templates…: no shebang, not executable, a
  suffix that is no script's) are left alone quietly; a file that looks like a script
  Synapse cannot start (`tool.rb` without a shebang, a file without a suffix that is not
  executable) is skipped with a warning, as before.
- `fingerprint`: the same for two folders with the same paths and contents
  (`skill:reinforce` keeps only changed skills; `skill:rollback` to the version a skill
  already matches keeps no new copy).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
EXTENSIONS: dict[str, str] = {
    ".py": "python3",
    ".sh": "bash",
    ".bash": "bash",
    ".js": "node",
    ".mjs": "node",
    ".cjs": "node",
}
IGNORED_SUFFIXES = (".pyc", ".pyo", "~", ".swp", ".md", ".txt", ".json")
MAX_DEPTH = 3  # sub-folders of scripts/ entered (scripts/a/b/c/x.py is the deepest)
# Suffixes of scripts Synapse cannot start without a shebang: such a file is a script
# missing its first line, worth a warning (any other suffix is data).
SCRIPT_SUFFIXES = frozenset({"", ".ts", ".mts", ".rb", ".pl", ".php", ".lua", ".r", ".ps1"})
_MAIN = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']""", re.MULTILINE)


def find_scripts(folder: Path, warnings: list[str]) -> list[tuple[str, Path, tuple[str, ...]]]:
    """(stem, path, interpreter) of each command of the skill in `folder` (its
    `scripts/`, sub-folders included); a warning per script skipped."""
    found: list[tuple[str, Path, tuple[str, ...]]] = []
    seen: dict[str, Path] = {}
    top = folder / "scripts"
    for path in _files(top, 0):
        if path.name.endswith(IGNORED_SUFFIXES):
            continue
        rel = path.relative_to(top)
        stem = ".".join([*rel.parent.parts, path.stem])
        where = f"skill {folder.name!r}: script {rel.as_posix()!r}"
        interpreter = pick_interpreter(path)
        if len(rel.parts) > 1 and not _runnable(path, interpreter):
            continue  # a module of the skill's package, not a command
        if interpreter is None:
            if path.suffix.lower() in SCRIPT_SUFFIXES:
                warnings.append(
                    f"{where} skipped: no shebang, unknown extension and not executable "
                    f"(supported: {', '.join(sorted(EXTENSIONS))})"
                )
            continue  # a data file (a schema, a font, a template): not a command
        if not SAFE_NAME.match(stem):
            warnings.append(f"{where} skipped: its name is not safe as a command name")
            continue
        if stem in seen:
            warnings.append(f"{where} skipped: {seen[stem].name} already provides {stem!r}")
            continue
        seen[stem] = path
        found.append((stem, path, interpreter))
    return found


def pick_interpreter(path: Path) -> tuple[str, ...] | None:
    try:
        with path.open("rb") as fh:
            head = fh.readline(512)
    except OSError:
        return None
    if head.startswith(b"#!"):
        words = shlex.split(head[2:].decode("utf-8", errors="replace").strip())
        if words:
            return tuple(words)
    program = EXTENSIONS.get(path.suffix.lower())
    if program == "python3":
        return (shutil.which("python3") or sys.executable,)
    if program is not None:
        return (shutil.which(program) or program,)
    if os.access(path, os.X_OK):
        return ()
    return None


def _files(folder: Path, depth: int) -> list[Path]:
    """The files under `folder`, a folder's own files before its sub-folders'."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    visible = [e for e in entries if not e.name.startswith((".", "_"))]
    files = [e for e in visible if e.is_file()]
    if depth < MAX_DEPTH:
        for sub in visible:
            if sub.is_dir() and not sub.is_symlink() and sub.name != "node_modules":
                files += _files(sub, depth + 1)
    return files


def _runnable(path: Path, interpreter: tuple[str, ...] | None) -> bool:
    """A file in a sub-folder of scripts/ that is meant to be run."""
    if interpreter is None:
        return False
    if os.access(path, os.X_OK) or path.suffix.lower() in (".sh", ".bash"):
        return True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if text.startswith("#!"):
        return True
    return path.suffix.lower() == ".py" and _MAIN.search(text) is not None


def fingerprint(folder: Path) -> str | None:
    """A hash of a skill folder's paths and contents; None when it is gone."""
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for here, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
            path = Path(here) / name
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            try:
                digest.update(path.read_bytes() if not path.is_symlink() else b"link")
            except OSError:
                digest.update(b"unreadable")
    return digest.hexdigest()


def script_env(pairs: tuple[tuple[str, str], ...], env: dict[str, str]) -> None:
    """Add a script's `pairs` (`ScriptInfo.env`) to `env`: `SYNAPSE_SKILL_DIR` (its
    skill's folder, unless set) and that folder first on `PYTHONPATH`, so a script
    importing its own package (`from scripts.quick_validate import …`) finds it from any
    directory."""
    for key, value in pairs:
        if key == "PYTHONPATH":
            env[key] = f"{value}:{env[key]}" if env.get(key) else value
        else:
            env.setdefault(key, value)
