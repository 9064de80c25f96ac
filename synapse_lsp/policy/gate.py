"""Permissions: one decision order for every face, and the sandbox's refusals.

Order (docs/user-guide.md "Sandbox and permissions"): deny rules (the `deny` globs,
remembered and folder denies from `permission_rules`) -> PreToolUse hooks (hooks.py: a
deny ends it, an allow skips the policy, an ask forces the question) -> the
sandbox mode (`sandbox`: read-only refuses `write`/`edit`; workspace-write asks
before a built-in writes outside the workspace; the shell itself is confined by the
kernel, `sandbox.py`) -> the `permission` policy (`auto` never asks;
`ask-writes-outside-workspace`, the default, asks before native commands that
obviously write outside the workspace; `ask-all-native` asks before every native
command; `allow` globs must match every simple command of the line, so `git
status*` never allows `git status && rm -rf /`) -> ask, through the face: Allow once
/ Allow for this session / Always allow <prefix> here / Deny. A command the sandbox
blocked is recognised by `sandbox_refusal` (a documented case table) and the user
is asked whether to re-run it outside the sandbox (`AskingGate.escalate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from synapse_lsp import bashparse, catalog, cmdline
from synapse_lsp.cmdline import simple_commands
from synapse_lsp.commands import Layer, OutsideEnv, Step
from synapse_lsp.config import POLICIES, SANDBOX_MODES, Settings, SettingsSource, as_source
from synapse_lsp.events import RUNNING_TOOL_CALL
from synapse_lsp.policy.governing import governing
from synapse_lsp.policy.hooks import Hooks, notified
from synapse_lsp.policy.hooks import current as hook_scope
from synapse_lsp.policy.writes import inside, unreadable, writes_outside
from synapse_lsp.question import (
    ACTIONS,
    ALLOW_ONCE,
    ALLOW_SESSION,
    ALLOW_WITH_PATH,
    ALWAYS,
    ALWAYS_DENY,
    ALWAYS_OUTSIDE,
    DENY,
    Asker,
    Question,
    always_deny_title,
    gate_options,
)
from synapse_lsp.sandbox import HOST_VIEW, PathView

# Re-exported: a question's titles and types live in question.py.
__all__ = ["ACTIONS", "ALLOW_ONCE", "ALLOW_SESSION", "ALLOW_WITH_PATH", "ALWAYS"]
__all__ += ["ALWAYS_DENY", "ALWAYS_OUTSIDE", "DENY", "Asker", "always_deny_title"]


class Rules(Protocol):
    """Remembered decisions for one folder (`permission_rules`): per simple command;
    `closed` says why every command is denied (the rules could not be read);
    `why_denied` words a deny rule's refusal (a rule given for this run says so)."""

    @property
    def closed(self) -> str | None: ...

    def outside_line(self, commands: Sequence[str]) -> bool: ...

    def decide_line(self, commands: Sequence[str]) -> tuple[str | None, str | None]: ...

    def why_denied(self, prefix: str) -> str: ...


class RuleStore(Protocol):
    """Where "Always allow" answers are read and written (`permission_rules`)."""

    def load(self, root: Path) -> Rules: ...

    def remember(self, root: Path, prefix: str, decision: str) -> None: ...

    def prefix(self, simple_command: str, *, with_flags: bool = False) -> str: ...


NO_ASKING = (
    "this face cannot ask (run it again with --yes to allow what would be asked, or "
    "change the `sandbox`/`permission` settings)"
)


@dataclass
class _Asked:
    reason: str
    outside: bool  # allowing it means running the line outside the sandbox
    once_only: bool = False  # a hook asks: Allow once or Deny (it asks again next time)
    env: OutsideEnv | None = None  # outside: what the re-run gets of the session's exports
    always: bool = True  # an "Always allow" answer may be offered


