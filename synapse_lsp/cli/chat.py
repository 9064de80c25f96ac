"""`synapse chat`: the terminal face of the agent (SPEC §9).

Interactive (repl.py): a `You (N)>` prompt, the answer streamed, each command shown
with its title, command line, output head and tail, exit status and duration
(render.py), Ctrl-C cancels the running turn (not the program), and a line starting
with `!` runs in the chat session's own shell with the terminal attached (bang.py);
the next prompt tells the model what the user ran. One-shot: `synapse chat -p
"PROMPT"` prints the final answer on stdout, tool activity on stderr, and exits
0 on success; or JSON, for scripts and CI (headless.py). Without an API key the
interactive REPL starts the offline demo model (`--demo` forces it) to show the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from synapse_lsp import __version__
from synapse_lsp.cli import headless, run_options, stop_signals
from synapse_lsp.cli.asking import (
    TerminalQuestions,
    add_permission_flags,
    face_settings,
    yes_asker,
)
from synapse_lsp.cli.oneshot import DeferredStart
from synapse_lsp.cli.preload import after_import, start_sdk_import
from synapse_lsp.cli.render import DEFAULT_OUTPUT_LINES
from synapse_lsp.cli.startup import (
    SANDBOX_LOG,
    home_line,
    home_problem,
    quiet_notes,
    stderr_warnings,
)
from synapse_lsp.config import MIN_THINKING_BUDGET, LiveSettings, Settings, synapse_home
from synapse_lsp.errors import ModelError, SynapseError

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.agent.scripted_api import FakeAnthropic
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.agent.store import ChatStore
    from synapse_lsp.core import Workspace
    from synapse_lsp.policy.gate import Asker, RuleStore
    from synapse_lsp.router import BashRouter

DEMO_BANNER = (
    "Offline demo model: no ANTHROPIC_API_KEY is set, so a scripted stand-in answers "
    "(it runs `ls` to show the tool loop). Set ANTHROPIC_API_KEY to talk to Claude."
)
READ_ONLY_NOTE = (
    "This session is open for writing in another Synapse process: it is read-only here "
    "until that process closes it."
)
OUTPUT_LINES_ENV = "SYNAPSE_OUTPUT_LINES"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse chat",
        description="Chat with the Synapse agent in this terminal, or run one prompt with -p.",
        epilog="Environment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, SYNAPSE_HOME, "
        "SYNAPSE_MODEL (or ANTHROPIC_MODEL), SYNAPSE_MAX_TOKENS, SYNAPSE_THINKING_BUDGET; "
        "flags win over them.",
    )
    parser.add_argument(
        "-p", "--print", dest="prompt", metavar="PROMPT", nargs="?", const=headless.FROM_STDIN,
        help="one-shot: run PROMPT (- or none: read it from stdin), print the final answer "
        "on stdout, exit 0 on success (the exit codes: docs/user-guide.md)",
    )  # fmt: skip
    headless.add_flags(parser)
    run_options.add_flags(parser)
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
    add_permission_flags(parser)
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    parser.add_argument(
        "--output-lines", type=int, metavar="N",
        help="show the first and last N lines of each command's output "
        f"(default ${OUTPUT_LINES_ENV} or {DEFAULT_OUTPUT_LINES}; 0 = none)",
    )  # fmt: skip
    return parser


@dataclass
class Runtime:
    """Everything one `synapse chat` process owns; `close()` releases all of it."""

    settings: LiveSettings
    cwd: Path
    store: ChatStore
    workspace: Workspace | None = None
    router: BashRouter | None = None
    model: ModelClient | None = None
    demo: FakeAnthropic | None = None
    session: ChatSession | None = None
    notes: list[str] = field(default_factory=list)
    exit_requested: bool = False
    trusted: bool | None = None  # None: the remembered answer / environment decide
    ask: Asker | None = None  # None: nobody to ask; the gate denies, saying `cannot_ask`
    cannot_ask: str = ""
    sandbox_line: str = ""
    sandbox_warning: bool = False  # asked for a sandbox that could not run
    quiet: tuple[str, ...] = ()  # notices' parts the face said once (an unwritable home)
    questions: TerminalQuestions = field(default_factory=lambda: TerminalQuestions(sys.stdout))
    face: dict[str, Any] = field(default_factory=dict)  # the face layer main() set (flags)
    deferred: DeferredStart | bool = False  # -p: start the tools after the request (oneshot)
    rules: RuleStore | None = None  # None: the remembered rules (else --allow/--deny's too)
    make_model: Callable[[Settings], ModelClient] | None = None  # the API client's maker
    system_append: str = ""  # --append-system-prompt
    watch: bool = True  # the extension watcher; off for one `chat -p` turn (cli/oneshot.py)

    async def start(self, *, demo: bool, allow_demo_fallback: bool) -> None:
        from synapse_lsp.core import Workspace

        model = self._api_model(demo=demo, allow_demo_fallback=allow_demo_fallback)
        # The SDK's import (most of a second) overlaps the shell's start (or began in entry.py).
        start_sdk_import()
        self.model = model if model is not None else await self._demo_model()
        after_import(self.model.prepare)  # the API client too, while nobody waits
        # The gate asks through `ask`; without one (-p, a pipe) it denies, saying `cannot_ask`.
        self.workspace = Workspace(
            self.cwd, self.settings, trusted=self.trusted, ask=self.ask,
            cannot_ask=self.cannot_ask or None, rules=self.rules, watch=self.watch,
        )  # fmt: skip
        if self.workspace.trust_notice:
            self.notes.append(self.workspace.trust_notice)
        if self.deferred:  # chat -p: the first request goes out first (cli/oneshot.py)
            self.router = await self.workspace.prepare()
            self.deferred = DeferredStart(self.workspace, self.model, self.quiet)
            return
        self.router = await self.workspace.start()
        assert self.workspace.shell is not None
        status = self.workspace.shell.sandbox
        self.sandbox_line = status.describe()
        self.sandbox_warning = status.reason is not None
        await self.workspace.registry_ready()
        if self.workspace.registry is not None:  # the REPL's loop idles while you type:
            await self.workspace.registry.wait_for_pending(float("inf"))  # connect them now
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
        """The stored session is opened before the current one is closed: whatever goes
        wrong (an unknown id, an unreadable file) leaves the current session as it was."""
        from synapse_lsp.agent.session import ChatSession

        assert self.router is not None
        current = self.session
        if current is not None and current.id == session_id:
            return f"{current.title} (already the current session)"
        try:
            session = ChatSession.resume(
                self.store, session_id, self.router, self.settings, model=self.model,
                workspace_root=self.cwd,
            )  # fmt: skip
        except SynapseError:
            raise
        except Exception as exc:  # e.g. an unreadable session file: say so, keep going
            raise SynapseError(f"cannot resume {session_id!r}: {exc}") from exc
        self.session = session
        if current is not None:
            await current.close()
        from synapse_lsp.agent.recap import recap

        note = f"\n{READ_ONLY_NOTE}" if session.read_only else ""
        return f"{session.title}\n{recap(session)}{note}"  # turns, last exchange, usage

    def bang_router(self) -> BashRouter:
        """The session's router for the user's own `!` lines: its shell and sandbox,
        with a gate that asks nothing (the user typed the line)."""
        assert self.session is not None and self.workspace is not None
        router = self.session.router
        return router.derive(
            permission=self.workspace.new_gate(lambda: router.shell, typed_by_user=True)
        )

    def request_exit(self) -> None:
        self.exit_requested = True

    def current_session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    def chat_session(self) -> ChatSession | None:
        """`/context`, `/compact`, `/cost` act on the current session."""
        return self.session

    async def list_tools(self, query: str) -> str:
        """`/tools [QUERY]`: the folder's extension commands as `synapse tools list`
        (`search QUERY`) prints them, then the registry's notes."""
        from synapse_lsp.extensions.search import no_match_line, search_commands

        registry = await self.workspace.registry_ready() if self.workspace else None
        if registry is None:
            return "Extensions are unavailable in this session (see the warning at start).\n"
        try:
            found = search_commands(registry.search_index(), query)
        except ValueError as exc:
            return f"{exc}\n"
        lines = [m.line() for m in found]
        if not found.total:
            empty = "No extension commands: no MCP server configured, no skill scripts."
            lines.append(no_match_line(query, None) if query else empty)
        return "\n".join([*lines, *registry.notes()]) + "\n"

    async def list_skills(self) -> str:
        """`/skills`: what `skill:list` prints."""
        from synapse_lsp.extensions.skill_commands import list_text
        from synapse_lsp.extensions.skills import skills_dir

        registry = await self.workspace.registry_ready() if self.workspace else None
        if registry is None:
            return "Extensions are unavailable in this session (see the warning at start).\n"
        return list_text(registry.skills, skills_dir(self.settings().synapse_home))

    def can_pick(self) -> bool:
        """A bare `/resume` offers a list to pick from: only with a terminal to ask in."""
        return sys.stdin.isatty() and sys.stdout.isatty()

    async def pick(self, title: str, options: list[str]) -> int | None:
        """Numbered options, a number read from the terminal; Enter or Ctrl-C/D: None."""
        out = sys.stdout
        out.write(title + "\n" + "".join(f"  [{i}] {o}\n" for i, o in enumerate(options, 1)))
        while True:
            try:
                text = await asyncio.to_thread(input, f"1-{len(options)} (Enter = none)> ")
            except (EOFError, KeyboardInterrupt):
                out.write("\n")
                return None
            text = text.strip()
            if not text:
                return None
            if text.isdigit() and 1 <= int(text) <= len(options):
                return int(text) - 1

    def model_name(self) -> str:
        return self.model.model if self.model is not None else self.settings().model

    def set_model(self, name: str) -> str:
        """`/model NAME`: the face layer gets `model` (this process only, never written to
        a settings file) and the client asks for it from the next call on."""
        layer = {**self.face, "model": name}
        before = set(self.settings.problems)
        problems = [p for p in self.settings.set_face(layer) if p not in before]
        if problems:
            self.settings.set_face(self.face)
            raise SynapseError("; ".join(problems))
        self.face = layer
        if self.model is not None:
            self.model.model = self.settings().model
        return self.model_name()

    def _api_model(self, *, demo: bool, allow_demo_fallback: bool) -> ModelClient | None:
        """The API's model client; None when the demo model is to be used."""
        from synapse_lsp.agent.model import ModelClient

        if demo:
            return None
        try:
            return (self.make_model or ModelClient.from_settings)(self.settings())
        except ModelError:
            if not allow_demo_fallback:
                raise
        return None

    async def _demo_model(self) -> ModelClient:
        from synapse_lsp.agent.model import ModelClient
        from synapse_lsp.agent.scripted_api import FakeAnthropic, demo_script

        self.demo = await FakeAnthropic(demo_script()).start()
        self.notes.append(DEMO_BANNER)
        return ModelClient(api_key="demo", base_url=self.demo.base_url, model="synapse-demo")

    def new_session_now(self, resume: str | None = None) -> ChatSession:
        """A new session, or the stored one `resume` names; with the run's appended
        system prompt, and -p's deferred start attached."""
        from synapse_lsp.agent.session import ChatSession

        assert self.router is not None
        common: dict[str, Any] = {"model": self.model, "workspace_root": self.cwd}
        session = self.session = (
            ChatSession(self.router, self.settings, store=self.store, **common)
            if resume is None
            else ChatSession.resume(self.store, resume, self.router, self.settings, **common)
        )
        session.append_system_prompt(self.system_append)
        if isinstance(self.deferred, DeferredStart):
            self.deferred.attach(session)
        return session

    def resume_now(self, session_id: str) -> ChatSession:
        return self.new_session_now(resume=session_id)

    async def close(self) -> None:
        if self.workspace is not None:
            self.workspace.begin_close()  # MCP servers and shells end beside the session's close
        if self.session is not None:
            await self.session.close()
        for part in (self.workspace, self.model, self.demo):
            if part is not None:
                await part.close()
        self.store.close()


