"""The Codex port: Codex's `parse_command` (codex-rs/shell-command), rule for rule.

It gives the same answer as Codex on every one of Codex's test vectors: `read`,
`list_files`, `search` or `unknown`, with the same `cmd` strings. This module also
holds every summary variant (Synapse's own kinds too) and takes an optional
`Upgrade` hook for stages Codex calls `unknown`; it never imports Synapse's kinds.
`command_kinds` supplies that hook and `parse_command.parse_command` is the public
entry. Lossy by design: anything not understood stays `unknown`.

Import order (a DAG): shell_words <- codex <- command_kinds <- titles <- parse_command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from synapse_lsp.summaries.shell_words import (
    extract_bash_script,
    extract_powershell_script,
    parse_plain_shell_script,
    shlex_join,
    shlex_split,
)

# ------------------------------------------------------------------ variants


class _Variant:
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of Codex's serde enum: `type` tag first, nulls kept."""
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Read(_Variant):
    type: ClassVar[str] = "read"
    cmd: str
    name: str
    path: str


@dataclass(frozen=True)
class ListFiles(_Variant):
    type: ClassVar[str] = "list_files"
    cmd: str
    path: str | None


@dataclass(frozen=True)
class Search(_Variant):
    type: ClassVar[str] = "search"
    cmd: str
    query: str | None
    path: str | None


@dataclass(frozen=True)
class Unknown(_Variant):
    type: ClassVar[str] = "unknown"
    cmd: str


# Synapse's additions (never produced where Codex has a non-unknown answer).


@dataclass(frozen=True)
class Test(_Variant):
    type: ClassVar[str] = "test"
    cmd: str


@dataclass(frozen=True)
class Lint(_Variant):
    type: ClassVar[str] = "lint"
    cmd: str
    tool: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Format(_Variant):
    type: ClassVar[str] = "format"
    cmd: str
    tool: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Noop(_Variant):
    type: ClassVar[str] = "noop"
    cmd: str


@dataclass(frozen=True)
class Edit(_Variant):
    type: ClassVar[str] = "edit"
    cmd: str
    name: str
    path: str


@dataclass(frozen=True)
class Tool(_Variant):
    """An extension command: `source` is `mcp:<server>` or `skill:<skill>`."""

    type: ClassVar[str] = "tool"
    cmd: str
    source: str
    name: str


@dataclass(frozen=True)
class Task(_Variant):
    """A sub-agent (`task:<type>`); the field is `task_type` since `type` is the tag."""

    type: ClassVar[str] = "task"
    cmd: str
    task_type: str
    description: str | None


@dataclass(frozen=True)
class Fetch(_Variant):
    type: ClassVar[str] = "fetch"
    cmd: str
    url: str


@dataclass(frozen=True)
class Plan(_Variant):
    type: ClassVar[str] = "plan"
    cmd: str


ParsedCommand = (
    Read
    | ListFiles
    | Search
    | Unknown
    | Test
    | Lint
    | Format
    | Noop
    | Edit
    | Tool
    | Task
    | Fetch
    | Plan
)
CODEX_TYPES = frozenset({"read", "list_files", "search", "unknown"})

# An upgrade for a stage Codex calls unknown: tokens -> better summary, or None.
Upgrade = Callable[[list[str]], "ParsedCommand | None"]

# ------------------------------------------------------------------ Codex's parse


def parse_codex(argv: Sequence[str], upgrade: Upgrade | None = None) -> list[ParsedCommand]:
    """Codex's answer for one command (argv as the shell would run it), left to right.

    With `upgrade`, each stage Codex calls `unknown` is offered to it first; any stage
    still unknown makes the whole answer one `unknown` (Codex's rule)."""
    argv = list(argv)
    return finish(argv, _parse_impl(argv, upgrade))


def has_unknown(parsed: list[ParsedCommand]) -> bool:
    return any(isinstance(p, Unknown) for p in parsed)


def finish(argv: list[str], parsed: list[ParsedCommand]) -> list[ParsedCommand]:
    """Codex's last step: consecutive duplicates collapse; one `unknown` stage makes the
    answer a single `unknown` naming the whole command."""
    deduped: list[ParsedCommand] = []
    for item in parsed:
        if not deduped or deduped[-1] != item:
            deduped.append(item)
    if has_unknown(deduped):
        return [single_unknown(argv)]
    return deduped


