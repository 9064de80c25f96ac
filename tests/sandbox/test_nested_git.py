"""Issue 28 item 4: a nested repository's (a sub-project's, a submodule's) git config
and hooks are read-only in the sandbox, as the workspace's own `.git` is, so the
agent cannot plant `core.fsmonitor` or a hook that the user's next `git status` there
(VS Code's git scans sub-repositories) runs outside. Commits still work: only what
makes git run programs is protected. A repository made during the session is
protected from the next command on, and what its config would run is said at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

from synapse_lsp import sandbox
from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession

GIT = "git -c user.email=a@b.c -c user.name=n"


def _init(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)


async def test_a_nested_repositorys_config_and_hooks_are_read_only(
    settings: Settings, workdir: Path
) -> None:
    _init(workdir)
    _init(workdir / "sub")
    shell = ShellSession(workdir, settings)
    await shell.start()
    try:
        planted = await shell.run('git -C sub config core.fsmonitor "touch PWNED"')
        assert planted.exit_code != 0
        hook = await shell.run("echo 'touch PWNED' > sub/.git/hooks/post-checkout")
        assert hook.exit_code != 0 and "Read-only file system" in hook.stderr
        assert "fsmonitor" not in (workdir / "sub" / ".git" / "config").read_text()
        committed = await shell.run(
            f"cd sub && echo hi > f && git add f && {GIT} commit -qm first && git log --oneline"
        )
        assert committed.exit_code == 0 and "first" in committed.stdout, committed.stderr
    finally:
        await shell.close()


async def test_a_submodule_style_git_file_protects_where_it_points(
    settings: Settings, workdir: Path
) -> None:
    _init(workdir / "store" / "mod.git")  # the git folder lives elsewhere in the workspace
    (workdir / "mod").mkdir()
    (workdir / "mod" / ".git").write_text("gitdir: ../store/mod.git/.git\n")
    assert sandbox.nested_git_dirs([workdir]) >= {workdir / "store" / "mod.git" / ".git"}
    shell = ShellSession(workdir, settings)
    await shell.start()
    try:
        planted = await shell.run("echo '[core] fsmonitor = x' >> store/mod.git/.git/config")
        assert planted.exit_code != 0
    finally:
        await shell.close()


async def test_a_repository_made_now_is_named_and_protected_from_the_next_command(
    settings: Settings, workdir: Path
) -> None:
    shell = ShellSession(workdir, settings)
    await shell.start()
    try:
        made = await shell.run('git init -q new && git -C new config core.fsmonitor "touch X"')
        assert made.exit_code == 0
        assert "a new repository's git config or hooks make git run programs" in made.stderr
        assert "fsmonitor = touch X" in made.stderr
        later = await shell.run('export KEEP=1; git -C new config core.pager "evil"')
        assert "a new repository" in later.stderr and "read-only in the sandbox" in later.stderr
        assert later.exit_code != 0
        assert "pager" not in (workdir / "new" / ".git" / "config").read_text()
    finally:
        await shell.close()
