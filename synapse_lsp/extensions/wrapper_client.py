"""The client behind MCP wrappers: `python -m synapse_lsp.wrappers call --home H
[--config F] [--socket S] NAME ARGS…` (`synapse_lsp.wrappers` is the stable entry point
that re-exports this module).

It first asks the registry that wrote the wrapper over its Unix socket (`--socket`, in
the wrappers of a registry's own bin folder; else `$SYNAPSE_EXT_SOCKET`, which
Synapse's shells set to their registry's socket): its live session to the server, no
SDK import, no server start. It falls back to a one-shot connection to that one
server when no socket is named, nobody serves it, or its registry does not know the
command (a terminal, or a server of another folder's config). The
wrapper files themselves are written by `wrapper_files.py`. This module's top
level imports the standard library only (and `wrapper_files`, which does too): it
must start fast.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from synapse_lsp.extensions.wrapper_files import SOCKET_ENV


def ask_socket(path: Path, request: dict[str, Any], timeout: float | None) -> dict[str, Any] | None:
    """One request over the socket; None when nobody serves it (or it does not know the command)."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        try:
            sock.connect(str(path))
        except OSError:
            return None
        sock.settimeout(timeout)
        sock.sendall(json.dumps(request).encode() + b"\n")
        chunks: list[bytes] = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw:
            return None
        reply: dict[str, Any] = json.loads(raw)
        return None if reply.get("unknown") else reply
    finally:
        sock.close()


USAGE = "usage: python -m synapse_lsp.wrappers call --home H [--config F] [--socket S] NAME ARGS…\n"


def call_main(argv: list[str]) -> int:
    """`python -m synapse_lsp.wrappers call --home H [--config F] [--socket S] NAME ARGS…`."""
    options: dict[str, str] = {}
    while len(argv) >= 2 and argv[0] in ("--home", "--config", "--socket"):
        options[argv[0]] = argv[1]
        argv = argv[2:]
    if not argv or "--home" not in options:
        sys.stderr.write(USAGE)
        return 2
    home = Path(options["--home"])
    config = Path(options["--config"]) if "--config" in options else None
    where = options.get("--socket") or os.environ.get(SOCKET_ENV)
    request = {"argv": argv, "cwd": str(Path.cwd())}
    reply = ask_socket(Path(where), request, timeout=None) if where else None
    if reply is None:
        reply = _one_shot(home, config, argv)
    sys.stdout.write(reply.get("stdout", ""))
    sys.stdout.flush()
    sys.stderr.write(reply.get("stderr", ""))
    code = reply.get("exit_code", 1)
    return code if isinstance(code, int) else 1


def _one_shot(home: Path, config: Path | None, argv: list[str]) -> dict[str, Any]:
    import asyncio

    from synapse_lsp.extensions.registry import run_one_shot

    return asyncio.run(run_one_shot(home, config, argv, Path.cwd()))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["call"]:
        return call_main(args[1:])
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main())
