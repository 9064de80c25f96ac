"""Skills as `skill:<skill>:<script>` commands: interpreters, docs, safety, the watcher,
skill:search/load/reinforce, through the real router and a real bash session."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory, Layer
from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.extensions.skills import SkillScriptCommand, run_script, scan_skills
from synapse_lsp.files import DiskFiles
from synapse_lsp.router import BashRouter

SKILL_MD = """\
---
name: {name}
description: {description}
---
# {name}

{body}
"""


def write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def make_skill(home: Path, name: str, description: str, body: str = "Steps.") -> Path:
    folder = home / "skills" / name
    write(folder / "SKILL.md", SKILL_MD.format(name=name, description=description, body=body))
    return folder


@pytest.fixture
def home(settings: Settings) -> Path:
    root = settings.synapse_home
    pdf = make_skill(root, "pdf-editor", "Edit and extract text from PDF files", "Use pdftotext.")
    write(
        pdf / "scripts" / "extract_text.py",
        '"""Extract text from PDF files.\n\nUsage: extract_text.py <pdf_path> [--pages LIST]\n'
        '"""\nimport os, sys\nprint("py", os.getcwd(), sys.argv[1:])\n',
    )
    write(
        pdf / "scripts" / "merge.sh",
        "# Merge PDF files into one.\n# Usage: merge.sh <out> <in>...\n"
        'echo "sh $# $1|$2"\n[ "$1" = fail ] && exit 3\n[ -n "$FAIL" ] && exit 4\nexit 0\n',
    )
    tools = make_skill(root, "misc", "Assorted helpers", "Nothing about documents.")
    write(
        tools / "scripts" / "greet.bash",
        '#!/usr/bin/env bash\n# Greet someone.\necho "hi ${1:-you}"\n',
    )
    write(
        tools / "scripts" / "count.js",
        "// Count arguments.\nconsole.log('js', process.argv.length - 2);\n",
    )
    write(tools / "scripts" / "shebang", "#!/bin/sh\n# Run by its shebang.\necho shebang\n")
    write(tools / "scripts" / "native", "#!/bin/sh\necho native-exec\n", 0o755)
    write(
        tools / "scripts" / "nodoc.py",
        "import sys\nif sys.argv[1:] == ['--help']:\n    print('own help of nodoc')\n",
    )
    write(tools / "scripts" / "stdin.py", "import sys\nprint(sys.stdin.read().upper(), end='')\n")
    write(tools / "scripts" / "data.rb", "no interpreter for this\n")  # a script, no shebang
    # Hostile names: never a command, never run.
    canary = root / "canary"
    write(root / "skills" / "a;rm -rf x" / "scripts" / "s.sh", f"touch {canary}\n")
    write(tools / "scripts" / "bad name;touch x.sh", f"touch {canary}\n")
    return root


@pytest.fixture
async def registry(home: Path, settings: Settings) -> AsyncIterator[ExtensionRegistry]:
    reg = ExtensionRegistry(settings, None, serve_socket=False)
    await reg.start()
    try:
        yield reg
    finally:
        await reg.close()


@pytest.fixture
async def ext_router(router: BashRouter, registry: ExtensionRegistry) -> BashRouter:
    routed = router.derive(extensions=registry)
    for command in registry.builtins():
        routed.register(command)
    return routed


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return predicate()


# ------------------------------------------------------------ interpreters


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "skill:pdf-editor:extract_text a.pdf --pages '1 2'",
            "py {cwd} ['a.pdf', '--pages', '1 2']",
        ),
        ("skill:pdf-editor:merge out.pdf 'in 1.pdf' x", "sh 3 out.pdf|in 1.pdf"),
        ("skill:misc:greet Ada", "hi Ada"),
        ("skill:misc:count a b c", "js 3"),
        ("skill:misc:shebang", "shebang"),
        ("skill:misc:native", "native-exec"),
    ],
)
async def test_scripts_run_with_their_interpreter_args_and_cwd(
    ext_router: BashRouter, workdir: Path, command: str, expected: str
) -> None:
    if "count" in command and shutil.which("node") is None:
        pytest.skip("node is not installed")
    result = await ext_router.route(command)
    assert result.layer is Layer.EXTENSION
    assert (result.exit_code, result.stdout) == (0, expected.format(cwd=workdir) + "\n")


