"""Escalation instead of dead ends (issue 17, items 4-6), with real bubblewrap: a
command the sandbox blocked is recognised, the user is asked whether to run it again
outside the sandbox (once / for the session / always for its prefix), the re-run
keeps cwd and exported variables; denied, the model is told why. Plus the modes'
word on the built-ins and on extension calls."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import replace
from pathlib import Path

from synapse_lsp.commands import FailureCategory
from synapse_lsp.config import Settings
from synapse_lsp.policy import rules as permission_rules
from synapse_lsp.policy.gate import ALLOW_ONCE, ALLOW_SESSION, ALLOW_WITH_PATH, DENY, AskingGate
from synapse_lsp.policy.run_rules import RuleFile
from synapse_lsp.question import Question
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession


class Recorder:
    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.questions: list[tuple[str, tuple[str, ...]]] = []

    async def __call__(self, question: Question) -> str | None:
        message, actions = question.message, question.actions
        self.questions.append((message, actions))
        return self.answers.pop(0) if self.answers else DENY


def _router(
    shell: ShellSession, settings: Settings, root: Path, asker: Recorder, policy: str = "auto"
) -> BashRouter:
    live = replace(settings, permission=policy)
    gate = AskingGate(
        live,
        root,
        asker,
        sandboxed=lambda: shell.sandbox.sandboxed,
        rules=RuleFile(settings.synapse_home),
    )
    return BashRouter(shell, live, permission=gate)


async def test_a_blocked_write_asks_and_runs_again_outside_in_its_cwd_without_exports(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    asker = Recorder(ALLOW_ONCE)
    router = _router(shell, settings, workdir, asker)
    (workdir / "sub").mkdir()
    assert (await router.route("cd sub && export GREETING=hello")).exit_code == 0
    result = await router.route(f'echo "[$GREETING] from $PWD" > {outside}/made.txt')
    assert result.exit_code == 0, result.text
    # the cwd carries over; an export the session made does not (an allowlist)
    assert (outside / "made.txt").read_text() == f"[] from {workdir / 'sub'}\n"
    assert "the sandbox blocked the first attempt" in result.stderr
    assert "may have partly run" in result.stderr
    assert "the session's exports GREETING" in result.stderr and "not carried" in result.stderr
    message, actions = asker.questions[0]
    assert "The sandbox blocked" in message and "refused a write" in message
    assert "GREETING" in message and "not carried" in message  # the user sees what is dropped
    assert actions[0] == ALLOW_ONCE and actions[-1] == DENY
    # once: the next blocked command asks again
    denied = await router.route(f"python3 -c \"open('{outside}/p.txt', 'w')\"")
    assert denied.exit_code != 0 and not (outside / "p.txt").exists()
    assert len(asker.questions) == 2
    assert "[blocked by the sandbox: the sandbox refused a write" in denied.stderr
    assert "was not allowed" in denied.stderr


async def test_cp_dd_and_a_symlink_escalate_and_session_answers_hold(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    asker = Recorder(ALLOW_SESSION)
    router = _router(shell, settings, workdir, asker)
    (workdir / "src.txt").write_text("data\n")
    (workdir / "link").symlink_to(outside)
    line = f"cp src.txt {outside}/copy.txt"
    assert (await router.route(line)).exit_code == 0
    assert (outside / "copy.txt").read_text() == "data\n"
    (outside / "copy.txt").unlink()
    assert (await router.route(line)).exit_code == 0  # for the session: not asked again
    assert len(asker.questions) == 1
    asker.answers = [DENY, DENY]
    dd = await router.route(f"dd if=src.txt of={outside}/dd.txt status=none")
    assert dd.exit_code != 0 and not (outside / "dd.txt").exists()
    via_link = await router.route("echo x > link/through.txt")
    assert via_link.exit_code != 0 and not (outside / "through.txt").exists()
    assert len(asker.questions) == 3


async def test_the_network_is_off_and_a_loopback_connection_escalates(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        asker = Recorder(DENY, ALLOW_ONCE)
        router = _router(shell, settings, workdir, asker)
        probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\""
        refused = await router.route(probe)
        assert refused.exit_code != 0
        assert "the network is off in the sandbox" in refused.stderr
        allowed = await router.route(probe)
        assert allowed.exit_code == 0, allowed.text
        assert len(asker.questions) == 2
    finally:
        server.close()
        await server.wait_closed()


async def test_always_run_outside_remembers_one_prefix_not_the_line(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    async def always(question: Question) -> str | None:
        message, actions = question.message, question.actions
        asked.append((message, actions))
        return next(a for a in actions if a.startswith("Always run"))

    router = _router(shell, settings, workdir, Recorder())
    router.permission._ask = always  # type: ignore[union-attr]
    result = await router.route(f"touch {outside}/a")
    assert result.exit_code == 0 and (outside / "a").exists()
    assert "Always run `touch` outside the sandbox here" in asked[0][1]
    rules = permission_rules.load(settings.synapse_home, workdir)
    assert [(r.prefix, r.decision) for r in rules.rules] == [("touch", "outside")]
    # remembered: `touch` runs outside without a question; a line with more in it asks
    asker = Recorder()
    fresh = _router(shell, settings, workdir, asker)
    assert (await fresh.route(f"touch {outside}/b")).exit_code == 0
    assert (outside / "b").exists() and asker.questions == []
    chained = await fresh.route(f"touch {outside}/c && rm -f {outside}/a")
    assert chained.exit_code != 0 and (outside / "a").exists()
    assert len(asker.questions) == 1
    # an escalation of a line with two commands offers no "always" at all
    assert not any(a.startswith(("Always", "Always run")) for a in asker.questions[0][1][2:-1])


async def test_a_plain_remembered_allow_never_leaves_the_sandbox(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    """ "Always allow" (a policy question's answer, or `synapse permissions allow`)
    spares the question; the command still runs in the sandbox, and a refusal there
    is asked about, not re-run outside on its own."""
    permission_rules.remember(settings.synapse_home, workdir, "python3", "allow")
    asker = Recorder(DENY)
    router = _router(shell, settings, workdir, asker, policy="ask-all-native")
    ok = await router.route("python3 -c 'print(1)'")
    assert ok.exit_code == 0 and asker.questions == []  # not asked: remembered
    escape = await router.route(f"python3 -c \"open('{outside}/x', 'w')\"")
    assert escape.exit_code != 0 and not (outside / "x").exists()
    assert len(asker.questions) == 1 and "The sandbox blocked" in asker.questions[0][0]


async def test_asked_first_an_outside_write_runs_outside_the_sandbox(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    (outside / "victim.txt").write_text("x")
    asker = Recorder(ALLOW_ONCE)
    router = _router(shell, settings, workdir, asker, policy="ask-writes-outside-workspace")
    result = await router.route(f"rm -f {outside}/victim.txt")
    assert result.exit_code == 0, result.text
    assert not (outside / "victim.txt").exists()
    assert len(asker.questions) == 1  # asked before, not again after a failure
    assert "allowing runs it outside the sandbox" in asker.questions[0][0]
    assert "ran outside the sandbox" in result.stderr


async def test_read_only_refuses_builtin_writes_and_the_kernel_refuses_the_rest(
    workdir: Path, settings: Settings, outside: Path
) -> None:
    ro = replace(settings, sandbox="read-only")
    shell = ShellSession(workdir, ro)
    await shell.start()
    try:
        assert shell.sandbox.sandboxed
        asker = Recorder()
        router = _router(shell, ro, workdir, asker)
        write = await router.route("write notes.txt hello")
        assert write.exit_code == 126 and write.category is FailureCategory.PERMISSION_DENIED
        assert "read-only" in write.stderr and not (workdir / "notes.txt").exists()
        touch = await router.route("touch inside.txt")
        assert touch.exit_code != 0 and not (workdir / "inside.txt").exists()
        assert "blocked by the sandbox" in touch.stderr
        assert (await router.route("echo scratch > /tmp/x && cat /tmp/x")).stdout == "scratch\n"
        mcp = await router.route("mcp:db:drop x")
        assert mcp.category is FailureCategory.PERMISSION_DENIED
        assert "extension command runs outside the sandbox" in asker.questions[-1][0]
    finally:
        await shell.close()


def test_a_workspace_file_cannot_allow_what_home_does_not(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "ws"
    (root / ".synapse").mkdir(parents=True)
    (root / ".synapse" / "permissions.json").write_text('{"allow": ["rm"], "deny": ["curl"]}')
    rules = permission_rules.load(home, root)
    assert rules.decide("rm -rf x") is None
    assert rules.decide("curl example.com") == "deny"
    assert any("cannot grant itself" in p for p in rules.problems)


def test_socket_connect_needs_no_network_namespace_to_fail_here() -> None:
    """Sanity for the loopback test above: the host itself can connect."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with socket.create_connection(s.getsockname(), 5):
            pass


async def test_a_changed_mode_takes_effect_at_the_next_command(
    workdir: Path, settings: Settings, outside: Path
) -> None:
    """The mode is read at each command: a change (an editor setting, ACP's set_mode)
    restarts bash under the new mounts, in the same directory, and says so."""
    current = {"settings": settings}
    shell = ShellSession(workdir, lambda: current["settings"])
    await shell.start()
    try:
        (workdir / "sub").mkdir()
        await shell.run("cd sub && export KEPT=no")
        blocked = await shell.run(f"touch {outside}/x")
        assert blocked.exit_code != 0 and not (outside / "x").exists()
        current["settings"] = replace(settings, sandbox="full-access")
        free = await shell.run(f'touch {outside}/x && echo "[$KEPT]" && pwd')
        assert free.exit_code == 0 and (outside / "x").exists()
        assert free.stdout == f"[]\n{workdir / 'sub'}\n"
        assert "a fresh shell started" in free.stderr and "full-access" in free.stderr
        assert not shell.sandbox.sandboxed
        again = await shell.run("true")
        assert again.stderr == ""  # nothing changed since
        current["settings"] = replace(settings, sandbox="read-only")
        ro = await shell.run("touch inside.txt")
        assert ro.exit_code != 0 and shell.sandbox.mode == "read-only"
    finally:
        await shell.close()


async def test_a_skill_script_is_confined_like_the_shell(
    workdir: Path, settings: Settings, outside: Path
) -> None:
    import os

    from synapse_lsp.commands import CommandContext
    from synapse_lsp.extensions.skills import run_script, scan_skills
    from synapse_lsp.files import DiskFiles

    scripts = settings.synapse_home / "skills" / "maker" / "scripts"
    scripts.mkdir(parents=True)
    (scripts.parent / "SKILL.md").write_text("---\nname: maker\ndescription: Makes files\n---\n")
    (scripts / "make.sh").write_text('touch "$1" && echo made\n')
    skills, _ = scan_skills(settings.synapse_home / "skills")
    script = next(s for k in skills for s in k.scripts)

    async def run(mode: str, target: Path) -> int:
        ctx = CommandContext(
            cwd=workdir,
            settings=replace(settings, sandbox=mode),
            files=DiskFiles(),
            env=dict(os.environ),
            roots=(workdir,),
        )
        return (await run_script(script, [str(target)], ctx, timeout=30)).exit_code

    assert await run("workspace-write", workdir / "in.txt") == 0
    assert (workdir / "in.txt").exists()
    assert await run("workspace-write", outside / "out.txt") != 0
    assert not (outside / "out.txt").exists()
    assert await run("read-only", workdir / "ro.txt") != 0
    assert not (workdir / "ro.txt").exists()
    assert await run("full-access", outside / "out.txt") == 0
    assert (outside / "out.txt").exists()


async def test_a_rerun_outside_carries_no_variable_that_changes_what_runs(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    """The user allows the line they were shown: a sandboxed `export` cannot swap the
    program (PATH, an exported function) or load code (GIT_CONFIG_*, LD_PRELOAD)."""
    (workdir / "bin").mkdir()
    fake = workdir / "bin" / "touch"
    fake.write_text(f"#!/bin/sh\necho hijacked > {workdir}/hijacked\n")
    fake.chmod(0o755)
    router = _router(shell, settings, workdir, Recorder(ALLOW_ONCE))
    setup = (
        'export PATH="$PWD/bin:$PATH" KEPT=yes GIT_CONFIG_COUNT=1 LD_PRELOAD=/nonexistent.so; '
        f"cat() {{ echo function-ran > {workdir}/fn; }}; export -f cat"
    )
    assert (await router.route(setup)).exit_code == 0
    # mkdir is refused in the sandbox (so nothing after it runs there); the re-run
    # outside must use the real touch and cat
    line = (
        f"mkdir {outside}/d && touch {outside}/d/f && cat /dev/null && "
        'echo "[$KEPT][$GIT_CONFIG_COUNT]"'
    )
    result = await router.route(line)
    assert result.exit_code == 0, result.text
    assert (outside / "d" / "f").exists()
    assert not (workdir / "hijacked").exists() and not (workdir / "fn").exists()
    assert "[][]" in result.stdout
    assert "ERROR: ld.so" not in result.stderr  # the loader never saw LD_PRELOAD
    for name in ("KEPT", "GIT_CONFIG_COUNT", "LD_PRELOAD", "cat (a function)"):
        assert name in result.stderr  # named as not carried
    assert "PATH is the shell's starting one, not the session's" in result.stderr


REDIRECTING = {
    # name: (value, a line whose program it would redirect)
    "XDG_CONFIG_HOME": ("$PWD/cfg", "git status --short"),
    "GIT_CONFIG_GLOBAL": ("$PWD/cfg/git/config", "git status --short"),
    "GIT_DIR": ("$PWD/cfg", "git status --short"),
    "EDITOR": ("$PWD/evil", "git status --short"),
    "VISUAL": ("$PWD/evil", "git status --short"),
    "PAGER": ("$PWD/evil", "git status --short"),
    "LD_PRELOAD": ("$PWD/evil.so", "git status --short"),
    "LD_LIBRARY_PATH": ("$PWD", "git status --short"),
    "PYTHONSTARTUP": ("$PWD/evil.py", "python3 -i -c pass"),
    "PYTHONPATH": ("$PWD/pymod", "git status --short"),
    "NODE_OPTIONS": ("--require $PWD/evil.js", "git status --short"),
    "BASH_ENV": ("$PWD/evil.sh", "bash -c true"),
    "ENV": ("$PWD/evil.sh", "sh -c true"),
    "PROMPT_COMMAND": ("$PWD/evil", "git status --short"),
}


async def test_a_remembered_outside_rule_never_carries_what_redirects_programs(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    """Issue 28 item 1: with "always run `git status` outside" remembered, a session
    that exported XDG_CONFIG_HOME (a git config with core.fsmonitor) got its command
    run outside, unasked. Every variable that redirects programs is dropped, and so
    are exported functions and PATH; each is named as not carried."""
    (workdir / "cfg" / "git").mkdir(parents=True)
    marker = workdir / "PWNED"
    (workdir / "cfg" / "git" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    (workdir / "cfg" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    (workdir / "evil").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (workdir / "evil").chmod(0o755)
    for name in ("evil.sh", "evil.py"):
        (workdir / name).write_text(
            f"import os; os.system('touch {marker}')\n"
            if name.endswith(".py")
            else f"touch {marker}\n"
        )
    (workdir / "bin").mkdir()
    (workdir / "bin" / "git").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (workdir / "bin" / "git").chmod(0o755)
    RuleFile(settings.synapse_home).remember(workdir, "git status", "outside")
    RuleFile(settings.synapse_home).remember(workdir, "python3", "outside")
    RuleFile(settings.synapse_home).remember(workdir, "bash", "outside")
    RuleFile(settings.synapse_home).remember(workdir, "sh", "outside")
    asker = Recorder()
    router = _router(shell, settings, workdir, asker)
    assert (await router.route("git init -q . 2>/dev/null; true")).exit_code == 0
    exports = " ".join(f'{name}="{value}"' for name, (value, _) in REDIRECTING.items())
    setup = f'export {exports} PATH="$PWD/bin:$PATH"; git() {{ touch {marker}; }}; export -f git'
    assert (await router.route(setup)).exit_code == 0, setup
    for name, (_, line) in REDIRECTING.items():
        result = await router.route(line)
        assert "ran outside the sandbox" in result.stderr, (name, result.text)
        assert not marker.exists(), f"{name} redirected `{line}` outside the sandbox"
        if name != "PROMPT_COMMAND":  # the shell's own (its framing), never carried
            assert name in result.stderr, (name, result.stderr)
    assert asker.questions == []  # remembered: nothing was asked


async def test_the_sessions_path_is_carried_only_when_the_answer_says_so(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    """An activated venv matters for an escalated `pytest`: the question offers to carry
    the session's PATH, and only that answer carries it."""
    venv = workdir / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "which-env").write_text("#!/bin/sh\necho from-the-venv\n")
    (venv / "which-env").chmod(0o755)
    asker = Recorder(ALLOW_ONCE, ALLOW_WITH_PATH)
    router = _router(shell, settings, workdir, asker)
    assert (await router.route(f'export PATH="{venv}:$PATH"')).exit_code == 0
    plain = await router.route(f"which-env > {outside}/a; echo done > {outside}/b")
    assert ALLOW_WITH_PATH in asker.questions[0][1]
    assert (outside / "b").exists() and not (outside / "a").read_text()
    assert "PATH is the shell's starting one" in plain.stderr
    carried = await router.route(f"which-env > {outside}/c")
    assert carried.exit_code == 0, carried.text
    assert (outside / "c").read_text() == "from-the-venv\n"
    assert "PATH is the session's" in carried.stderr


async def test_a_skill_sees_the_sandboxed_sessions_exports_but_not_loader_variables(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    """What a skill script gets (the session's exports), read through the sandbox's own
    /tmp; loader variables are left out, since the script starts through bwrap, which
    runs outside the sandbox."""
    router = _router(shell, settings, workdir, Recorder())
    await router.route("export SKILL_INPUT=hello LD_PRELOAD=/nonexistent.so; unset HOME")
    env = await router._session_env()
    assert env.get("SKILL_INPUT") == "hello"
    assert "LD_PRELOAD" not in env and "HOME" not in env  # unset there: gone here too
