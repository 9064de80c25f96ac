"""Shell words the way Codex sees them: Rust `shlex` 1.3 split/quote rules and the
tree-sitter-bash "word-only" safe subset (`bash -lc` scripts made of plain commands).

Python's `shlex` differs from the Rust crate in both directions (`shlex.quote` never
double-quotes, `shlex.split` keeps `\\$` inside double quotes), and the summaries must
match Codex byte for byte, so both rules are ported here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from tree_sitter import Node

from synapse_lsp import bashparse
from synapse_lsp.bashparse import Parsed, bash_language, bash_parser

__all__ = ["Parsed", "bash_language", "bash_parser"]

# ------------------------------------------------------------------ Rust shlex


class NulByteError(ValueError):
    """A word holds a NUL byte, which no shell can take as an argument."""


_NEEDS_SLOW_SPLIT = re.compile(r"[\"'\\#]")
_BLANKS = re.compile(r"[ \t\n]+")
_BARE_WORD = re.compile(r"[A-Za-z0-9+\-./:@\]_]+")


def shlex_split(text: str) -> list[str] | None:
    """Split like Rust `shlex::split`: POSIX-ish words, `#` comments at a word start,
    backslash escapes; None when a quote or a trailing backslash is left open."""
    if not _NEEDS_SLOW_SPLIT.search(text):
        return [w for w in _BLANKS.split(text) if w]
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        # Skip blanks and comments before a word.
        while i < n:
            ch = text[i]
            if ch in " \t\n":
                i += 1
            elif ch == "#":
                newline = text.find("\n", i)
                i = n if newline < 0 else newline + 1
            else:
                break
        if i >= n:
            return words
        word: list[str] = []
        while i < n:
            ch = text[i]
            if ch in " \t\n":
                break
            if ch == '"':
                i += 1
                while True:
                    if i >= n:
                        return None
                    ch = text[i]
                    if ch == '"':
                        break
                    if ch == "\\":
                        if i + 1 >= n:
                            return None
                        nxt = text[i + 1]
                        if nxt in '$`"\\':
                            word.append(nxt)
                        elif nxt != "\n":
                            word.append("\\" + nxt)
                        i += 2
                        continue
                    word.append(ch)
                    i += 1
            elif ch == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    return None
                word.append(text[i + 1 : end])
                i = end
            elif ch == "\\":
                if i + 1 >= n:
                    return None
                if text[i + 1] != "\n":
                    word.append(text[i + 1])
                i += 1
            else:
                word.append(ch)
            i += 1
        words.append("".join(word))


_UNQUOTED_OK = frozenset("+-./:@]_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_U, _S, _D = 1, 2, 4


def _char_ok(ch: str) -> int:
    """Which quoting styles (bit set) can carry this character."""
    if ch in _UNQUOTED_OK:
        return _U | _S | _D
    if ch >= "\x80":  # non-ASCII always gets quotes (see the crate's quoting_warning)
        return _S | _D
    ok = _S | _D
    if ch in "'^\\":
        ok &= ~_S
    if ch in "`$!^":
        ok &= ~_D
    return ok


def shlex_quote(word: str) -> str:
    """Quote one word exactly like Rust `shlex::try_quote` (crate 1.3).

    Bare when every character is a letter, digit or one of ``+-./:@]_``; otherwise the
    longest prefix that one style can carry is emitted in the best style (single quotes
    before double quotes), and the rest is quoted the same way chunk by chunk."""
    if not word:
        return "''"
    if "\0" in word:
        raise NulByteError("word contains a NUL byte")
    if _BARE_WORD.fullmatch(word):
        return word
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        allowed = _U | _S | _D
        j = i
        if word[j] == "^":  # only safe right after an opening single quote
            allowed = _S
            j += 1
        while j < n:
            cur = allowed & _char_ok(word[j])
            if not cur:
                break
            allowed = cur
            j += 1
        chunk = word[i:j]
        if allowed & _U:
            out.append(chunk)
        elif allowed & _S:
            out.append(f"'{chunk}'")
        else:
            escaped = "".join("\\" + c if c in '$`"\\' else c for c in chunk)
            out.append(f'"{escaped}"')
        i = j
    return "".join(out)


def shlex_join(words: Iterable[str]) -> str:
    """Rust `shlex::try_join`; a NUL byte gives Codex's placeholder text."""
    try:
        return " ".join(shlex_quote(w) for w in words)
    except NulByteError:
        return "<command included NUL byte>"


# --------------------------------------------------------- tree-sitter-bash

_ALLOWED_NAMED = frozenset(
    {
        "program",
        "list",
        "pipeline",
        "command",
        "command_name",
        "word",
        "string",
        "string_content",
        "raw_string",
        "number",
        "concatenation",
    }
)
_ALLOWED_TOKENS = frozenset({"&&", "||", ";", "|", '"', "'"})


