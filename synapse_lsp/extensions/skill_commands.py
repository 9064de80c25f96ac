"""`skill:search`, `skill:load`, `skill:reinforce` (aliases `skill search|load|reinforce`)
and the lifecycle: `skill:list`, `skill:info`, `skill:import`, `skill:rollback`,
`skill:delete`.

Skills live in `$SYNAPSE_HOME/skills/<name>/` (SKILL.md + scripts/); the registry
keeps the index current (the watcher refreshes it), these commands read it through
`SkillSource` (so this module never imports the registry, which imports it). A
command that changes skills keeps the previous version first (`skills.save_version`)
and asks the registry to rescan at once (`SkillStore.refresh`), so the skill's
`skill:<skill>:<script>` commands and wrappers follow before it returns.
"""

from __future__ import annotations

import asyncio
import difflib
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Protocol

from synapse_lsp import catalog
from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory
from synapse_lsp.extensions import skill_files, skill_listing
from synapse_lsp.extensions.search import query_mode, search_invocation
from synapse_lsp.extensions.skill_files import SAFE_NAME
from synapse_lsp.extensions.skills import (
    MAX_VERSIONS,
    SkillInfo,
    SkillStoreError,
    delete_skill,
    import_skill,
    list_versions,
    rollback_skill,
    save_version,
    skills_dir,
)

DEFAULT_LIMIT = 10


class SkillSource(Protocol):
    """Where the skill commands read the current skills (the registry is one)."""

    @property
    def skills(self) -> Mapping[str, SkillInfo]: ...


class SkillStore(SkillSource, Protocol):
    """A source the lifecycle commands can ask to rescan after a change (the registry)."""

    async def refresh(self, kind: Literal["mcp", "skills", "all"] = "all") -> None: ...


def score_skill(skill: SkillInfo, words: list[str]) -> int:
    """3 per word in the name, 2 in the description, domain, tags, tools or a script
    name, 1 in SKILL.md text; 0 when any word is found nowhere."""
    name = skill.name.lower()
    desc = " ".join([skill.description, skill.domain, *skill.tags, *skill.tools]).lower()
    scripts = " ".join(s.stem.lower() + " " + s.summary.lower() for s in skill.scripts)
    body = skill.body.lower()
    total = 0
    for word in words:
        if word in name:
            total += 3
        elif word in desc or word in scripts:
            total += 2
        elif word in body:
            total += 1
        else:
            return 0
    return total


def _regex_score(skill: SkillInfo, pattern: re.Pattern[str]) -> int:
    """2 when the pattern matches the name, 1 when only the rest of the skill's text."""
    if pattern.search(skill.name.lower()):
        return 2
    scripts = " ".join(s.stem + " " + s.summary for s in skill.scripts)
    meta = " ".join([skill.domain, *skill.tags, *skill.tools])
    text = f"{skill.description}\n{meta}\n{scripts}\n{skill.body}".lower()
    return 1 if pattern.search(text) else 0


@catalog.builtin
class SkillSearchCommand(catalog.Described):
    name = "skill:search"
    traits = catalog.Traits(
        effect=catalog.Effect.READ,
        shape=catalog.Shape.SEARCH,
        read_only_safe=True,
        prompt_rank=6,
        aliases=("skill search",),
    )
    invocation = staticmethod(search_invocation)
    summary = "Find skills by what they do (name, description, tags, SKILL.md text)."
    usage = 'skill:search ["<what you need>"] [--regex] [--limit N]'

    def __init__(self, source: SkillSource) -> None:
        self.source = source

    def prompt_section(self) -> str:
        """The system prompt's list of installed skills (skill_listing.py)."""
        return skill_listing.prompt_listing(self.source.skills.values())

    def section_pending(self) -> bool:
        """Whether the source has not indexed its skills yet (the registry's `version`
        is 0 until its first scan; a source without one is always ready)."""
        return bool(getattr(self.source, "version", 1) == 0)

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Alias: skill search "<what you need>"
  Every word must appear in the skill's name, description, domain, tags, tools, script
  names or SKILL.md; name matches rank first, then description and metadata. Prints
  `name: description` and the skill's commands.
  No query (or "") lists every skill; a query whose only special characters are * and ?
  is a glob on the skill's name ("pdf*"); one with other regex characters, or --regex,
  is a regular expression (case-insensitive) over the same text. The same rule as
  command:search.
  --regex     the query is a regular expression whatever it holds
  --limit N   at most N skills (default {DEFAULT_LIMIT})
  Next: skill:load <name> prints the skill's SKILL.md.