async def test_cwd_follows_the_shell_session(ext_router: BashRouter, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    await ext_router.route("cd sub")
    result = await ext_router.route("skill:pdf-editor:extract_text")
    assert result.stdout == f"py {workdir / 'sub'} []\n"


async def test_exit_code_env_and_heredoc_stdin(ext_router: BashRouter) -> None:
    result = await ext_router.route("skill:pdf-editor:merge fail b")
    assert result.exit_code == 3
    assert result.is_error
    assert "Hint:" not in result.text  # the script's own failure, not a usage mistake
    piped = await ext_router.route("skill:misc:stdin <<'EOF'\nshout\nEOF")
    assert piped.stdout == "SHOUT\n"
    # The session's exported variables reach the script, run directly or through the
    # wrapper on PATH (as in a pipeline) - and an unset variable is gone again.
    await ext_router.route("export FAIL=1")
    exported = await ext_router.route("true && skill:pdf-editor:merge a b; echo rc=$?")
    assert exported.stdout == "sh 2 a|b\nrc=4\n"
    direct = await ext_router.route("skill:pdf-editor:merge a b")
    assert (direct.exit_code, direct.stdout) == (4, "sh 2 a|b\n")
    await ext_router.route("unset FAIL")
    again = await ext_router.route("skill:pdf-editor:merge a b")
    assert (again.exit_code, again.stdout) == (0, "sh 2 a|b\n")


async def test_docstrings_and_comments_give_h_and_help(ext_router: BashRouter) -> None:
    short = await ext_router.route("skill:pdf-editor:extract_text -h")
    assert short.stdout == (
        "Usage: skill:pdf-editor:extract_text <pdf_path> [--pages LIST]\n"
        "Extract text from PDF files.\n"
    )
    assert (await ext_router.route("skill:pdf-editor:merge -h")).stdout == (
        "Usage: skill:pdf-editor:merge <out> <in>...\nMerge PDF files into one.\n"
    )
    assert (await ext_router.route("skill:misc:count -h")).stdout.endswith("Count arguments.\n")
    full = await ext_router.route("skill:pdf-editor:extract_text --help")
    assert full.stdout.startswith("skill:pdf-editor:extract_text - Extract text from PDF files.")
    assert "Usage: extract_text.py <pdf_path> [--pages LIST]" in full.stdout
    fallback = await ext_router.route("skill:misc:nodoc --help")
    assert "own help of nodoc" in fallback.stdout


async def test_unsafe_and_unrunnable_names_are_skipped_with_warnings(
    registry: ExtensionRegistry, ext_router: BashRouter, home: Path
) -> None:
    names = {c.name for c in registry.commands()}
    assert not any("rm -rf" in n or "touch" in n for n in names)
    assert "skill:misc:data" not in names
    warnings = "\n".join(registry.problems)
    assert "skill folder 'a;rm -rf x' skipped" in warnings
    assert "script 'bad name;touch x.sh' skipped" in warnings
    assert "script 'data.rb' skipped: no shebang" in warnings
    listing = await ext_router.route("command:search rm")
    assert listing.data["matches"] == []
    assert not (home / "canary").exists()
    assert not [p for p in (home / "bin").iterdir() if "rm -rf" in p.name or "touch" in p.name]


async def test_timeout_kills_the_script_process_group(home: Path, workdir: Path) -> None:
    folder = make_skill(home, "slow", "Sleeps")
    pidfile = workdir / "child.pid"
    write(folder / "scripts" / "nap.sh", f"sleep 60 &\necho $! > {pidfile}\nwait\n")
    skills, _ = scan_skills(home / "skills")
    script = next(s for k in skills if k.name == "slow" for s in k.scripts)
    settings = Settings(synapse_home=home, command_timeout=30)
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles(), env=dict(os.environ))
    out = await run_script(script, [], ctx, timeout=1.0)
    assert out.exit_code == 124 and out.category is FailureCategory.TIMEOUT
    child = int(pidfile.read_text())
    assert await wait_until(lambda: not _alive(child))


async def test_cancel_kills_the_script_group(home: Path, workdir: Path) -> None:
    folder = make_skill(home, "big", "Hangs")
    write(folder / "scripts" / "hang.sh", f"echo $$ > {workdir / 'hang.pid'}\nsleep 60\n")
    skills, _ = scan_skills(home / "skills")
    hang = next(s for k in skills if k.name == "big" for s in k.scripts)
    settings = Settings(synapse_home=home)
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles(), env=dict(os.environ))
    task = asyncio.create_task(run_script(hang, [], ctx, timeout=60))
    pidfile = workdir / "hang.pid"
    assert await wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int((workdir / "hang.pid").read_text())
    assert await wait_until(lambda: not _alive(pid))


