"""Skill2Bash: scripts in `$SYNAPSE_HOME/skills/<skill>/scripts/` as `skill:<skill>:<stem>`.

A skill is a folder with `SKILL.md` (front-matter `name`, `description`, and
optionally `domain`, `tags`, `tools`) and a `scripts/` folder. Each script runs
with the interpreter its shebang names, else by extension (`.py` python3,
`.sh`/`.bash` bash, `.js`/`.mjs`/`.cjs` node), else directly when it is executable.
Names that are not safe command names are skipped with a warning; scripts are always
started with an argv list, never shell text. Which files are scripts (sub-folders of
`scripts/` too, data files left alone) is `skill_files.py`'s. The lifecycle (versions,
import with its archive checks, rollback, delete) is at the end of this module.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import errno
import os
import re
import shlex
import shutil
import signal
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from synapse_lsp import sandbox
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory
from synapse_lsp.extensions import skill_files
from synapse_lsp.extensions.skill_files import EXTENSIONS, SAFE_NAME
from synapse_lsp.frontmatter import parse_front_matter
from synapse_lsp.output import BoundedCapture
from synapse_lsp.policy.secrets import child_env

HELP_TIMEOUT = 10.0


@dataclass(frozen=True)
class ScriptInfo:
    skill: str
    stem: str
    path: Path
    interpreter: tuple[str, ...]
    summary: str
    usage: str
    doc: str | None
    skill_dir: Path | None = None  # its skill's folder (default: the parent of scripts/)

    @property
    def command_name(self) -> str:
        return f"skill:{self.skill}:{self.stem}"

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        """Its skill's folder, as `SYNAPSE_SKILL_DIR` and on `PYTHONPATH` (skill_files.py)."""
        root = str(self.skill_dir or self.path.parent.parent)
        return (("SYNAPSE_SKILL_DIR", root), ("PYTHONPATH", root))

    def argv(self, args: list[str]) -> list[str]:
        return [*self.interpreter, str(self.path), *args]


@dataclass(frozen=True)
class SkillInfo:
    name: str
    description: str
    path: Path
    skill_md: Path | None
    body: str
    scripts: tuple[ScriptInfo, ...]
    domain: str = ""
    tags: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # programs the skill needs (front-matter `tools`/`requires`)


def skills_dir(synapse_home: Path) -> Path:
    return synapse_home / "skills"


def scan_skills(root: Path) -> tuple[list[SkillInfo], list[str]]:
    """Every skill under `root` and a warning per skipped skill or script."""
    skills: list[SkillInfo] = []
    warnings: list[str] = []
    try:
        entries = sorted(root.iterdir())
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"{root}: cannot list skills: {exc}"]
    for folder in entries:
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        if not SAFE_NAME.match(folder.name):
            warnings.append(
                f"skill folder {folder.name!r} skipped: a skill name may hold only letters, "
                "digits, '_', '.' and '-'"
            )
            continue
        skills.append(_load_skill(folder, warnings))
    return skills, warnings