Examples:
  skill:search pdf
  skill search "extract text from pdf\""""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options={"limit"}, flags={"regex"})
            limit = non_negative_int("limit", args.options.get("limit"), DEFAULT_LIMIT)
            query = " ".join(args.positional)
            try:
                mode, pattern = query_mode(query, "regex" in args.flags)
            except ValueError as exc:
                raise ArgError(str(exc)) from None
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        skills = list(self.source.skills.values())
        if mode == "keywords":
            words = query.lower().split()
            scored = [(score_skill(s, words), s) for s in skills]
        elif mode == "all":
            scored = [(1, s) for s in skills]
        elif mode == "glob":
            assert pattern is not None
            scored = [(int(pattern.fullmatch(s.name.lower()) is not None), s) for s in skills]
        else:
            assert pattern is not None
            scored = [(_regex_score(s, pattern), s) for s in skills]
        found = sorted((p for p in scored if p[0] > 0), key=lambda p: (-p[0], p[1].name))
        if not found:
            where = skills_dir(ctx.settings.synapse_home)
            return CommandOutput(
                f"No skill matches {' '.join(args.positional)!r} ({len(skills)} skills in "
                f"{where}).\n",
                data={"matches": []},
            )
        lines: list[str] = []
        for _, skill in found[:limit]:
            lines.append(f"{skill.name}: {skill.description or '(no description)'}")
            for script in skill.scripts:
                lines.append(f"  {script.command_name}  {script.summary}")
        lines.append("Load one with: skill:load <name>")
        return CommandOutput(
            "\n".join(lines) + "\n", data={"matches": [s.name for _, s in found[:limit]]}
        )


@catalog.builtin
class SkillLoadCommand(catalog.Described):
    name = "skill:load"
    traits = catalog.Traits(
        effect=catalog.Effect.READ,
        shape=catalog.Shape.TOOL,
        verb="Load skill",
        read_only_safe=True,
        prompt_rank=7,
        aliases=("skill load",),
    )
    summary = "Print a skill's SKILL.md and list its commands."
    usage = "skill:load <name>"

    def __init__(self, source: SkillSource) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Alias: skill load <name>
  <name>   the skill's folder name, as skill:search prints it
Example:
  skill:load pdf-editor"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        wanted = _one_skill_name(self.name, argv)
        if isinstance(wanted, CommandOutput):
            return wanted
        skill = self.source.skills.get(wanted)
        if skill is None:
            return _not_found(self.name, wanted, self.source)
        text = ""
        if skill.skill_md is not None:
            try:
                text = skill.skill_md.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                return CommandOutput(
                    stderr=f"skill:load: cannot read {skill.skill_md}: {exc}\n", exit_code=1
                )
        else:
            text = f"# {skill.name}\n(This skill has no SKILL.md.)\n"
        lines = [text.rstrip("\n"), "", f"Skill folder: {skill.path}"]
        if skill.scripts:
            lines.append("Commands (run `<name> -h` for usage):")
            lines += [f"  {s.command_name}  {s.summary}" for s in skill.scripts]
        return CommandOutput("\n".join(lines) + "\n", data={"skill": skill.name})


@catalog.builtin
class SkillReinforceCommand(catalog.Described):
    name = "skill:reinforce"
    traits = catalog.Traits(
        effect=catalog.Effect.RUN,
        shape=catalog.Shape.TOOL,
        prompt_rank=8,
        aliases=("skill reinforce",),
    )
    summary = "After a task: have a skill sub-agent improve or create a skill from it."
    usage = 'skill:reinforce "<what was done and what worked>" [--skill NAME]'

    def __init__(self, source: SkillStore) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Alias: skill reinforce "<summary>"
  <summary>     what the task was, the steps that worked, commands and pitfalls; the
                sub-agent sees nothing else of this conversation
  --skill NAME  improve this existing skill (default: the sub-agent decides)
  Runs a task:skill:enhance sub-agent that edits SKILL.md / scripts under
  $SYNAPSE_HOME/skills/; new scripts become skill:* commands at once. Each skill it
  changes or deletes is kept as it was first (undo: skill:rollback <name>).
