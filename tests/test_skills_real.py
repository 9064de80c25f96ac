"""Issue 32 item 4: real skills (Anthropic's public pdf, docx, xlsx, skill-creator…) work
as their SKILL.md says. Small fixture skills in the public shapes: the prompt lists the
skills, data files beside the scripts are no warnings, a rollback to the version a skill
already is keeps no copy, scripts in sub-folders are commands and a script importing its
own package (`from scripts.quick_validate import …`) runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.agent import prompts
from synapse_lsp.agent.session_model import SessionModel
from synapse_lsp.config import Settings
from synapse_lsp.extensions import skills as skills_module
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.router import BashRouter

SKILL_MD = "---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps.\n"
LONG = (
    "Comprehensive document creation, editing, and analysis with support for tracked "
    "changes, comments, formatting preservation, and text extraction. When Claude needs "
    "to work with professional documents (.docx files)"
)


def write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def make_skill(root: Path, name: str, description: str) -> Path:
    folder = root / name
    write(folder / "SKILL.md", SKILL_MD.format(name=name, description=description))
    return folder


@pytest.fixture
def home(settings: Settings) -> Path:
    skills = settings.synapse_home / "skills"
    pdf = make_skill(skills, "pdf", "PDF manipulation toolkit. Extract text and tables.")
    write(pdf / "scripts" / "check_fillable_fields.py", '"""Check fields."""\nprint("ok")\n')
    docx = make_skill(skills, "docx", LONG)
    scripts = docx / "scripts"
    write(scripts / "__init__.py", "")
    write(scripts / "document.py", '"""Edit a document."""\nprint("document")\n')
    write(
        scripts / "office" / "unpack.py",
        '"""Unpack an Office file.\n\nUsage: unpack.py <file> <dir>\n"""\n'
        "import os, sys\n\n\ndef main():\n"
        '    print("unpack", sys.argv[1:], os.environ["SYNAPSE_SKILL_DIR"])\n\n\n'
        'if __name__ == "__main__":\n    main()\n',
    )
    write(scripts / "office" / "__init__.py", "")
    write(scripts / "office" / "helpers" / "merge_runs.py", "def merge():\n    return 1\n")
    write(scripts / "office" / "helpers" / "lib.js", "module.exports = 1;\n")
    write(scripts / "office" / "pack.sh", 'echo "pack $*"\n')
    write(scripts / "office" / "schemas" / "wml.xsd", "<xsd:schema/>\n")
    write(scripts / "templates" / "comments.xml", "<w:comments/>\n")
    write(scripts / "fonts" / "Sans.ttf", "not really a font\n")
    write(scripts / "schema.xsd", "<xsd:schema/>\n")
    write(scripts / "data.csv", "a,b\n1,2\n")
    creator = make_skill(skills, "skill-creator", "Guide for creating effective skills.")
    write(creator / "scripts" / "__init__.py", "")
    write(
        creator / "scripts" / "quick_validate.py",
        "def validate_skill(path):\n    return True, f'{path} is valid'\n",
    )
    write(
        creator / "scripts" / "package_skill.py",
        '"""Package a skill.\n\nUsage: python -m scripts.package_skill <skill> [out]\n"""\n'
        "import sys\n\nfrom scripts.quick_validate import validate_skill\n\n"
        "print(validate_skill(sys.argv[1])[1])\n",
    )
    return settings.synapse_home


@pytest.fixture
async def registry(home: Path, settings: Settings) -> AsyncIterator[ExtensionRegistry]:
    reg = ExtensionRegistry(settings, None, serve_socket=False)
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


# ------------------------------------------------------------ A: the prompt


async def test_the_session_prompt_lists_the_skills_after_the_cached_block(
    ext: BashRouter, settings: Settings, workdir: Path
) -> None:
    model = SessionModel(None, lambda: settings, None, lambda: ext, workdir, lambda: None)
    blocks = model.system()
    stable, listing = blocks[0], blocks[1]["text"]
    assert stable["cache_control"] == prompts.CACHE
    # The cached block is the same whatever is installed: no skill in it.
    assert stable["text"] == prompts.system_text(ext.builtins.values())
    assert "- docx:" not in stable["text"]
    assert listing.startswith("# Installed skills")
    lines = listing.splitlines()
    assert "- pdf: PDF manipulation toolkit. Extract text and tables." in lines
    assert "- skill-creator: Guide for creating effective skills." in lines
    docx = next(line for line in lines if line.startswith("- docx: "))
    assert len(docx) - len("- docx: ") <= 120 and docx.endswith("…")
    assert "skill:load <name>" in listing
    assert model.system() is blocks  # built once: the same prompt every turn
    # A sub-agent's prompt lists them too.
    assert any("- pdf:" in b["text"] for b in model.system("general")[1:])


def test_the_listing_is_bounded_and_names_skill_search_for_the_rest(tmp_path: Path) -> None:
    from synapse_lsp.extensions.skill_listing import prompt_listing

    many = [
        skills_module.SkillInfo(
            f"skill{i:03d}", "does things\nacross lines " * 3, tmp_path, None, "", ()
        )
        for i in range(80)
    ]
    text = prompt_listing(many)
    assert len(text) <= 2000
    shown = [line for line in text.splitlines() if line.startswith("- skill")]
    assert 0 < len(shown) <= 50
    assert text.rstrip().endswith(
        f'+{80 - len(shown)} more: skill:search "<what you need>" finds them'
    )
    assert all("\n" not in line and len(line) <= 140 for line in shown)
    few = prompt_listing(many[:3], max_chars=10_000)
    assert "more" not in few and len([x for x in few.splitlines() if x.startswith("- ")]) == 3
    assert prompt_listing([]) == ""


# ------------------------------------------------------------ B: data files


def test_data_files_beside_the_scripts_are_ignored_quietly(home: Path) -> None:
    skills, warnings = skills_module.scan_skills(home / "skills")
    assert warnings == []
    docx = next(s for s in skills if s.name == "docx")
    assert {s.stem for s in docx.scripts} == {"document", "office.pack", "office.unpack"}
    # A script Synapse cannot start is still reported (a script's suffix, or none).
    tools = make_skill(home / "skills", "tools", "Tools")
    write(tools / "scripts" / "convert.rb", "puts 1\n")
    write(tools / "scripts" / "runme", "echo hi\n")
    write(tools / "scripts" / "table.parquet", "PAR1\n")
    _, warnings = skills_module.scan_skills(home / "skills")
    assert [w.split(" skipped")[0] for w in warnings] == [
        "skill 'tools': script 'convert.rb'",
        "skill 'tools': script 'runme'",
    ]
    assert all("skipped: no shebang" in w for w in warnings)


# ------------------------------------------------------------ C: rollback


def test_a_rollback_to_the_version_the_skill_already_is_keeps_no_copy(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = make_skill(root, "pdf", "PDF tools")
    write(folder / "scripts" / "x.py", "print(1)\n")
    skills_module.save_version(root, "pdf", "import")
    write(folder / "scripts" / "x.py", "print(2)\n")
    restored, saved = skills_module.rollback_skill(root, "pdf", 1)
    assert saved is not None and saved.number == 2  # a real change: kept
    assert (folder / "scripts" / "x.py").read_text() == "print(1)\n"
    for _ in range(12):  # already version 1: nothing kept, nothing pushed out
        restored, saved = skills_module.rollback_skill(root, "pdf", 1)
        assert restored.number == 1 and saved is None
    assert [v.number for v in skills_module.list_versions(root, "pdf")] == [1, 2]
    assert (folder / "scripts" / "x.py").read_text() == "print(1)\n"


async def test_skill_rollback_command_to_the_same_version_adds_no_version(
    ext: BashRouter, home: Path
) -> None:
    root = home / "skills"
    skills_module.save_version(root, "pdf", "import")
    done = await ext.route("skill:rollback pdf 1")
    assert done.exit_code == 0, done.stderr
    assert done.data["saved"] is None
    assert "It already was that version: nothing new was kept." in done.stdout
    assert [v.number for v in skills_module.list_versions(root, "pdf")] == [1]


# ------------------------------------------------------------ D: sub-folders, packages


async def test_a_script_in_a_sub_folder_is_a_command_here_and_on_path(
    ext: BashRouter, registry: ExtensionRegistry, home: Path
) -> None:
    names = {c.name for c in registry.commands()}
    assert "skill:docx:office.unpack" in names
    assert "skill:docx:office.pack" in names
    assert not any(w in n for n in names for w in ("merge_runs", "lib", "schemas", "__init__"))
    help_ = await ext.route("skill:docx:office.unpack -h")
    assert help_.stdout.startswith("Usage: skill:docx:office.unpack <file> <dir>")
    done = await ext.route("skill:docx:office.unpack report.docx out")
    assert done.exit_code == 0, done.stderr
    assert done.stdout == f"unpack ['report.docx', 'out'] {home / 'skills' / 'docx'}\n"
    piped = await ext.route("true | skill:docx:office.unpack a b")  # the wrapper on PATH
    assert piped.exit_code == 0, piped.stderr
    assert piped.stdout == f"unpack ['a', 'b'] {home / 'skills' / 'docx'}\n"


async def test_a_script_importing_its_own_package_runs_from_any_folder(
    ext: BashRouter, workdir: Path
) -> None:
    # A `scripts/` of the user's own in the working folder does not shadow the skill's.
    write(workdir / "scripts" / "quick_validate.py", "raise SystemExit('wrong package')\n")
    done = await ext.route("skill:skill-creator:package_skill my-skill")
    assert done.exit_code == 0, done.stderr
    assert done.stdout == "my-skill is valid\n"
    piped = await ext.route("true | skill:skill-creator:package_skill other")
    assert piped.exit_code == 0, piped.stderr
    assert piped.stdout == "other is valid\n"