class AskingGate:
    """`commands.PermissionGate` for every face: one decision order (docs/user-guide.md
    "Sandbox and permissions"): deny rules (the `deny` setting, remembered and folder
    denies) -> PreToolUse hooks (`hooks`, when the line is a chat turn's) -> the sandbox
    mode -> the `permission` policy -> ask.

    Every step of a line is judged as if it were typed alone: `read a | rm x` asks what
    `rm x` asks. One question covers the whole line. An unanswered question is denied
    after `permission_timeout` seconds; a face that cannot ask (`ask` None) denies what
    would be asked, saying why. `sandboxed()` tells whether the session's shell runs
    in the sandbox now: a line the user allowed to write outside the workspace, or to
    re-run after the sandbox blocked it (`escalate`), then runs outside it
    (`runs_outside`).
    """

    def __init__(
        self,
        settings: Settings | SettingsSource,
        workspace_root: Path,
        ask: Asker | None,
        *,
        sandboxed: Callable[[], bool] = lambda: False,
        view: Callable[[], PathView] = lambda: HOST_VIEW,
        rules: RuleStore | None = None,
        cannot_ask: str = NO_ASKING,
        typed_by_user: bool = False,
        hooks: Hooks | None = None,
        tool_hints: Callable[[str], str | None] = lambda _name: None,
    ) -> None:
        self._settings = as_source(settings)
        self._root = workspace_root
        self._ask = ask
        self._sandboxed = sandboxed
        self._view = view  # how the shell spells paths: its /tmp is its own
        self._rules = rules
        self._cannot_ask = cannot_ask
        # The user's own command lines (the REPL's `!`): deny rules and the sandbox
        # mode apply, nothing is asked (the user is who would be asked).
        self._typed_by_user = typed_by_user
        self.hooks = hooks  # the folder's hooks; chat sessions on this gate run them too
        # What an extension command's server says of it: "read-only" (MCP `readOnlyHint`:
        # no question in read-only mode), "destructive" (`destructiveHint`: asked unless
        # the policy is `auto` or a rule allows it), or None. The registry answers.
        self._tool_hints = tool_hints
        self.remembered: set[str] = set()  # "Allow for this session": exact lines
        self._outside_session: set[str] = set()
        self._outside_once: set[str] = set()
        self._read: tuple[Sequence[str], Rules] | None = None  # `check`'s, if nothing asked

    # -------------------------------------------------------------- deciding

    def _needs_asking(self, steps: Sequence[Step], cwd: Path, policy: str) -> str | None:
        """Why the `permission` policy asks, or None."""
        if policy == "auto":
            return None
        if policy == "ask-all-native":
            native = [s.text for s in steps if s.layer is Layer.NATIVE]
            return "native command: " + _shorten(native[0]) if native else None
        problem = unreadable(steps)
        if problem is not None:
            return f"the line cannot be read reliably: {problem}"
        marked = self._hinted(steps, "destructive")
        if marked:
            return f"its server marks {_shorten(marked[0], 80)} destructive (destructiveHint)"
        outside: list[str] = []
        for step in steps:
            outside += writes_outside(step.text, step.layer, cwd, self._root, self._view())
        if outside:
            return "writes outside the workspace: " + ", ".join(outside[:3])
        return None

    def _hinted(self, steps: Sequence[Step], hint: str) -> list[str]:
        """The extension steps (not `--help`) whose server gives them `hint`."""
        return [
            s.text
            for s in steps
            if s.layer is Layer.EXTENSION
            and not _is_help(s.text)
            and self._tool_hints(_first(s.text)) == hint
        ]

    def _mode(self, steps: Sequence[Step], cwd: Path, mode: str) -> tuple[str | None, str | None]:
        """The sandbox mode's word on the line's built-in and extension steps (the
        shell's own commands are the kernel's business): (refusal, question)."""
        if mode not in SANDBOX_MODES or mode == "full-access":
            return None, None
        writes = [s for s in steps if _writes_files(s)]
        if mode == "read-only":
            if writes:
                return (
                    "refused: the sandbox mode is read-only, so `write` and `edit` cannot "
                    "change files (setting `sandbox`)",
                    None,
                )
            # MCP tools run in their servers, outside the sandbox; skill scripts run in
            # it when there is one (`skills.run_script`).
            sandboxed = self._sandboxed()
            ext = [
                s.text
                for s in steps
                if s.layer is Layer.EXTENSION
                and not _is_help(s.text)
                and (not sandboxed or not _first(s.text).startswith("skill:"))
                and self._tool_hints(_first(s.text)) != "read-only"
            ]
            if ext:
                return None, (
                    "read-only mode: an extension command runs outside the sandbox and may "
                    "change things: " + _shorten(ext[0], 80)
                )
            return None, None
        outside: list[str] = []
        for step in writes:
            outside += writes_outside(step.text, step.layer, cwd, self._root, self._view())
        if outside:
            return None, "writes outside the workspace: " + ", ".join(outside[:3])
        return None, None

    async def check(
        self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
    ) -> str | None:
        settings = self._settings()
        line = command.strip()
        self._outside_once.discard(line)  # a grant left unused by an earlier run lapses
        self._read = None
        plan = list(steps) or [Step(line, layer)]
        if len(line) > 64 * 1024:  # scanning a long line is linear, but keep it off the loop
            parts = await asyncio.to_thread(_parts, plan)
        else:
            parts = _parts(plan)
        # 1. Deny rules: the setting, then remembered and folder denies.
        for pattern in settings.deny:
            if fnmatch.fnmatchcase(line, pattern) or any(
                fnmatch.fnmatchcase(p, pattern) for p in parts
            ):
                return f"denied by the `deny` setting (pattern {pattern!r})"
        if len(line) > 64 * 1024:  # a rule per command of a huge line: off the event loop
            remembered, rule = await asyncio.to_thread(self._remembered, parts)
        else:
            remembered, rule = self._remembered(parts)
        if remembered == "deny":
            return f"denied: {rule}"
        # 2. PreToolUse hooks, for a line of a chat turn (`hooks.current()`): the whole
        # line once, as Claude Code's hooks see a Bash call.
        hooked, hook_reason = None, ""  # "allow" or "ask", and why
        scope = hook_scope()
        if self.hooks is not None and scope is not None and not self._typed_by_user:
            verdict = await self.hooks.pre_tool_use(scope, line, cwd)
            if verdict.decision == "deny":
                return verdict.reason
            hooked, hook_reason = verdict.decision, verdict.reason
        # 2b. What governs the agent (its settings, hooks, permissions, trusted folders,
        # MCP configs, a repository's .git): a built-in never writes it without a
        # question of its own, in every mode and policy; never on `--yes`.
        for step in plan:
            target = _writer_target(step, cwd, self._view())
            what = governing(target, self._root, settings.synapse_home) if target else None
            if target is not None and what is not None:
                refused = await self._governing(line, parts, cwd, target, what)
                if refused is not None:
                    return refused
        # 3. The sandbox mode.
        mode = settings.sandbox
        refusal, question = self._mode(plan, cwd, mode)
        if refusal is not None:
            return refusal
        if self._typed_by_user:
            return None
        if hooked == "ask":  # whatever would allow the line: the user is asked
            why = f"{question}; {hook_reason}" if question else hook_reason
            return await self._ask_line(line, parts, cwd, _Asked(why, False, True))
        # 4. The policy (`allow` globs, session and remembered allows and a hook's allow
        # skip it; the sandbox mode's question stays; no glob or prefix vouches for a
        # line the parser does not: its commands are a guess).
        problem = unreadable(plan)
        allowed = (
            hooked == "allow"
            or line in self.remembered
            or line in self._outside_session
            or (problem is None and remembered == "allow")
            or (
                problem is None
                and bool(settings.allow)
                and all(
                    bashparse.parse(p).plain
                    and any(fnmatch.fnmatchcase(p, pat) for pat in settings.allow)
                    for p in parts
                )
            )
        )
        if allowed and question is None:
            return None
        sandboxed = self._sandboxed()
        policy = settings.permission if settings.permission in POLICIES else POLICIES[1]
        if mode == "read-only" and not sandboxed:
            # No kernel sandbox to keep native commands from writing: each one asks.
            policy = "ask-all-native"
        reason = question
        if reason is None and not allowed:
            if len(line) > 64 * 1024:
                reason = await asyncio.to_thread(self._needs_asking, plan, cwd, policy)
            else:
                reason = self._needs_asking(plan, cwd, policy)
        if reason is None:
            return None
        # 5. Ask. Allowing a native write outside the workspace runs the line outside
        # the sandbox (in it, the write would fail).
        outside = sandboxed and reason.startswith("writes outside") and _has_native(plan)
        if outside:
            reason += "; allowing runs it outside the sandbox"
        asked = _Asked(reason, outside, always=problem is None)  # no "Always" for a guess
        return await self._ask_line(line, parts, cwd, asked)

    async def _ask_line(
        self, line: str, parts: Sequence[str], cwd: Path, asked: _Asked
    ) -> str | None:
        shown = _showable(line, parts)
        if shown is None:
            return f"denied: {asked.reason}; the line has too many commands to show in a question"
        message = f"Synapse wants to run:\n  {shown}\nin {cwd}\n({asked.reason})"
        return await self._question(line, parts, cwd, message, asked)

    async def approve(self, what: str, message: str, reason: str) -> str | None:
        """A question that is no command line (MCP sampling): None when allowed (`auto`
        policy: unasked), else why not. Allow once or Deny; `cannot_ask`, timeout as ever."""
        if self._settings().permission == "auto":
            return None
        asked = _Asked(reason, False, once_only=True)
        return await self._question(what, [what], self._root, message, asked)

    async def escalate(
        self, command: str, cwd: Path, why: str, env: OutsideEnv | None = None
    ) -> bool:
        """The sandbox blocked `command` (`why`, from `sandbox_refusal`): ask whether to
        re-run it outside the sandbox. True: run it outside now. `env`: what the re-run
        gets of the session's exports, said in the question; an answer carrying the
        session's PATH sets `env.with_session_path`."""
        line = command.strip()
        if not self._sandboxed() or self._typed_by_user:
            return False
        parts = _parts([Step(line, Layer.NATIVE)])
        if line in self._outside_session or self._outside_rule(parts):
            return True
        shown = _showable(line, parts)
        if shown is None:
            return False
        told = env.describe() if env is not None else ""
        message = (
            f"The sandbox blocked:\n  {shown}\nin {cwd}\n({why})\n"
            "Re-run it outside the sandbox? It may have partly run already."
            + (f"\nOutside, {cmdline.visible(told)}." if told else "")
        )
        denied = await self._question(line, parts, cwd, message, _Asked(why, True, env=env))
        if denied is None:
            self._outside_once.discard(line)  # the caller runs it outside right now
        return denied is None

    def runs_outside(self, command: str) -> bool:
        """Whether `command`, just allowed by `check`, runs outside the sandbox."""
        line = command.strip()
        if not self._sandboxed():
            return False
        if line in self._outside_once:
            self._outside_once.discard(line)
            return True
        if line in self._outside_session:
            return True
        parts, (read, self._read) = _parts([Step(line, Layer.NATIVE)]), (self._read, None)
        if read is not None and read[0] == parts:  # just read by `check`, nothing asked
            return read[1].outside_line(parts)
        return self._outside_rule(parts)

    async def _governing(
        self, line: str, parts: Sequence[str], cwd: Path, target: Path, what: str
    ) -> str | None:
        """The question for a built-in write of a governing file: allow once or deny,
        nothing remembered; refused where nobody is asked (`--yes` answers for nobody)."""
        if self._ask is None or getattr(self._ask, "answers_everything", False):
            return (
                f"refused: {target} governs {what}; the agent changes it only when you "
                "confirm each change in an interactive session (--yes does not cover it)"
            )
        shown = _showable(line, parts)
        if shown is None:
            return f"refused: {target} governs {what}, and the line is too long to show"
        message = (
            f"The agent wants to change {target}, which governs {what}:\n  {shown}\n"
            "What it writes there decides what the agent may do or what runs outside "
            "the sandbox. Allow this one change?"
        )
        asked = _Asked(f"changes {target}", False, once_only=True)
        return await self._question(line, parts, cwd, message, asked)

    # ---------------------------------------------------------------- asking

    async def _question(
        self, line: str, parts: Sequence[str], cwd: Path, message: str, asked: _Asked
    ) -> str | None:
        """Ask (a `question.Question` about the running tool call); None when allowed
        (and remember the answer), else the denial."""
        self._read = None  # the rules may change meanwhile: `runs_outside` reads them
        if self._ask is None:
            return f"denied: {asked.reason}; {self._cannot_ask}"
        once = asked.once_only or not asked.always
        prefixes = [] if once else _prefixes(self._rules, parts, outside=asked.outside)
        always: str | None = None
        if asked.outside:
            # One prefix at most: "always run X outside" must never carry a second
            # command (`npm install && rm …`) along.
            if len(prefixes) == 1:
                always = f"{ALWAYS_OUTSIDE} `{prefixes[0]}` outside the sandbox here"
        elif prefixes:
            always = f"{ALWAYS} {', '.join(f'`{p}`' for p in prefixes)} here"
        with_path = asked.env is not None and asked.env.session_path is not None
        # every part of it (the line, the reason quoting it) with escapes shown
        question = Question(
            tool_call_id=RUNNING_TOOL_CALL.get(),
            command=cmdline.visible(_shorten(line, SHOWN_CHARS)),
            cwd=str(cwd),
            steps=tuple(cmdline.visible(_shorten(p.strip(), 160)) for p in parts),
            reason=cmdline.visible(asked.reason),
            options=gate_options(once_only=asked.once_only, with_path=with_path, always=always),
            message=cmdline.visible(message),
        )
        wait = self._settings().permission_timeout
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel that comes as
            # the answer does, and the command would run in a cancelled turn.
            async with asyncio.timeout(wait):
                answer = await notified(self._ask, question, self.hooks)
        except TimeoutError:
            return f"denied: nobody answered the permission question within {wait:g} s"
        except Exception as exc:  # the face could not ask: do not run
            return f"denied: the question could not be asked ({exc})"
        if answer == ALLOW_WITH_PATH and with_path and asked.env is not None:
            asked.env.with_session_path = True
            self._outside_once.add(line)
            return None
        if answer == ALLOW_ONCE:
            if asked.outside:
                self._outside_once.add(line)
            return None
        if answer == ALLOW_SESSION:
            (self._outside_session if asked.outside else self.remembered).add(line)
            return None
        if always is not None and answer == always:
            assert self._rules is not None
            for prefix in prefixes:
                try:
                    self._rules.remember(
                        self._root, prefix, "outside" if asked.outside else "allow"
                    )
                except OSError as exc:
                    return f"denied: the answer could not be remembered ({exc})"
            if asked.outside:
                self._outside_once.add(line)
            else:
                self.remembered.add(line)
            return None
        if always is not None and answer == always_deny_title(always):
            assert self._rules is not None
            for prefix in prefixes:
                with contextlib.suppress(OSError):
                    self._rules.remember(self._root, prefix, "deny")
            return "denied by the user (remembered for this folder)"
        return "denied by the user"

    def _outside_rule(self, parts: Sequence[str]) -> bool:
        """Every command of the line is remembered to run outside the sandbox."""
        if self._rules is None:
            return False
        try:
            return self._rules.load(self._root).outside_line(parts)
        except OSError:
            return False

    def _remembered(self, parts: Sequence[str]) -> tuple[str | None, str | None]:
        """("allow", rules) / ("deny", why) from the remembered rules, or (None, None).
        Rules that cannot be read deny (their allows are lost, their denies must hold)."""
        if self._rules is None:
            return None, None
        try:
            rules = self._rules.load(self._root)
            self._read = (parts, rules)
        except OSError as exc:
            return "deny", f"the remembered permission rules cannot be read ({exc})"
        decision, rule = rules.decide_line(parts)
        if decision == "deny" and rules.closed is None and rule is not None:
            return decision, rules.why_denied(rule)
        return decision, rule