def parse_bash(script: str) -> Parsed:
    """The one parse of `script` (`bashparse.parse`: cached, shared with the permission
    gate and the router's plan, bounded in time). Its `tree` is None when tree-sitter
    did not finish; read node text with `Parsed.node_text`."""
    return bashparse.parse(script)


def parse_plain_shell_script(script: str) -> list[list[str]] | None:
    """The commands of a script made only of plain words joined by ``&& || ; |``.

    None for anything else: redirections, ``$`` expansions, substitutions, subshells,
    assignments, ``&``, or a parse error (Codex ``try_parse_word_only_commands_sequence``)."""
    return word_only_commands(parse_bash(script))


def word_only_commands(parsed: Parsed) -> list[list[str]] | None:
    """`parse_plain_shell_script` on an already parsed script."""
    if parsed.tree is None:
        return None
    root = parsed.tree.root_node
    if root.has_error:
        return None
    commands: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if node.is_named:
            if kind not in _ALLOWED_NAMED:
                return None
            if kind == "command":
                commands.append(node)
        elif kind not in _ALLOWED_TOKENS and kind.strip():
            return None
        stack.extend(node.children)
    commands.sort(key=lambda c: c.start_byte)
    out: list[list[str]] = []
    for command in commands:
        words = _command_words(command, parsed.node_text)
        if words is None:
            return None
        out.append(words)
    return out


def _command_words(command: Node, _text: Callable[[Node], str]) -> list[str] | None:
    words: list[str] = []
    for child in command.children:
        kind = child.type
        if not child.is_named:
            # Inside a plain command only quote tokens and blanks may appear unnamed.
            if kind not in _ALLOWED_TOKENS and kind.strip():
                return None
            continue
        if kind == "command_name":
            inner = child.named_children
            if not inner or inner[0].type != "word":
                return None
            words.append(_text(inner[0]))
        elif kind in ("word", "number"):
            if not _only_allowed(child):
                return None
            words.append(_text(child))
        elif kind == "string":
            value = _double_quoted(child, _text)
            if value is None:
                return None
            words.append(value)
        elif kind == "raw_string":
            words.append(_text(child)[1:-1])
        elif kind == "concatenation":
            parts: list[str] = []
            for part in child.named_children:
                if part.type in ("word", "number"):
                    if not _only_allowed(part):
                        return None
                    parts.append(_text(part))
                elif part.type == "string":
                    value = _double_quoted(part, _text)
                    if value is None:
                        return None
                    parts.append(value)
                elif part.type == "raw_string":
                    parts.append(_text(part)[1:-1])
                else:
                    return None
            joined = "".join(parts)
            if not joined:
                return None
            words.append(joined)
        else:
            return None
    return words


def _only_allowed(node: Node) -> bool:
    """Words and numbers must not hide an expansion inside them."""
    return all(c.type in _ALLOWED_NAMED for c in node.named_children)


def _double_quoted(node: Node, _text: Callable[[Node], str]) -> str | None:
    if any(part.type != "string_content" for part in node.named_children):
        return None
    text = _text(node)
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    return text[1:-1]


def shell_stem(program: str) -> str:
    """`/usr/local/bin/powershell.exe` -> `powershell` (path and one extension dropped)."""
    base = program.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, _ext = base.rpartition(".")
    return stem if dot and stem else base


def extract_bash_script(argv: Sequence[str]) -> str | None:
    """The script of ``[bash|zsh|sh, -c|-lc, SCRIPT]`` (any path to those shells)."""
    if len(argv) != 3 or argv[1] not in ("-lc", "-c"):
        return None
    if shell_stem(argv[0]) not in ("bash", "zsh", "sh"):
        return None
    return argv[2]


_POWERSHELL_FLAGS = frozenset({"-nologo", "-noprofile", "-command", "-c"})


def extract_powershell_script(argv: Sequence[str]) -> str | None:
    """The script of ``[pwsh|powershell[.exe], (-NoLogo|-NoProfile)*, -Command|-c, SCRIPT]``."""
    if len(argv) < 3 or shell_stem(argv[0]).lower() not in ("pwsh", "powershell"):
        return None
    i = 1
    while i + 1 < len(argv):
        flag = argv[i].lower()
        if flag not in _POWERSHELL_FLAGS:
            return None
        if flag in ("-command", "-c"):
            return argv[i + 1]
        i += 1
    return None


def parse_shell_lc_plain_commands(argv: Sequence[str]) -> list[list[str]] | None:
    script = extract_bash_script(argv)
    return None if script is None else parse_plain_shell_script(script)