def single_unknown(argv: list[str]) -> Unknown:
    """`unknown` whose `cmd` is the raw script (bash or PowerShell) or the joined argv."""
    script = extract_bash_script(argv)
    if script is None:
        script = extract_powershell_script(argv)
    return Unknown(script if script is not None else shlex_join(argv))


_CONNECTORS = frozenset({"&&", "||", "|", ";"})


def _parse_impl(argv: list[str], upgrade: Upgrade | None) -> list[ParsedCommand]:
    script = extract_bash_script(argv)
    if script is not None:
        return parse_shell_script(script, upgrade)
    ps_script = extract_powershell_script(argv)
    if ps_script is not None:
        return [Unknown(ps_script)]
    tokens = _normalize_tokens(argv)
    parts = _split_on_connectors(tokens) if _CONNECTORS.intersection(tokens) else [tokens]
    stages = _classify_stages(parts)
    stages = _simplify(stages)
    return _apply_upgrade(stages, upgrade)


def parse_shell_script(script: str, upgrade: Upgrade | None = None) -> list[ParsedCommand]:
    """Summaries of a bash script; `[unknown{script}]` unless it is the word-only subset."""
    return parse_script_commands(script, parse_plain_shell_script(script), upgrade)


def parse_script_commands(
    script: str, commands: list[list[str]] | None, upgrade: Upgrade | None = None
) -> list[ParsedCommand]:
    """`parse_shell_script` for a script whose word-only commands are already known
    (`shell_words.word_only_commands`; None when it is outside that subset)."""
    if not commands:
        return [Unknown(script)]
    had_multiple = len(commands) > 1
    filtered = [c for c in commands if not is_small_formatting_command(c)]
    if not filtered:
        return [Unknown(script)]
    stages = _classify_stages(filtered)
    if len(stages) > 1:
        stages = [s for s in stages if s[0] != ["true"]]
        stages = _simplify(stages)
    parsed = _apply_upgrade(stages, upgrade)
    if len(parsed) != 1:
        return parsed
    # Only a single remaining summary needs the script's own words (Codex's display rule).
    script_tokens = shlex_split(script)
    if script_tokens is None:
        script_tokens = [script]
    had_connectors = had_multiple or bool(_CONNECTORS.intersection(script_tokens))
    only = parsed[0]
    if not had_connectors:
        joined = shlex_join(script_tokens)
        if isinstance(only, Read):
            return [Read(joined, only.name, only.path)]
        if isinstance(only, ListFiles):
            return [ListFiles(joined, only.path)]
        if isinstance(only, Search):
            return [Search(joined, only.query, only.path)]
        return parsed
    if isinstance(only, Read) and "|" in script_tokens and _has_pair(script_tokens, "sed", "-n"):
        return [Read(script, only.name, only.path)]
    return parsed


def _has_pair(tokens: list[str], first: str, second: str) -> bool:
    return any(a == first and b == second for a, b in zip(tokens, tokens[1:], strict=False))


# A stage is its tokens plus the summary; `cd` stages are consumed into the cwd.
_Stage = tuple[list[str], "ParsedCommand"]


def _classify_stages(parts: list[list[str]]) -> list[_Stage]:
    stages: list[_Stage] = []
    cwd: str | None = None
    for tokens in parts:
        if tokens and tokens[0] == "cd":
            target = _cd_target(tokens[1:])
            if target is not None:
                cwd = target if cwd is None else _join_paths(cwd, target)
            continue
        parsed = summarize_main_tokens(tokens)
        if cwd is not None and isinstance(parsed, Read):
            parsed = Read(parsed.cmd, parsed.name, _join_paths(cwd, parsed.path))
        stages.append((tokens, parsed))
    return stages


def _apply_upgrade(stages: list[_Stage], upgrade: Upgrade | None) -> list[ParsedCommand]:
    if upgrade is None:
        return [parsed for _, parsed in stages]
    out: list[ParsedCommand] = []
    for tokens, parsed in stages:
        if isinstance(parsed, Unknown):
            parsed = upgrade(tokens) or parsed
        out.append(parsed)
    return out


