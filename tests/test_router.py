"""BashRouter: the BDD scenarios (seeds part01/part05) of the router layer, and its bad cases."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from synapse_lsp import cmdline
from synapse_lsp.commands import (
    CommandContext,
    CommandOutput,
    FailureCategory,
    Layer,
    Step,
)
from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter, format_for_model
from synapse_lsp.shell import ShellSession

# --------------------------------------------------------------- three layers


async def test_native_pwd_reports_the_working_directory(router: BashRouter, workdir: Path) -> None:
    result = await router.route("pwd")
    assert result.exit_code == 0
    assert result.layer is Layer.NATIVE
    assert str(workdir) in result.stdout
    assert not result.is_error


async def test_native_common_commands(router: BashRouter) -> None:
    listing = await router.route("ls -la")
    echo = await router.route('echo "Hello Synapse"')
    assert (listing.exit_code, echo.exit_code) == (0, 0)
    assert "Hello Synapse" in echo.stdout
    assert echo.text == "Hello Synapse\n"


async def test_builtin_read_is_dispatched_in_process(router: BashRouter, workdir: Path) -> None:
    (workdir / "notes.txt").write_text("alpha\nbeta\n")
    result = await router.route("read notes.txt")
    assert result.layer is Layer.AGENT
    assert result.exit_code == 0
    assert "alpha" in result.stdout and "beta" in result.stdout


async def test_extension_names_route_to_the_extension_layer(router: BashRouter) -> None:
    result = await router.route("mcp:nowhere:tool --x 1")
    assert result.layer is Layer.EXTENSION
    assert result.exit_code == 127
    assert result.category is FailureCategory.NOT_FOUND
    assert "command:search" in result.text


async def test_extension_commands_get_argv_and_cwd(shell: ShellSession, settings: Settings) -> None:
    seen: dict[str, object] = {}

    class Echo:
        name = "skill:demo:echo"
        summary = "echo"
        usage = "skill:demo:echo ARGS"

        def help(self) -> str:
            return self.usage

        async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
            seen.update(argv=argv, cwd=ctx.cwd)
            return CommandOutput(" ".join(argv[1:]) + "\n")

    class Lookup:
        def get(self, name: str) -> Echo | None:
            return Echo() if name == "skill:demo:echo" else None

    router = BashRouter(shell, settings, extensions=Lookup())
    await router.route("mkdir -p sub && cd sub")
    result = await router.route("skill:demo:echo 'a b' c")
    assert result.layer is Layer.EXTENSION
    assert result.stdout == "a b c\n"
    assert seen == {"argv": ["skill:demo:echo", "a b", "c"], "cwd": shell.cwd}
    assert shell.cwd.name == "sub"


# ------------------------------------------------------- native pass-through


async def test_redirection_runs_natively(router: BashRouter, workdir: Path) -> None:
    result = await router.route('echo "hello" > ./tmp.txt')
    assert result.layer is Layer.NATIVE and result.exit_code == 0
    assert (workdir / "tmp.txt").read_text() == "hello\n"


async def test_heredoc_is_passed_verbatim(router: BashRouter, workdir: Path) -> None:
    result = await router.route("cat <<'EOF' > ./tmp.txt\nline one $HOME\n  line two\nEOF")
    assert result.layer is Layer.NATIVE and result.exit_code == 0
    assert (workdir / "tmp.txt").read_text() == "line one $HOME\n  line two\n"


async def test_sed_in_place_is_not_taken_for_a_builtin(router: BashRouter, workdir: Path) -> None:
    (workdir / "tmp.txt").write_text("aaa\n")
    result = await router.route('sed -i "s/a/b/g" ./tmp.txt')
    assert result.layer is Layer.NATIVE and result.exit_code == 0
    assert (workdir / "tmp.txt").read_text() == "bbb\n"


async def test_builtin_names_only_count_as_the_first_word(router: BashRouter) -> None:
    result = await router.route("echo read write edit")
    assert result.layer is Layer.NATIVE
    assert result.stdout == "read write edit\n"


async def test_pipelines_and_and_lists_run_natively(router: BashRouter) -> None:
    result = await router.route("printf 'b\\na\\n' | sort && echo done")
    assert result.layer is Layer.NATIVE
    assert result.stdout == "a\nb\ndone\n"


async def test_bash_prefix_is_stripped(router: BashRouter, workdir: Path) -> None:
    result = await router.route('bash echo "hello" > ./tmp.txt')
    assert result.exit_code == 0
    assert (workdir / "tmp.txt").read_text() == "hello\n"


async def test_bash_c_and_bash_script_keep_their_meaning(router: BashRouter, workdir: Path) -> None:
    (workdir / "s.sh").write_text('echo "script $1"\n')
    assert (await router.route("bash -c 'echo via-c'")).stdout == "via-c\n"
    assert (await router.route("bash s.sh arg")).stdout == "script arg\n"


@pytest.mark.parametrize("command", ['glob "*.ts"', 'search "TODO"'])
async def test_retired_builtins_fall_back_to_native(router: BashRouter, command: str) -> None:
    result = await router.route(command)
    assert result.layer is Layer.NATIVE
    assert result.exit_code != 0
    assert result.is_error
    assert result.category is FailureCategory.NOT_FOUND


# ----------------------------------------------------------------- misuse


async def test_command_bash_gets_a_repair_example(router: BashRouter, workdir: Path) -> None:
    result = await router.route("Bash")
    assert result.is_error and result.exit_code == 2
    assert result.category is FailureCategory.INVALID_USAGE
    assert result.layer is Layer.AGENT
    assert 'Bash(command="...")' in result.text
    assert "Bash --help" not in result.text  # no hint at a command that does not exist
    # `Bash ls -la`: the example is the call the model meant; nothing runs.
    spaced = await router.route("Bash touch made.txt")
    assert spaced.category is FailureCategory.INVALID_USAGE
    assert 'Bash(command="touch made.txt")' in spaced.text
    assert not (workdir / "made.txt").exists()


@pytest.mark.parametrize(
    "line",
    ['Bash(command="ls -la")', "Bash(command='ls -la')", 'Bash(command="ls -la", restart=true)'],
)
async def test_wrapped_bash_call_is_explained_not_run(router: BashRouter, line: str) -> None:
    result = await router.route(line)
    assert result.is_error and result.exit_code == 2
    assert result.category is FailureCategory.INVALID_USAGE
    assert "Do not wrap Bash(...) inside command" in result.text
    assert result.text.rstrip().endswith('Hint: Retry as Bash(command="ls -la").')
    assert "--help" not in result.text
    assert result.stdout == ""  # not run


async def test_wrapped_bash_call_runs_nothing(router: BashRouter, workdir: Path) -> None:
    result = await router.route('Bash(command="touch made.txt")')
    assert 'Bash(command="touch made.txt")' in result.text
    assert not (workdir / "made.txt").exists()


async def test_read_usage_error_teaches_read_help(router: BashRouter) -> None:
    result = await router.route("read")
    assert result.is_error
    assert result.category is FailureCategory.INVALID_USAGE
    assert 'Bash(command="read --help")' in result.text


async def test_unknown_flag_is_invalid_usage(router: BashRouter, workdir: Path) -> None:
    (workdir / "f.txt").write_text("x\n")
    result = await router.route("read f.txt --ofset 2")
    assert result.category is FailureCategory.INVALID_USAGE
    assert "--ofset" in result.text and 'Bash(command="read --help")' in result.text


async def test_unbalanced_quotes_in_a_builtin_are_invalid_usage(router: BashRouter) -> None:
    result = await router.route('write f.txt "unterminated')
    assert result.category is FailureCategory.INVALID_USAGE


# ---------------------------------------------------------- error format


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("sort --frob", "unrecognized option '--frob'"),  # exit 2, "unrecognized"
        ("grep -Q x f.txt", "invalid option"),
        ("sort -k", "option requires an argument"),  # exit 2 alone
    ],
)
async def test_nonzero_exit_shows_stderr_and_a_help_hint(
    router: BashRouter, line: str, shown: str
) -> None:
    """SPEC §2: the `--help` hint where usage is the likely cause."""
    result = await router.route(line)
    assert result.is_error and result.exit_code == 2
    assert "[stderr]" in result.text
    assert shown in result.text
    base = line.split()[0]
    assert result.text.rstrip().endswith(
        f"Hint: Run `{base} --help` to learn the correct usage before retrying."
    )


async def test_every_failure_has_the_error_header_stderr_and_the_hint(
    router: BashRouter, workdir: Path
) -> None:
    """SPEC §2 / seed 000: `[Error]`, `[stderr]` with the original text and a hint - for
    built-ins failing at run time and for native commands (`--help` for a usage mistake)."""
    missing = await router.route("read nope.txt")
    assert missing.is_error and missing.layer is Layer.AGENT
    assert missing.text.startswith("[Error] Not found (exit code 1)\n[stderr]\n")
    assert "nope.txt" in missing.text
    assert missing.text.endswith(MISSING_HINT + "\n")
    await router.route("git init -q .")
    typo = await router.route("git comit -m x")
    assert typo.text.startswith("[Error] Command failed (exit code 1)\n")
    assert "'comit' is not a git command" in typo.text
    assert typo.text.endswith(
        "Hint: Run `git --help` to learn the correct usage before retrying.\n"
    )


async def test_a_denied_command_names_the_reason_and_no_help_hint(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    """A command the user refused, or cancelled, is not a usage problem, so its result
    has no hint at all (SPEC §2)."""

    class Deny:
        async def check(
            self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
        ) -> str | None:
            return "denied by the user"

    guarded = BashRouter(shell, settings, permission=Deny())
    result = await guarded.route("touch made.txt")
    assert result.exit_code == 126 and result.category is FailureCategory.PERMISSION_DENIED
    assert result.text == (
        "[Error] Permission denied (exit code 126)\n[stderr]\nNot run: denied by the user\n"
    )
    assert not (workdir / "made.txt").exists()


async def test_success_with_stderr_keeps_both(router: BashRouter) -> None:
    result = await router.route("echo out; echo err >&2")
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert not result.is_error
    assert result.text == "out\n[stderr]\nerr\n"


@pytest.mark.parametrize(
    ("line", "base"),
    [
        ("git comit -m x", "git"),
        ('mcp:github:create_issue {"a":1}', "mcp:github:create_issue"),
        ("skill:pdf:extract file.pdf", "skill:pdf:extract"),
        ("FOO=1 BAR=2 make test", "make"),
        ("cd src && pytest -x", "pytest"),
        ("  ls   -la ", "ls"),
    ],
)
def test_base_command(line: str, base: str) -> None:
    assert cmdline.base_command(line) == base


def test_hint_names_the_whole_extension_command() -> None:
    # (an unknown extension command gets the command:search hint instead: issue 14 item 9)
    text = format_for_model("skill:pdf:extract a.pdf", "", "usage: extract <pdf>\n", 2, None)
    assert "Hint: Run `skill:pdf:extract --help`" in text


# ------------------------------------------- hints that fit the failure (issue 27 item 8)

MISSING_HINT = (
    "Hint: A file or folder the command names does not exist (not a usage problem): check "
    "the path against the current directory (`pwd`, `ls <folder>`; `find . -name '<name>'` "
    "searches below it), then retry with the right one."
)
PERMISSION_HINT = (
    "Hint: The file system refused access (the permissions of the file or its folder; "
    "`ls -ld <path>` shows them), not a usage problem: `--help` cannot change that. Use a "
    "path you have access to, or ask the user to change the permissions (`chmod`) if they "
    "want that."
)
GREP_HINT = (
    "Hint: grep exits with 1 when no line matched: the search ran and found nothing; that "
    "is not an error in the command. If a match was expected, check the pattern (case, "
    "regex characters) and the files searched."
)
TRACEBACK_HINT = (
    "Hint: The program ran and raised an exception (not a usage problem): the traceback's "
    "last line names the error and the frames above it show where. Fix that cause in the "
    "code or its input, then run it again."
)
DIRECTORY_HINT = (
    "Hint: The path is a folder, not a file (not a usage problem): list it with "
    "`ls <folder>`, then name a file inside it."
)


@pytest.mark.parametrize(
    ("line", "shown", "hint"),
    [
        ("cat /nonexistent", "No such file or directory", MISSING_HINT),
        ("ls /definitely/not/here", "No such file or directory", MISSING_HINT),  # exit 2
        ("grep zeta f.txt", "(empty)", GREP_HINT),
        ("cat f.txt | grep zeta", "(empty)", GREP_HINT),
        ("python3 -c 'import json; json.loads(\"{\")'", "JSONDecodeError", TRACEBACK_HINT),
        # a file without an x bit: refused even to root, sandboxed or not
        ("printf 'echo hi\\n' > run.sh; ./run.sh", "run.sh: Permission denied", PERMISSION_HINT),
        ("cat .", "Is a directory", DIRECTORY_HINT),
        ("read .", "is a directory", DIRECTORY_HINT),
    ],
)
async def test_a_data_failure_gets_a_hint_that_fits_not_help(
    router: BashRouter, workdir: Path, line: str, shown: str, hint: str
) -> None:
    """SPEC §2: a command that ran as intended and failed on its data is not sent to
    `--help`; its hint says what failed and what to do."""
    (workdir / "f.txt").write_text("alpha\n")
    result = await router.route(line)
    assert result.is_error
    assert shown in result.text
    assert result.text.endswith(hint + "\n")
    assert "--help` to learn" not in result.text


async def test_edit_refused_by_file_permissions_says_so(
    router: BashRouter, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workdir / "locked.txt"
    target.write_text("alpha\n")
    target.chmod(0o444)
    if os.geteuid() == 0:  # root may write any file: answer as the file's mode says
        real_access = os.access

        def access(path: str | os.PathLike[str], mode: int, **kwargs: object) -> bool:
            if Path(path) == target:
                return False
            return real_access(path, mode)

        monkeypatch.setattr(os, "access", access)
    result = await router.route("edit locked.txt alpha beta")
    assert result.is_error
    assert "edit: " in result.text and "permission denied" in result.text
    assert result.text.endswith(PERMISSION_HINT + "\n")
    assert target.read_text() == "alpha\n"


@pytest.mark.parametrize("line", ["false", "exit_three() { return 3; }; exit_three"])
async def test_a_failure_with_no_sign_of_its_cause_gets_no_hint(
    router: BashRouter, line: str
) -> None:
    """Neither usage nor a known data failure: no hint (its `--help` would not say why)."""
    result = await router.route(line)
    assert result.is_error
    assert "Hint:" not in result.text


def test_a_sandbox_refusal_gets_its_note_and_no_help_hint() -> None:
    note = (
        "\n[blocked by the sandbox: the sandbox refused a write. Running it outside the "
        "sandbox was not allowed; work inside the workspace, or ask the user]\n"
    )
    text = format_for_model(
        "echo x > /etc/f", "", "bash: /etc/f: Read-only file system\n" + note, 1, None
    )
    assert text.endswith(note.lstrip("\n"))
    assert "Hint:" not in text


# ---------------------------------------------------------------- built-in plumbing


async def test_builtin_help_and_short_help(router: BashRouter) -> None:
    short = await router.route("read -h")
    full = await router.route("read --help")
    assert short.exit_code == full.exit_code == 0
    assert short.stdout.splitlines()[0] == "read <file> [--offset N] [--limit N]"
    assert "--offset N" in full.stdout and "Examples:" in full.stdout
    assert len(full.stdout) > len(short.stdout)


async def test_builtin_piped_into_native(router: BashRouter, workdir: Path) -> None:
    (workdir / "f.txt").write_text("apple\nbanana\ncherry\n")
    result = await router.route("read f.txt | grep an")
    assert result.exit_code == 0
    assert result.stdout == "banana\n"


async def test_builtin_then_and_list(router: BashRouter, workdir: Path) -> None:
    result = await router.route('write a.txt "A" && cat a.txt')
    assert result.exit_code == 0
    assert result.stdout.endswith("A")
    failed = await router.route("read missing.txt && echo never")
    assert failed.exit_code != 0 and "never" not in failed.text


async def test_write_from_heredoc(router: BashRouter, workdir: Path) -> None:
    result = await router.route("write out/h.txt <<'EOF'\nfirst $X\nsecond\nEOF")
    assert result.exit_code == 0, result.text
    assert (workdir / "out" / "h.txt").read_text() == "first $X\nsecond\n"


async def test_builtin_redirection_is_refused_with_a_hint(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "f.txt").write_text("x\n")
    result = await router.route("read f.txt > copy.txt")
    assert result.category is FailureCategory.INVALID_USAGE
    assert not (workdir / "copy.txt").exists()


async def test_aliases(router: BashRouter) -> None:
    assert router.layer_of("todo '{}'") is (
        Layer.AGENT if "plan" in router.builtins else Layer.NATIVE
    )
    assert router.layer_of("task:general --prompt x") is Layer.AGENT


async def test_builtin_output_is_bounded_for_the_model(router: BashRouter, workdir: Path) -> None:
    (workdir / "big.txt").write_text("".join(f"line {i}\n" for i in range(1500)))
    result = await router.route("read big.txt")
    assert result.exit_code == 0
    assert "\tline 0\n" in result.stdout and "  1500\tline 1499" in result.stdout
    assert len(result.text.encode()) < 32 * 1024  # numbered lines (issue 14 item 21)


# ------------------------------------------------------------------- task:*


async def test_task_without_executor_is_a_dependency_error(router: BashRouter) -> None:
    result = await router.route('task:general --prompt "analyze route" --description "guard"')
    assert result.exit_code == 1
    assert "Task commands require SubAgent executor" in result.stderr
    assert result.is_error


async def test_task_inside_a_subagent_is_blocked_without_error(router: BashRouter) -> None:
    calls: list[str] = []

    async def runner(task_type: str, prompt: str, description: str) -> CommandOutput:
        calls.append(task_type)
        return CommandOutput("child answer\n")

    child = router.derive(in_subagent=True, subagent=runner)
    result = await child.route('task:skill:search --prompt "x" --description "y"')
    assert not result.is_error and result.exit_code == 0
    assert "blocked" in result.stdout
    assert calls == []
    parent = router.derive(subagent=runner)
    ok = await parent.route('task:general --prompt "analyze route" --description "guard"')
    assert ok.stdout == "child answer\n" and calls == ["general"]


async def test_task_bad_type_and_missing_prompt(router: BashRouter) -> None:
    async def runner(task_type: str, prompt: str, description: str) -> CommandOutput:
        raise AssertionError("must not run")

    parent = router.derive(subagent=runner)
    bad_type = await parent.route('task:nope --prompt "x"')
    no_prompt = await parent.route('task:general --description "x"')
    assert bad_type.category is no_prompt.category is FailureCategory.INVALID_USAGE
    assert "task:general" in bad_type.text


# ----------------------------------------------------------- cancellation


async def _wait_for_child_of(shell: ShellSession, name: str) -> int:
    # shell.pid is read on every pass: a restart inside route() replaces the bash.
    for _ in range(200):
        pid = shell.pid
        if pid is None:
            await asyncio.sleep(0.02)
            continue
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            ppid_session = stat.rsplit(")", 1)[1].split()
            with contextlib.suppress(ProcessLookupError):
                if comm == name and int(ppid_session[3]) == os.getsid(pid):
                    return int(entry.name)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {name} process appeared")


async def test_cancel_interrupts_the_command_and_keeps_the_session(
    router: BashRouter, shell: ShellSession
) -> None:
    await router.route("cd / && export KEEP=1")
    task = asyncio.create_task(router.route("sleep 30"))
    sleeper = await _wait_for_child_of(shell, "sleep")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not Path(f"/proc/{sleeper}").exists() or "Z" in Path(f"/proc/{sleeper}/stat").read_text()
    after = await router.route("pwd; echo $KEEP")
    assert after.stdout == "/\n1\n"


async def test_cancel_of_a_restart_route_cancels_the_inner_work(
    router: BashRouter, shell: ShellSession
) -> None:
    task = asyncio.create_task(router.route("sleep 30", restart=True))
    sleeper = await _wait_for_child_of(shell, "sleep")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if not Path(f"/proc/{sleeper}").exists():
            break
        await asyncio.sleep(0.02)
    assert not Path(f"/proc/{sleeper}").exists()
    assert (await router.route("echo alive")).stdout == "alive\n"


async def test_a_cancel_during_the_restart_itself_is_not_lost(
    router: BashRouter, workdir: Path
) -> None:
    task = asyncio.create_task(router.route("touch marker", restart=True))
    await asyncio.sleep(0)  # the task is now inside the restart, before the command
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert not (workdir / "marker").exists()  # the command never ran
    after = await router.route("echo alive; pwd")
    assert after.stdout == f"alive\n{workdir}\n"


async def test_restart_gives_a_fresh_session(router: BashRouter, workdir: Path) -> None:
    await router.route("cd / && export GONE=1")
    result = await router.route("pwd; echo ${GONE:-unset}", restart=True)
    assert result.stdout == f"{workdir}\nunset\n"
    only = await router.route("", restart=True)
    assert only.exit_code == 0 and "restarted" in only.text


async def test_timeout_is_reported_and_the_session_survives(
    shell: ShellSession, settings: Settings
) -> None:
    quick = BashRouter(shell, Settings(synapse_home=settings.synapse_home, command_timeout=0.5))
    result = await quick.route("sleep 20")
    assert result.is_error
    assert result.category is FailureCategory.TIMEOUT
    assert "timed out" in result.text
    assert (await quick.route("echo ok")).stdout == "ok\n"