def _load_skill(folder: Path, warnings: list[str]) -> SkillInfo:
    md = folder / "SKILL.md"
    meta: dict[str, str] = {}
    body = ""
    if md.is_file():
        try:
            meta, body = parse_front_matter(md.read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            warnings.append(f"{md}: cannot read: {exc}")
    description = meta.get("description") or first_paragraph(body)
    scripts = [  # sub-folders too
        replace(describe_script(folder.name, stem, path, run), skill_dir=folder)
        for stem, path, run in skill_files.find_scripts(folder, warnings)
    ]
    return SkillInfo(
        name=folder.name,
        description=description,
        path=folder,
        skill_md=md if md.is_file() else None,
        body=body,
        scripts=tuple(scripts),
        domain=meta.get("domain", ""),
        tags=split_list(meta.get("tags", "")),
        tools=split_list(meta.get("tools") or meta.get("requires", "")),
    )


def split_list(value: str) -> tuple[str, ...]:
    """`[a, b]`, `a, b` or `a b` -> ("a", "b") (front-matter tags and tools)."""
    inner = value.strip().removeprefix("[").removesuffix("]")
    words = inner.split(",") if "," in inner else inner.split()
    return tuple(w.strip().strip("'\"") for w in words if w.strip().strip("'\""))


def first_paragraph(text: str) -> str:
    out: list[str] = []
    for line in text.strip().splitlines():
        if not line.strip():
            if out:
                break
            continue
        if line.startswith("#") and not out:
            continue
        out.append(line.strip())
    return " ".join(out)[:300]


def describe_script(skill: str, stem: str, path: Path, interpreter: tuple[str, ...]) -> ScriptInfo:
    name = f"skill:{skill}:{stem}"
    doc = script_doc(path)
    summary, usage = "", f"{name} [args...]"
    if doc:
        lines = [line.rstrip() for line in doc.strip().splitlines()]
        for line in lines:
            if line.strip() and not line.strip().lower().startswith("usage:"):
                summary = line.strip()
                break
        for line in lines:
            if line.strip().lower().startswith("usage:"):
                rest = line.strip()[len("usage:") :].strip()
                words = rest.split(maxsplit=1)
                # `Usage: extract_text.py <pdf>` -> `skill:pdf:extract_text <pdf>`
                if words and (words[0] in (path.name, stem, name) or words[0].endswith(path.name)):
                    rest = words[1] if len(words) > 1 else ""
                usage = f"{name} {rest}".strip()
                break
    return ScriptInfo(
        skill=skill,
        stem=stem,
        path=path,
        interpreter=interpreter,
        summary=summary or f"script {path.name} of skill {skill}",
        usage=usage,
        doc=doc,
    )


def script_doc(path: Path) -> str | None:
    """The module docstring of a Python script, else its leading comment block."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if path.suffix == ".py" or text.startswith("#!") and "python" in text.splitlines()[0]:
        try:
            doc = ast.get_docstring(ast.parse(text))
        except (SyntaxError, ValueError):
            doc = None
        if doc:
            return doc
    lines = text.splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    block: list[str] = []
    in_c_comment = False
    for line in lines:
        stripped = line.strip()
        if in_c_comment:
            if "*/" in stripped:
                block.append(stripped.split("*/")[0].lstrip("* ").rstrip())
                break
            block.append(stripped.lstrip("*").strip())
            continue
        if not stripped and not block:
            continue
        if stripped.startswith("/*"):
            in_c_comment = True
            rest = stripped[2:]
            if "*/" in rest:
                block.append(rest.split("*/")[0].strip())
                break
            if rest.strip():
                block.append(rest.strip())
            continue
        marker = "#" if stripped.startswith("#") else "//" if stripped.startswith("//") else None
        if marker is None:
            break
        if marker == "#" and stripped.startswith(("#!", "# -*-", "#-*-")):
            continue
        block.append(stripped[len(marker) :].strip() if len(stripped) > len(marker) else "")
    doc = "\n".join(block).strip()
    return doc or None


# ------------------------------------------------------------- the command


class SkillScriptCommand:
    """`skill:<skill>:<stem>`: runs the script as a subprocess in the session's cwd."""

    def __init__(self, script: ScriptInfo, keywords: str = "") -> None:
        self.script = script
        self.name = script.command_name
        self.summary = script.summary
        self.usage = script.usage
        # The skill's description, domain and tags: command:search matches them too.
        self.keywords = keywords

    def help(self) -> str:
        s = self.script
        doc = s.doc or "(no docstring; run with --help to see the script's own help)"
        return (
            f"{self.name} - {s.summary}\n\nUsage:\n  {s.usage}\n\n{doc.rstrip()}\n\n"
            f"Script: {s.path}\nRuns as: {' '.join(map(shlex.quote, s.argv(['ARGS...'])))}\n"
        )

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        args = argv[1:] if argv and argv[0] == self.name else argv
        if args == ["-h"]:
            return CommandOutput(f"Usage: {self.usage}\n{self.summary}\n")
        if args == ["--help"]:
            if self.script.doc:
                return CommandOutput(self.help())
            own = await run_script(self.script, ["--help"], ctx, timeout=HELP_TIMEOUT)
            if own.exit_code == 0 and own.stdout.strip():
                return CommandOutput(f"{self.help()}\n{own.stdout}")
            return CommandOutput(self.help())
        return await run_script(self.script, args, ctx, timeout=ctx.settings.command_timeout)


async def run_script(
    script: ScriptInfo, args: list[str], ctx: CommandContext, *, timeout: float
) -> CommandOutput:
    """Run one script in its own process group; kill the group on timeout or cancel.

    Output is captured as native commands' is (`output.BoundedCapture`): within
    `settings.output`, head and tail, memory bounded whatever the volume, and past
    the limits the whole stream is written to `$SYNAPSE_HOME/outputs/`, whose path
    the cut marker names and `full_output_path` carries. The result is `bounded`
    so the router cuts neither stream a second time."""
    # Never the model's credentials or a `secretEnv` variable, whoever built ctx.env.
    env = child_env(ctx.env or os.environ, ctx.settings)
    skill_files.script_env(script.env, env)  # its skill's folder: SYNAPSE_SKILL_DIR, PYTHONPATH
    # Shielded: a cancel while asyncio connects the pipes would otherwise wait for the
    # child to exit on its own; instead we let the spawn finish and kill the group.
    # Confined like the session's shell (the sandbox mode applies to skills too).
    filter_fd = sandbox.seccomp_fd() if sandbox.status(ctx.settings).sandboxed else -1
    confine = sandbox.command_prefix(
        ctx.settings,
        ctx.roots or (ctx.cwd,),
        extension_dirs=ctx.extension_dirs,
        view=ctx.view,  # the session's /tmp, so `/tmp/x` is one file for every layer
        cwd=ctx.cwd,
        seccomp=filter_fd,
    )
    if confine:
        # Inside the sandbox bwrap execs the script: a missing interpreter or shebang
        # would come back as bwrap's own message. Found here, it gets the one error.
        unstartable = _preflight(script, env)
        if unstartable is not None:
            return _cannot_start(script, unstartable)
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *confine,
            *script.argv(args),
            cwd=str(ctx.cwd),
            env=env,
            stdin=asyncio.subprocess.PIPE if ctx.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=(filter_fd,) if filter_fd >= 0 else (),
        )
    )
    try:
        try:
            proc = await asyncio.shield(spawn)
        finally:
            if filter_fd >= 0 and spawn.done():
                os.close(filter_fd)  # the child has its copy
                filter_fd = -1
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await _kill_group(await spawn)
        raise
    except OSError as exc:
        return _cannot_start(script, exc)
    spill = ctx.settings.synapse_home / "outputs"
    out = BoundedCapture(ctx.settings.output, spill, name="stdout")
    err = BoundedCapture(ctx.settings.output, spill, name="stderr")
    try:
        return await _supervise(proc, script, ctx, timeout, out, err)
    finally:
        out.close()
        err.close()


