"""`synapse chat`: the terminal face of the agent (SPEC §9).

Interactive: a `You (N)>` prompt, the answer streamed, each tool call shown by
its one-line summary, Ctrl-C cancels the running turn (not the program), and a
line starting with `!` runs in this terminal directly (stdio attached, current
directory) without touching the conversation. One-shot: `synapse chat -p
"PROMPT"` prints the final answer on stdout, tool activity on stderr, and exits
0 on success. Without an API key the interactive REPL starts the offline demo
model (`--demo` forces it) so the loop can be seen working.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from synapse_lsp import __version__
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.config import MIN_THINKING_BUDGET, LiveSettings
from synapse_lsp.errors import ModelError, SynapseError

if TYPE_CHECKING:
    from synapse_lsp.agent.fakeapi import FakeAnthropic
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.agent.store import SessionStore
    from synapse_lsp.core import Workspace
    from synapse_lsp.events import Event
    from synapse_lsp.router import BashRouter

HELP_INTRO = """\
Type a request and press Enter. Lines starting with ! run in this terminal directly
(e.g. !git status) and are not sent to the agent. Ctrl-C cancels a running turn;
Ctrl-D or /exit leaves."""
DEMO_BANNER = (
    "Offline demo model: no ANTHROPIC_API_KEY is set, so a scripted stand-in answers "
    "(it runs `ls` to show the tool loop). Set ANTHROPIC_API_KEY to talk to Claude."
)
READ_ONLY_NOTE = (
    "This session is open for writing in another Synapse process: it is read-only here "
    "until that process closes it."
)
EXIT_CODES = {"end_turn": 0, "cancelled": 130}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse chat",
        description="Chat with the Synapse agent in this terminal, or run one prompt with -p.",
        epilog="Environment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, SYNAPSE_HOME, "
        "SYNAPSE_MODEL (or ANTHROPIC_MODEL), SYNAPSE_MAX_TOKENS, SYNAPSE_THINKING_BUDGET; "
        "flags win over them.",
    )
    parser.add_argument(
        "-p", "--print", dest="prompt", metavar="PROMPT",
        help="one-shot: run PROMPT, print the final answer on stdout, exit 0 on success",
    )  # fmt: skip
    parser.add_argument("--resume", metavar="ID", help="continue a stored session")
    parser.add_argument("--list", action="store_true", help="list stored sessions and exit")
    parser.add_argument(
        "--demo", action="store_true", help="use the offline demo model instead of the API"
    )
    parser.add_argument("--model", help="model name (default from settings)")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="output tokens per model call")
    parser.add_argument(
        "--thinking", type=int, metavar="BUDGET",
        help="extended thinking with this token budget (>= 1024, < max tokens; 0 = off)",
    )  # fmt: skip
    parser.add_argument("--cwd", type=Path, help="working directory (default: .)")
    parser.add_argument(
        "--trust",
        action="store_true",
        help="trust the folder for this run: load its own mcp_servers.json (not remembered; "
        "`synapse trust` remembers)",
    )
    parser.add_argument(
        "--max-turns", type=int, metavar="N", help="model calls per turn before stopping"
    )
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


def _preload_sdk() -> None:
    with contextlib.suppress(Exception):
        import anthropic  # noqa: F401


def _title(command: str) -> str:
    from synapse_lsp.summaries.titles import summarize

    try:
        return summarize(command).title
    except Exception:  # a summary is cosmetic: never fail a turn over it
        return command


@dataclass
class Runtime:
    """Everything one `synapse chat` process owns; `close()` releases all of it."""

    settings: LiveSettings
    cwd: Path
    store: SessionStore
    workspace: Workspace | None = None
    router: BashRouter | None = None
    model: ModelClient | None = None
    demo: FakeAnthropic | None = None
    session: ChatSession | None = None
    notes: list[str] = field(default_factory=list)
    exit_requested: bool = False
    trusted: bool | None = None  # None: the remembered answer / environment decide

    async def start(self, *, demo: bool, allow_demo_fallback: bool) -> None:
        from synapse_lsp.core import Workspace

        model = self._api_model(demo=demo, allow_demo_fallback=allow_demo_fallback)
        # The SDK takes seconds to import: overlap it with starting the shell (and only
        # once it is known to be needed: a missing key ends `-p` before this).
        threading.Thread(target=_preload_sdk, name="synapse-preload", daemon=True).start()
        self.model = model if model is not None else await self._demo_model()
        # The terminal asks nothing (no gate) until terminal asks exist.
        self.workspace = Workspace(self.cwd, self.settings, trusted=self.trusted)
        if self.workspace.trust_notice:
            self.notes.append(self.workspace.trust_notice)
        self.router = await self.workspace.start()
        await self.workspace.registry_ready()
        if self.workspace.registry_error is not None:
            self.notes.append(self.workspace.registry_error)

    # -- SlashHost

    def list_sessions(self) -> list[tuple[str, str, str]]:
        return [(i.id, i.updated_at, i.title) for i in self.store.list()]

    async def new_session(self) -> str:
        if self.session is not None:
            await self.session.close()
        return self.new_session_now().id

    async def resume(self, session_id: str) -> str:
        self.store.info(session_id)  # an unknown id raises here: the current session stays
        if self.session is not None:
            await self.session.close()
        session = self.resume_now(session_id)
        return session.title + (f"\n{READ_ONLY_NOTE}" if session.read_only else "")

    def request_exit(self) -> None:
        self.exit_requested = True

    def _api_model(self, *, demo: bool, allow_demo_fallback: bool) -> ModelClient | None:
        """The API's model client; None when the demo model is to be used."""
        from synapse_lsp.agent.model import ModelClient

        if demo:
            return None
        try:
            return ModelClient.from_settings(self.settings())
        except ModelError:
            if not allow_demo_fallback:
                raise
        return None

    async def _demo_model(self) -> ModelClient:
        from synapse_lsp.agent.fakeapi import FakeAnthropic, demo_script
        from synapse_lsp.agent.model import ModelClient

        self.demo = await FakeAnthropic(demo_script()).start()
        self.notes.append(DEMO_BANNER)
        return ModelClient(api_key="demo", base_url=self.demo.base_url, model="synapse-demo")

    def new_session_now(self) -> ChatSession:
        from synapse_lsp.agent.session import ChatSession

        assert self.router is not None
        self.session = ChatSession(
            self.router, self.settings, model=self.model, store=self.store,
            workspace_root=self.cwd,
        )  # fmt: skip
        return self.session

    def resume_now(self, session_id: str) -> ChatSession:
        from synapse_lsp.agent.session import ChatSession

        assert self.router is not None
        self.session = ChatSession.resume(
            self.store, session_id, self.router, self.settings, model=self.model,
            workspace_root=self.cwd,
        )  # fmt: skip
        return self.session

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.workspace is not None:
            await self.workspace.close()
        if self.model is not None:
            await self.model.close()
        if self.demo is not None:
            await self.demo.close()
        self.store.close()


