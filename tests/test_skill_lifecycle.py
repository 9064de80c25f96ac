"""Issue 19 item 6: the skill lifecycle (skill:list, info, import, rollback, delete;
versions on every change; SKILL.md metadata in info and search), with real skills on
disk, real archives (malicious ones too), through the real router and a real bash
session, and the wrappers in $SYNAPSE_HOME/bin following every change."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.commands import CommandOutput, FailureCategory
from synapse_lsp.config import Settings
from synapse_lsp.extensions import skills as skills_module
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.frontmatter import parse_front_matter
from synapse_lsp.router import BashRouter

SKILL_MD = """\
---
name: {name}
description: {description}
domain: documents
tags: [pdf, extraction]
tools:
  - sh
  - no-such-program-xyz
---
# {name}

Steps for {name}.
"""


def write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def skill_folder(base: Path, name: str, description: str, script: str = "hello") -> Path:
    folder = base / name
    write(folder / "SKILL.md", SKILL_MD.format(name=name, description=description))
    write(folder / "scripts" / f"{script}.sh", f"# Say {description}.\necho '{description}'\n")
    return folder


@pytest.fixture
def home(settings: Settings) -> Path:
    root = settings.synapse_home
    plain = root / "skills" / "plain"
    write(plain / "SKILL.md", "---\nname: plain\ndescription: Nothing special\n---\nBody.\n")
    return root


@pytest.fixture
async def registry(home: Path, settings: Settings) -> AsyncIterator[ExtensionRegistry]:
    # No watcher: every change below must show through the commands' own refresh.
    reg = ExtensionRegistry(settings, None, watch=False, serve_socket=False)
    await reg.start()
    try:
        yield reg
    finally:
        await reg.close()


@pytest.fixture
async def ext(router: BashRouter, registry: ExtensionRegistry) -> BashRouter:
    routed = router.derive(extensions=registry)
    for command in registry.builtins():
        routed.register(command)
    return routed


def wrappers(home: Path) -> set[str]:
    return {p.name for p in (home / "bin").iterdir() if p.name.startswith("skill:")}


def leftovers(home: Path) -> list[str]:
    staging = home / "skills" / ".staging"
    return [p.name for p in staging.iterdir()] if staging.exists() else []


def make_zip(path: Path, members: list[tuple[str, bytes, int | None]]) -> Path:
    """members: (name, data, unix mode or None)."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            if mode is not None:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


