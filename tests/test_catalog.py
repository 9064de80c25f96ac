"""A built-in describes itself (`synapse_lsp.catalog`): the gate, the explore gate,
the prompt, summaries, hooks and tool-name hints ask the catalog, and no code outside
the built-ins' own modules dispatches on a built-in's name."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp import catalog
from synapse_lsp.agent import prompts
from synapse_lsp.agent.subagents import ExploreGate
from synapse_lsp.agent.tool_names import unknown_tool_result
from synapse_lsp.builtins import default_builtins
from synapse_lsp.commands import CommandContext, CommandOutput, Layer, Step
from synapse_lsp.config import Settings
from synapse_lsp.policy import hooks
from synapse_lsp.policy.gate import AskingGate
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession
from synapse_lsp.summaries.titles import summarize

PACKAGE = Path(__file__).resolve().parent.parent / "synapse_lsp"


class StampCommand(catalog.Described):
    """A built-in only this test module defines: `stamp <file>` writes a date stamp."""

    name = "stamp"
    traits = catalog.Traits(
        effect=catalog.Effect.WRITE,
        shape=catalog.Shape.EDIT,
        verb="Stamp",
        claude_tool="Stamp",
        tool_aliases=("datestamp",),
        prompt_rank=1,  # between read and write... after `read`, tied with `write`
        aliases=("put stamp",),
        example='Bash(command="stamp path/to/file")',
    )
    summary = "Write today's stamp into a file."
    usage = "stamp <file>"

    def help(self) -> str:
        return f"{self.usage}\n  {self.summary}"

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> catalog.Invocation | None:
        return catalog.Invocation(writes=(argv[1],)) if len(argv) == 2 else None

    @staticmethod
    def hook_input(
        argv: Sequence[str], body: str | None, path: Callable[[str], str]
    ) -> dict[str, Any] | None:
        return {"file_path": path(argv[1])} if len(argv) == 2 else None

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        path = args.get("file_path")
        return f"stamp {path}" if isinstance(path, str) else None

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        await ctx.files.write(ctx.resolve(argv[0]), "stamped\n")
        return CommandOutput(f"Stamped {argv[0]}\n")


@pytest.fixture
def stamp() -> Iterator[StampCommand]:
    catalog.register(StampCommand)
    try:
        yield StampCommand()
    finally:
        catalog.unregister("stamp")


def test_a_builtin_defined_in_a_test_is_treated_as_its_description_says(
    stamp: StampCommand, tmp_path: Path
) -> None:
    # the prompt lists it, in its rank's place
    text = prompts.builtins_section([*default_builtins(), stamp])
    assert "#### stamp" in text
    assert text.index("#### read") < text.index("#### stamp") < text.index("#### plan")
    # its title, its ACP kind and its honest "writes" from the catalog
    summary = summarize("stamp notes.txt")
    assert (summary.kind, summary.title) == ("edit", "Stamp notes.txt")
    assert summarize("put stamp notes.txt").title == "Stamp notes.txt"  # its alias
    # a hook sees Claude Code's tool it says it is
    name, tool_input = hooks.tool_call("stamp notes.txt", tmp_path)
    assert (name, tool_input) == ("Stamp", {"file_path": str(tmp_path / "notes.txt")})
    # a model calling another agent's name for it is told the same call here
    hint = unknown_tool_result("DateStamp", {"file_path": "a.txt"})
    assert "`DateStamp` is `stamp` here" in hint and 'Bash(command="stamp a.txt")' in hint
    # the explore gate refuses it (not read-only safe); a read is fine
    gate = ExploreGate(None)
    assert asyncio.run(gate.check("stamp a.txt", Layer.AGENT, tmp_path)) is not None
    assert asyncio.run(gate.check("read a.txt", Layer.AGENT, tmp_path)) is None


async def test_the_gate_judges_a_test_builtin_by_the_paths_it_writes(
    stamp: StampCommand, tmp_path: Path, shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "elsewhere.txt"
    settings = Settings(
        synapse_home=tmp_path / "home",
        sandbox="workspace-write",
        permission="ask-writes-outside-workspace",
    )
    asked: list[str] = []

    async def ask(question: Any) -> str | None:
        asked.append(question.message)
        return None  # the user does not answer: denied

    policy = AskingGate(settings, root, ask)
    denied = await policy.check(
        f"stamp {outside}", Layer.AGENT, root, [Step(f"stamp {outside}", Layer.AGENT)]
    )
    assert denied is not None and asked and str(outside) in asked[0]
    asked.clear()
    inside = await policy.check(
        "stamp in.txt", Layer.AGENT, root, [Step("stamp in.txt", Layer.AGENT)]
    )
    assert inside is None and not asked
    # and the router runs it through its alias, as a built-in
    router = BashRouter(shell, settings)
    router.register(stamp)
    result = await router.route("put stamp in.txt")
    assert result.exit_code == 0, result.stderr
    assert (workdir / "in.txt").read_text() == "stamped\n"


def test_a_fresh_process_knows_every_builtin_before_any_router_exists() -> None:
    code = (
        "from synapse_lsp.summaries.titles import summarize\n"
        "print(summarize('tools search pdf').title, '|', summarize('write a.txt x').title)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Search `pdf` | Write a.txt"


# ------------------------------------------------------------ nobody dispatches on a name

# Words that are both a built-in's name and a value of another vocabulary: an ACP tool
# kind or a summary type (`kind == "edit"` is a kind, not the `edit` command). Checked
# by module: only these modules hold those vocabularies.
_VOCABULARIES: dict[str, frozenset[str]] = {
    "summaries/titles.py": frozenset({"read", "edit", "search"}),
    "acp/updates.py": frozenset({"read", "edit", "search"}),
    "lsp/protocol.py": frozenset({"read", "edit", "search"}),
    "lsp/updates.py": frozenset({"edit"}),  # a command's result data key
    "agent/prompts.py": frozenset({"skill:search"}),  # the sub-agent type task:skill:search
}


def _owners() -> set[Path]:
    return {Path(sys.modules[cls.__module__].__file__ or "") for _, cls in catalog.entries()}


def _names() -> set[str]:
    names = set(catalog.names())
    for _, cls in catalog.entries():
        traits = catalog.traits(cls)
        names.update(alias.split()[0] for alias in traits.aliases if " " not in alias)
        if traits.prefixed:
            names.add(f"{cls.name}:")
    return names


def _literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
    return []


def name_dispatch(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of each comparison, lookup or prefix test against a built-in's
    name in `tree`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        candidates: list[str] = []
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                candidates += _literals(operand)
        elif isinstance(node, ast.Subscript) and not (
            isinstance(node.value, ast.Name) and node.value.id == "Literal"
        ):
            candidates += _literals(node.slice)
        elif isinstance(node, ast.Dict):
            candidates += [
                k.value
                for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "startswith", "removeprefix", "pop")
            and node.args
        ):
            candidates += _literals(node.args[0])
        found += [(getattr(node, "lineno", 0), c) for c in candidates if c in names]
    return found


def test_no_code_outside_the_builtins_dispatches_on_a_builtins_name() -> None:
    names = _names()
    owners = _owners()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("builtins/") or path in owners:
            continue
        allowed = _VOCABULARIES.get(rel, frozenset())
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [
            f"{rel}:{line}: {word!r}"
            for line, word in name_dispatch(tree, names)
            if word not in allowed
        ]
    assert not offenders, "dispatch on a built-in's name outside its module:\n" + "\n".join(
        offenders
    )


def test_the_name_dispatch_check_catches_each_form() -> None:
    names = {"read", "write", "task:"}
    source = (
        "a = word == 'write'\n"
        "b = word in ('read', 'x')\n"
        "c = table['read']\n"
        "d = word.startswith('task:')\n"
        "e = {'write': 1}\n"
        "f = kinds.get('read')\n"
        "g = 'read the file'\n"  # prose, not a lookup
        "h = call('write')\n"  # an argument, not a lookup
    )
    hits = name_dispatch(ast.parse(source), names)
    assert [line for line, _ in hits] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(
    ("tool", "tool_input", "line"),
    [
        (
            "Read",
            {"file_path": "a.py", "offset": 11, "limit": 5},
            "read a.py --offset 10 --limit 5",
        ),
        ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, "edit a.py x y"),
        (
            "MultiEdit",
            {"file_path": "a.py", "edits": [{"old_string": "a", "new_string": "b"}] * 2},
            "edit a.py a b && edit a.py a b",
        ),
        ("Write", {"file_path": "n.txt", "content": "hi"}, "write n.txt -- hi"),
        (
            "Task",
            {"prompt": "look", "subagent_type": "Explore"},
            "task:explore --prompt look --description sub-task",
        ),
        ("TodoWrite", {"todos": []}, "TodoWrite '{\"todos\": []}'"),
        ("Grep", {"pattern": "x"}, "grep -rlE -e x ."),
    ],
)
def test_another_agents_tool_call_gets_the_same_call_here(
    tool: str, tool_input: dict[str, Any], line: str
) -> None:
    import json

    hint = unknown_tool_result(tool, tool_input)
    assert f"Bash(command={json.dumps(line)})" in hint, hint
