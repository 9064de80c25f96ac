"""`skill:search`, `skill:load`, `skill:reinforce` (aliases `skill search|load|reinforce`).

Skills live in `$SYNAPSE_HOME/skills/<name>/` (SKILL.md + scripts/); the registry
keeps the index current (the watcher refreshes it), these commands read it through
`SkillSource` (so this module never imports the registry, which imports it).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Protocol

from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory
from synapse_lsp.extensions.search import query_mode
from synapse_lsp.extensions.skills import SkillInfo, skills_dir

DEFAULT_LIMIT = 10


class SkillSource(Protocol):
    """Where the skill commands read the current skills (the registry is one)."""

    @property
    def skills(self) -> Mapping[str, SkillInfo]: ...


def score_skill(skill: SkillInfo, words: list[str]) -> int:
    """3 per word in the name, 2 in the description or a script name, 1 in SKILL.md text;
    0 when any word is found nowhere."""
    name = skill.name.lower()
    desc = skill.description.lower()
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
    text = f"{skill.description}\n{scripts}\n{skill.body}".lower()
    return 1 if pattern.search(text) else 0


class SkillSearchCommand:
    name = "skill:search"
    summary = "Find skills by what they do (name, description, SKILL.md text)."
    usage = 'skill:search ["<what you need>"] [--regex] [--limit N]'

    def __init__(self, source: SkillSource) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Alias: skill search "<what you need>"
  Every word must appear in the skill's name, description, script names or SKILL.md;
  name matches rank first. Prints `name: description` and the skill's commands.
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


class SkillLoadCommand:
    name = "skill:load"
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
        try:
            args = parse_args(argv, options=set())
            if len(args.positional) != 1:
                raise ArgError("expected exactly one skill name")
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        wanted = args.positional[0]
        skill = self.source.skills.get(wanted)
        if skill is None:
            close = difflib.get_close_matches(wanted, list(self.source.skills), n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            return CommandOutput(
                stderr=f"skill:load: no skill named {wanted!r}.{hint} Find skills with "
                "`skill:search <words>`.\n",
                exit_code=1,
                category=FailureCategory.NOT_FOUND,
            )
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


class SkillReinforceCommand:
    name = "skill:reinforce"
    summary = "After a task: have a skill sub-agent improve or create a skill from it."
    usage = 'skill:reinforce "<what was done and what worked>" [--skill NAME]'

    def __init__(self, source: SkillSource) -> None:
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
  $SYNAPSE_HOME/skills/; new scripts become skill:* commands at once.
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
        return await ctx.subagent("skill:enhance", prompt, "improve skills")