Example:
  skill:reinforce "Converted CSV to Parquet with pandas; needed pyarrow" --skill data-tools"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options={"skill"})
            summary = " ".join(args.positional).strip()
            if not summary:
                raise ArgError(
                    "missing <summary>: describe the task and what worked (the skill sub-agent "
                    "sees nothing else)"
                )
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        root = skills_dir(ctx.settings.synapse_home)
        if ctx.in_subagent:
            return CommandOutput(
                "skill:reinforce is not run inside a sub-agent (no nested sub-agents). "
                "Finish your work and give your final answer.\n",
                data={"blocked_nested_task": True},
            )
        if ctx.subagent is None:
            return CommandOutput(
                stderr="skill:reinforce needs a sub-agent executor (it runs task:skill:enhance) "
                "and none is configured here. To improve a skill by hand, edit "
                f"{root}/<skill>/SKILL.md or add a script under {root}/<skill>/scripts/ "
                "(it becomes skill:<skill>:<script> at once).\n",
                exit_code=1,
                category=FailureCategory.DEPENDENCY_MISSING,
            )
        target = args.options.get("skill")
        existing = (
            "\n".join(f"- {s.name}: {s.description}" for s in self.source.skills.values())
            or "(none yet)"
        )
        goal = (
            f"Improve the skill {target!r}."
            if target
            else "Improve the best-fitting skill, or create a new one if none fits and the "
            "task is reusable."
        )
        prompt = f"""\
Improve Synapse's skills from a finished task.

Task summary (from the agent that did it):
{summary}

Skills live in {root}/<name>/: SKILL.md starts with front-matter
---
name: <name>
description: <one line: what it is for and when to use it>
---
followed by instructions; scripts/ holds runnable scripts (Python, sh, bash, node) whose
docstring or leading comment gives a one-line description and a `Usage:` line. Each
script becomes the command skill:<name>:<script-stem>.

Existing skills:
{existing}

{goal}
Keep skills small and general; do not copy secrets or task-specific data. End with a short
list of the files you changed."""
        existed = set(self.source.skills)
        names = [target] if target else list(existed)
        before = await asyncio.to_thread(_copies, root, names)
        try:
            out = await ctx.subagent("skill:enhance", prompt, "improve skills")
        finally:
            saved = await asyncio.to_thread(_keep_changed, root, before)
            await self.source.refresh("skills")
        created = sorted(set(self.source.skills) - existed)
        if saved:
            note = ", ".join(f"{name} (version {n})" for name, n in saved)
            out.stdout += f"[previous versions kept: {note}; undo: skill:rollback <name>]\n"
        if created:
            out.stdout += f"[new skills: {', '.join(created)}; undo: skill:delete <name>]\n"
        # What changed, for whoever ran it (a background enhancement announces it).
        out.data = {**out.data, "changed": [list(pair) for pair in saved], "created": created}
        return out


def _copies(root: Path, names: list[str]) -> list[tuple[str, str, Path]]:
    """(name, fingerprint, copy) of each existing skill, copied under skills/.staging."""
    import tempfile

    out: list[tuple[str, str, Path]] = []
    for name in names:
        folder = root / name
        fingerprint = skill_files.fingerprint(folder)
        if fingerprint is None:
            continue
        (root / ".staging").mkdir(parents=True, exist_ok=True)
        holder = Path(tempfile.mkdtemp(dir=root / ".staging"))
        try:
            shutil.copytree(folder, holder / name, symlinks=True)
        except OSError:
            shutil.rmtree(holder, ignore_errors=True)
            continue
        out.append((name, fingerprint, holder / name))
    return out