def _prefixes(store: RuleStore | None, parts: Sequence[str], *, outside: bool = False) -> list[str]:
    """What "Always allow" would remember: each command's prefix (at most 3); for
    "always run outside", the narrowest one (its flags too)."""
    if store is None:
        return []
    found: list[str] = []
    for part in parts:
        builtin = catalog.lookup(part.split(maxsplit=2)[:2])
        if builtin is not None and catalog.traits(builtin).effect is not catalog.Effect.RUN:
            continue  # a file or plan built-in: judged by its paths, not remembered
        prefix = store.prefix(part, with_flags=outside)
        if not prefix:
            return []  # a command nothing safe can be remembered for: no "Always"
        if prefix not in found:
            found.append(prefix)
    return found if 0 < len(found) <= 3 else []


def _writes_files(step: Step) -> bool:
    """A built-in step whose catalog entry says it writes files (`write`, `edit`)."""
    if step.layer is not Layer.AGENT:
        return False
    found = catalog.traits_of(_first(step.text))
    return found is not None and found.effect is catalog.Effect.WRITE


SHOWN_CHARS = 2000
SHOWN_COMMANDS = 40


def _writer_target(step: Step, cwd: Path, view: PathView) -> Path | None:
    """The file a `write`/`edit` step writes (a host path), or None."""
    if not _writes_files(step):
        return None
    heredoc = cmdline.extract_heredoc(step.text)
    try:
        argv = cmdline.split_argv(heredoc[0] if heredoc is not None else step.text)
    except ValueError:
        return None
    found = catalog.invocation(argv, heredoc[1] if heredoc is not None else None)
    if found is None or not found.writes:
        return None
    given = Path(found.writes[0]).expanduser()
    return view.host(given) if given.is_absolute() else cwd / given