def _print_sessions(store: ChatStore, out: TextIO) -> None:
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


CHANGED_QUESTION = (
    "This folder's {files} changed since Synapse last loaded them (an agent may have "
    "written them): they run programs. Use them as they are now? [y/N] "
)


HOME_CHANGED_QUESTION = (
    "{files} changed since Synapse last loaded it (an agent may have written it): it "
    "decides what the agent may do and what runs. Apply the change as it is now? [y/N] "
)


def ask_home_changes(home: Path, read: Callable[[str], str]) -> bool | None:
    """The REPL's question at start when $SYNAPSE_HOME's governing files changed since
    Synapse last loaded them (`trust.home_unconfirmed`); yes confirms them. None: not
    asked (nothing changed)."""
    from synapse_lsp.policy import trust

    changed = trust.home_unconfirmed(home)
    if not changed:
        return None
    try:
        answer = read(HOME_CHANGED_QUESTION.format(files=", ".join(str(home / n) for n in changed)))
    except (EOFError, KeyboardInterrupt):
        sys.stdout.write("\n")
        return False  # not applied; asked again next time
    if answer.strip().lower() in ("y", "yes"):
        trust.record_home(home, tuple(changed))
        return True
    return False


def ask_trust(cwd: Path, home: Path, *, flag: bool, read: Callable[[str], str]) -> bool | None:
    """The REPL's one question at start: asked only when the folder has its own config
    and nothing (flag, environment, remembered answer) has decided yet; the answer is
    remembered for the folder. None: not asked (the usual rule decides)."""
    from synapse_lsp.policy import trust

    decided = trust.decide(home, cwd, flag=flag)
    changed = trust.unconfirmed(home, cwd) if decided.trusted else []
    if changed:  # trusted, but these changed since Synapse last loaded them
        try:
            answer = read(CHANGED_QUESTION.format(files=trust.names(cwd, changed)))
        except (EOFError, KeyboardInterrupt):
            sys.stdout.write("\n")
            return True  # trusted; the changed files stay unused (said at start)
        if answer.strip().lower() in ("y", "yes"):
            trust.record_loaded(home, cwd)
        return True
    files = trust.needs_trust(cwd)
    if not files or decided.source != "default":
        return None
    try:
        answer = read(TRUST_QUESTION.format(files=trust.names(cwd, files), folder=cwd))
        answer = answer.strip().lower()
    except (EOFError, KeyboardInterrupt):
        sys.stdout.write("\n")
        return False  # not remembered: asked again next time
    trusted = answer in ("y", "yes")
    trust.remember(home, cwd, trusted)
    return trusted