def _keep_changed(root: Path, before: list[tuple[str, str, Path]]) -> list[tuple[str, int]]:
    """Keep the copy of every skill that changed (or vanished) as its version; drop the
    rest. Returns (name, version number) of those kept."""
    saved: list[tuple[str, int]] = []
    for name, fingerprint, copy in before:
        try:
            if skill_files.fingerprint(root / name) != fingerprint:
                saved.append((name, save_version(root, name, "reinforce", source=copy).number))
        except OSError:
            pass
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)
    return saved


# ------------------------------------------------------------ lifecycle


def _versions_line(root: Path, name: str) -> str:
    kept = list_versions(root, name)
    return f"{len(kept)} version{'s' if len(kept) != 1 else ''} kept" if kept else ""


def _meta_bits(skill: SkillInfo) -> str:
    bits = [f"domain: {skill.domain}"] if skill.domain else []
    if skill.tags:
        bits.append(f"tags: {', '.join(skill.tags)}")
    return f"  [{'; '.join(bits)}]" if bits else ""


def list_text(skills: Mapping[str, SkillInfo], root: Path) -> str:
    """What `skill:list` (and the REPL's /skills) prints."""
    if not skills:
        return (
            f"No skills in {root}. Add one with skill:import <folder|.zip|.tar.gz>, or "
            "create <name>/SKILL.md there.\n"
        )
    lines: list[str] = []
    for skill in sorted(skills.values(), key=lambda s: s.name):
        count = len(skill.scripts)
        extra = [f"{count} command{'s' if count != 1 else ''}"]
        if kept := _versions_line(root, skill.name):
            extra.append(kept)
        described = skill.description or "(no description)"
        lines.append(f"{skill.name}: {described}{_meta_bits(skill)}  ({', '.join(extra)})")
    lines.append("Details: skill:info <name>; instructions: skill:load <name>")
    return "\n".join(lines) + "\n"


def _refuse_read_only(name: str, ctx: CommandContext) -> CommandOutput | None:
    if ctx.settings.sandbox != "read-only":
        return None
    return CommandOutput(
        stderr=f"{name}: refused: the sandbox mode is read-only (setting `sandbox`), and "
        "this command changes $SYNAPSE_HOME/skills\n",
        exit_code=126,
        category=FailureCategory.PERMISSION_DENIED,
    )


def _store_error(name: str, exc: SkillStoreError) -> CommandOutput:
    return CommandOutput(
        stderr=f"{name}: {exc}\n", exit_code=1, category=FailureCategory.EXECUTION_ERROR
    )


@catalog.builtin
class SkillListCommand(catalog.Described):
    name = "skill:list"
    traits = catalog.Traits(effect=catalog.Effect.READ)
    summary = "List the installed skills: description, domain, tags, commands, versions."
    usage = "skill:list"

    def __init__(self, source: SkillSource) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  One line per skill: `name: description  [domain: D; tags: T]  (N commands, M versions
  kept)`. Versions are earlier states kept by skill:import, skill:reinforce,
  skill:rollback and skill:delete (the newest {MAX_VERSIONS} per skill).
  Next: skill:info <name> for one skill's details, skill:search <words> to find one.
Example:
  skill:list"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options=set())
            if args.positional:
                raise ArgError("skill:list takes no arguments (find skills with skill:search)")
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        root = skills_dir(ctx.settings.synapse_home)
        skills = self.source.skills
        return CommandOutput(list_text(skills, root), data={"skills": sorted(skills)})


@catalog.builtin
class SkillInfoCommand(catalog.Described):
    name = "skill:info"
    traits = catalog.Traits(effect=catalog.Effect.READ)
    summary = "Show a skill's metadata (description, domain, tags, tools), commands, versions."
    usage = "skill:info <name>"

    def __init__(self, source: SkillSource) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <name>   the skill's folder name, as skill:list prints it
  Metadata comes from SKILL.md's front-matter: description, domain, tags (a list) and
  tools (programs the skill needs; each is looked up on PATH and shown as found or
  missing). Versions are listed newest first with why they were kept; a deleted skill
  whose versions remain is shown too (restore it with skill:rollback <name>).
