"""The walk over tree-sitter-bash's tree of a line: what bash runs (`Parsed`), with
tree-sitter-bash's misreadings repaired (see `bashparse`). Iterative (no recursion,
whatever the nesting); each node is visited once."""

from __future__ import annotations

import re
from typing import NamedTuple

from tree_sitter import Node, Tree

from synapse_lsp.bashparse.model import (
    Chars,
    Command,
    Parsed,
    Redirect,
    Substitution,
    Word,
    ansi_c,
)

# How deep command and process substitutions may nest in a line the walk reads.
MAX_DEPTH = 16


class UntrustedError(Exception):
    """The tree parsed, but something in it is not read reliably (the message says what)."""


# Operators between commands of a list, a pipeline or a case item.
_LIST_OPS = frozenset({"&&", "||", "|", "|&", ";", "&", ";;", ";&", ";;&"})
# Nodes whose children are statements of the same list (operators included).
_TRANSPARENT = frozenset({"program", "list", "pipeline", "redirected_statement", "negated_command"})
# Nodes that are one simple command.
_SIMPLE = frozenset(
    {"command", "declaration_command", "unset_command", "variable_assignment",
     "variable_assignments"}
)  # fmt: skip
_REDIRECTS = frozenset({"file_redirect", "herestring_redirect", "heredoc_redirect"})
# Nodes whose statements are a list of their own (not the line's top level).
_COMPOUND = frozenset(
    {"subshell", "compound_statement", "if_statement", "elif_clause", "else_clause",
     "while_statement", "for_statement", "c_style_for_statement", "case_statement",
     "case_item", "do_group", "function_definition"}
)  # fmt: skip
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
# Pieces that are plain text.
_PLAIN = frozenset(
    {"number", "extglob_pattern", "regex", "test_operator", "variable_name",
     "special_variable_name", "file_descriptor"}
)  # fmt: skip
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_WORD_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
_NAMED_FD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def _word_unescape(match: re.Match[str]) -> str:
    char = match.group(1)
    return "" if char == "\n" else char


class _Frame:
    """One list of statements being walked: the line's own (`top`) or one inside a
    group, a compound command or a substitution (`depth`: how many substitutions
    around it)."""

    __slots__ = ("top", "depth", "current", "last_end", "sep")

    def __init__(self, top: bool, depth: int) -> None:
        self.top = top
        self.depth = depth
        self.current: _Cmd | None = None  # the command a statement-level redirect joins
        self.last_end = -1  # where the previous statement ended (bytes)
        self.sep = True  # an operator came after it


class _W:
    """A word being assembled from adjacent pieces."""

    __slots__ = ("start", "end", "parts", "literal", "brace")

    def __init__(self, start: int) -> None:
        self.start = start
        self.end = start
        self.parts: list[str] = []
        self.literal = True
        self.brace = False  # an unquoted `{`: brace expansion is looked for at the end


class _R:
    __slots__ = ("start", "end", "fd", "op", "target", "heredoc", "quoted")

    def __init__(self, start: int, fd: str, op: str) -> None:
        self.start = start
        self.end = start
        self.fd = fd
        self.op = op
        self.target: _W | None = None
        self.heredoc: str | None = None
        self.quoted = False


class _Body(NamedTuple):
    """A here-document body waiting to be walked: its command, redirection and end."""

    command: _Cmd
    redirect: _R
    end: Node | None


class _Cmd:
    __slots__ = ("start", "end", "words", "redirects", "top", "pending", "last")

    def __init__(self, start: int, top: bool) -> None:
        self.start = start
        self.end = start
        self.words: list[_W] = []
        self.redirects: list[_R] = []
        self.top = top
        self.pending: _R | None = None  # a redirection waiting for its target
        self.last: _W | None = None  # the word the next adjacent piece joins


