"""`./dev`'s set-up (issue 27 items 2-4): it says what it does, runs no installer when
the lock and pyproject did not change (a warm `./dev run` starts at once), refuses a
Python older than 3.11 with the version and the path it found, and makes a `.venv`
made by such a Python anew. Deterministic: a stand-in `uv` records its calls."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "clone"
    project.mkdir()
    for name in ("dev", "requirements.lock", "pyproject.toml"):
        shutil.copy2(ROOT / name, project / name)
    return project


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _fake_venv(project: Path) -> Path:
    """A .venv whose python is the real one and whose uv only records its arguments."""
    venv = project / ".venv"
    _script(venv / "bin" / "python", f'exec "{sys.executable}" "$@"\n')
    log = project / "uv.log"
    _script(venv / "bin" / "uv", f'echo "$*" >> "{log}"\n')
    (venv / "lib").mkdir()
    return log


def _setup(project: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "dev", "setup", "python"],
        cwd=project, env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_warm_setup_runs_no_installer_until_the_lock_or_pyproject_changes(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    log = _fake_venv(project)
    first = _setup(project)
    assert first.returncode == 0, first.stderr
    assert "installing the locked dependencies" in first.stderr  # it says what it does
    assert len(log.read_text().splitlines()) == 2  # the lock, then Synapse itself
    second = _setup(project)
    assert second.returncode == 0, second.stderr
    assert len(log.read_text().splitlines()) == 2  # nothing ran
    assert "installing" not in second.stderr
    with (project / "pyproject.toml").open("a") as fh:
        fh.write("\n# changed\n")
    third = _setup(project)
    assert third.returncode == 0 and len(log.read_text().splitlines()) == 4


def test_a_python_older_than_3_11_is_named_with_its_path(tmp_path: Path) -> None:
    project = _project(tmp_path)
    old = tmp_path / "bin" / "python3"
    _script(old, "echo 3.10\nexit 1\n")
    done = _setup(project, PATH=f"{old.parent}:{os.environ['PATH']}")
    assert done.returncode == 2
    assert f"Synapse needs Python >= 3.11 (found 3.10 at {old})" in done.stderr
    assert not (project / ".venv").exists()


def test_a_venv_made_by_an_old_python_is_made_anew(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _script(project / ".venv" / "bin" / "python", "echo 3.10\nexit 1\n")
    log = project / "uv.log"
    # python3 on PATH: the real interpreter, whose `-m venv DIR` makes a stand-in venv
    # (its python the real one, its uv a recorder) so no download happens here.
    fake_venv = (
        'mkdir -p "$3/bin" "$3/lib"\n'
        f'printf \'#!/bin/sh\\nexec "%s" "$@"\\n\' "{sys.executable}" > "$3/bin/python"\n'
        f'printf \'#!/bin/sh\\necho "$*" >> "%s"\\n\' "{log}" > "$3/bin/uv"\n'
        'chmod +x "$3/bin/python" "$3/bin/uv"\n'
    )
    python3 = tmp_path / "bin" / "python3"
    _script(
        python3,
        f'if [ "$1" = -m ] && [ "$2" = venv ]; then\n{fake_venv}exit 0\nfi\n'
        f'exec "{sys.executable}" "$@"\n',
    )
    done = _setup(project, PATH=f"{python3.parent}:{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    assert "making .venv anew: it was made by Python 3.10" in done.stderr
    assert len(log.read_text().splitlines()) == 2  # installed into the new one
    new_python = str(project / ".venv" / "bin" / "python")
    check = subprocess.run(
        [new_python, "-c", "import sys; print(sys.version_info >= (3, 11))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert check.stdout.strip() == "True"
