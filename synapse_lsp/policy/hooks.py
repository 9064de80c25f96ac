"""Hooks: the user's own commands at eight points of a session, in Claude Code's shape.

`{"hooks": {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command",
"command": "…", "timeout": 60}]}]}}` in `$SYNAPSE_HOME/settings.json` (the `hooks`
setting, home only) and, only when the folder is trusted, in the folder's
`.synapse/settings.json`, `.claude/settings.json` and `.claude/settings.local.json`
(`folder_files.HOOK_FILES`; read once per permission gate, so a file the agent writes
mid-session changes nothing until the next session); with `claudeUserHooks` (the
default), Claude Code's user settings too (`claude_user_settings`), named once in a
notice. Events: PreToolUse (from the
permission gate, `policy.gate.AskingGate`; `updatedInput`: hook_events.py),
PostToolUse (`agent/loop.py`), UserPromptSubmit, Stop, SessionStart (with
`$CLAUDE_ENV_FILE`: hook_env.py) and SessionEnd (`agent/session_hooks.py`),
PreCompact (session_hooks.py, `agent/compaction.py`), Notification (`notified`, from
the gate's question). Running one hook: hook_process.py.

A hook gets Claude Code's JSON on stdin and answers with its exit code (0 ok, 2
blocking, else an error) and, on 0, optional JSON on stdout. The one Bash tool is
presented to matchers as the tool a Claude Code hook expects (`tool_call`): a single
`edit`/`write`/`read` call as `Edit`/`Write`/`Read`, `mcp:s:t` as `mcp__s__t`,
anything else (compound lines included, seen whole) as `Bash`. Hooks run as the user,
unsandboxed, in the workspace root, with the model credentials and `secretEnv`
removed from their environment (`secrets.child_env`); matching hooks run at once,
each in a process group of its own, killed at its timeout (default 60 s), on cancel,
and once it exits (whatever it left behind). A PreToolUse hook that fails (exit other
than 0/2, a signal, a timeout, a command that cannot start) denies the call; every
other hook fails open with a warning (a `Notice`). docs/user-guide.md "Hooks".

Who is asking comes from `HookScope` (a context variable the chat session sets for
its turn): outside a turn (the user's own commands, an editor's direct command)
no hook runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synapse_lsp import catalog, cmdline
from synapse_lsp.builtins.args import ArgError
from synapse_lsp.config import SETTINGS_FILE, SettingsSource
from synapse_lsp.events import RUNNING_TOOL_CALL, Notice
from synapse_lsp.policy import claude_home, folder_files, hook_events
from synapse_lsp.policy.hook_process import (
    DEFAULT_TIMEOUT_S,
    MATCHED,
    SHOWN_CHARS,
    Hook,
    Ran,
    run_one,
)
from synapse_lsp.policy.hook_process import short as _short
from synapse_lsp.policy.secrets import child_env
from synapse_lsp.question import Question
from synapse_lsp.sandbox import HOST_VIEW, PathView

EVENTS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop")
EVENTS += ("SessionStart", "SessionEnd", "PreCompact", "Notification", "SubagentStop")


def parse(value: Any, source: str) -> tuple[list[Hook], list[str]]:
    """The hooks of one `hooks` object and the problems found (a bad entry is skipped,
    the others kept)."""
    hooks: list[Hook] = []
    problems: list[str] = []
    if not isinstance(value, dict):
        return [], [f"{source}: `hooks` must be an object of events"]
    for event, groups in value.items():
        where = f"{source}: hooks.{event}"
        if event not in EVENTS:
            problems.append(f"{where}: not an event Synapse runs ({', '.join(EVENTS)}); ignored")
            continue
        if not isinstance(groups, list):
            problems.append(f"{where}: expected a list of {{matcher, hooks}} objects")
            continue
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                problems.append(f'{where}[{i}]: expected {{"matcher": …, "hooks": [...]}}')
                continue
            matcher = group.get("matcher", "")
            if not isinstance(matcher, str):
                problems.append(f"{where}[{i}].matcher: expected a string")
                continue
            if matcher not in ("", "*") and not re.fullmatch(r"[\w|]+", matcher):
                try:
                    re.compile(matcher)
                except re.error as exc:
                    problems.append(f"{where}[{i}].matcher {matcher!r}: bad pattern ({exc})")
                    continue
            for j, entry in enumerate(group["hooks"]):
                found = _entry(entry, f"{where}[{i}].hooks[{j}]")
                if isinstance(found, str):
                    problems.append(found)
                else:
                    command, timeout = found
                    hooks.append(Hook(event, matcher, command, timeout, source))
    return hooks, problems


def _entry(entry: Any, where: str) -> tuple[str, float] | str:
    if not isinstance(entry, dict):
        return f"{where}: expected an object"
    kind = entry.get("type", "command")
    if kind != "command":
        return f'{where}: type {kind!r} is not supported (only "command"); ignored'
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        return f"{where}: `command` must be a non-empty string"
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        return f"{where}: `timeout` must be a positive number of seconds"
    return command, float(timeout)


# ---------------------------------------------------------------- the tool's names


def tool_call(line: str, cwd: Path, view: PathView = HOST_VIEW) -> tuple[str, dict[str, Any]]:
    """(tool_name, tool_input) as a Claude Code hook expects them for one command line.

    One call of a built-in that is a Claude Code tool (`catalog.Traits.claude_tool`:
    `edit` is `Edit` {file_path, old_string, new_string, replace_all}, `write` is
    `Write` {file_path, content}, `read` is `Read` {file_path, offset?, limit?}; a
    heredoc allowed, nothing after it; paths absolute, against `cwd`, as the host
    spells them: `view`); one `mcp:<server>:<tool>` call is `mcp__<server>__<tool>`
    {command}; anything else — a compound line too, whole — is `Bash` {command}."""
    text = line.strip()
    word = cmdline.first_word(text)
    found = catalog.traits_of(word)
    if (found is not None and found.claude_tool is not None) or word.startswith("mcp:"):
        with contextlib.suppress(ValueError, ArgError):
            mapped = _mapped(text, word, cwd, view)
            if mapped is not None:
                return mapped
    return "Bash", {"command": text}


def _mapped(
    text: str, word: str, cwd: Path, view: PathView = HOST_VIEW
) -> tuple[str, dict[str, Any]] | None:
    heredoc = cmdline.extract_heredoc(text)
    head, body = heredoc if heredoc is not None else (text, None)
    if len(cmdline.split_all(head)) != 1:
        return None
    argv = cmdline.split_argv(head)
    if word.startswith("mcp:"):
        parts = word.split(":")
        if len(parts) != 3 or not all(parts[1:]):
            return None
        return f"mcp__{parts[1]}__{parts[2]}", {"command": text}

    def path(arg: str) -> str:
        return os.path.normpath(cwd / view.host(Path(arg).expanduser()))

    argv = catalog.normalized(argv)
    builtin = catalog.lookup(argv)
    if builtin is None:
        return None
    tool = catalog.traits(builtin).claude_tool
    tool_input: dict[str, Any] | None = builtin.hook_input(argv, body, path)
    return (tool, tool_input) if tool is not None and tool_input is not None else None


# ---------------------------------------------------------------- who is asking


@dataclass
class HookScope:
    """One chat session's turn (or its background work), as hooks see it: who, where,
    and where warnings go. `halt` is set when a hook answered `continue: false`."""

    hooks: Hooks
    session_id: str
    transcript_path: str
    cwd: Callable[[], Path]
    notify: Callable[[Notice], None]
    halt: str | None = None
    # How the session's commands spell paths: hooks run on the host, so a `/tmp/x`
    # the model names reaches them as the host file it is (`sandbox.PathView`).
    view: Callable[[], PathView] = lambda: HOST_VIEW
    # Lines a PreToolUse hook replaced (`updatedInput.command`): old -> new, taken by
    # the router (`hook_events.take_rewrite`); `rewritten`: the new lines (no chains).
    rewrites: dict[str, str] = field(default_factory=dict)
    rewritten: set[str] = field(default_factory=set)


_SCOPE: contextvars.ContextVar[HookScope | None] = contextvars.ContextVar(
    "synapse_hook_scope", default=None
)


def current() -> HookScope | None:
    return _SCOPE.get()


def enter(scope: HookScope | None) -> None:
    """Make `scope` the current one for this task (and the tasks it starts)."""
    _SCOPE.set(scope)


async def notified(
    ask: Callable[[Question], Awaitable[str | None]], question: Question, hooks: Any
) -> str | None:
    """`ask(question)` — a permission question waiting for its answer — with the
    Notification hooks of the current turn started alongside (not awaited)."""
    scope = current()
    if isinstance(hooks, Hooks) and scope is not None and hooks.has("Notification"):
        fields = {"message": f"Synapse needs your permission: {question.command}"}
        fields["notification_type"] = PROMPT
        task = asyncio.ensure_future(hooks.event(scope, "Notification", PROMPT, fields))
        _RUNNING.add(task)
        task.add_done_callback(_RUNNING.discard)
    return await ask(question)


PROMPT = "permission_prompt"
_RUNNING: set[asyncio.Future[None]] = set()  # Notification hooks under way


def of_gate(gate: object) -> Hooks | None:
    """The hooks a permission gate carries (`core.Workspace` gives every agent gate its
    folder's), else None."""
    found = getattr(gate, "hooks", None)
    return found if isinstance(found, Hooks) else None


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class PreVerdict:
    decision: str | None  # "deny", "ask", "allow" or None (no word)
    reason: str = ""


@dataclass(frozen=True)
class PromptVerdict:
    blocked: str | None = None  # why the prompt is not sent
    context: tuple[str, ...] = ()


# ---------------------------------------------------------------- the hooks


@dataclass(frozen=True)
class Configured:
    hooks: tuple[Hook, ...]
    problems: tuple[str, ...]
    withheld: tuple[str, ...]  # folder files with hooks, not read: the folder is not trusted


class Hooks:
    """The hooks of one folder for one permission gate (and the sessions using it)."""

    def __init__(
        self,
        settings: SettingsSource,
        root: Path,
        trusted: Callable[[], bool],
        *,
        withheld: Callable[[], Sequence[Path]] = tuple,
    ) -> None:
        self._settings = settings
        self.root = root
        self._trusted = trusted
        # A trusted folder's files and folders changed since Synapse last loaded them
        # (`trust.unconfirmed`): not used until the user confirms them (claude_code.py too).
        self.unconfirmed = withheld
        self._home: tuple[object, list[Hook], list[str]] | None = None
        self._folder: tuple[bool, list[Hook], list[str], list[str]] | None = None
        self._user: tuple[list[Hook], list[str]] | None = None  # claude_user_settings()
        self._announced = False  # the notice naming the user's Claude Code hooks

    def trusted(self) -> bool:
        """Whether the folder is trusted now (its own files count)."""
        return self._trusted()

    def configured(self) -> Configured:
        """Home hooks as the live settings say; the folder's, read once per trust state."""
        settings = self._settings()
        value = settings.hooks
        if self._home is None or self._home[0] is not value:
            source = str(settings.synapse_home / SETTINGS_FILE)
            self._home = (value, *parse(dict(value), source)) if value else (value, [], [])
        trusted = self._trusted()
        if self._folder is None or self._folder[0] is not trusted:
            self._folder = (trusted, *self._read_folder(trusted))
        _, home, home_problems = self._home
        _, folder, folder_problems, withheld = self._folder
        if settings.claude_user_hooks:  # ~/.claude/settings.json's: the user's own
            if self._user is None:
                self._user = _read_hooks(claude_user_settings()) or ([], [])
            home, home_problems = home + self._user[0], home_problems + self._user[1]
        return Configured(
            tuple(home + folder), tuple(home_problems + folder_problems), tuple(withheld)
        )

    def _read_folder(self, trusted: bool) -> tuple[list[Hook], list[str], list[str]]:
        hooks: list[Hook] = []
        problems: list[str] = []
        withheld: list[str] = []
        unconfirmed = set(self.unconfirmed()) if trusted else set()
        for path in folder_files.hook_files(self.root):
            if not trusted or path in unconfirmed:
                withheld.append(str(path))
                continue
            found, bad = _read_hooks(path) or ([], [])
            hooks += found
            problems += bad
        return hooks, problems, withheld

    def describe(self) -> str:
        """What `/hooks` prints: every hook by event, matcher, command and file."""
        found = self.configured()
        lines: list[str] = []
        for event in EVENTS:
            mine = [h for h in found.hooks if h.event == event]
            if not mine:
                continue
            lines.append(event)
            for hook in mine:
                matcher = (hook.matcher or "*") if event in MATCHED else "-"
                lines.append(
                    f"  {matcher}  {hook.command}  (timeout {hook.timeout:g} s; {hook.source})"
                )
        if not lines:
            lines.append(
                f'No hooks. Add them under "hooks" in $SYNAPSE_HOME/{SETTINGS_FILE} '
                "(Claude Code's shape; see the user guide, Hooks)."
            )
        if found.withheld:
            lines.append("Not loaded (the folder is not trusted): " + ", ".join(found.withheld))
        lines += [f"Problem: {p}" for p in found.problems]
        return "\n".join(lines)

    # ------------------------------------------------------------- the events

    async def pre_tool_use(self, scope: HookScope, line: str, cwd: Path) -> PreVerdict:
        """The hooks' word on a command line: any deny wins, then ask, then allow. A
        hook that fails denies (fail closed)."""
        if not self.has("PreToolUse"):
            return PreVerdict(None)  # no parsing of a long line for nothing
        name, tool_input = tool_call(line, cwd, scope.view())
        fields = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_use_id": RUNNING_TOOL_CALL.get(),
        }
        scope.rewrites.pop(line, None)  # one a caller other than the router left
        denied: list[str] = []
        asked: list[str] = []
        allowed = False
        for ran in await self._run(scope, "PreToolUse", name, fields):
            if ran.failed:
                denied.append(ran.failure() + " (a PreToolUse hook that fails denies the call)")
                continue
            if ran.exit_code == 2:
                denied.append(_short(ran.stderr.strip()) or "(the hook gave no reason)")
                continue
            _show(scope, ran)
            updated = ran.specific("updatedInput")
            if updated is not None:
                problem = hook_events.rewrite(scope, line, updated, tool_input)
                if problem is not None:
                    denied.append(
                        f"the PreToolUse hook `{_short(ran.hook.command, 120)}` {problem}"
                    )
                    continue
            decision = ran.specific("permissionDecision")
            reason = ran.specific("permissionDecisionReason") or ran.output.get("reason")
            if decision is None:  # the older `decision` field
                decision = {"approve": "allow", "block": "deny"}.get(
                    str(ran.output.get("decision"))
                )
            if ran.output.get("continue") is False:
                decision = "deny"
                reason = reason or ran.output.get("stopReason")
                scope.halt = str(
                    ran.output.get("stopReason") or "a PreToolUse hook stopped the turn"
                )
            why = _short(str(reason)) if reason else ""
            if decision == "deny":
                denied.append(why or "(the hook gave no reason)")
            elif decision == "ask":
                asked.append(why)
            elif decision == "allow":
                allowed = True
            elif decision not in (None, "defer"):  # defer: no word (Claude Code's -p only)
                denied.append(
                    f"the PreToolUse hook `{_short(ran.hook.command, 120)}` answered "
                    f"permissionDecision {decision!r} (not allow, deny or ask)"
                )
        if denied:
            scope.rewrites.pop(line, None)
            return PreVerdict("deny", "denied by a PreToolUse hook: " + "; ".join(denied))
        if line in scope.rewrites:  # the router runs the new line, gated afresh
            return PreVerdict("deny", hook_events.REWRITTEN + scope.rewrites[line])
        if asked:
            shown = "; ".join(a for a in asked if a)
            return PreVerdict("ask", "a PreToolUse hook asks" + (f": {shown}" if shown else ""))
        return PreVerdict("allow" if allowed else None)

    async def post_tool_use(
        self, scope: HookScope, line: str, cwd: Path, response: dict[str, Any]
    ) -> str:
        """What the hooks add to the tool result the model sees ("" for nothing)."""
        if not self.has("PostToolUse"):
            return ""
        name, tool_input = tool_call(line, cwd, scope.view())
        if "file_path" in tool_input:
            response = {**response, "filePath": tool_input["file_path"]}
        fields = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_response": response,
            "tool_use_id": RUNNING_TOOL_CALL.get(),
        }
        said: list[str] = []
        for ran in await self._run(scope, "PostToolUse", name, fields):
            if self._fail_open(scope, ran):
                continue
            if ran.exit_code == 2:
                said.append(ran.stderr.strip())
            elif ran.output.get("decision") == "block":
                said.append(str(ran.output.get("reason") or "(the hook gave no reason)"))
            extra = ran.specific("additionalContext")
            if isinstance(extra, str) and extra.strip():
                said.append(extra.strip())
        return "".join(f"\n[PostToolUse hook] {_short(s)}" for s in said if s)

    async def user_prompt_submit(self, scope: HookScope, prompt: str) -> PromptVerdict:
        blocked: list[str] = []
        context: list[str] = []
        for ran in await self._run(scope, "UserPromptSubmit", None, {"prompt": prompt}):
            if self._fail_open(scope, ran):
                continue
            if ran.exit_code == 2:
                blocked.append(_short(ran.stderr.strip()) or "(no reason given)")
            elif ran.output.get("decision") == "block" or ran.output.get("continue") is False:
                why = ran.output.get("reason") or ran.output.get("stopReason")
                blocked.append(_short(str(why)) if why else "(no reason given)")
            else:
                context += _context(ran)
        if blocked:
            return PromptVerdict("blocked by a UserPromptSubmit hook: " + "; ".join(blocked))
        return PromptVerdict(None, tuple(context))

    async def stop(self, scope: HookScope, active: bool) -> str | None:
        """Why the agent should go on (a hook blocked the stop), or None."""
        reasons: list[str] = []
        for ran in await self._run(scope, "Stop", None, {"stop_hook_active": active}):
            if self._fail_open(scope, ran):
                continue
            if ran.output.get("continue") is False:
                return None  # continue: false wins over a block
            if ran.exit_code == 2:
                reasons.append(ran.stderr.strip() or "(no reason given)")
            elif ran.output.get("decision") == "block":
                reasons.append(str(ran.output.get("reason") or "(no reason given)"))
        return "\n".join(_short(r) for r in reasons) if reasons else None

    async def session_start(
        self, scope: HookScope, source: str, env_file: str | None = None
    ) -> list[str]:
        """Their context for the model; `env_file` is their `$CLAUDE_ENV_FILE`."""
        context: list[str] = []
        extra = {"CLAUDE_ENV_FILE": env_file} if env_file else {}
        for ran in await self._run(scope, "SessionStart", source, {"source": source}, extra):
            if self._fail_open(scope, ran):
                continue
            if ran.exit_code == 2:
                scope.notify(Notice(ran.failure(), "warning"))
                continue
            context += _context(ran)
        return context

    async def event(
        self, scope: HookScope, event: str, subject: str | None, fields: dict[str, Any]
    ) -> None:
        """An event whose hooks only run (SessionEnd, PreCompact, Notification): they
        fail open; exit 2 shows their stderr to the user; `systemMessage` is shown."""
        for ran in await self._run(scope, event, subject, fields):
            if not self._fail_open(scope, ran) and ran.exit_code == 2:
                scope.notify(Notice(ran.failure(), "warning"))

    # ---------------------------------------------------------- running them

    def has(self, event: str) -> bool:
        return any(h.event == event for h in self.configured().hooks)

    def _fail_open(self, scope: HookScope, ran: Ran) -> bool:
        """A failed hook of an event that fails open: a warning, and True (skip it).
        Also shows `systemMessage` and notes `continue: false`."""
        if ran.failed:
            scope.notify(Notice(ran.failure() + " (ignored)", "warning"))
            return True
        _show(scope, ran)
        if ran.output.get("continue") is False and ran.hook.event == "PostToolUse":
            scope.halt = str(ran.output.get("stopReason") or "a PostToolUse hook stopped the turn")
        return False

    async def _run(
        self,
        scope: HookScope,
        event: str,
        subject: str | None,
        fields: dict[str, Any],
        extra_env: dict[str, str] | None = None,
    ) -> list[Ran]:
        found = self.configured().hooks
        if not self._announced and (user := [h for h in found if h.source == CLAUDE_SOURCE]):
            self._announced = True
            scope.notify(Notice(_user_notice(user), "info"))
        hooks = [h for h in found if h.event == event and h.matches(subject)]
        if not hooks:
            return []
        unique = list({h.command: h for h in hooks}.values())  # one run per command
        payload = {
            "session_id": scope.session_id,
            "transcript_path": scope.transcript_path,
            "cwd": str(scope.cwd()),
            "permission_mode": self._settings().permission,
            "hook_event_name": event,
            **fields,
        }
        data = json.dumps(payload).encode()
        env = child_env(os.environ, self._settings())
        env["CLAUDE_PROJECT_DIR"] = env["SYNAPSE_PROJECT_DIR"] = str(self.root)
        env.update(extra_env or {})
        return list(await asyncio.gather(*(run_one(h, data, env, self.root) for h in unique)))