# 200,000 numbered lines on stdout (1.3 MB), 50,000 bytes on stderr.
FLOOD = (
    "import sys\n"
    "sys.stdout.write(''.join(f'line {i}\\n' for i in range(200_000)))\n"
    "sys.stderr.write('e' * 50_000)\n"
)
FLOOD_STDOUT = "".join(f"line {i}\n" for i in range(200_000))


async def test_big_output_is_bounded_and_spilled_like_native_output(
    ext_router: BashRouter, registry: ExtensionRegistry, home: Path, settings: Settings
) -> None:
    script = write(make_skill(home, "big", "Floods") / "scripts" / "flood.py", FLOOD)
    await registry.refresh("skills")
    skill = await ext_router.route("skill:big:flood")
    native = await ext_router.route(f"python3 {script}")
    assert skill.exit_code == native.exit_code == 0
    # The whole stream is on disk under $SYNAPSE_HOME/outputs, named in the cut marker.
    assert skill.full_output_path is not None
    path = skill.full_output_path
    assert path.parent == home / "outputs" and path.name.endswith("-stdout.txt")
    assert path.read_text() == FLOOD_STDOUT
    assert f"; full output: {path} ...]" in skill.stdout
    # What the model sees is exactly what a native command's output gives, but the path.
    assert native.full_output_path is not None
    assert skill.stdout.replace(str(path), "PATH") == native.stdout.replace(
        str(native.full_output_path), "PATH"
    )
    assert skill.stdout.startswith("line 0\n") and skill.stdout.endswith("line 199999\n")
    assert len(skill.stdout.encode()) < settings.output.max_bytes + 200
    assert len(skill.stdout.splitlines()) <= settings.output.max_lines + 1


async def test_big_stderr_keeps_its_spill_path_through_the_router(
    ext_router: BashRouter, registry: ExtensionRegistry, home: Path
) -> None:
    script = "import sys\nfor i in range(200_000):\n    print(f'err {i}', file=sys.stderr)\n"
    write(make_skill(home, "noisy", "Floods stderr") / "scripts" / "noisy.py", script)
    await registry.refresh("skills")
    result = await ext_router.route("skill:noisy:noisy")
    assert result.full_output_path is not None
    spilled = result.full_output_path.with_name(
        result.full_output_path.name.replace("-stdout", "-stderr")
    )
    assert f"full output: {spilled} ...]" in result.stderr  # cut once, by the capture
    assert result.stderr.count("omitted") == 1


async def test_script_output_memory_stays_bounded(home: Path, workdir: Path) -> None:
    """40 MiB on each stream: memory stays flat, both streams spill to their files."""
    folder = make_skill(home, "huge", "Floods a lot")
    write(
        folder / "scripts" / "huge.py",
        "import sys\nchunk = b'y' * (1 << 20)\nfor _ in range(40):\n"
        "    sys.stdout.buffer.write(chunk)\n    sys.stderr.buffer.write(chunk)\n",
    )
    skills, _ = scan_skills(home / "skills")
    huge = next(s for k in skills if k.name == "huge" for s in k.scripts)
    settings = Settings(synapse_home=home)
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles(), env=dict(os.environ))
    tracemalloc.start()
    try:
        out = await SkillScriptCommand(huge).run([], ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.exit_code == 0 and out.bounded
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes while reading 80 MiB"
    spilled = list((home / "outputs").iterdir())
    assert sorted(p.name.rsplit("-", 1)[1] for p in spilled) == ["stderr.txt", "stdout.txt"]
    assert all(p.stat().st_size == 40 << 20 for p in spilled)
    assert out.full_output_path is not None
    assert out.full_output_path.name.endswith("-stdout.txt")
    for text in (out.stdout, out.stderr):
        assert "bytes / 0 lines omitted; full output: " in text
        assert len(text.encode()) < settings.output.max_bytes + 200


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and ") Z " in stat.read_text())


# ----------------------------------------------------------------- wrappers


async def test_skill_wrappers_on_path_work_in_a_pipeline(
    ext_router: BashRouter, home: Path
) -> None:
    wrapper = home / "bin" / "skill:misc:greet"
    assert os.access(wrapper, os.X_OK)
    result = await ext_router.route("echo x | skill:misc:greet Bob | tr a-z A-Z")
    assert result.layer is Layer.NATIVE
    assert result.stdout == "HI BOB\n"
    helped = await ext_router.route("true && skill:pdf-editor:merge -h")
    assert (
        helped.stdout == "Usage: skill:pdf-editor:merge <out> <in>...\nMerge PDF files into one.\n"
    )


# ------------------------------------------------------------------ watcher


