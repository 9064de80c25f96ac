"""The package layout is the architecture: the import rules table in
docs/architecture.md is the law, and no module (at any level: module, function
or TYPE_CHECKING import) takes part in an import cycle."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "synapse_lsp"
DOC = ROOT / "docs" / "architecture.md"


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Every module of ours that `name` imports, wherever the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [f"{target}.{alias.name}" for alias in node.names] + [target]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        seen: set[str] = set()
        for candidate in candidates:
            # `from synapse_lsp.agent import store` names the module; else the deepest known
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name and candidate not in seen:
                seen.add(candidate)
                yield candidate, node.lineno


def read_rules() -> tuple[dict[str, str], dict[str, set[str]]]:
    """(module or package prefix -> unit, unit -> units it may import) from the doc's table."""
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- import-rules -->(.*?)<!-- /import-rules -->", text, re.S)
    assert block, "docs/architecture.md lost its import rules table"
    owners: dict[str, str] = {}
    allowed: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("**"):
            continue
        unit = cells[0].strip("*")
        for member in re.findall(r"`([^`]+)`", cells[1]):
            owners[member.removesuffix(".py").rstrip("/").replace("/", ".")] = unit
        allowed[unit] = {u.strip() for u in cells[2].split(",") if u.strip() and u != "—"}
    return owners, allowed


def unit_of(module: str, owners: dict[str, str]) -> str | None:
    rel = module.removeprefix("synapse_lsp").lstrip(".") or "__init__"
    while rel:
        if rel in owners:
            return owners[rel]
        rel = rel.rpartition(".")[0]
    return None


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: {t for t, _ in imports_of(name, path, set(mods))} for name, path in mods.items()}


def test_every_module_belongs_to_a_package_of_the_table() -> None:
    owners, allowed = read_rules()
    orphans = [m for m in modules() if unit_of(m, owners) is None]
    assert orphans == [], f"add these to the import rules table: {orphans}"
    assert {"floor", "spine", "lsp", "cli", "agent", "extensions", "summaries", "acp"} <= set(
        allowed
    )


def test_imports_follow_the_table() -> None:
    owners, allowed = read_rules()
    mods = modules()
    wrong: list[str] = []
    for name, path in sorted(mods.items()):
        unit = unit_of(name, owners)
        assert unit is not None
        for target, line in imports_of(name, path, set(mods)):
            target_unit = unit_of(target, owners)
            if target_unit != unit and target_unit not in allowed[unit]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {unit} imports {target_unit}")
    assert wrong == []


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_no_import_cycle_between_modules() -> None:
    edges = graph()
    # a package's __init__ re-exporting its own modules is not a cycle of ideas
    for name in list(edges):
        edges[name] = {t for t in edges[name] if not name.startswith(t + ".")}
    assert find_cycle(edges) is None


def test_no_import_cycle_between_packages() -> None:
    owners, _ = read_rules()
    units: dict[str, set[str]] = {}
    for name, targets in graph().items():
        unit = unit_of(name, owners)
        assert unit is not None
        units.setdefault(unit, set())
        units[unit] |= {u for t in targets if (u := unit_of(t, owners)) not in (None, unit)}
    assert find_cycle(units) is None


@pytest.mark.parametrize(
    ("edges", "cyclic"),
    [({"a": {"b"}, "b": {"c"}, "c": set()}, False), ({"a": {"b"}, "b": {"a"}}, True)],
)
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]], cyclic: bool) -> None:
    assert (find_cycle(edges) is not None) is cyclic


def test_function_level_imports_are_seen(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from synapse_lsp.lsp import server\n")
    found = list(imports_of("synapse_lsp.x", source, {"synapse_lsp.lsp.server"}))
    assert found == [("synapse_lsp.lsp.server", 2)]


# ---------------------------------------------------------------- sizes (a ratchet)

MODULE_LIMIT = 500  # lines of a module...
CLASS_LIMIT = 400  # ...and of a class, for every new one
SLACK = 40  # a ceiling this far above the size it guards must be lowered
CEILINGS = ROOT / "tests" / "size_ceilings.json"


def sizes() -> tuple[dict[str, int], dict[str, int]]:
    """(module path -> lines, `path:Class` -> lines) of the package."""
    mods: dict[str, int] = {}
    classes: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8")
        mods[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                classes[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
    return mods, classes


def over_limits() -> dict[str, dict[str, int]]:
    mods, classes = sizes()
    return {
        "modules": {k: v for k, v in mods.items() if v > MODULE_LIMIT},
        "classes": {k: v for k, v in classes.items() if v > CLASS_LIMIT},
    }


def test_sizes_only_go_down() -> None:
    """Issue 30 item 4: a module over 500 lines or a class over 400 may stay only as big
    as tests/size_ceilings.json says, and the ceilings follow it down (a split or a cut
    lowers them: `python -m tests.test_layout` prints the table as it is now). Every
    new module and class keeps within the limits."""
    import json

    ceilings = json.loads(CEILINGS.read_text(encoding="utf-8"))
    found = over_limits()
    wrong: list[str] = []
    for kind, limit in (("modules", MODULE_LIMIT), ("classes", CLASS_LIMIT)):
        table: dict[str, int] = ceilings[kind]
        for name, size in found[kind].items():
            ceiling = table.get(name, limit)
            if size > ceiling:
                wrong.append(f"{name}: {size} lines, over its ceiling {ceiling}: split it")
        for name, ceiling in table.items():
            size = found[kind].get(name, 0)
            if ceiling - max(size, limit) > SLACK:
                wrong.append(f"{name}: ceiling {ceiling}, now {size}: lower the ceiling")
    assert wrong == [], "\n".join(wrong)


if __name__ == "__main__":  # print the ceilings as they are now
    import json

    print(json.dumps(over_limits(), indent=2, sort_keys=True))