def _showable(line: str, parts: Sequence[str]) -> str | None:
    """The line as a question shows it: whole when short; else its head and every
    command in it (a long line must not hide a command past what is shown). None when
    it has too many commands to show: such a line is not asked about, it is denied."""
    if len(line) <= SHOWN_CHARS:
        return cmdline.visible(line)  # escapes shown as escapes: what is asked is what runs
    if len(parts) > SHOWN_COMMANDS:
        return None
    listed = "\n".join(f"  - {cmdline.visible(_shorten(p.strip(), 160))}" for p in parts)
    return (
        f"{cmdline.visible(_shorten(line, 300))}\n  The line is {len(line):,} characters "
        f"long; its {len(parts)} command(s):\n{listed}"
    )


def _first(text: str) -> str:
    return cmdline.first_word(text.strip())


def _is_help(text: str) -> bool:
    words = text.split()
    return len(words) == 2 and words[1] in ("-h", "--help")


def _has_native(steps: Sequence[Step]) -> bool:
    return any(s.layer is Layer.NATIVE for s in steps)


def _parts(steps: Sequence[Step]) -> list[str]:
    """The simple commands of every step (what deny/allow globs are matched against)."""
    parts: list[str] = []
    for step in steps:
        found = simple_commands(step.text) if step.layer is Layer.NATIVE else []
        parts += found or [step.text.strip()]
    return parts


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