def _show(scope: HookScope, ran: Ran) -> None:
    """A hook's `systemMessage`, to the user."""
    message = ran.output.get("systemMessage")
    if isinstance(message, str) and message.strip():
        scope.notify(Notice(_short(message.strip()), "info"))


def _context(ran: Ran) -> list[str]:
    """Context for the model from a successful hook: `additionalContext`, else its
    plain stdout (not JSON: `{}` or any object without it adds nothing)."""
    extra = ran.specific("additionalContext")
    if isinstance(extra, str):
        return [extra.strip()] if extra.strip() else []
    if not ran.is_json and ran.stdout.strip():  # `{}`: an answer with nothing to add
        return [ran.stdout.strip()]
    return []


CLAUDE_SOURCE = "~/.claude/settings.json"  # the `source` of the user's Claude Code hooks


def claude_user_settings() -> Path:
    """Claude Code's user settings: `settings.json` in `claude_home.user_dir()`."""
    return claude_home.user_dir() / "settings.json"


def _read_hooks(path: Path) -> tuple[list[Hook], list[str]] | None:
    """The hooks of one settings file and its problems; None when it does not exist."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        return [], [f"{path}: cannot read its hooks: {exc}"]
    source = CLAUDE_SOURCE if path == claude_user_settings() else str(path)
    return parse(data.get("hooks") if isinstance(data, dict) else None, source)


def _user_notice(user: Sequence[Hook]) -> str:
    listed = "; ".join(f"{h.event} `{_short(h.command, 80)}`" for h in user[:10])
    more = f" and {len(user) - 10} more" if len(user) > 10 else ""
    return (
        f"Running your Claude Code hooks ({claude_user_settings()}) as your own: {listed}{more}."
        ' Turn them off with "claudeUserHooks": false in $SYNAPSE_HOME/settings.json.'
    )


def context_block(event: str, texts: Sequence[str]) -> dict[str, Any]:
    """The content block that brings hook context to the model."""
    body = "\n".join(_short(t, 10 * SHOWN_CHARS) for t in texts)
    return {
        "type": "text",
        "text": f"<system-reminder>\n{event} hook additional context:\n{body}\n</system-reminder>",
    }
