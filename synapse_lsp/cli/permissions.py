"""`synapse permissions …`: see, add and revoke remembered permission decisions.

    synapse permissions list [FOLDER | --all]
    synapse permissions allow PREFIX… [--folder F]
    synapse permissions deny PREFIX… [--folder F]
    synapse permissions revoke PREFIX… [--folder F | --all-folders]
    synapse permissions revoke --all [--folder F | --all-folders]

Rules live in `$SYNAPSE_HOME/permissions.json`, per folder (its real path), the
store the "Always allow … here" answer writes; a folder's own
`.synapse/permissions.json` may add denies, which `list` shows. See
`synapse_lsp.policy.rules` for what a prefix matches. Exit status: 0 done,
1 the rules file could not be read or written, 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from synapse_lsp import __version__
from synapse_lsp.config import synapse_home
from synapse_lsp.policy import rules as pr
from synapse_lsp.policy.trust import folder_key

PROG = "synapse permissions"
_PREFIX_HELP = (
    "the command prefix: its words (git commit), or one quoted string ('git commit'); "
    "options go first, then -- before words that start with - (--folder F -- rm -rf)"
)


def _version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="See, add and revoke remembered permission decisions: command "
        "prefixes always allowed or always denied in a folder (kept in "
        "$SYNAPSE_HOME/permissions.json; a folder's own .synapse/permissions.json "
        "may only add denies).",
        epilog="Exit status: 0 done, 1 the rules file could not be read or written, "
        "2 a usage error.",
    )
    _version(parser)
    sub = parser.add_subparsers(dest="action", required=True, metavar="<action>")
    listing = sub.add_parser(
        "list", help="show a folder's rules and where each comes from",
        description="Show the rules that apply in a folder: remembered allows and "
        "denies, and the folder file's denies, each with its source.",
    )  # fmt: skip
    listing.add_argument("folder", nargs="?", type=Path, help="the folder (default: .)")
    listing.add_argument("--all", action="store_true", help="every folder with remembered rules")
    _version(listing)
    for name, text in (("allow", "always allow"), ("deny", "always deny")):
        add = sub.add_parser(
            name, help=f"{text} a command prefix in a folder",
            description=f"Remember: {text} commands that start with PREFIX in a folder "
            "(it replaces the opposite decision for the same prefix; deny beats allow).",
        )  # fmt: skip
        add.add_argument("prefix", nargs="+", metavar="PREFIX", help=_PREFIX_HELP)
        add.add_argument("--folder", type=Path, help="the folder (default: .)")
        _version(add)
    revoke = sub.add_parser(
        "revoke", help="forget remembered rules",
        description="Forget a remembered prefix (allowed or denied), or every rule "
        "with --all, in a folder or in every folder. A folder file's denies are "
        "that folder's own: edit the file to change them.",
    )  # fmt: skip
    revoke.add_argument("prefix", nargs="*", metavar="PREFIX", help=_PREFIX_HELP)
    revoke.add_argument("--all", action="store_true", help="every prefix, not one")
    where = revoke.add_mutually_exclusive_group()
    where.add_argument("--folder", type=Path, help="the folder (default: .)")
    where.add_argument("--all-folders", action="store_true", help="in every folder")
    _version(revoke)
    return parser


def _prefix(words: Sequence[str]) -> str:
    return pr.normalize_prefix(words[0] if len(words) == 1 else list(words))


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _show(home: Path, folder: Path) -> int:
    rules = pr.load(home, folder)
    code = 0
    for problem in rules.problems:
        print(f"{PROG}: problem: {problem}", file=sys.stderr)
    if rules.closed is not None:
        print(f"{PROG}: until it is fixed, every command in {rules.root} is denied",
              file=sys.stderr)  # fmt: skip
        code = 1
    print(f"{rules.root}:")
    if not rules.rules:
        print("  no rules")
    width = max((len(r.prefix) for r in rules.rules), default=0)
    for rule in sorted(rules.rules, key=lambda r: (r.decision != "deny", r.prefix)):
        where = "remembered" if rule.source == pr.store_path(home) else "folder file"
        print(f"  {rule.decision:<7}  {rule.prefix:<{width}}  {where}: {rule.source}")
    return code


def _list_all(home: Path) -> int:
    try:
        folders = pr.list_rules(home)
    except pr.UnreadableRulesError as exc:
        return _fail(f"problem: {exc}", 1)
    if not folders:
        print(f"no remembered rules ({pr.store_path(home)})")
    code = 0
    for key, entry in folders.items():
        if entry.problem:
            print(f"{PROG}: problem: {entry.problem}", file=sys.stderr)
            code = 1
            continue
        print(f"{key}:")
        for decision in pr.DECISIONS:
            for prefix in getattr(entry, decision):
                print(f"  {decision:<7}  {prefix}")
    return code


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    home = synapse_home()
    pr.log.disabled = True  # problems are printed here, not logged too
    if getattr(args, "folder", None) is not None:
        args.folder = args.folder.absolute()
    if args.action == "list":
        if args.all and args.folder is not None:
            parser.error("list: give a FOLDER or --all, not both")
        return _list_all(home) if args.all else _show(home, args.folder or Path.cwd())
    if args.action == "revoke" and bool(args.all) == bool(args.prefix):
        parser.error("revoke: give a PREFIX or --all")
    folder = None if getattr(args, "all_folders", False) else (args.folder or Path.cwd())
    try:
        prefix = None if args.action == "revoke" and args.all else _prefix(args.prefix)
    except ValueError as exc:
        return _fail(str(exc), 2)
    store = pr.store_path(home)
    try:
        if args.action == "revoke":
            return _revoke(home, folder, prefix)
        assert folder is not None and prefix is not None
        if not folder.is_dir():
            return _fail(f"{folder}: not a directory", 2)
        added = pr.remember(home, folder, prefix, args.action)
    except OSError as exc:  # UnreadableRulesError too
        return _fail(str(exc), 1)
    key = folder_key(folder)
    state = "remembered" if added else "already remembered"
    print(f"{args.action} `{prefix}` in {key}: {state} ({store})")
    if args.action == "allow":
        rule = pr.load(home, folder).match(prefix)
        if rule is not None and rule.decision == "deny":
            print(f"note: still denied by `{rule.prefix}` ({rule.source}); deny beats allow",
                  file=sys.stderr)  # fmt: skip
    return 0


def _revoke(home: Path, folder: Path | None, prefix: str | None) -> int:
    removed = pr.revoke(home, folder, prefix)
    where = "every folder" if folder is None else folder_key(folder)
    what = "every rule" if prefix is None else f"`{prefix}`"
    if removed:
        print(f"revoked {what} in {where}: {removed} rule{'s' if removed != 1 else ''}")
        return 0
    if prefix is None:
        print(f"nothing to revoke: no rules are remembered in {where}")
    else:
        print(f"nothing to revoke: {what} is not remembered in {where}")
    if folder is not None and prefix is not None:
        denies, _ = pr.read_folder_file(folder)
        if prefix in denies:
            print(f"note: `{prefix}` is denied by {pr.folder_file(folder)}: edit that file",
                  file=sys.stderr)  # fmt: skip
    return 0
