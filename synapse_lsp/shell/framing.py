"""The marker protocol, as text and as a state machine: no bash, no asyncio.

Each command line is `__syn_seq=N; \\. FILE </dev/null >DIR/out.N 2>DIR/err.N`
(`line_template`). bash's prompt hook (`prompt_command`) then prints
`\\x1e<nonce>:<seq>:<$?>:<$PWD>\\x1f<nonce>` on the PTY. `MarkerParser` is fed what
the PTY gives, in chunks of any size, and yields the command's own output (`Output`:
the bytes and their UTF-8 text, a character split across chunks decoded once
whole) and its markers (`Marker`: exit code and claimed cwd). A marker of another
sequence number (a previous prompt, a cancelled command) is dropped with the output
before it; a marker split across chunks is held back until it is whole.

A marker is only a candidate: it counts once bash is seen back at its prompt
(`bash.py`; docs/shell.md "Framing guarantees"), and the last one wins.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path

from synapse_lsp.cmdline import quote

START = b"\x1e"  # a marker's first byte (ASCII RS: never part of a UTF-8 character)
END = b"\x1f"  # the byte before the nonce that closes it (ASCII US)
# Options that entering and leaving POSIX mode changes; the prompt hook restores them.
POSIX_SHOPTS = (
    "interactive_comments",
    "sourcepath",
    "expand_aliases",
    "inherit_errexit",
    "shift_verbose",
)


@dataclass(frozen=True, slots=True)
class Output:
    """Output of the running command seen on the PTY (what it wrote to /dev/tty)."""

    data: bytes
    text: str  # `data` decoded (UTF-8, invalid bytes replaced), continuing the last chunk


@dataclass(frozen=True, slots=True)
class Marker:
    """A completion marker of the running command: `$?` and `$PWD` as the hook saw them."""

    code: int
    cwd: bytes


Event = Output | Marker


class MarkerParser:
    """The PTY's bytes of one command (sequence number `seq`), split into `Output` and
    `Marker` events. `marker` is the last marker seen (None: none yet, or forgotten)."""

    def __init__(self, nonce: str, seq: int) -> None:
        self.seq = seq
        self.marker: Marker | None = None
        self._start = START + nonce.encode() + b":"
        self._end = END + nonce.encode()
        self._seq = str(seq).encode()
        self._pending = bytearray()  # bytes not yet classified: maybe a marker's beginning
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> list[Event]:
        """Classify `data` (and what was held back before it)."""
        events: list[Event] = []
        start, end = self._start, self._end
        buf = self._pending
        buf += data
        while True:
            at = buf.find(start)
            if at < 0:
                # Hold back only a possible beginning of the marker.
                keep = buf.rfind(START, max(0, len(buf) - len(start) + 1))
                cut = keep if keep >= 0 and start.startswith(bytes(buf[keep:])) else len(buf)
                self._output(events, bytes(buf[:cut]))
                del buf[:cut]
                return events
            close = buf.find(end, at)
            if close < 0:
                self._output(events, bytes(buf[:at]))
                del buf[:at]
                return events
            at = buf.rfind(start, at, close)  # a torn marker before it is output
            fields = bytes(buf[at + len(start) : close]).split(b":", 2)
            before = bytes(buf[:at])
            del buf[: close + len(end)]
            if len(fields) == 3 and fields[0] == self._seq:
                # A candidate: it counts once bash is seen at its prompt; a later one
                # replaces it. What follows is still this command's output.
                self._output(events, before)
                try:
                    code = int(fields[1])
                except ValueError:
                    code = 1
                self.marker = Marker(code, fields[2])
                events.append(self.marker)
                continue
            # A stale marker (a previous prompt, or a cancelled command): drop its output.

    def _output(self, events: list[Event], data: bytes) -> None:
        if data:
            events.append(Output(data, self._decoder.decode(data)))

    def forget_marker(self) -> None:
        """The marker seen so far does not count (printed before the command was sent)."""
        self.marker = None

    def take_pending(self) -> bytes:
        """What is held back (a possible marker's beginning), handed over and forgotten."""
        held = bytes(self._pending)
        self._pending.clear()
        return held

    def flush(self) -> str:
        """The text of an incomplete character at the end (a replacement character)."""
        return self._decoder.decode(b"", final=True)


HOOK = "__syn_hook"  # the prompt hook's function: defined once per bash, read-only


def hook_function() -> str:
    """The prompt hook's body, as the definition of a read-only function (`HOOK`):
    bash parses it once, when the shell starts and no alias or function of the
    commands exists yet, and a command can neither redefine nor unset it. It resets
    what a command could have changed to break the framing. No word in it can be
    shadowed: every command word is quoted (aliases do not apply) and runs while POSIX
    mode is on (`POSIXLY_CORRECT=` is an assignment), where special builtins (`unset`,
    `exec`) are found before functions; `unset -f builtin . source` then makes
    `\\builtin X` and the next command line's `\\.` safe. POSIX mode and the shell
    options it changes are restored. `$?` is still the command's on entry."""
    save = "".join(
        f"__syn_s{i}=-u;case $__syn_o in *:{name}:*) __syn_s{i}=-s;; esac;"
        for i, name in enumerate(POSIX_SHOPTS)
    )
    restore = ";".join(
        f'\\builtin shopt "$__syn_s{i}" {name}' for i, name in enumerate(POSIX_SHOPTS)
    )
    return (
        f"{HOOK}() {{ "
        "__syn_rc=$?;__syn_o=:$BASHOPTS:;"
        "__syn_u=${POSIXLY_CORRECT+__syn_u};__syn_u=${__syn_u:-POSIXLY_CORRECT};"
        + save
        + "POSIXLY_CORRECT=y;\\unset -f builtin . source;"
        "\\builtin enable . builtin enable exec printf shopt trap unset;"
        "\\exec 2>/dev/null;"
        "PS0=;PS1=;PS2=;PS4='+ ';"
        '\\unset "$__syn_u";' + restore + "; }"
    )


def prompt_command(nonce: str) -> str:
    """bash's prompt hook: the hook function, then, out of it, the traps reset and the
    marker printed. Out of it, because bash puts back on return a DEBUG trap that a
    function without the trace attribute removed, and runs a RETURN trap (the trace
    attribute, `set -T`) after its last command: output there precedes the marker."""
    return (
        f"\\{HOOK};\\builtin trap - INT DEBUG;"
        f"\\builtin printf '\\036%s:%s:%s:%s\\037%s' {nonce} \"${{__syn_seq-}}\" "
        f'"$__syn_rc" "$PWD" {nonce}'
    )


def environment_prompt_command(nonce: str) -> str:
    """The `PROMPT_COMMAND` bash starts with, until `startup_line` installs the hook."""
    return (
        "__syn_rc=$?; printf '\\036%s:%s:%s:%s\\037%s' "
        f'\'{nonce}\' "${{__syn_seq-}}" "$__syn_rc" "$PWD" \'{nonce}\''
    )


def startup_line(stderr_fifo: Path, nonce: str) -> str:
    """The first line a fresh bash reads: its stderr to the FIFO, no history, the hook
    (its function, then `PROMPT_COMMAND`, both read-only)."""
    return (
        f"exec 2>{quote(str(stderr_fifo))}; set +o history; "
        f"{hook_function()}; readonly -f {HOOK}; "
        f"PROMPT_COMMAND={quote(prompt_command(nonce))}; "
        "export -n PROMPT_COMMAND; readonly PROMPT_COMMAND; __syn_seq=0\n"
    )


def line_template(cmd_path: str, directory: Path) -> str:
    """The command line, for `.format(seq=N)`. `\\.`: no alias applies to a quoted word
    (and the prompt hook removes a function named `.`). bash's own stderr is /dev/null
    (prompts, traces of the framing, job notices); the command's goes to its FIFOs."""
    folder = quote(str(directory)).replace("{", "{{").replace("}", "}}")
    return (
        "__syn_seq={seq}; \\. "
        + quote(cmd_path).replace("{", "{{").replace("}", "}}")
        + " </dev/null >"
        + folder
        + "/out.{seq} 2>"
        + folder
        + "/err.{seq}\n"  # the command's own FIFOs (`streams.Streams.open_command_fifos`)
    )