# ---------------------------------------------------------------- escalation

# How a command the sandbox blocked fails (docs/user-guide.md "When the sandbox
# blocks a command"): (pattern in its output, case, needs network off).
_REFUSALS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"Read-only file system|EROFS"), "the sandbox refused a write", False),
    (
        re.compile(
            r"Temporary failure in name resolution|Could not resolve host|Name or service "
            r"not known|nodename nor servname|getaddrinfo (?:failed|ENOTFOUND|EAI_AGAIN)|"
            r"EAI_AGAIN|No address associated with hostname|Network is unreachable|"
            r"ENETUNREACH"
        ),
        "the network is off in the sandbox",
        True,
    ),
)
_REFUSED = re.compile(r"Connection refused|ECONNREFUSED")
_DENIED = re.compile(r"Permission denied|EACCES")
_PATH = re.compile(r"""(?:'|"|`|‘|\s|^)(/[^\s'"`’:]+)""")


def sandbox_refusal(
    output: str, exit_code: int, *, network_off: bool, writable: Sequence[Path]
) -> str | None:
    """Why the sandbox (not the command itself) made a failed command fail, or None.

    The case table: EROFS ("Read-only file system"); with the network off, name
    resolution failures, an unreachable network, and ECONNREFUSED (only the sandbox's
    own loopback exists, where nothing listens: the service is outside); EACCES ("Permission
    denied") only when it names a path outside the writable set."""
    if exit_code == 0:
        return None
    for pattern, case, needs_off in _REFUSALS:
        if (network_off or not needs_off) and pattern.search(output):
            return case
    if network_off and _REFUSED.search(output):
        # Without a network the sandbox has only its own loopback (other addresses are
        # unreachable): a refused connection was to a loopback service outside it.
        return "the network is off in the sandbox (loopback services outside it are unreachable)"
    for line in output.splitlines():
        if not _DENIED.search(line):
            continue
        for match in _PATH.finditer(line):
            path = Path(match.group(1))
            if not any(inside(path, root) for root in writable):
                return f"the sandbox refused a write to {path}"
    return None