def _output_lines(flag: int | None) -> tuple[int, str | None]:
    """N of `--output-lines` (else $SYNAPSE_OUTPUT_LINES, else the default); a problem."""
    if flag is not None:
        if flag < 0:
            return DEFAULT_OUTPUT_LINES, "--output-lines: expected 0 or more"
        return flag, None
    raw = os.environ.get(OUTPUT_LINES_ENV, "").strip()
    if not raw:
        return DEFAULT_OUTPUT_LINES, None
    if not raw.isdigit():
        return DEFAULT_OUTPUT_LINES, f"${OUTPUT_LINES_ENV}: expected a whole number >= 0"
    return int(raw), None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    stop_signals.for_chat(args.prompt is not None)  # -p: SIGINT/SIGTERM are a cancel
    cwd = (args.cwd or Path.cwd()).resolve()
    problem = headless.check(args) or run_options.check(args)
    if problem or not cwd.is_dir():
        print(f"synapse chat: {problem or f'--cwd {cwd}: not a directory'}", file=sys.stderr)
        return 2
    if args.prompt is None and not args.list and sys.stdin.isatty():
        ask_home_changes(synapse_home(), read=input)  # before the settings are read
    settings = LiveSettings(folder=cwd)
    warnings = list(settings.problems)
    problems: list[str] = []
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
    overrides.update(face_settings(args))
    problems += [p for p in settings.set_face(overrides) if p not in warnings]
    problems += [p for p in settings.refusals if p not in problems]
    output_lines, problem = _output_lines(args.output_lines)
    if problem:
        problems.append(problem)
    for warning in warnings:  # ignored keys and values: the layer below wins
        if warning not in problems:
            print(f"synapse chat: settings: warning: {warning}", file=sys.stderr)
    if problems:
        for problem in problems:
            print(f"synapse chat: settings: {problem}", file=sys.stderr)
        return 2
    from synapse_lsp.agent.store import ChatStore

    home = settings().synapse_home
    home_unusable = home_problem(home)
    quiet = (str(home),) if home_unusable else ()
    stderr_warnings((*quiet, SANDBOX_LOG))  # the banner or -p's note says that one
    if home_unusable:  # one line for what every part that writes there would say
        print(home_line("chat", home, home_unusable), file=sys.stderr)
    store = ChatStore(home / "sessions")
    if args.list:
        _print_sessions(store, sys.stdout)
        return 0
    one_shot = args.prompt is not None
    problem = run_options.resolve_continue(args, store, cwd)  # --continue: --resume ID
    if problem := problem or (headless.take_prompt(args) if one_shot else None):
        print(f"synapse chat: {problem}", file=sys.stderr)
        return 2
    if args.resume:
        try:  # before anything starts: a wrong id should not cost a shell and the SDK
            store.info(args.resume)
        except SynapseError as exc:
            print(f"synapse chat: {exc.message}", file=sys.stderr)
            return 2
    runtime = Runtime(
        settings, cwd, store, face=overrides, quiet=quiet, deferred=one_shot,
        rules=run_options.rules(args, home), watch=not one_shot or args.input_format != "text",
    )  # fmt: skip
    runtime.make_model = run_options.model_factory()
    runtime.system_append = args.append_system_prompt or ""
    if args.yes:
        runtime.ask = yes_asker
    elif one_shot:
        runtime.cannot_ask = "synapse chat -p cannot ask; run it again with --yes to allow it"
    elif sys.stdin.isatty():
        runtime.ask = runtime.questions.ask
    else:
        runtime.cannot_ask = (
            "the chat reads from a pipe and cannot ask; run it again with --yes to allow it"
        )
    if args.trust:
        runtime.trusted = True
    elif not one_shot and sys.stdin.isatty():
        runtime.trusted = ask_trust(cwd, settings().synapse_home, flag=False, read=input)
    loop = asyncio.new_event_loop()
    try:
        try:
            start = runtime.start(demo=args.demo, allow_demo_fallback=not one_shot)
            loop.run_until_complete(stop_signals.start(start))  # a signal: exit 130 / 143
            if args.resume:
                if runtime.resume_now(args.resume).read_only:
                    runtime.notes.append(READ_ONLY_NOTE)
            else:
                runtime.new_session_now()
        except SynapseError as exc:
            print(f"synapse chat: {exc.message}", file=sys.stderr)
            return 2
        if one_shot and runtime.sandbox_warning:  # the REPL's banner says it
            runtime.notes.append(f"warning: {runtime.sandbox_line}")
        for note in quiet_notes(runtime.notes, quiet):
            print(note, file=sys.stderr)
        assert runtime.session is not None
        if one_shot:  # text, or JSON for scripts (cli/headless.py)
            return headless.run(runtime, args, loop, output_lines=output_lines)
        if sys.stdin.isatty():
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (line editing and history for input())
        from synapse_lsp.cli.repl import interactive

        return interactive(runtime, loop, input, output_lines=output_lines)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(runtime.close())
        loop.close()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