def make_tar(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info in members:
            body = data.get(info.name)
            if body is not None:
                info.size = len(body)
                tf.addfile(info, io.BytesIO(body))
            else:
                tf.addfile(info)
    return path


def tar_file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    return info


# ------------------------------------------------------------ list, info, search


async def test_list_info_and_search_use_the_front_matter(
    ext: BashRouter, home: Path, tmp_path: Path
) -> None:
    source = skill_folder(tmp_path / "src", "pdf-tools", "Work with documents")
    assert (await ext.route(f"skill:import {source}")).exit_code == 0
    listed = await ext.route("skill:list")
    assert listed.exit_code == 0, listed.stderr
    assert "pdf-tools: Work with documents  [domain: documents; tags: pdf, extraction]" in (
        listed.stdout
    )
    assert "(1 command)" in listed.stdout and "plain: Nothing special  (0 commands)" in (
        listed.stdout
    )
    info = await ext.route("skill:info pdf-tools")
    assert info.exit_code == 0, info.stderr
    assert "domain: documents" in info.stdout and "tags: pdf, extraction" in info.stdout
    assert "tools: sh (found), no-such-program-xyz (missing from PATH)" in info.stdout
    assert "skill:pdf-tools:hello  Say Work with documents." in info.stdout
    assert info.data["tags"] == ["pdf", "extraction"]
    # `extraction` is only a tag: search finds the skill by it, ranked above body text.
    found = await ext.route("skill:search extraction")
    assert found.data["matches"] == ["pdf-tools"]
    # command:search matches a skill script by its skill's tags and domain too.
    commands = await ext.route("command:search extraction --type skill")
    assert commands.data["matches"] == ["skill:pdf-tools:hello"]
    assert (await ext.route("command:search documents")).data["matches"] == [
        "skill:pdf-tools:hello"
    ]
    missing = await ext.route("skill:info pdf-tool")
    assert missing.exit_code == 1 and "Did you mean: pdf-tools?" in missing.stderr


async def test_every_lifecycle_command_answers_help(ext: BashRouter) -> None:
    for name in ("skill:list", "skill:info", "skill:import", "skill:rollback", "skill:delete"):
        short = await ext.route(f"{name} -h")
        full = await ext.route(f"{name} --help")
        assert short.exit_code == 0 and name in short.stdout, name
        assert full.exit_code == 0 and "Example" in full.stdout, name
    assert (await ext.route("skill:rollback plain two")).exit_code == 2
    assert (await ext.route("skill:info")).exit_code == 2


# ------------------------------------------------------------ import, versions, rollback


async def test_import_folder_then_zip_over_it_keeps_a_version_and_rollback_restores(
    ext: BashRouter, registry: ExtensionRegistry, home: Path, tmp_path: Path
) -> None:
    first = skill_folder(tmp_path / "v1", "greeter", "first greeting", script="greet")
    done = await ext.route(f"skill:import {first}")
    assert done.exit_code == 0, done.stderr
    assert "Imported skill 'greeter'" in done.stdout and "skill:greeter:greet" in done.stdout
    assert "skill:greeter:greet" in wrappers(home)
    assert (await ext.route("echo x | skill:greeter:greet")).stdout == "first greeting\n"

    # The same skill as a zip with one top-level folder and another script.
    second = skill_folder(tmp_path / "v2", "greeter", "second greeting", script="wave")
    archive = make_zip(
        tmp_path / "greeter.zip",
        [
            (f"greeter/{p.relative_to(second).as_posix()}", p.read_bytes(), 0o100644)
            for p in sorted(second.rglob("*"))
            if p.is_file()
        ],
    )
    replaced = await ext.route(f"skill:import {archive}")
    assert replaced.exit_code == 0, replaced.stderr
    assert "kept as version 1" in replaced.stdout
    assert registry.get("skill:greeter:greet") is None
    assert {"skill:greeter:wave"} == {w for w in wrappers(home) if "greeter" in w}
    assert (await ext.route("skill:greeter:wave")).stdout == "second greeting\n"

    info = await ext.route("skill:info greeter")
    assert "1  " in info.stdout and "before import" in info.stdout
    assert info.data["versions"] == [1]

    back = await ext.route("skill:rollback greeter")
    assert back.exit_code == 0, back.stderr
    assert "version 1" in back.stdout and "version 2" in back.stdout
    assert {"skill:greeter:greet"} == {w for w in wrappers(home) if "greeter" in w}
    assert (await ext.route("skill:greeter:greet")).stdout == "first greeting\n"
    # The rollback is undoable: version 2 holds what it replaced.
    again = await ext.route("skill:rollback greeter 2")
    assert again.exit_code == 0, again.stderr
    assert (await ext.route("skill:greeter:wave")).stdout == "second greeting\n"
    nope = await ext.route("skill:rollback greeter 99")
    assert nope.exit_code == 1 and "has no version 99 (kept: 1, 2, 3)" in nope.stderr
    assert leftovers(home) == []


async def test_delete_then_rollback_brings_the_skill_and_its_wrappers_back(
    ext: BashRouter, registry: ExtensionRegistry, home: Path, tmp_path: Path
) -> None:
    source = skill_folder(tmp_path / "src", "temp-skill", "temporary", script="run")
    write(source / "scripts" / "direct", "#!/bin/sh\necho direct\n", 0o755)
    archive = tmp_path / "temp-skill.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:  # SKILL.md at the top, no folder
        for path in sorted(source.rglob("*")):
            tf.add(path, arcname=path.relative_to(source).as_posix(), recursive=False)
    imported = await ext.route(f"skill:import {archive} --name temp-skill")
    assert imported.exit_code == 0, imported.stderr
    assert os.access(home / "skills" / "temp-skill" / "scripts" / "direct", os.X_OK)
    assert (await ext.route("skill:temp-skill:direct")).stdout == "direct\n"
    assert "skill:temp-skill:run" in wrappers(home)
    deleted = await ext.route("skill:delete temp-skill")
    assert deleted.exit_code == 0, deleted.stderr
    assert "kept as version 1" in deleted.stdout
    assert not (home / "skills" / "temp-skill").exists()
    assert registry.get("skill:temp-skill:run") is None
    assert "skill:temp-skill:run" not in wrappers(home)
    gone = await ext.route("skill:temp-skill:run")
    assert gone.exit_code == 127
    info = await ext.route("skill:info temp-skill")
    assert info.exit_code == 0 and "not installed" in info.stdout
    assert (await ext.route("skill:delete temp-skill")).exit_code == 1

    restored = await ext.route("skill:rollback temp-skill")
    assert restored.exit_code == 0, restored.stderr
    assert "version 1 (kept before delete)" in restored.stdout
    assert "skill:temp-skill:run" in wrappers(home)
    assert (await ext.route("skill:temp-skill:run")).stdout == "temporary\n"


async def test_versions_are_bounded(
    ext: BashRouter, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skills_module, "MAX_VERSIONS", 3)
    for n in range(6):
        source = skill_folder(tmp_path / f"v{n}", "churn", f"version {n}")
        assert (await ext.route(f"skill:import {source}")).exit_code == 0
    kept = skills_module.list_versions(home / "skills", "churn")
    assert [v.number for v in kept] == [3, 4, 5]
    assert sorted(p.name for p in (home / "skills" / ".versions" / "churn").iterdir()) == [
        "3",
        "3.json",
        "4",
        "4.json",
        "5",
        "5.json",
    ]
    oldest = (kept[0].path / "SKILL.md").read_text()
    assert "version 2" in oldest  # version 3 holds the state before the 4th import


async def test_reinforce_keeps_the_skills_the_sub_agent_changed(
    ext: BashRouter, home: Path, tmp_path: Path
) -> None:
    source = skill_folder(tmp_path / "src", "editable", "before")
    assert (await ext.route(f"skill:import {source}")).exit_code == 0
    skill_md = home / "skills" / "editable" / "SKILL.md"

    async def subagent(task_type: str, prompt: str, description: str) -> CommandOutput:
        skill_md.write_text(skill_md.read_text().replace("before", "after"))
        return CommandOutput("changed SKILL.md\n")

    routed = ext.derive(subagent=subagent)
    done = await routed.route('skill:reinforce "made it better"')
    assert done.exit_code == 0, done.stderr
    assert "previous versions kept: editable (version 1)" in done.stdout
    assert [v.reason for v in skills_module.list_versions(home / "skills", "editable")] == [
        "reinforce"
    ]
    assert skills_module.list_versions(home / "skills", "plain") == []  # unchanged
    assert leftovers(home) == []
    back = await routed.route("skill:rollback editable 1")
    assert back.exit_code == 0 and "description: before" in skill_md.read_text()


async def test_read_only_mode_refuses_changes(
    ext: BashRouter, home: Path, tmp_path: Path, settings: Settings
) -> None:
    source = skill_folder(tmp_path / "src", "ro", "read only")
    locked = ext.derive(settings=settings.with_overrides({"sandbox": "read-only"})[0])
    refused = await locked.route(f"skill:import {source}")
    assert refused.exit_code != 0
    assert not (home / "skills" / "ro").exists()


# ------------------------------------------------------------ hostile input


def _hostile(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    ok_md = b"---\nname: evil\ndescription: x\n---\n"
    out: dict[str, tuple[Path, str]] = {}
    out["dotdot-zip"] = (
        make_zip(
            tmp_path / "dotdot.zip",
            [("SKILL.md", ok_md, None), ("../escaped.txt", b"pwned", None)],
        ),
        "leaves the skill folder",
    )
    out["absolute-zip"] = (
        make_zip(
            tmp_path / "absolute.zip",
            [("SKILL.md", ok_md, None), (str(tmp_path / "abs-escaped.txt"), b"pwned", None)],
        ),
        "absolute path",
    )
    out["symlink-zip"] = (
        make_zip(
            tmp_path / "link.zip",
            [("SKILL.md", ok_md, None), ("scripts/x", b"/etc/passwd", stat.S_IFLNK | 0o777)],
        ),
        "is a symlink",
    )
    out["big-zip"] = (
        make_zip(tmp_path / "big.zip", [("SKILL.md", ok_md, None), ("blob", b"0" * 5000, None)]),
        "limit is 4096 per file",
    )
    link = tarfile.TarInfo("scripts/passwd")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    out["symlink-tar"] = (
        make_tar(tmp_path / "link.tar.gz", [tar_file("SKILL.md"), link], {"SKILL.md": ok_md}),
        "is a symlink",
    )
    hard = tarfile.TarInfo("hard")
    hard.type = tarfile.LNKTYPE
    hard.linkname = "SKILL.md"
    out["hardlink-tar"] = (
        make_tar(tmp_path / "hard.tar.gz", [tar_file("SKILL.md"), hard], {"SKILL.md": ok_md}),
        "is a hard link",
    )
    out["dotdot-tar"] = (
        make_tar(
            tmp_path / "dotdot.tar.gz",
            [tar_file("SKILL.md"), tar_file("a/../../escaped-tar.txt")],
            {"SKILL.md": ok_md, "a/../../escaped-tar.txt": b"pwned"},
        ),
        "leaves the skill folder",
    )
    out["big-tar"] = (
        make_tar(
            tmp_path / "big.tar.gz",
            [tar_file("SKILL.md"), tar_file("blob")],
            {"SKILL.md": ok_md, "blob": b"0" * 5000},
        ),
        "limit is 4096 per file",
    )
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    out["fifo-tar"] = (
        make_tar(tmp_path / "fifo.tar.gz", [tar_file("SKILL.md"), fifo], {"SKILL.md": ok_md}),
        "not a regular file",
    )
    folder = tmp_path / "linked-folder"
    write(folder / "SKILL.md", ok_md.decode())
    (folder / "secret").symlink_to("/etc/passwd")
    out["symlink-folder"] = (folder, "is a symlink")
    out["not-an-archive"] = (write(tmp_path / "skill.rar", "x"), "not a folder, .zip")
    out["no-skill-md"] = (
        make_zip(tmp_path / "empty.zip", [("a/readme.txt", b"x", None), ("b/x", b"y", None)]),
        "no SKILL.md",
    )
    out["bad-name"] = (
        make_zip(tmp_path / "named.zip", [("SKILL.md", b"---\nname: ../up\n---\n", None)]),
        "not a valid skill name",
    )
    return out


async def test_hostile_archives_are_refused_whole_and_nothing_is_written(
    ext: BashRouter, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skills_module, "MAX_FILE_BYTES", 4096)
    work = tmp_path / "archives"
    work.mkdir()
    before = sorted(p.name for p in (home / "skills").iterdir() if not p.name.startswith("."))
    for case, (path, reason) in _hostile(work).items():
        result = await ext.route(f"skill:import {path}")
        assert result.exit_code == 1, (case, result.stdout)
        assert result.category is FailureCategory.EXECUTION_ERROR, case
        assert reason in result.stderr, (case, result.stderr)
        now = sorted(p.name for p in (home / "skills").iterdir() if not p.name.startswith("."))
        assert now == before, case
        assert leftovers(home) == [], case
    escaped = [*tmp_path.rglob("escaped*"), *(home / "skills").rglob("escaped*")]
    assert escaped == [] and not (tmp_path / "abs-escaped.txt").exists()
    assert not (home / "skills" / "escaped.txt").exists()
    assert not (home / "skills" / ".versions").exists()  # nothing replaced, nothing kept


async def test_a_zip_that_lies_about_its_sizes_is_stopped_while_unpacking(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skills_module, "MAX_FILE_BYTES", 4096)
    archive = make_zip(
        tmp_path / "liar.zip",
        [("SKILL.md", b"---\nname: liar\n---\n", None), ("blob", b"0" * 50_000, None)],
    )
    raw = bytearray(archive.read_bytes())
    # Rewrite the declared uncompressed size of `blob` (local header and central
    # directory) to 10 bytes; the data is stored uncompressed and is 50,000 bytes.
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("blob")
    for offset, size_at in ((info.header_offset, 22),):
        raw[offset + size_at : offset + size_at + 4] = (10).to_bytes(4, "little")
    central = raw.rfind(b"PK\x01\x02")
    raw[central + 24 : central + 28] = (10).to_bytes(4, "little")
    archive.write_bytes(bytes(raw))
    root = home / "skills"
    with pytest.raises(skills_module.SkillStoreError):
        skills_module.import_skill(root, archive)
    assert not (root / "liar").exists() and leftovers(home) == []


def test_front_matter_lists_and_metadata(tmp_path: Path) -> None:
    folder = skill_folder(tmp_path, "meta", "d")
    (skill,), _ = skills_module.scan_skills(tmp_path)
    assert (skill.domain, skill.tags, skill.tools) == (
        "documents",
        ("pdf", "extraction"),
        ("sh", "no-such-program-xyz"),
    )
    write(folder / "SKILL.md", "---\nname: meta\ntags: a b\nrequires: jq, curl\n---\n")
    (skill,), _ = skills_module.scan_skills(tmp_path)
    assert (skill.tags, skill.tools) == (("a", "b"), ("jq", "curl"))
    meta = json.dumps(parse_front_matter("no front matter")[0])
    assert meta == "{}" and os.sep == "/"