# An executable without a shebang whose suffix names a known language: the interpreter
# it wants (the kernel cannot run it: ENOEXEC).
_SHEBANG_FOR = {
    ".ts": "#!/usr/bin/env -S npx tsx",
    ".mts": "#!/usr/bin/env -S npx tsx",
    ".rb": "#!/usr/bin/env ruby",
    ".pl": "#!/usr/bin/env perl",
    ".php": "#!/usr/bin/env php",
    ".lua": "#!/usr/bin/env lua",
    ".r": "#!/usr/bin/env Rscript",
}


def _preflight(script: ScriptInfo, env: dict[str, str]) -> OSError | None:
    """Why the kernel would refuse to start `script` (as `exec` would fail), or None."""
    if script.interpreter:
        program = script.interpreter[0]
        if "/" not in program and shutil.which(program, path=env.get("PATH")) is None:
            return FileNotFoundError(errno.ENOENT, "No such file or directory", program)
        return None
    try:
        with script.path.open("rb") as fh:
            start = fh.read(4)
    except OSError as exc:
        return exc
    if not start.startswith(b"#!") and start != b"\x7fELF":
        return OSError(errno.ENOEXEC, "Exec format error", str(script.path))
    return None


def _cannot_start(script: ScriptInfo, exc: OSError) -> CommandOutput:
    """A script that could not be started (missing interpreter, no shebang, not
    executable): one clear error, never an uncaught OSError."""
    program = script.interpreter[0] if script.interpreter else str(script.path)
    if exc.errno == errno.ENOEXEC and not script.interpreter:
        wanted = _SHEBANG_FOR.get(script.path.suffix.lower())
        example = wanted or "#!/usr/bin/env <interpreter>"
        why = (
            f"{script.path} is executable but has no shebang line naming its interpreter, "
            "and its file type is not one Synapse runs itself "
            f"(supported: {', '.join(sorted(EXTENSIONS))}); "
            f"add a first line such as `{example}`"
        )
        return CommandOutput(
            stderr=f"{script.command_name}: cannot start: {why}\n",
            exit_code=126,
            category=FailureCategory.DEPENDENCY_MISSING,
        )
    missing = isinstance(exc, FileNotFoundError) and script.interpreter
    what = (
        f"the interpreter {program} is not installed (not on PATH)"
        if missing
        else (exc.strerror or str(exc))
    )
    return CommandOutput(
        stderr=f"{script.command_name}: cannot start {program}: {what}\n",
        exit_code=127 if missing else 126,
        category=FailureCategory.DEPENDENCY_MISSING,
    )