def _simplify(stages: list[_Stage]) -> list[_Stage]:
    """Codex's `simplify_once` until nothing changes: a leading `echo`, a `cd` followed by
    something, a `true` and a flags-only `nl` are dropped (only while >1 stage remains)."""
    while len(stages) > 1:
        first_tokens, first = stages[0]
        if isinstance(first, Unknown) and first_tokens[:1] == ["echo"]:
            stages = stages[1:]
            continue
        index = _find_unknown(stages, lambda t: t[:1] == ["cd"])
        if index is not None and len(stages) > index + 1:
            stages = stages[:index] + stages[index + 1 :]
            continue
        index = _find_unknown(stages, lambda t: t == ["true"])
        if index is None:
            index = _find_unknown(
                stages, lambda t: t[:1] == ["nl"] and all(x.startswith("-") for x in t[1:])
            )
        if index is None:
            break
        stages = stages[:index] + stages[index + 1 :]
    return stages


def _find_unknown(stages: list[_Stage], test: Callable[[list[str]], bool]) -> int | None:
    for index, (tokens, parsed) in enumerate(stages):
        if isinstance(parsed, Unknown) and test(tokens):
            return index
    return None


def _normalize_tokens(tokens: list[str]) -> list[str]:
    if len(tokens) >= 2 and tokens[1] == "|" and tokens[0] in ("yes", "y", "no", "n"):
        return tokens[2:]
    if len(tokens) == 3 and tokens[0] in ("bash", "zsh") and tokens[1] in ("-c", "-lc"):
        split = shlex_split(tokens[2])
        return split if split is not None else tokens
    return tokens