class Walker:
    def __init__(self, line: str, data: bytes) -> None:
        self.line = line
        self.data = data
        self.operators: list[tuple[int, str]] = []
        self.commands: list[_Cmd] = []
        self.substitutions: list[tuple[int, int, str, int, int]] = []
        self.stack: list[tuple[Node, _Frame, _Body | None]] = []
        self.chars = Chars(line, data)

    def src(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")

    # ------------------------------------------------------------ statements

    def run(self, tree: Tree) -> Parsed:
        self.stack.append((tree.root_node, _Frame(True, 0), None))
        while self.stack:
            node, frame, extra = self.stack.pop()
            if extra is not None:
                self._heredoc_body(node, frame, extra)
            else:
                self._statement(node, frame)
        return self._result(tree)

    def _push(self, nodes: list[Node], frame: _Frame) -> None:
        self.stack.extend((n, frame, None) for n in reversed(nodes))

    def _statement(self, node: Node, frame: _Frame) -> None:
        kind = node.type
        if not node.is_named:
            frame.current = None
            frame.last_end = max(frame.last_end, node.end_byte)
            if kind in _LIST_OPS:
                frame.sep = True
                if frame.top:
                    self.operators.append((node.start_byte, kind))
            return
        if kind == "comment":
            frame.last_end = node.end_byte
        elif kind in _TRANSPARENT:
            self._push(node.children, frame)
        elif kind in _SIMPLE or (kind == "test_command" and _first(node) == "["):
            self._begin(frame, node.start_byte)
            command = _Cmd(node.start_byte, frame.top)
            self.commands.append(command)
            frame.current = command
            if kind == "test_command":
                self._test_words(node, command, frame)
            else:
                self._command(node, command, frame)
            command.end = max(command.end, node.end_byte)
            frame.last_end = max(frame.last_end, node.end_byte)
        elif kind in _REDIRECTS:
            if frame.current is None:
                self._begin(frame, node.start_byte)
                frame.current = _Cmd(node.start_byte, frame.top)
                self.commands.append(frame.current)
            self._redirect(node, frame.current, frame)
        elif kind in _COMPOUND or kind == "test_command":
            self._begin(frame, node.start_byte)
            frame.current = None
            frame.last_end = node.end_byte
            self._push(node.children, _Frame(False, frame.depth))
        else:
            # A word of `for x in …`, a `case` pattern, an arithmetic expression:
            # nothing runs but the substitutions in it.
            frame.current = None
            self._find_substitutions(node, frame)

    def _begin(self, frame: _Frame, start: int) -> None:
        """A statement starts: in the line's own list, a newline since the previous one
        (with no operator between) is the "\\n" operator."""
        if frame.top and not frame.sep and frame.last_end >= 0:
            newline = self.data.find(b"\n", frame.last_end, start)
            if newline >= 0:
                self.operators.append((newline, "\n"))
        frame.sep = False

    # ------------------------------------------------------------ commands

    def _command(self, node: Node, command: _Cmd, frame: _Frame) -> None:
        for child in node.children:
            kind = child.type
            if kind == "command_name":
                for inner in child.children:
                    self._piece(inner, command, frame)
            elif kind in _REDIRECTS:
                self._redirect(child, command, frame)
            elif kind == "comment":
                continue
            else:
                self._piece(child, command, frame)

    def _test_words(self, node: Node, command: _Cmd, frame: _Frame) -> None:
        """`[ … ]` is a simple command to bash: its `>`/`<` are redirections."""
        pending = list(reversed(node.children))
        while pending:
            child = pending.pop()
            kind = child.type
            if not child.is_named and kind in (">", ">>", "<"):
                self._finish_redirect(command)
                redirect = _R(child.start_byte, "", kind)
                redirect.end = child.end_byte
                command.redirects.append(redirect)
                command.pending = redirect
                command.last = None
            elif child.is_named and kind in (
                "binary_expression", "unary_expression", "parenthesized_expression",
                "ternary_expression", "postfix_expression",
            ):  # fmt: skip
                pending.extend(reversed(child.children))
            else:
                self._piece(child, command, frame)
                if command.pending is not None and command.pending.target is not None:
                    self._finish_redirect(command)
        self._finish_redirect(command)

    def _redirect(self, node: Node, command: _Cmd, frame: _Frame) -> None:
        if node.type == "heredoc_redirect":
            self._heredoc(node, command, frame)
            return
        self._finish_redirect(command)
        children = node.children
        fd, index = "", 0
        if children and children[0].type == "file_descriptor":
            fd, index = self.src(children[0]), 1
        if index >= len(children):
            raise UntrustedError("a redirection without an operator")
        op_node = children[index]
        start = children[0].start_byte
        last = command.words[-1] if command.words and not fd else None
        if last is not None and last.end == op_node.start_byte and last.literal:
            value = "".join(last.parts)
            if value.isdigit() or _NAMED_FD.fullmatch(value):
                command.words.pop()  # tree-sitter took `0` of `0<in` for an argument
                fd, start = value, last.start
        redirect = _R(start, fd, op_node.type)
        redirect.end = op_node.end_byte
        command.redirects.append(redirect)
        command.end = max(command.end, node.end_byte)
        command.last = None
        if not op_node.type.endswith("-"):  # `>&-` / `<&-` take no target
            command.pending = redirect
        for child in children[index + 1 :]:
            if child.type != "comment":
                # the first word is the target; tree-sitter puts the words after it
                # (`> f x`) here too: `_piece` makes them arguments
                self._piece(child, command, frame)
        self._finish_redirect(command)
        frame.last_end = max(frame.last_end, node.end_byte)

    def _finish_redirect(self, command: _Cmd) -> None:
        redirect = command.pending
        if redirect is not None and redirect.target is not None:
            redirect.end = max(redirect.end, redirect.target.end)
        command.pending = None

    def _heredoc(self, node: Node, command: _Cmd, frame: _Frame) -> None:
        self._finish_redirect(command)
        children = node.children
        if len(children) < 2 or children[1].type != "heredoc_start":
            raise UntrustedError("a here-document without its delimiter")
        op, start = children[0], children[1]
        redirect = _R(op.start_byte, "", op.type)
        raw = self.src(start)
        redirect.quoted = any(q in raw for q in "'\"\\")
        delimiter = _W(start.start_byte)
        delimiter.end = start.end_byte
        delimiter.parts = [_WORD_ESCAPE.sub(_word_unescape, raw.replace("'", "").replace('"', ""))]
        redirect.target = delimiter
        redirect.end = start.end_byte
        command.redirects.append(redirect)
        command.end = max(command.end, start.end_byte)
        command.last = None
        frame.last_end = max(frame.last_end, start.end_byte)
        # What tree-sitter put inside the here-document node: the body, and whatever
        # followed its start on the line (more redirections of this command, operators,
        # the next commands), walked as statements of this list.
        rest: list[tuple[Node, _Frame, _Body | None]] = []
        end = next((c for c in children if c.type == "heredoc_end"), None)
        for child in children[2:]:
            if child.type == "heredoc_body":
                rest.append((child, frame, _Body(command, redirect, end)))
            elif child.type != "heredoc_end":
                rest.append((child, frame, None))
        if not any(c.type == "heredoc_body" for c in children):
            redirect.heredoc = ""
        self.stack.extend(reversed(rest))

    def _heredoc_body(self, body: Node, frame: _Frame, extra: _Body) -> None:
        command, redirect, end = extra
        redirect.heredoc = self.src(body)
        if not redirect.quoted:
            if b"`" in self.data[body.start_byte : body.end_byte]:
                raise UntrustedError(
                    "a backtick in an unquoted here-document body (bash runs what is "
                    "between backticks there; tree-sitter-bash does not parse it)"
                )
            for child in body.children:
                if child.type != "heredoc_content":
                    self._find_substitutions(child, frame)
        stop = end.end_byte if end is not None else body.end_byte
        if self.commands and self.commands[-1] is command:
            command.end = max(command.end, stop)  # the body follows its command
        frame.last_end = max(frame.last_end, stop)

    # ------------------------------------------------------------ words

    def _piece(self, node: Node, command: _Cmd, frame: _Frame) -> None:
        """Add one piece of a word: it joins the previous word when adjacent (no blank
        between: `a"b"`, `$"x"`), else it is the pending redirection's target or a new
        word."""
        start, end = node.start_byte, node.end_byte
        last = command.last
        if last is not None and last.end == start:
            word = last
        else:
            word = _W(start)
            redirect = command.pending
            if redirect is not None and redirect.target is None:
                redirect.target = word
            else:
                if redirect is not None:
                    self._finish_redirect(command)
                command.words.append(word)
            command.last = word
        if node.type == "word":  # the common case, kept short
            raw = self.data[start:end].decode("utf-8", "surrogatepass")
            if raw[:1] == "~" and start == word.start:
                word.literal = False
            if "{" in raw:
                word.brace = True
            word.parts.append(_WORD_ESCAPE.sub(_word_unescape, raw) if "\\" in raw else raw)
        else:
            self._value(node, word, frame)
        word.end = end
        if end > command.end:
            command.end = end

    def _value(self, node: Node, word: _W, frame: _Frame) -> None:
        """Append a piece's value to `word` (bash's quote removal; expansions kept as
        written), marking it not literal where bash expands something."""
        pending: list[tuple[Node, bool]] = [(node, False)]
        while pending:
            piece, quoted = pending.pop()
            kind = piece.type
            if kind == "concatenation":
                pending.extend((c, quoted) for c in reversed(piece.children))
            elif kind == "string":
                pending.extend((c, True) for c in reversed(piece.children) if c.type != '"')
            elif kind == "word" and not quoted:
                raw = self.src(piece)
                if raw.startswith("~") and piece.start_byte == word.start:
                    word.literal = False
                word.brace = word.brace or "{" in raw
                word.parts.append(_WORD_ESCAPE.sub(_word_unescape, raw))
            elif kind == "string_content" or (kind == "word" and quoted):
                word.parts.append(_DQ_ESCAPE.sub(_word_unescape, self.src(piece)))
            elif kind == "raw_string":
                word.parts.append(self.src(piece)[1:-1])
            elif kind == "ansi_c_string":
                word.parts.append(ansi_c(self.src(piece)[2:-1]))
            elif kind in _SUBSTITUTIONS:
                word.literal = False
                word.parts.append(self.src(piece))
                self._substitution(piece, frame)
            elif kind in _PLAIN or (not piece.is_named and kind != "$"):
                raw = self.src(piece)
                word.brace = word.brace or (not quoted and "{" in raw)
                word.parts.append(raw)
            else:
                # `$x`, `${…}`, `$((…))`, `{1..3}`, `$"…"`, an array, anything unknown:
                # bash expands it; the substitutions in it run.
                word.literal = False
                word.parts.append(self.src(piece))
                self._find_substitutions(piece, frame)

    def _find_substitutions(self, node: Node, frame: _Frame) -> None:
        pending = [node]
        while pending:
            current = pending.pop()
            if current.type in _SUBSTITUTIONS:
                self._substitution(current, frame)
            else:
                pending.extend(current.children)

    def _substitution(self, node: Node, frame: _Frame) -> None:
        children = node.children
        opener = children[0] if children else None
        closer = children[-1] if len(children) > 1 else None
        kind = opener.type if opener is not None else "$("
        inner_start = opener.end_byte if opener is not None else node.start_byte
        inner_end = closer.start_byte if closer is not None else node.end_byte
        if frame.depth == 0:
            self.substitutions.append(
                (node.start_byte, node.end_byte, kind, inner_start, inner_end)
            )
        if frame.depth >= MAX_DEPTH:
            # Each level's command holds the text of all the levels inside it: deeper
            # nesting would make the commands' texts grow with the square of the line.
            raise UntrustedError(f"substitutions nested more than {MAX_DEPTH} deep")
        self._push(children[1:-1], _Frame(False, frame.depth + 1))

    # ------------------------------------------------------------ result

    def _result(self, tree: Tree) -> Parsed:
        at = self.chars.at
        same = self.chars.same
        line = self.line

        def word(w: _W) -> Word:
            start, end = (w.start, w.end) if same else (at(w.start), at(w.end))
            text = line[start:end]
            # `{a,b}`, `{1..3}` unquoted: brace expansion
            literal = w.literal and not (w.brace and _BRACES.search(text) is not None)
            parts = w.parts
            value = parts[0] if len(parts) == 1 else "".join(parts)
            return Word(start, end, text, value, literal)

        commands: list[Command] = []
        for cmd in sorted(self.commands, key=lambda c: c.start):
            words = [word(w) for w in cmd.words]
            start_byte = cmd.start
            if cmd.redirects and (not cmd.words or cmd.redirects[0].start < cmd.start):
                start_byte = min(start_byte, cmd.redirects[0].start)
            # `time [-p] cmd`: a keyword, not the command
            if words and words[0].value == "time" and words[0].literal and len(words) > 1:
                words = words[1:]
                while len(words) > 1 and words[0].value in ("-p", "--"):
                    words = words[1:]
                start_byte = cmd.words[len(cmd.words) - len(words)].start
            redirects = tuple(
                Redirect(
                    at(r.start),
                    at(r.end),
                    r.fd,
                    r.op,
                    word(r.target) if r.target is not None else None,
                    r.heredoc,
                    r.quoted,
                )
                for r in cmd.redirects
            )
            start, end = at(start_byte), at(cmd.end)
            commands.append(Command(start, end, line[start:end], tuple(words), redirects, cmd.top))
        substitutions = tuple(
            Substitution(at(s), at(e), kind, line[at(i) : at(j)])
            for s, e, kind, i, j in sorted(self.substitutions)
        )
        operators = tuple((at(i), op) for i, op in sorted(self.operators))
        return Parsed(line, operators, tuple(commands), substitutions, None, tree, self.data)


def _first(node: Node) -> str:
    return node.children[0].type if node.child_count else ""