async def _supervise(
    proc: asyncio.subprocess.Process,
    script: ScriptInfo,
    ctx: CommandContext,
    timeout: float,
    out: BoundedCapture,
    err: BoundedCapture,
) -> CommandOutput:
    async def pump(stream: asyncio.StreamReader | None, sink: BoundedCapture, name: str) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            sink.feed(chunk)
            if ctx.on_output is not None:
                ctx.on_output(name, chunk.decode("utf-8", errors="replace"))

    async def feed() -> None:
        if proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write((ctx.stdin or "").encode())
            await proc.stdin.drain()
        proc.stdin.close()

    # Wait for the script itself, not for end of file on its pipes: a background child
    # (`sleep 300 &`) inherits them and would hold the call open for its whole life.
    pumps = asyncio.gather(
        pump(proc.stdout, out, "stdout"), pump(proc.stderr, err, "stderr"), feed()
    )
    exited = asyncio.ensure_future(_exited(proc))
    try:
        # asyncio.wait, not wait_for: 3.11's wait_for drops a cancel that comes as the
        # script exits, and the cancelled turn would go on.
        finished, _ = await asyncio.wait({exited}, timeout=timeout)
        timed_out = not finished
        if timed_out:
            await _kill_group(proc)
    except asyncio.CancelledError:
        exited.cancel()
        await _kill_group(proc)
        with contextlib.suppress(OSError):  # background children of the script too
            os.killpg(proc.pid, signal.SIGKILL)
        pumps.cancel()
        raise
    finally:
        exited.cancel()
    await _reap_leftovers(proc, pumps)
    path = out.full_output_path or err.full_output_path
    stdout_path = out.full_output_path if out.truncated else None
    code = proc.returncode if proc.returncode is not None else -1
    if timed_out:
        return CommandOutput(
            stdout=out.text(),
            stderr=err.text() + f"\n[timed out after {timeout:g} s: the script was killed]\n",
            exit_code=124,
            category=FailureCategory.TIMEOUT,
            bounded=True,
            full_output_path=path,
            stdout_path=stdout_path,
        )
    if code < 0:
        code = 128 - code
    category = None if code == 0 else FailureCategory.EXECUTION_ERROR
    return CommandOutput(
        stdout=out.text(),
        stderr=err.text(),
        exit_code=code,
        category=category,
        bounded=True,
        full_output_path=path,
        stdout_path=stdout_path,
    )