class Renderer:
    """Prints one turn's events. `answer_out` gets the answer; `activity` the rest."""

    def __init__(
        self, answer_out: TextIO, activity: TextIO, *, one_shot: bool, color: bool = False
    ) -> None:
        self.out = answer_out
        self.activity = activity
        self.one_shot = one_shot
        self.buffer: list[str] = []  # one-shot: the current message's text
        self.mid_line = False
        self.thinking = False  # inside a run of thinking deltas
        self.dim, self.reset = ("\033[2m", "\033[0m") if color else ("", "")

    def _line(self, text: str, stream: TextIO | None = None) -> None:
        target = stream or self.activity
        if self.mid_line:  # end the streamed text's line first
            self.out.write("\n")
            self.out.flush()
            self.mid_line = False
        target.write(text + "\n")
        target.flush()

    def show(self, event: Event) -> None:
        from synapse_lsp.events import (
            Notice,
            PlanUpdated,
            TextDelta,
            ThinkingDelta,
            ToolCallFinished,
            ToolCallStarted,
            TurnFinished,
        )

        nested = getattr(event, "parent_tool_call_id", None) is not None
        indent = "    " if nested else ""
        if self.thinking and not isinstance(event, ThinkingDelta):
            self.thinking = False
            if self.mid_line:
                self.out.write("\n")
                self.mid_line = False
        if isinstance(event, TextDelta):
            if nested:
                return  # a sub-agent's prose stays in its card; its tool calls are shown
            if self.one_shot:
                self.buffer.append(event.text)
            else:
                self.out.write(event.text)
                self.out.flush()
                self.mid_line = not event.text.endswith("\n")
        elif isinstance(event, ThinkingDelta):
            if nested or self.one_shot:
                return  # thinking is for the person watching, not for scripts
            if not self.thinking:
                self._line(f"{self.dim}(thinking){self.reset}")
                self.thinking = True
            self.out.write(f"{self.dim}{event.text}{self.reset}")
            self.out.flush()
            self.mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolCallStarted):
            if self.one_shot and self.buffer:
                self.activity.write("".join(self.buffer).rstrip() + "\n")
                self.buffer.clear()
            restart = " (restarting the shell)" if event.restart else ""
            self._line(f"{indent}\u25b8 {_title(event.command)}{restart}")
        elif isinstance(event, ToolCallFinished):
            if event.is_error:
                what = {"cancelled": "cancelled", "denied": "Denied"}.get(
                    event.status, f"exit {event.exit_code}"
                )
                first = next((ln for ln in event.text.splitlines() if ln.strip()), "")
                self._line(f"{indent}  \u2717 {what}: {first[:160]}")
        elif isinstance(event, Notice):
            if event.discards_text and self.one_shot and not nested:
                self.buffer.clear()  # stdout carries only the final answer
            self._line(f"{indent}[{event.level}] {event.message}")
        elif isinstance(event, PlanUpdated):
            marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
            lines = [f"{indent}Plan:"] + [
                f"{indent}  {marks.get(e.status, '[ ]')} {e.step}" for e in event.entries
            ]
            self._line("\n".join(lines))
        elif isinstance(event, TurnFinished):
            if self.one_shot:
                answer = "".join(self.buffer).strip()
                self.buffer.clear()
                if answer and event.stop_reason == "error":
                    # the failed call's partial text is no answer: stdout stays clean
                    self.activity.write(answer + "\n")
                elif answer:
                    self.out.write(answer + "\n")
                    self.out.flush()
            elif self.mid_line:
                self.out.write("\n")
                self.out.flush()
                self.mid_line = False
            if event.stop_reason == "error":
                self._line(f"Error: {event.error}", sys.stderr)
            elif event.stop_reason == "cancelled":
                self._line("(turn cancelled)")
            elif event.stop_reason != "end_turn":
                self._line(f"(turn ended: {event.stop_reason})")


