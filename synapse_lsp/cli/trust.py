"""`synapse trust [FOLDER]`: trust a folder, so its own `mcp_servers.json` is loaded.

The answer is remembered per folder (its real path) in
`$SYNAPSE_HOME/trusted_folders.json`, the store `synapse chat` writes when it asks;
`--revoke` forgets it (the folder is asked about again), `--no` remembers a refusal,
`--list` shows every remembered folder. See `synapse_lsp.policy.trust` for the rule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from synapse_lsp import __version__
from synapse_lsp.config import Settings
from synapse_lsp.policy import trust


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse trust",
        description="Trust a folder: its own mcp_servers.json is then loaded by every "
        "Synapse face (chat, exec, editors that do not have their own workspace trust).",
    )
    parser.add_argument("folder", nargs="?", type=Path, help="the folder (default: .)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--revoke", action="store_true", help="forget the folder's answer")
    what.add_argument("--no", action="store_true", help="remember the folder as not trusted")
    what.add_argument("--list", action="store_true", help="list remembered folders")
    what.add_argument(
        "--home", action="store_true",
        help="confirm $SYNAPSE_HOME's settings.json, permissions.json and "
        "mcp/mcp_servers.json as they are now (after a change Synapse did not make)",
    )  # fmt: skip
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    home = Settings().synapse_home
    if args.list:
        for key, trusted in trust.trusted_folders(home).items():
            print(f"{'trusted' if trusted else 'not trusted'}\t{key}")
        return 0
    if args.home:
        changed = trust.home_unconfirmed(home)
        if not trust.record_home(home):
            print(
                f"synapse trust: cannot write {trust.store_path(home)}: nothing was confirmed",
                file=sys.stderr,
            )
            return 1
        for name in changed:
            print(f"{home / name}: confirmed as it is now")
        if not changed:
            print(f"{home}: nothing changed since Synapse last loaded it")
        return 0
    folder = (args.folder or Path.cwd()).resolve()
    if not folder.is_dir():
        print(f"synapse trust: {folder}: not a directory", file=sys.stderr)
        return 2
    if args.revoke:
        known = trust.forget(home, folder)
        print(f"{folder}: {'forgotten' if known else 'nothing was remembered'}")
        return 0
    trust.remember(home, folder, not args.no)
    print(f"{folder}: {'not trusted' if args.no else 'trusted'} (remembered in "
          f"{trust.store_path(home)})")  # fmt: skip
    return 0