# After the script exits, how long its output may still take to arrive before what
# still holds its pipes (a background child of its process group) is ended.
DRAIN_GRACE_S = 0.5


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Return once the process has exited. `proc.wait()` also waits for the end of its
    pipes (asyncio reports the exit only then), so poll `returncode` (set by the child
    watcher at exit): 1 ms at first, backing off to 50 ms."""
    delay = 0.001
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


async def _reap_leftovers(proc: asyncio.subprocess.Process, pumps: asyncio.Future[Any]) -> None:
    """The script is gone: take what its output still holds, for `DRAIN_GRACE_S`. If
    something of its process group keeps a pipe open past that (a background child),
    the group is ended (SIGTERM, then SIGKILL) and its output closed; a child that
    redirected its output elsewhere (`cmd >log 2>&1 &`) is left running."""
    with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(pumps), DRAIN_GRACE_S)
    if pumps.done():
        with contextlib.suppress(BaseException):
            pumps.result()
        return
    for sig, wait in ((signal.SIGTERM, 0.5), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(pumps), wait)
        if pumps.done():
            break
    if not pumps.done():  # held by something outside the group (it called setsid)
        pumps.cancel()
        with contextlib.suppress(BaseException):
            await pumps
    transport = getattr(proc, "_transport", None)  # closes the pipes we no longer read
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 2.0)):
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), wait)


# ------------------------------------------------------------ lifecycle
#
# Every change made through Synapse (skill:import over an existing skill,
# skill:reinforce, skill:rollback, skill:delete) first copies the skill as it was to
# `skills/.versions/<name>/<n>/` (n counts up; `<n>.json` says why and when), keeping
# the newest `MAX_VERSIONS`. New content is assembled under `skills/.staging/` (same
# file system) and renamed into place, so a failure leaves the skill as it was and a
# reader never sees half a skill. Both folders start with "." and are never skills.

VERSIONS_DIR = ".versions"
STAGING_DIR = ".staging"
MAX_VERSIONS = 10
MAX_IMPORT_BYTES = 50 * 1024 * 1024  # a whole skill, unpacked
MAX_FILE_BYTES = 20 * 1024 * 1024  # one file of it
MAX_IMPORT_FILES = 2000
_CHUNK = 1024 * 1024


class SkillStoreError(Exception):
    """A lifecycle operation refused or failed; the message says why (nothing changed)."""


@dataclass(frozen=True)
class SkillVersion:
    name: str
    number: int
    path: Path
    reason: str
    saved_at: str


def versions_dir(root: Path, name: str) -> Path:
    return root / VERSIONS_DIR / name


def list_versions(root: Path, name: str) -> list[SkillVersion]:
    """The kept versions of skill `name`, oldest first."""
    import json

    folder = versions_dir(root, name)
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    found: list[SkillVersion] = []
    for entry in entries:
        if not entry.name.isdigit() or not entry.is_dir():
            continue
        reason, saved_at = "", ""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            meta = json.loads((folder / f"{entry.name}.json").read_text(encoding="utf-8"))
            reason, saved_at = str(meta.get("reason", "")), str(meta.get("saved_at", ""))
        found.append(SkillVersion(name, int(entry.name), entry, reason, saved_at))
    return sorted(found, key=lambda v: v.number)


def check_name(name: str) -> None:
    if not SAFE_NAME.match(name) or name.startswith("."):
        raise SkillStoreError(
            f"{name!r} is not a valid skill name: letters, digits, '_', '.' and '-' only, "
            "not starting with '.' or '-'"
        )


def _stage(root: Path) -> Path:
    import tempfile

    base = root / STAGING_DIR
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=base))


def _discard(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # the staging folder, once empty


def save_version(root: Path, name: str, reason: str, source: Path | None = None) -> SkillVersion:
    """Keep a copy of skill `name` (or of `source`, a copy of it made earlier) as its
    next version; prune to `MAX_VERSIONS`."""
    import json
    from datetime import UTC, datetime

    folder = versions_dir(root, name)
    folder.mkdir(parents=True, exist_ok=True)
    kept = list_versions(root, name)
    number = kept[-1].number + 1 if kept else 1
    target = folder / str(number)
    if source is None:
        staged = _stage(root)
        try:
            shutil.copytree(root / name, staged / "copy", symlinks=True)
            (staged / "copy").replace(target)
        finally:
            _discard(staged)
    else:
        source.replace(target)
    saved_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (folder / f"{number}.json").write_text(
        json.dumps({"reason": reason, "saved_at": saved_at}) + "\n", encoding="utf-8"
    )
    for old in list_versions(root, name)[:-MAX_VERSIONS]:
        shutil.rmtree(old.path, ignore_errors=True)
        (folder / f"{old.number}.json").unlink(missing_ok=True)
    return SkillVersion(name, number, target, reason, saved_at)


def _swap_in(root: Path, name: str, new: Path) -> None:
    """Put the staged folder `new` in place of skill `name` (two renames: the old one
    aside, the new one in; the old one back if the second fails)."""
    target = root / name
    aside: Path | None = None
    if target.exists() or target.is_symlink():
        aside = _stage(root)
        target.replace(aside / "old")
    try:
        new.replace(target)
    except OSError:
        if aside is not None:
            (aside / "old").replace(target)
        raise
    finally:
        if aside is not None:
            _discard(aside)


def delete_skill(root: Path, name: str) -> SkillVersion:
    """Remove skill `name`, kept first as a version (so `rollback` brings it back)."""
    check_name(name)
    if not (root / name).is_dir():
        raise SkillStoreError(f"no skill named {name!r} in {root}")
    saved = save_version(root, name, "delete")
    staged = _stage(root)
    try:
        (root / name).replace(staged / name)
    finally:
        _discard(staged)
    return saved


def rollback_skill(
    root: Path, name: str, number: int | None = None
) -> tuple[SkillVersion, SkillVersion | None]:
    """Restore version `number` (default: the newest) of skill `name`; what it replaced
    is kept as a new version first, unless it is that version already. Returns
    (restored, saved or None)."""
    check_name(name)
    kept = list_versions(root, name)
    if not kept:
        raise SkillStoreError(f"skill {name!r} has no saved versions")
    chosen = kept[-1] if number is None else next((v for v in kept if v.number == number), None)
    if chosen is None:
        numbers = ", ".join(str(v.number) for v in kept)
        raise SkillStoreError(f"skill {name!r} has no version {number} (kept: {numbers})")
    if skill_files.fingerprint(root / name) == skill_files.fingerprint(chosen.path):
        return chosen, None  # it is that version already: nothing to keep or to copy
    staged = _stage(root)
    try:
        shutil.copytree(chosen.path, staged / name, symlinks=True)
        saved = save_version(root, name, "rollback") if (root / name).is_dir() else None
        _swap_in(root, name, staged / name)
    finally:
        _discard(staged)
    return chosen, saved


@dataclass(frozen=True)
class ImportResult:
    name: str
    path: Path
    replaced: SkillVersion | None  # the version saved of the skill it replaced
    files: int


def import_skill(root: Path, source: Path, name: str | None = None) -> ImportResult:
    """Install the skill in `source` (a folder, `.zip`, `.tar.gz`/`.tgz`/`.tar`).

    Archives are checked before anything is written: no absolute paths, no `..`, no
    symlinks or hard links, no devices, at most `MAX_IMPORT_FILES` files of at most
    `MAX_FILE_BYTES` each and `MAX_IMPORT_BYTES` in all (counted while unpacking too).
    The skill is `SKILL.md` at the top or in the archive's single top-level folder;
    its name is `name`, else SKILL.md's `name:`, else that folder's (or the archive's)
    name. An existing skill of that name is kept as a version, then replaced."""
    if not source.exists():
        raise SkillStoreError(f"{source}: no such file or folder")
    staged = _stage(root)
    try:
        unpacked = staged / "unpacked"
        unpacked.mkdir()
        lower = source.name.lower()
        if source.is_dir():
            files = _copy_folder(source, unpacked)
            default = source.resolve().name
        elif lower.endswith(".zip"):
            files = _unzip(source, unpacked)
            default = source.name[: -len(".zip")]
        elif lower.endswith((".tar.gz", ".tgz", ".tar")):
            files = _untar(source, unpacked)
            default = source.name.split(".")[0]
        else:
            raise SkillStoreError(
                f"{source}: not a folder, .zip, .tar.gz, .tgz or .tar (the formats "
                "skill:import reads)"
            )
        top = unpacked
        if not (top / "SKILL.md").is_file():
            entries = [e for e in top.iterdir() if e.name != "__MACOSX"]
            if len(entries) == 1 and (entries[0] / "SKILL.md").is_file():
                top = entries[0]
                default = top.name
            else:
                raise SkillStoreError(
                    f"{source}: no SKILL.md at its top or in its single top-level folder "
                    "(a skill is a folder with SKILL.md and scripts/)"
                )
        meta, _ = parse_front_matter(
            (top / "SKILL.md").read_text(encoding="utf-8", errors="replace")
        )
        chosen = name or meta.get("name") or default
        check_name(chosen)
        replaced = save_version(root, chosen, "import") if (root / chosen).is_dir() else None
        _swap_in(root, chosen, top)
        return ImportResult(chosen, root / chosen, replaced, files)
    except (OSError, UnicodeError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise SkillStoreError(f"{source}: cannot import: {exc}") from exc
    finally:
        _discard(staged)


def _member_path(name: str, dest: Path) -> Path:
    """Where archive member `name` goes under `dest`; SkillStoreError when it would
    leave `dest` (absolute path, `..`)."""
    clean = name.replace("\\", "/")
    if clean.startswith("/") or re.match(r"^[A-Za-z]:", clean):
        raise SkillStoreError(f"refused: member {name!r} has an absolute path")
    parts = [p for p in clean.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SkillStoreError(f"refused: member {name!r} leaves the skill folder ('..')")
    target = dest.joinpath(*parts) if parts else dest
    if not target.resolve().is_relative_to(dest.resolve()):
        raise SkillStoreError(f"refused: member {name!r} leaves the skill folder")
    return target


class _Budget:
    """The size limits of one import, checked on declared sizes and on bytes written."""

    def __init__(self) -> None:
        self.files = 0
        self.total = 0

    def declare(self, name: str, size: int) -> None:
        self.files += 1
        if self.files > MAX_IMPORT_FILES:
            raise SkillStoreError(f"refused: more than {MAX_IMPORT_FILES} files")
        if size > MAX_FILE_BYTES:
            raise SkillStoreError(
                f"refused: {name!r} is {size} bytes (the limit is {MAX_FILE_BYTES} per file)"
            )
        self.total += size
        if self.total > MAX_IMPORT_BYTES:
            raise SkillStoreError(f"refused: more than {MAX_IMPORT_BYTES} bytes in all")

    def copy(self, name: str, src: Any, target: Path, executable: bool) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        with target.open("xb") as out:
            while chunk := src.read(_CHUNK):
                written += len(chunk)
                if written > MAX_FILE_BYTES:
                    raise SkillStoreError(
                        f"refused: {name!r} unpacks to more than {MAX_FILE_BYTES} bytes"
                    )
                out.write(chunk)
        target.chmod(0o755 if executable else 0o644)


def _unzip(archive: Path, dest: Path) -> int:
    import stat
    import zipfile

    budget = _Budget()
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            plan: list[tuple[zipfile.ZipInfo, Path]] = []
            for info in members:  # every member checked before anything is written
                target = _member_path(info.filename, dest)
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise SkillStoreError(f"refused: member {info.filename!r} is a symlink")
                if not info.is_dir():
                    budget.declare(info.filename, info.file_size)
                plan.append((info, target))
            for info, target in plan:
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                with zf.open(info) as src:
                    executable = bool((info.external_attr >> 16) & 0o111)
                    budget.copy(info.filename, src, target, executable)
    except zipfile.BadZipFile as exc:
        raise SkillStoreError(f"{archive}: not a valid zip archive ({exc})") from exc
    return budget.files


def _untar(archive: Path, dest: Path) -> int:
    import tarfile

    budget = _Budget()
    try:
        with tarfile.open(archive, "r:*") as tf:
            # Every member checked before anything is written, each as soon as its
            # header is read: reading on past a member means decompressing its data,
            # which must not happen for one too big (a compressed "bomb").
            members: list[tarfile.TarInfo] = []
            while (member := tf.next()) is not None:
                members.append(member)
                _member_path(member.name, dest)
                if member.issym() or member.islnk():
                    kind = "a symlink" if member.issym() else "a hard link"
                    raise SkillStoreError(f"refused: member {member.name!r} is {kind}")
                if not (member.isfile() or member.isdir()):
                    raise SkillStoreError(
                        f"refused: member {member.name!r} is not a regular file or folder"
                    )
                if member.isfile():
                    budget.declare(member.name, member.size)
            for member in members:
                target = _member_path(member.name, dest)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                src = tf.extractfile(member)
                if src is None:
                    continue
                with src:
                    budget.copy(member.name, src, target, bool(member.mode & 0o111))
    except tarfile.TarError as exc:
        raise SkillStoreError(f"{archive}: not a valid tar archive ({exc})") from exc
    return budget.files


def _copy_folder(source: Path, dest: Path) -> int:
    """Copy a skill folder: regular files and folders only (a symlink is refused: it
    could point anywhere), within the same limits as an archive."""
    import stat

    budget = _Budget()
    plan: list[tuple[Path, Path, os.stat_result]] = []
    for here, dirs, files in os.walk(source, followlinks=False):
        base = Path(here)
        for entry in [*dirs, *files]:
            path = base / entry
            info = path.lstat()
            rel = path.relative_to(source).as_posix()
            if stat.S_ISLNK(info.st_mode):
                raise SkillStoreError(f"refused: {rel!r} is a symlink")
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise SkillStoreError(f"refused: {rel!r} is not a regular file or folder")
            budget.declare(rel, info.st_size)
            plan.append((path, dest / rel, info))
    for path, target, info in plan:
        with path.open("rb") as src:
            budget.copy(path.name, src, target, bool(info.st_mode & 0o111))
    return budget.files