async def run_turn(session: ChatSession, text: str, renderer: Renderer) -> str:
    """Run one turn, printing it; Ctrl-C cancels it. Returns the stop reason."""
    loop = asyncio.get_running_loop()
    stop_reason = "error"
    handler_set = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, session.cancel)
        handler_set = True
    try:
        async for event in session.run_turn(text):
            renderer.show(event)
            stop_reason = getattr(event, "stop_reason", stop_reason)
    finally:
        if handler_set:
            loop.remove_signal_handler(signal.SIGINT)
    return stop_reason


def run_bang(command: str, cwd: Path, out: TextIO) -> int:
    """`!cmd`: run in this terminal with stdio attached; nothing reaches the agent."""
    if not command.strip():
        return 0
    previous = signal.signal(signal.SIGINT, _ignore)  # Ctrl-C is for the command, not us
    try:
        code = subprocess.call(["bash", "-c", command], cwd=cwd)
    except OSError as exc:
        out.write(f"Cannot run: {exc}\n")
        return 127
    finally:
        signal.signal(signal.SIGINT, previous)
    if code != 0:
        shown = 128 - code if code < 0 else code  # killed by a signal: shell convention
        out.write(f"Command exited with code {shown}\n")
        out.flush()
    return code


def _ignore(signum: int, frame: Any) -> None:
    return None


def _print_sessions(store: SessionStore, out: TextIO) -> None:
    infos = store.list()
    if not infos:
        out.write("No stored sessions.\n")
        return
    for info in infos:
        out.write(f"{info.id}  {info.updated_at}  {info.title}\n")


TRUST_QUESTION = (
    "This folder has its own {files}: it starts programs when Synapse loads it.\n"
    "Trust {folder} and load it? (remembered; `synapse trust --revoke` forgets) [y/N] "
)


def ask_trust(cwd: Path, home: Path, *, flag: bool, read: Callable[[str], str]) -> bool | None:
    """The REPL's one question at start: asked only when the folder has its own config
    and nothing (flag, environment, remembered answer) has decided yet; the answer is
    remembered for the folder. None: not asked (the usual rule decides)."""
    from synapse_lsp import trust

    files = trust.needs_trust(cwd)
    if not files or trust.decide(home, cwd, flag=flag).source != "default":
        return None
    names = ", ".join(p.name for p in files)
    try:
        answer = read(TRUST_QUESTION.format(files=names, folder=cwd)).strip().lower()
    except (EOFError, KeyboardInterrupt):
        sys.stdout.write("\n")
        return False  # not remembered: asked again next time
    trusted = answer in ("y", "yes")
    trust.remember(home, cwd, trusted)
    return trusted