def _split_on_connectors(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _CONNECTORS:
            if current:
                out.append(current)
                current = []
        else:
            current.append(token)
    if current:
        out.append(current)
    return out


def _trim_at_connector(tokens: list[str]) -> list[str]:
    for index, token in enumerate(tokens):
        if token in _CONNECTORS:
            return tokens[:index]
    return tokens


# ------------------------------------------------------------------ helpers


def short_display_path(path: str) -> str:
    """`webview/src` -> `webview`, `./dist` -> `.`, `core/src/spawn.rs` -> `spawn.rs`."""
    trimmed = path.replace("\\", "/").rstrip("/")
    for part in reversed(trimmed.split("/")):
        if part and part not in ("build", "dist", "node_modules", "src"):
            return part
    return trimmed


def _skip_flag_values(args: list[str], with_values: Sequence[str]) -> list[str]:
    """Drop flags' values and `--flag=value` words; after `--` keep everything."""
    out: list[str] = []
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            out.extend(args[index + 1 :])
            break
        if arg.startswith("--") and "=" in arg:
            continue
        if arg in with_values:
            skip = index + 1 < len(args)
            continue
        out.append(arg)
    return out


def _positional_operands(args: list[str], with_values: Sequence[str]) -> list[str]:
    out: list[str] = []
    after_dashes = False
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
        elif after_dashes:
            out.append(arg)
        elif arg == "--":
            after_dashes = True
        elif arg.startswith("--") and "=" in arg:
            continue
        elif arg in with_values:
            skip = index + 1 < len(args)
        elif not arg.startswith("-"):
            out.append(arg)
    return out


def _first_operand(args: list[str], with_values: Sequence[str]) -> str | None:
    operands = _positional_operands(args, with_values)
    return operands[0] if operands else None


def _single_operand(args: list[str], with_values: Sequence[str]) -> str | None:
    operands = _positional_operands(args, with_values)
    return operands[0] if len(operands) == 1 else None


def _non_flags(args: list[str], with_values: Sequence[str]) -> list[str]:
    return [a for a in _skip_flag_values(args, with_values) if not a.startswith("-")]


def _all_digits(text: str) -> bool:
    """Rust `chars().all(is_ascii_digit)`: true for the empty string too."""
    return all("0" <= c <= "9" for c in text)


def _is_digits(text: str) -> bool:
    return bool(text) and _all_digits(text)


def _is_sed_range(arg: str | None) -> bool:
    """`12p` or `12,20p`."""
    if arg is None or not arg.endswith("p"):
        return False
    parts = arg[:-1].split(",")
    return len(parts) in (1, 2) and all(p and _is_digits(p) for p in parts)


def _sed_read_path(args: list[str]) -> str | None:
    args = _trim_at_connector(args)
    if "-n" not in args:
        return None
    has_range = False
    i = 0
    while i < len(args):
        if args[i] in ("-e", "--expression"):
            if _is_sed_range(args[i + 1] if i + 1 < len(args) else None):
                has_range = True
            i += 2
        elif args[i] in ("-f", "--file"):
            i += 2
        else:
            i += 1
    if not has_range:
        has_range = any(not a.startswith("-") and _is_sed_range(a) for a in args)
    if not has_range:
        return None
    operands = _non_flags(args, ("-e", "-f", "--expression", "--file"))
    if not operands:
        return None
    if _is_sed_range(operands[0]):
        return operands[1] if len(operands) > 1 else None
    return operands[0]


def _awk_data_file(args: list[str]) -> str | None:
    if not args:
        return None
    args = _trim_at_connector(args)
    has_script_file = any(a in ("-f", "--file") for a in args)
    operands = _non_flags(args, ("-F", "-v", "-f", "--field-separator", "--assign", "--file"))
    if has_script_file:
        return operands[0] if operands else None
    return operands[1] if len(operands) >= 2 else None


def _is_count(text: str, plus: bool) -> bool:
    if plus and text.startswith("+"):
        text = text[1:]
    return bool(text) and _is_digits(text)


def is_small_formatting_command(tokens: Sequence[str]) -> bool:
    """Pipeline helpers that only shape output (`wc`, `sort`, `head -n 40` without a file…)."""
    if not tokens:
        return False
    tokens = list(tokens)
    head = tokens[0]
    if head in ("wc", "tr", "cut", "sort", "uniq", "tee", "column", "yes", "printf"):
        return True
    if head == "xargs":
        return not _is_mutating_xargs(tokens)
    if head == "awk":
        return _awk_data_file(tokens[1:]) is None
    if head in ("head", "tail"):
        if len(tokens) == 1:
            return True
        if len(tokens) == 2:
            return tokens[1].startswith("-")
        if len(tokens) == 3 and tokens[1] in ("-n", "-c"):
            count = tokens[2]
            if head == "tail" and count.startswith("+"):
                count = count[1:]
            return _all_digits(count)
        return False
    if head == "sed":
        return _sed_read_path(tokens[1:]) is None
    return False


def _is_mutating_xargs(tokens: list[str]) -> bool:
    sub = _xargs_subcommand(tokens)
    if not sub:
        return False
    head, tail = sub[0], sub[1:]
    if head in ("perl", "ruby"):
        return _has_in_place(tail)
    if head == "sed":
        return _has_in_place(tail) or "--in-place" in tail
    if head == "rg":
        return "--replace" in tail
    return False


def _xargs_subcommand(tokens: list[str]) -> list[str] | None:
    i = 1
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            return tokens[i + 1 :] or None
        if not token.startswith("-"):
            return tokens[i:]
        takes_value = token in ("-E", "-e", "-I", "-L", "-n", "-P", "-s")
        i += 2 if takes_value else 1
    return None


def _has_in_place(tokens: list[str]) -> bool:
    return any(t.startswith(("-i", "-pi")) for t in tokens)


def _cd_target(args: list[str]) -> str | None:
    target: str | None = None
    for index, arg in enumerate(args):
        if arg == "--":
            return args[index + 1] if index + 1 < len(args) else None
        if not arg.startswith("-"):
            target = arg
    return target


def _is_abs_like(path: str) -> bool:
    if path.startswith("/"):
        return True
    if len(path) >= 3 and path[0].isascii() and path[0].isalpha() and path[1:3] == ":\\":
        return True
    return path.startswith("\\\\")


def _join_paths(base: str, rel: str) -> str:
    if _is_abs_like(rel) or not base:
        return rel
    return base + rel if base.endswith("/") else f"{base}/{rel}"


def _is_pathish(text: str) -> bool:
    return text in (".", "..") or "/" in text or "\\" in text


# ------------------------------------------------------------- classification

_LS_VALUES = ("-I", "-w", "--block-size", "--format", "--time-style", "--color", "--quoting-style")
_EZA_VALUES = ("-I", "--ignore-glob", "--color", "--sort", "--time-style", "--time")
_TREE_VALUES = ("-L", "-P", "-I", "--charset", "--filelimit", "--sort")
_DU_VALUES = ("-d", "--max-depth", "-B", "--block-size", "--exclude", "--time-style")
_RG_VALUES = (
    "-g",
    "--glob",
    "--iglob",
    "-t",
    "--type",
    "--type-add",
    "--type-not",
    "-m",
    "--max-count",
    "-A",
    "-B",
    "-C",
    "--context",
    "--max-depth",
)
_AG_VALUES = (
    "-G",
    "-g",
    "--file-search-regex",
    "--ignore-dir",
    "--ignore-file",
    "--path-to-ignore",
)
_FD_VALUES = ("-t", "--type", "-e", "--extension", "-E", "--exclude", "--search-path")
_BAT_VALUES = (
    "--theme",
    "--language",
    "--style",
    "--terminal-width",
    "--tabs",
    "--line-range",
    "--map-syntax",
)
_LESS_VALUES = (
    "-p",
    "-P",
    "-x",
    "-y",
    "-z",
    "-j",
    "--pattern",
    "--prompt",
    "--tabs",
    "--shift",
    "--jump-target",
)
_GREP_SKIP_VALUE = frozenset(
    {"-m", "--max-count", "-C", "--context", "-A", "--after-context", "-B", "--before-context"}
)
_PY_WALKS = (
    "os.walk",
    "os.listdir",
    "os.scandir",
    "glob.glob",
    "glob.iglob",
    "pathlib.Path",
    ".rglob(",
)


def _read(tokens: list[str], path: str) -> Read:
    return Read(shlex_join(tokens), short_display_path(path), path)


def _listing(tokens: list[str], path: str | None) -> ListFiles:
    return ListFiles(shlex_join(tokens), None if path is None else short_display_path(path))


def summarize_main_tokens(tokens: list[str]) -> ParsedCommand:
    """Codex's classification of one stage (no connectors inside)."""
    if not tokens:
        return Unknown("")
    head, tail = tokens[0], tokens[1:]
    if head in ("ls", "eza", "exa"):
        return _listing(tokens, _first_operand(tail, _LS_VALUES if head == "ls" else _EZA_VALUES))
    if head == "tree":
        return _listing(tokens, _first_operand(tail, _TREE_VALUES))
    if head == "du":
        return _listing(tokens, _first_operand(tail, _DU_VALUES))
    if head in ("rg", "rga", "ripgrep-all"):
        args = _trim_at_connector(tail)
        operands = _non_flags(args, _RG_VALUES)
        if "--files" in args:
            return _listing(tokens, operands[0] if operands else None)
        return Search(
            shlex_join(tokens),
            operands[0] if operands else None,
            short_display_path(operands[1]) if len(operands) > 1 else None,
        )
    if head == "git":
        if tail[:1] == ["grep"]:
            return _grep_like(tokens, tail[1:])
        if tail[:1] == ["ls-files"]:
            operand = _first_operand(
                tail[1:], ("--exclude", "--exclude-from", "--pathspec-from-file")
            )
            return _listing(tokens, operand)
        return Unknown(shlex_join(tokens))
    if head in ("fd", "find"):
        query, path = _fd_query_path(tail) if head == "fd" else _find_query_path(tail)
        if query is not None:
            return Search(shlex_join(tokens), query, path)
        return ListFiles(shlex_join(tokens), path)
    if head in ("grep", "egrep", "fgrep"):
        return _grep_like(tokens, tail)
    if head in ("ag", "ack", "pt"):
        operands = _non_flags(_trim_at_connector(tail), _AG_VALUES)
        return Search(
            shlex_join(tokens),
            operands[0] if operands else None,
            short_display_path(operands[1]) if len(operands) > 1 else None,
        )
    single_with: dict[str, Sequence[str]] = {
        "cat": (),
        "more": (),
        "bat": _BAT_VALUES,
        "batcat": _BAT_VALUES,
        "less": _LESS_VALUES,
    }
    if head in single_with:
        operand = _single_operand(tail, single_with[head])
        return _read(tokens, operand) if operand is not None else Unknown(shlex_join(tokens))
    if head in ("head", "tail"):
        path = _head_tail_path(tail, plus=head == "tail")
        return _read(tokens, path) if path is not None else Unknown(shlex_join(tokens))
    if head == "awk":
        path = _awk_data_file(tail)
        return _read(tokens, path) if path is not None else Unknown(shlex_join(tokens))
    if head == "nl":
        candidates = _skip_flag_values(tail, ("-s", "-w", "-v", "-i", "-b"))
        path = next((c for c in candidates if not c.startswith("-")), None)
        return _read(tokens, path) if path is not None else Unknown(shlex_join(tokens))
    if head == "sed":
        path = _sed_read_path(tail)
        return _read(tokens, path) if path is not None else Unknown(shlex_join(tokens))
    is_python = head in ("python", "python2", "python3") or head.startswith(
        ("python2.", "python3.")
    )
    if is_python and _python_walks_files(tail):
        return ListFiles(shlex_join(tokens), None)
    return Unknown(shlex_join(tokens))


def _head_tail_path(tail: list[str], *, plus: bool) -> str | None:
    """`head -n 50 f`, `head -n50 f`, `tail -n +10 f`, or a lone file operand."""

    def count_ok(value: str) -> bool:
        # Codex: head takes any all-digit value (even empty); tail a non-empty [+]digits.
        return _is_count(value, plus=True) if plus else _all_digits(value)

    valid_n = False
    if tail:
        if tail[0] == "-n":
            valid_n = len(tail) > 1 and count_ok(tail[1])
        elif tail[0].startswith("-n"):
            valid_n = count_ok(tail[0][2:])
    if valid_n:
        start = 2 if tail[0] == "-n" and len(tail) > 1 and count_ok(tail[1]) else 0
        found = next((c for c in tail[start:] if not c.startswith("-")), None)
        if found is not None:
            return found
    if len(tail) == 1 and not tail[0].startswith("-"):
        return tail[0]
    return None


def _grep_like(tokens: list[str], args: list[str]) -> Search:
    args = _trim_at_connector(args)
    operands: list[str] = []
    pattern: str | None = None
    after_dashes = False
    items = iter(args)
    for arg in items:
        if after_dashes:
            operands.append(arg)
        elif arg == "--":
            after_dashes = True
        elif arg in ("-e", "--regexp", "-f", "--file"):
            value = next(items, None)
            if value is not None and pattern is None:
                pattern = value
        elif arg in _GREP_SKIP_VALUE:
            next(items, None)
        elif not arg.startswith("-"):
            operands.append(arg)
    has_pattern = pattern is not None
    query = pattern if has_pattern else (operands[0] if operands else None)
    index = 0 if has_pattern else 1
    path = short_display_path(operands[index]) if len(operands) > index else None
    return Search(shlex_join(tokens), query, path)


def _fd_query_path(tail: list[str]) -> tuple[str | None, str | None]:
    operands = _non_flags(_trim_at_connector(tail), _FD_VALUES)
    if len(operands) == 1:
        one = operands[0]
        return (None, short_display_path(one)) if _is_pathish(one) else (one, None)
    if len(operands) >= 2:
        return operands[0], short_display_path(operands[1])
    return None, None


def _find_query_path(tail: list[str]) -> tuple[str | None, str | None]:
    args = _trim_at_connector(tail)
    path = next(
        (short_display_path(a) for a in args if not a.startswith("-") and a not in "!()"),
        None,
    )
    query: str | None = None
    for index, arg in enumerate(args):
        if arg in ("-name", "-iname", "-path", "-regex"):
            if index + 1 < len(args):
                query = args[index + 1]
            break
    return query, path


def _python_walks_files(args: list[str]) -> bool:
    args = _trim_at_connector(args)
    for index, arg in enumerate(args):
        if arg == "-c" and index + 1 < len(args):
            script = args[index + 1]
            return any(marker in script for marker in _PY_WALKS)
    return False
