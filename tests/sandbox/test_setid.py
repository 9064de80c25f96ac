"""Issue 28 item 10: a sandboxed command cannot leave a set-user-ID or set-group-ID file
for the host (bwrap's mounts are nosuid inside, but the bit is stored in the file and
the host's mount honours it). bwrap loads a seccomp filter (`sandbox.seccomp_program`):
chmod and its siblings with S_ISUID/S_ISGID fail, and so does creating a file with such
a mode."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from synapse_lsp import sandbox
from synapse_lsp.commands import CommandContext
from synapse_lsp.config import Settings
from synapse_lsp.extensions.skills import run_script, scan_skills
from synapse_lsp.files import DiskFiles
from synapse_lsp.shell import ShellSession

SETID = stat.S_ISUID | stat.S_ISGID


def _setid(path: Path) -> int:
    return path.stat().st_mode & SETID


@pytest.mark.parametrize(
    "line",
    [
        "cp /bin/true t && chmod u+s t",
        "cp /bin/true t && chmod 4755 t",
        "cp /bin/true t && chmod g+s t",
        "cp /bin/true t && python3 -c 'import os; os.chmod(\"t\", 0o6755)'",
        "cp /bin/true t && python3 -c 'import os; os.chmod(os.open(\"t\", os.O_RDONLY), 0o4755)'",
        "python3 -c 'import os; os.close(os.open(\"t\", os.O_CREAT | os.O_WRONLY, 0o4755))'",
        "python3 -c 'import os; os.mknod(\"t\", 0o104755)'",
    ],
    ids=["chmod-u+s", "chmod-4755", "chmod-g+s", "os.chmod", "fchmod", "open-O_CREAT", "mknod"],
)
async def test_no_command_can_set_a_set_id_bit(
    shell: ShellSession, workdir: Path, line: str
) -> None:
    result = await shell.run(line)
    target = workdir / "t"
    assert result.exit_code != 0, result.stdout + result.stderr
    assert "Operation not permitted" in result.stderr
    assert not target.exists() or _setid(target) == 0


async def test_cp_p_of_a_setuid_file_drops_the_bit(shell: ShellSession, workdir: Path) -> None:
    source = workdir / "src"
    shutil.copy("/bin/true", source)
    source.chmod(0o4755)  # made by the user, outside the sandbox
    result = await shell.run("cp -p src copy; ls -l copy")
    assert (workdir / "copy").exists(), result.stderr
    assert _setid(workdir / "copy") == 0


async def test_ordinary_modes_still_work(shell: ShellSession, workdir: Path) -> None:
    result = await shell.run(
        "touch f && chmod 600 f && chmod +x f && mkdir d && chmod 700 d && "
        "python3 -c 'import os; os.close(os.open(\"n\", os.O_CREAT | os.O_WRONLY, 0o644))' && "
        "stat -c %a f d n"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["711", "700", "644"]


def test_the_filter_exists_for_this_machine_and_not_for_unknown_ones() -> None:
    if os.uname().machine in ("x86_64", "aarch64"):
        program = sandbox.seccomp_program()
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 4096
    assert sandbox.seccomp_program("sparc64") is None


async def test_a_skill_script_is_filtered_too(settings: Settings, workdir: Path) -> None:
    home = settings.synapse_home
    scripts = home / "skills" / "mode" / "scripts"
    scripts.mkdir(parents=True)
    (home / "skills" / "mode" / "SKILL.md").write_text(
        "---\nname: mode\ndescription: Sets a mode\n---\n# mode\n"
    )
    (scripts / "setuid.sh").write_text("#!/bin/sh\ncp /bin/true t && chmod u+s t\n")
    (scripts / "setuid.sh").chmod(0o755)
    skills, _ = scan_skills(home / "skills")
    script = next(s for k in skills for s in k.scripts)
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles(), roots=(workdir,))
    out = await run_script(script, [], ctx, timeout=30)
    assert out.exit_code != 0 and "Operation not permitted" in out.stderr
    assert (workdir / "t").exists() and _setid(workdir / "t") == 0