def interactive(
    runtime: Runtime, loop: asyncio.AbstractEventLoop, read: Callable[[str], str]
) -> int:
    out = sys.stdout
    renderer = Renderer(out, out, one_shot=False, color=out.isatty())
    assert runtime.session is not None
    out.write(f"Synapse chat \u2014 session {runtime.session.id}. /help for help.\n")
    out.flush()
    count = 1
    while True:
        try:
            line = read(f"You ({count})> ")
        except EOFError:
            out.write("\n")
            return 0
        except KeyboardInterrupt:
            out.write("\n")
            continue
        text = line.strip()
        if not text:
            continue
        count += 1
        if text.startswith("!"):
            run_bang(text[1:].strip(), runtime.cwd, out)
            continue
        if text.startswith("/"):
            command = SESSION_COMMANDS.get(text.split()[0])
            if command is not None and command.name == "help":
                out.write(HELP_INTRO + "\n")
            shown = loop.run_until_complete(SESSION_COMMANDS.run(runtime, text))
            if runtime.exit_requested:
                return 0
            if shown:
                out.write(shown + "\n")
            out.flush()
            continue
        assert runtime.session is not None
        loop.run_until_complete(run_turn(runtime.session, text, renderer))


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    cwd = (args.cwd or Path.cwd()).resolve()
    if not cwd.is_dir():
        print(f"synapse chat: --cwd {cwd}: not a directory", file=sys.stderr)
        return 2
    settings = LiveSettings(folder=cwd)
    problems = list(settings.problems)
    overrides: dict[str, Any] = {}
    if args.model:
        overrides["model"] = args.model
    if args.max_turns is not None:
        overrides["maxTurns"] = args.max_turns
    if args.max_tokens is not None:
        overrides["maxTokens"] = args.max_tokens
    if args.thinking is not None:
        limit = args.max_tokens or settings().max_tokens
        if args.thinking and not MIN_THINKING_BUDGET <= args.thinking < limit:
            print(
                f"synapse chat: --thinking {args.thinking} refused: a thinking budget must be "
                f"at least {MIN_THINKING_BUDGET} tokens and less than max tokens ({limit}); "
                "use --thinking 0 for no thinking",
                file=sys.stderr,
            )
            return 2
        overrides["thinkingBudget"] = args.thinking
    problems += [p for p in settings.set_face(overrides) if p not in problems]
    if problems:
        print("synapse chat: " + "; ".join(problems), file=sys.stderr)
        return 2
    from synapse_lsp.agent.store import SessionStore

    store = SessionStore(settings().synapse_home / "sessions")
    if args.list:
        _print_sessions(store, sys.stdout)
        return 0
    one_shot = args.prompt is not None
    if one_shot and not args.prompt.strip():
        print("synapse chat: -p needs a non-empty prompt", file=sys.stderr)
        return 2
    if args.resume:
        try:  # before anything starts: a wrong id should not cost a shell and the SDK
            store.info(args.resume)
        except SynapseError as exc:
            print(f"synapse chat: {exc.message}", file=sys.stderr)
            return 2
    runtime = Runtime(settings, cwd, store)
    if args.trust:
        runtime.trusted = True
    elif not one_shot and sys.stdin.isatty():
        runtime.trusted = ask_trust(cwd, settings().synapse_home, flag=False, read=input)
    loop = asyncio.new_event_loop()
    try:
        try:
            loop.run_until_complete(runtime.start(demo=args.demo, allow_demo_fallback=not one_shot))
            if args.resume:
                if runtime.resume_now(args.resume).read_only:
                    runtime.notes.append(READ_ONLY_NOTE)
            else:
                runtime.new_session_now()
        except SynapseError as exc:
            print(f"synapse chat: {exc.message}", file=sys.stderr)
            return 2
        for note in runtime.notes:
            print(note, file=sys.stderr)
        assert runtime.session is not None
        if one_shot:
            renderer = Renderer(sys.stdout, sys.stderr, one_shot=True)
            reason = loop.run_until_complete(run_turn(runtime.session, args.prompt, renderer))
            return EXIT_CODES.get(reason, 1)
        if sys.stdin.isatty():
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (line editing and history for input())
        return interactive(runtime, loop, input)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(runtime.close())
        loop.close()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