async def test_watcher_sees_create_modify_delete_and_folder_recreation(
    registry: ExtensionRegistry, ext_router: BashRouter, home: Path
) -> None:
    folder = make_skill(home, "fresh", "Made while running")
    script = write(folder / "scripts" / "new_tool.py", '"""First version."""\nprint("v1")\n')
    assert await wait_until(lambda: registry.get("skill:fresh:new_tool") is not None)
    found = await ext_router.route("command:search new_tool --type skill")
    assert found.data["matches"] == ["skill:fresh:new_tool"]
    assert (home / "bin" / "skill:fresh:new_tool").is_file()

    script.write_text('"""Second version."""\nprint("v2")\n')

    def summary_is_v2() -> bool:
        cmd = registry.get("skill:fresh:new_tool")
        return cmd is not None and cmd.summary == "Second version."

    assert await wait_until(summary_is_v2)
    assert (await ext_router.route("skill:fresh:new_tool")).stdout == "v2\n"

    script.unlink()
    assert await wait_until(lambda: registry.get("skill:fresh:new_tool") is None)
    assert await wait_until(lambda: not (home / "bin" / "skill:fresh:new_tool").exists())

    shutil.rmtree(home / "skills")
    assert await wait_until(lambda: registry.commands() == [])
    assert await wait_until(lambda: not list((home / "bin").glob("skill:*")))
    again = make_skill(home, "reborn", "After the folder came back")
    write(again / "scripts" / "hello.sh", "echo reborn\n")
    assert await wait_until(lambda: registry.get("skill:reborn:hello") is not None)
    assert (await ext_router.route("skill:reborn:hello")).stdout == "reborn\n"


async def test_watcher_stops_cleanly(registry: ExtensionRegistry) -> None:
    watcher = registry._watcher
    assert watcher is not None
    tasks = list(watcher._tasks)
    await registry.close()
    assert all(t.done() for t in tasks)


# ---------------------------------------------------------------- skill:*


async def test_skill_search_ranks_name_then_description_then_body(ext_router: BashRouter) -> None:
    result = await ext_router.route('skill search "pdf"')
    assert result.exit_code == 0
    assert result.data["matches"] == ["pdf-editor"]
    assert "pdf-editor: Edit and extract text from PDF files" in result.stdout
    assert "  skill:pdf-editor:extract_text  Extract text from PDF files." in result.stdout
    docs = await ext_router.route("skill:search documents")
    assert docs.data["matches"] == ["misc"]  # only in SKILL.md's body
    none = await ext_router.route("skill:search quantum")
    assert none.exit_code == 0 and "No skill matches 'quantum'" in none.stdout


async def test_skill_load_prints_skill_md_and_commands(ext_router: BashRouter) -> None:
    loaded = await ext_router.route("skill load pdf-editor")
    assert loaded.stdout.startswith("---\nname: pdf-editor\n")
    assert "Use pdftotext." in loaded.stdout
    assert "  skill:pdf-editor:merge  Merge PDF files into one." in loaded.stdout
    missing = await ext_router.route("skill:load pdf-edit")
    assert missing.exit_code == 1
    assert missing.category is FailureCategory.NOT_FOUND
    assert "Did you mean: pdf-editor?" in missing.stderr
    # An unknown skill is not a usage mistake: the hint points at listing skills.
    assert missing.text.endswith(
        "Hint: No installed skill has that name (not a usage problem): `skill:list` lists "
        "the installed skills, `skill:search <words>` finds one by what it does.\n"
    )
    assert "skill:load --help" not in missing.text


async def test_skill_reinforce_needs_an_executor_then_delegates(
    ext_router: BashRouter, registry: ExtensionRegistry
) -> None:
    without = await ext_router.route('skill reinforce "made a pdf tool"')
    assert without.exit_code == 1
    assert "needs a sub-agent executor" in without.stderr
    calls: list[tuple[str, str, str]] = []

    async def subagent(task_type: str, prompt: str, description: str) -> CommandOutput:
        calls.append((task_type, prompt, description))
        return CommandOutput("updated skills/pdf-editor/SKILL.md\n")

    routed = ext_router.derive(subagent=subagent)
    done = await routed.route('skill:reinforce "Merged PDFs with qpdf" --skill pdf-editor')
    assert (done.exit_code, done.stdout) == (0, "updated skills/pdf-editor/SKILL.md\n")
    ((task_type, prompt, _),) = calls
    assert task_type == "skill:enhance"
    assert "Merged PDFs with qpdf" in prompt and "'pdf-editor'" in prompt
    assert (await routed.route("skill:reinforce")).exit_code == 2