Example:
  skill:info pdf-editor"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        wanted = _one_skill_name(self.name, argv)
        if isinstance(wanted, CommandOutput):
            return wanted
        root = skills_dir(ctx.settings.synapse_home)
        skill = self.source.skills.get(wanted)
        kept = list_versions(root, wanted) if SAFE_NAME.match(wanted) else []
        if skill is None and not kept:
            return _not_found(self.name, wanted, self.source)
        lines: list[str] = [f"name: {wanted}"]
        if skill is None:
            lines.append("(not installed: deleted; its versions are kept)")
        else:
            lines.append(f"description: {skill.description or '(none)'}")
            lines.append(f"domain: {skill.domain or '(none)'}")
            lines.append(f"tags: {', '.join(skill.tags) or '(none)'}")
            tools = [
                f"{t} ({'found' if shutil.which(t) else 'missing from PATH'})" for t in skill.tools
            ]
            lines.append(f"tools: {', '.join(tools) or '(none)'}")
            lines.append(f"folder: {skill.path}")
            if skill.scripts:
                lines.append("commands:")
                lines += [f"  {s.command_name}  {s.summary}" for s in skill.scripts]
            else:
                lines.append("commands: (none)")
        if kept:
            lines.append(f"versions (newest first; at most {MAX_VERSIONS} kept):")
            lines += [f"  {v.number}  {v.saved_at}  before {v.reason}" for v in reversed(kept)]
            lines.append(f"Roll back with: skill:rollback {wanted} [version]")
        else:
            lines.append("versions: (none kept yet)")
        data = {
            "skill": wanted,
            "installed": skill is not None,
            "domain": skill.domain if skill else "",
            "tags": list(skill.tags) if skill else [],
            "tools": list(skill.tools) if skill else [],
            "versions": [v.number for v in kept],
        }
        return CommandOutput("\n".join(lines) + "\n", data=data)


