"""The router's native part: lines bash runs — in the session's shell (sandboxed
or not), outside the sandbox when the user allowed it (with the environment such
a re-run gets), and native producers feeding a built-in (`cmd | write f`)."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeGuard

from synapse_lsp import catalog, cmdline
from synapse_lsp.commands import (
    CommandOutput,
    FailureCategory,
    Layer,
    OutputSink,
    OutsideEnv,
    SandboxEscalation,
)
from synapse_lsp.errors import ShellError
from synapse_lsp.router.base import (
    EXTENSION_PREFIXES,
    ExtensionDirectory,
    RouterBase,
    RouteResult,
    WithholdsServers,
)
from synapse_lsp.router.tool_result import path_commands
from synapse_lsp.shell import SOCKET_ENV, ShellResult, ShellSession

# Variables a fresh bash sets itself: not carried into a re-run outside the sandbox.
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PROMPT_COMMAND", "PS1", "PS2"})


_LOADER = re.compile(r"LD_.*|GCONV_PATH|LOCPATH|NLSPATH|HOSTALIASES|RESOLV_HOST_CONF|MALLOC_.*")


_ESCALATES: dict[type, bool] = {}


def _escalates(gate: object) -> TypeGuard[SandboxEscalation]:
    """`isinstance(gate, SandboxEscalation)`, once per class: a protocol's isinstance
    looks up its members each time (~10 µs on every command line)."""
    known = _ESCALATES.get(type(gate))
    if known is None:
        known = _ESCALATES[type(gate)] = isinstance(gate, SandboxEscalation)
    return known


# The session's exports an escalated re-run carries: an allowlist (a denylist of names
# that redirect programs cannot be complete: XDG_*, GIT_*, EDITOR, PAGER, LD_*, ...).
_CARRIED = re.compile(r"LANG|LANGUAGE|LC_[A-Z_]+|TZ|TERM|COLUMNS|LINES")


class NativeRunner(RouterBase):
    """`BashRouter`'s native lines (a mixin)."""

    async def _native_list(
        self,
        command: str,
        cut: tuple[str, str, str],
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
        started: float,
    ) -> RouteResult:
        """The native head of a list, then the rest as its own (already checked) line."""
        head, op, rest = cut
        first = await self._run_native(head, head, on_output, started)
        ok = first.exit_code == 0
        if (
            (op == "&&" and not ok)
            or (op == "||" and ok)
            or first.category
            in (
                FailureCategory.CANCELLED,
                FailureCategory.TIMEOUT,
            )
        ):
            return self._finish(command, Layer.NATIVE, _as_output(first), started)
        tail = await self.route(rest, on_output=on_output, emit=emit, _checked=True)
        out = CommandOutput(
            stdout=first.stdout + tail.stdout,
            stderr=first.stderr + tail.stderr,
            exit_code=tail.exit_code,
            category=tail.category,
            data={**first.data, **tail.data},
        )
        return self._finish(command, tail.layer, out, started)

    async def _native_into_write(
        self,
        native: str,
        write_line: str,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
    ) -> CommandOutput:
        """`cmd | write f`: run `cmd` with its stdout in a private file, then `write f`
        with that as its content. A failing `cmd` writes nothing (an empty or partial
        file would replace what was there)."""
        view = self.shell.view
        folder = view.scratch("synapse-pipe-")  # where the shell writes, seen by both
        target = folder / "stdout"
        try:
            script = f"{{ {native.rstrip()}\n}} > {cmdline.quote(str(view.seen(target)))}"
            result = await self.shell.run(
                script, timeout=self.settings.command_timeout, on_output=on_output
            )
            if result.exit_code != 0 or result.timed_out or result.cancelled:
                why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
                return CommandOutput(
                    result.stdout,
                    result.stderr + f"write: not written: the command before `| write` {why}\n",
                    result.exit_code or 1,
                    FailureCategory.TIMEOUT
                    if result.timed_out
                    else FailureCategory.EXECUTION_ERROR,
                )
            size = target.stat().st_size if target.exists() else 0
            limit = self.settings.max_command_bytes
            if size > limit:
                return CommandOutput.usage_error(
                    "write",
                    f"the piped content is {size} bytes, over the {limit}-byte limit "
                    "(setting max_command_bytes); write it with a native command instead",
                )
            content = target.read_bytes().decode("utf-8", errors="replace") if size else ""
            write = self._pipe_sink()
            assert write is not None  # `_trailing_write` found it
            words = await self._words(write_line, write, on_output)
            if isinstance(words, CommandOutput):
                return words
            output = await self._invoke(write, words, content, None, emit)
            output.stdout = result.stdout + output.stdout
            output.stderr = result.stderr + output.stderr
            return output
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def _run_native(
        self, command: str, line: str, on_output: OutputSink | None, started: float
    ) -> RouteResult:
        gate = self.permission if _escalates(self.permission) else None
        note = ""
        outside = gate is not None and (
            await asyncio.to_thread(gate.runs_outside, line)  # a huge line: off the loop
            if len(line) > 64 * 1024
            else gate.runs_outside(line)
        )
        if gate is not None and outside:
            env = await self._outside_env()
            result = await self._run_outside(line, on_output, env)
            told = env.describe()
            note = (
                f"\n[ran outside the sandbox, as the user allowed{'; ' + told if told else ''}]\n"
            )
        else:
            result = await self.shell.run(
                line, timeout=self.settings.command_timeout, on_output=on_output
            )
            why = self._sandbox_refusal(result)
            if why is not None:
                env = await self._outside_env() if gate is not None else OutsideEnv()
                if gate is not None and await gate.escalate(line, self.shell.cwd, why, env):
                    result = await self._run_outside(line, on_output, env)
                    told = env.describe()
                    note = (
                        f"\n[the sandbox blocked the first attempt ({why}); it was run again "
                        "outside the sandbox, as the user allowed: the first attempt may have "
                        f"partly run{'; ' + told if told else ''}]\n"
                    )
                else:
                    note = (
                        f"\n[blocked by the sandbox: {why}. Running it outside the sandbox "
                        "was not allowed; work inside the workspace, or ask the user]\n"
                    )
        category: FailureCategory | None = None
        if result.timed_out:
            category = FailureCategory.TIMEOUT
        elif result.cancelled:
            category = FailureCategory.CANCELLED
        elif result.exit_code == 127:
            category = FailureCategory.NOT_FOUND
        elif result.exit_code != 0:
            category = FailureCategory.EXECUTION_ERROR
        out = CommandOutput(result.stdout, result.stderr, result.exit_code, category)
        if result.timed_out:
            out.stderr += (
                f"\n[timed out after {self.settings.command_timeout:g} s: the command's processes "
                "were killed; the shell session is intact]\n"
            )
        elif getattr(result, "shell_exited", False) and result.exit_code != 0:
            out.data["hint"] = (
                "Hint: The command ended the session's shell (`exit`/`exec`), so a fresh shell "
                "starts with the next command: variables, functions and aliases set earlier "
                "are gone. To stop a script early, run it as `bash script.sh` (its `exit` "
                "then ends only the script)."
            )
        elif category is FailureCategory.NOT_FOUND:
            base = cmdline.base_command(line)
            if base and f"{base}: command not found" in result.stderr:
                out.data["hint"] = self.not_found_hint(base)
        out.stderr += note
        routed = self._finish(command, Layer.NATIVE, out, started, bounded=True)
        routed.full_output_path = result.full_output_path
        return routed

    def _sandbox_refusal(self, result: ShellResult) -> str | None:
        """Why the sandbox made `result` fail (`permissions.sandbox_refusal`), or None."""
        status = self.shell.sandbox
        if not status.sandboxed or result.exit_code == 0 or result.cancelled:
            return None
        from synapse_lsp.policy.gate import sandbox_refusal

        return sandbox_refusal(
            result.stdout + "\n" + result.stderr,
            result.exit_code,
            network_off=status.network == "off",
            writable=self.shell.writable_paths,
        )

    async def _run_outside(
        self, line: str, on_output: OutputSink | None, env: OutsideEnv
    ) -> ShellResult:
        """Run `line` in a one-off bash outside the sandbox, in the session's cwd, with
        the shell's starting environment plus what `env` carries (what it changes there
        does not carry back)."""
        carried = dict(env.carried)
        if env.with_session_path and env.session_path is not None:
            carried["PATH"] = env.session_path
        source = self.settings_source
        outside = ShellSession(
            self.shell.cwd,
            lambda: replace(source(), sandbox="full-access"),
            env=carried,
            wrappers=getattr(self.shell, "wrappers", None),
        )
        try:
            return await outside.run(
                line, timeout=self.settings.command_timeout, on_output=on_output
            )
        finally:
            await outside.close()

    async def _outside_env(self) -> OutsideEnv:
        """What a re-run outside the sandbox gets of the sandboxed shell's exports (read
        through a file in its private /tmp): the allowlist `_CARRIED`; the rest of what
        the session added or changed is named as dropped; its PATH is offered."""
        tmp = self.shell.private_tmp
        if tmp is None:
            return OutsideEnv()
        name = f".synapse-env-{os.getpid()}-{time.monotonic_ns()}"
        try:
            await self.shell.run(f"env -0 > /tmp/{name}", timeout=10.0)
            raw = (tmp / name).read_bytes()
        except (OSError, ShellError):
            return OutsideEnv()
        finally:
            with contextlib.suppress(OSError):
                (tmp / name).unlink()
        session: dict[str, str] = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
            if sep and key:
                session[key] = value
        start = self.shell.starting_environment()
        carried = {k: v for k, v in session.items() if _CARRIED.fullmatch(k)}
        dropped = sorted(
            _shown_name(k)
            for k, v in session.items()
            if k not in _SHELL_OWN
            and k not in ("PATH", "TMPDIR")
            and not _CARRIED.fullmatch(k)
            and start.get(k) != v
        )
        path = session.get("PATH")
        return OutsideEnv(
            carried=carried,
            dropped=tuple(dropped),
            session_path=path if path is not None and path != start.get("PATH") else None,
        )

    def _env(self) -> dict[str, str]:
        """The environment in-process commands see (copied per call: commands may change
        theirs). Rebuilt when the process environment gains or loses a variable or changes
        PATH/SYNAPSE_HOME: copying `os.environ` (which decodes every entry) was most of a
        built-in's routing cost. Secrets (model credentials, `secretEnv`) are left out:
        skills and in-process commands never see them (`synapse_lsp.policy.secrets`)."""
        from synapse_lsp.policy.secrets import child_env

        settings = self.settings
        secrets_key = "\0".join((settings.api_key_env, *settings.secret_env))
        home = os.environ.get("SYNAPSE_HOME")
        key = len(os.environ), os.environ.get("PATH"), f"{home}\0{secrets_key}"
        if self._env_cache is None or self._env_cache[0] != key:
            env = child_env(os.environ, settings)
            # The shell's own: its registry's wrappers first, its socket (`ShellSession`).
            wrappers = getattr(self.shell, "wrappers", None)
            own = [str(wrappers.bin_dir)] if wrappers is not None else []
            env["PATH"] = os.pathsep.join([*own, str(settings.bin_dir), env.get("PATH", "")])
            env.pop(SOCKET_ENV, None)
            if wrappers is not None:
                env[SOCKET_ENV] = str(wrappers.socket)
            env["SYNAPSE_HOME"] = str(self.settings.synapse_home)
            self._env_cache = (key, env)
        return dict(self._env_cache[1])

    async def _session_env(self) -> dict[str, str]:
        """The variables exported in the session's bash, read with builtins only (no fork;
        ~2 ms in all) into a file (so no output bound applies); the process environment if
        bash can't say. Secrets are left out either way (`synapse_lsp.policy.secrets`)."""
        from synapse_lsp.policy.secrets import child_env

        # A sandboxed bash sees its private /tmp only: the file goes there.
        private = self.shell.private_tmp
        view = self.shell.view
        folder = view.scratch("synapse-env-")
        values = folder / "values"
        seen = view.seen(folder)
        script = (
            f"compgen -e > {cmdline.quote(str(seen / 'names'))}; "
            "while IFS= read -r __synapse_n; do "
            'printf "%s=%s\\0" "$__synapse_n" "${!__synapse_n}"; '
            f"done < {cmdline.quote(str(seen / 'names'))} > {cmdline.quote(str(seen / 'values'))}; "
            "unset __synapse_n"
        )
        try:
            result = await self.shell.run(script, timeout=10)
            raw = values.read_bytes() if result.exit_code == 0 else b""
        except (ShellError, OSError):
            raw = b""
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        env: dict[str, str] = {}
        for entry in raw.decode("utf-8", errors="surrogateescape").split("\0"):
            key, sep, value = entry.partition("=")
            # Sandboxed, the script starts through bwrap, which runs outside the sandbox:
            # nothing the sandbox exported may change what the loader does there.
            if sep and key and not (private is not None and _LOADER.fullmatch(key)):
                env[key] = value
        return child_env(env, self.settings) if env else self._env()

    def not_found_hint(self, name: str) -> str:
        """The hint for a command nobody provides (a typo, an unknown `mcp:`/`skill:`
        name): its `--help` would fail the same way, so point at `command:search` and
        what is close, and name the configured MCP servers and skills."""
        directory = self.extensions if isinstance(self.extensions, ExtensionDirectory) else None
        extension_names: list[str] = directory.command_names() if directory is not None else []
        sources: dict[str, list[str]] = (
            directory.extension_sources() if directory is not None else {}
        )
        aliases = [a for b in self.builtins.values() for a in catalog.of(b).aliases if " " not in a]
        candidates = [*self.builtins, *aliases, *extension_names]
        if name.startswith(EXTENSION_PREFIXES):
            prefix = name.rstrip(":") + ":"
            close = sorted(c for c in extension_names if c.startswith(prefix))[:5]
        else:
            candidates += path_commands(self._env().get("PATH", ""))
            close = []
        matches = difflib.get_close_matches(name, set(candidates), n=10, cutoff=0.6)
        # a transposition (`gti` -> `git`) first, then the closest length
        matches.sort(key=lambda c: (sorted(c) != sorted(name), abs(len(c) - len(name))))
        for match in matches[:3]:
            if match not in close and match != name:
                close.append(match)
        parts = [f"Hint: `{name}` is not a command here, so `{name} --help` would fail too."]
        if close:
            parts.append("Did you mean " + " or ".join(f"`{c}`" for c in close[:5]) + "?")
        servers = sources.get("mcp", [])
        skills = sources.get("skill", [])
        withheld = (
            self.extensions.withheld_servers()
            if isinstance(self.extensions, WithholdsServers)
            else None
        )
        known = [
            "configured MCP servers: " + (", ".join(servers) if servers else "none"),
            *([withheld] if withheld else []),
            "skills: " + (", ".join(skills[:20]) if skills else "none"),
        ]
        parts.append(
            "Find extension commands with `command:search <keyword>` (`command:search` alone "
            f"lists them all; {'; '.join(known)})."
        )
        return " ".join(parts)


def _as_output(routed: RouteResult) -> CommandOutput:
    return CommandOutput(
        routed.stdout, routed.stderr, routed.exit_code, routed.category, dict(routed.data)
    )


def _shown_name(key: str) -> str:
    """An exported bash function's variable (`BASH_FUNC_cat%%`) as the user wrote it."""
    if key.startswith("BASH_FUNC_") and key.endswith("%%"):
        return f"{key[len('BASH_FUNC_') : -2]} (a function)"
    return key