def _not_found(command: str, wanted: str, source: SkillSource) -> CommandOutput:
    close = difflib.get_close_matches(wanted, list(source.skills), n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return CommandOutput(
        stderr=f"{command}: no skill named {wanted!r}.{hint}\n",
        exit_code=1,
        category=FailureCategory.NOT_FOUND,
        data={
            "hint": "Hint: No installed skill has that name (not a usage problem): "
            "`skill:list` lists the installed skills, `skill:search <words>` finds one by "
            "what it does."
        },
    )


@catalog.builtin
class SkillImportCommand(catalog.Described):
    name = "skill:import"
    traits = catalog.Traits(effect=catalog.Effect.RUN)
    summary = "Install a skill from a folder, .zip or .tar.gz (checked; previous version kept)."
    usage = "skill:import <folder|archive.zip|archive.tar.gz> [--name NAME]"

    def __init__(self, source: SkillStore) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <folder|archive>  a skill folder, or a .zip / .tar.gz / .tgz / .tar holding one:
                    SKILL.md at its top or in its single top-level folder
  --name NAME       the skill's name (default: SKILL.md's `name:`, else the folder's)
  Archives are checked before anything is written and refused whole when a member
  has an absolute path or `..`, is a symlink, hard link or device, or is too big
  (20 MiB a file, 50 MiB and 2000 files in all); a folder may hold no symlinks.
  The skill is assembled aside and renamed into $SYNAPSE_HOME/skills/<name> in one
  step: never half a skill. Over an existing skill, that one is kept as a version
  first (undo: skill:rollback <name>). Its scripts are skill:<name>:<script> at once.
Examples:
  skill:import ./pdf-editor
  skill:import ~/Downloads/pdf-editor.zip --name pdf"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options={"name"})
            if len(args.positional) != 1:
                raise ArgError("expected one folder or archive to import")
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        if (refused := _refuse_read_only(self.name, ctx)) is not None:
            return refused
        root = skills_dir(ctx.settings.synapse_home)
        source = ctx.resolve(args.positional[0])
        try:
            done = await asyncio.to_thread(import_skill, root, source, args.options.get("name"))
        except SkillStoreError as exc:
            return _store_error(self.name, exc)
        await self.source.refresh("skills")
        skill = self.source.skills.get(done.name)
        lines = [f"Imported skill {done.name!r} ({done.files} files) into {done.path}."]
        if done.replaced is not None:
            lines.append(
                f"The skill it replaced is kept as version {done.replaced.number} "
                f"(undo: skill:rollback {done.name})."
            )
        if skill is not None and skill.scripts:
            lines.append("Commands:")
            lines += [f"  {s.command_name}  {s.summary}" for s in skill.scripts]
        lines.append(f"Next: skill:load {done.name}")
        data = {"skill": done.name, "replaced_version": done.replaced and done.replaced.number}
        return CommandOutput("\n".join(lines) + "\n", data=data)


@catalog.builtin
class SkillRollbackCommand(catalog.Described):
    name = "skill:rollback"
    traits = catalog.Traits(effect=catalog.Effect.RUN)
    summary = "Restore a kept version of a skill (the newest by default); undoable."
    usage = "skill:rollback <name> [version]"

    def __init__(self, source: SkillStore) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <name>     the skill (installed, or deleted with versions kept)
  [version]  a number from skill:info <name> (default: the newest)
  The skill as it is now is kept as a new version first, so a rollback can itself be
  rolled back. Brings back a deleted skill and its skill:<name>:* commands.
Examples:
  skill:rollback pdf-editor
  skill:rollback pdf-editor 3"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options=set())
            if len(args.positional) not in (1, 2):
                raise ArgError("expected a skill name and optionally a version number")
            number = None
            if len(args.positional) == 2:
                if not args.positional[1].isdigit():
                    raise ArgError(f"version must be a number, not {args.positional[1]!r}")
                number = int(args.positional[1])
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        if (refused := _refuse_read_only(self.name, ctx)) is not None:
            return refused
        name = args.positional[0]
        root = skills_dir(ctx.settings.synapse_home)
        existed = (root / name).is_dir()
        try:
            restored, saved = await asyncio.to_thread(rollback_skill, root, name, number)
        except SkillStoreError as exc:
            return _store_error(self.name, exc)
        await self.source.refresh("skills")
        text = (
            f"Restored skill {name!r} to version {restored.number} (kept before {restored.reason})."
        )
        if saved is not None:
            text += f" What it replaced is version {saved.number}."
        elif existed:
            text += " It already was that version: nothing new was kept."
        return CommandOutput(
            text + "\n",
            data={"skill": name, "restored": restored.number, "saved": saved and saved.number},
        )


@catalog.builtin
class SkillDeleteCommand(catalog.Described):
    name = "skill:delete"
    traits = catalog.Traits(effect=catalog.Effect.RUN)
    summary = "Remove a skill and its commands (kept as a version: skill:rollback restores it)."
    usage = "skill:delete <name>"

    def __init__(self, source: SkillStore) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <name>   the skill's folder name, as skill:list prints it
  Its skill:<name>:* commands and wrappers disappear at once; the folder is kept as
  the skill's newest version (the newest {MAX_VERSIONS} are kept).
Example:
  skill:delete old-helper"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        name = _one_skill_name(self.name, argv)
        if isinstance(name, CommandOutput):
            return name
        if (refused := _refuse_read_only(self.name, ctx)) is not None:
            return refused
        if name not in self.source.skills:
            return _not_found(self.name, name, self.source)
        root = skills_dir(ctx.settings.synapse_home)
        try:
            saved = await asyncio.to_thread(delete_skill, root, name)
        except SkillStoreError as exc:
            return _store_error(self.name, exc)
        await self.source.refresh("skills")
        return CommandOutput(
            f"Deleted skill {name!r}; kept as version {saved.number} "
            f"(restore: skill:rollback {name}).\n",
            data={"skill": name, "version": saved.number},
        )


def _one_skill_name(command: str, argv: list[str]) -> str | CommandOutput:
    """The one skill name `command` takes, or its usage error."""
    try:
        args = parse_args(argv, options=set())
        if len(args.positional) != 1:
            raise ArgError("expected exactly one skill name")
    except ArgError as exc:
        return CommandOutput.usage_error(command, str(exc))
    return args.positional[0]
