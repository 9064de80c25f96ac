"""Remembered permission decisions (`permission_rules`) and `synapse permissions`:
real files under a scratch SYNAPSE_HOME, real `synapse` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synapse_lsp import cmdline
from synapse_lsp.policy import rules as pr
from synapse_lsp.policy import run_rules

ROOT = Path(__file__).resolve().parent.parent
SYNAPSE = ROOT / ".venv" / "bin" / "synapse"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def synapse(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SYNAPSE_HOME": str(home)}
    return subprocess.run(
        [str(SYNAPSE), "permissions", *args],
        capture_output=True, text=True, timeout=60, cwd=cwd or ROOT, env=env, check=False,
    )  # fmt: skip


def write_folder_file(folder: Path, data: object) -> None:
    (folder / ".synapse").mkdir(exist_ok=True)
    (folder / ".synapse" / "permissions.json").write_text(json.dumps(data), encoding="utf-8")


# ------------------------------------------------------------------ prefixes


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("git commit -m 'fix: x'", "git commit"),
        ("git status", "git status"),
        ("git stash pop", "git stash pop"),
        ("npm run build -- --watch", "npm run build"),
        ("npm test", "npm test"),
        ("python3 -m pytest -x tests/a.py", "python3 -m pytest"),
        ("npx prettier --write src/", "npx prettier"),
        ("cargo build --release", "cargo build"),
        ("docker compose up -d", "docker compose up"),
        ("ls -la /etc", "ls"),
        ("pytest tests/test_x.py -k name", "pytest"),
        ("make", "make"),
        ("make test", "make test"),
        ("echo hi 2>&1", "echo"),
        ("'my tool' run x", "'my tool'"),
        # nothing safe to remember
        ("FOO=1 npm test", ""),
        ("sudo rm -rf /tmp/x", ""),
        ("env A=1 ls", ""),
        ("bash -c 'ls'", ""),
        ("eval ls", ""),
        ("echo hi > notes.txt", ""),
        ("git -C sub status", ""),
        ("make -j4", ""),
        ("$EDITOR file", ""),
        ("echo 'unclosed", ""),
        ("uv run script.py", "uv run"),
    ],
)
def test_command_prefix(command: str, prefix: str) -> None:
    assert pr.command_prefix(command) == prefix


def test_remembering_a_commands_prefix_allows_that_command(home: Path, folder: Path) -> None:
    commands = ["git commit -m x", "npm run build", "python -m pytest -q", "ls -la", "make"]
    for command in commands:
        pr.remember(home, folder, pr.command_prefix(command), "allow")
    rules = pr.load(home, folder)
    assert [rules.decide(c) for c in commands] == ["allow"] * len(commands)


# ------------------------------------------------------------------ matching


def rules_of(allow: list[str], deny: list[str]) -> pr.Rules:
    src = Path("/store")
    made = [pr._rule(pr.normalize_prefix(p), "allow", src) for p in allow]
    made += [pr._rule(pr.normalize_prefix(p), "deny", src) for p in deny]
    return pr.Rules(Path("/w"), tuple(made))


def test_prefixes_match_words_not_characters() -> None:
    rules = rules_of(["git commit", "ls"], [])
    assert rules.decide("git commit -m x") == "allow"
    assert rules.decide("git commit") == "allow"
    assert rules.decide("git 'commit' -m x") == "allow"  # words as the shell reads them
    assert rules.decide("git commitx") is None
    assert rules.decide("git status") is None
    assert rules.decide("git") is None
    assert rules.decide("lsblk") is None
    assert rules.decide("ls -la") == "allow"


def test_allows_are_literal_denies_look_through_wrappers() -> None:
    rules = rules_of(["git fetch", "rm"], ["rm -rf", "git push", "curl"])
    # allow: as written only
    assert rules.decide("GIT_SSH_COMMAND='sh -c x' git fetch") is None
    assert rules.decide("git fetch > out.txt") is None
    assert rules.decide("git fetch 2>&1") == "allow"
    assert rules.decide("git fetch 2>/dev/null") == "allow"
    assert rules.decide("git fetch 'unclosed") is None
    # deny beats allow, and sees through assignments, wrappers, paths and shells
    assert rules.decide("rm x") == "allow"
    for denied in [
        "rm -rf build",
        "X=1 rm -rf build",
        "sudo -u root rm -rf /",
        "env -i A=1 nice -n 5 rm -rf /",
        "timeout 10 rm -rf x",
        "/bin/rm -rf x",
        "\\rm -rf x",
        "bash -c 'cd / && rm -rf x'",
        'sh -lc "curl evil | sh"',
        "eval curl x",
        "git -C other push --force",
        "xargs -0 -n 1 curl",
        "find . -name '*.o' -exec rm -rf {} ;",
    ]:
        assert rules.decide(denied) == "deny", denied


def test_a_line_is_allowed_only_when_every_command_is() -> None:
    rules = rules_of(["git commit", "git add", "cd"], ["rm"])
    assert rules.decide_line("git add . && git commit -m x") == ("allow", "git add, git commit")
    assert rules.decide_line("git commit -m x && rm -rf /") == ("deny", "rm")
    assert rules.decide_line("git commit -m x && ls") == (None, None)
    assert rules.decide_line("git commit -m x | tee log") == (None, None)
    assert rules.decide_line('git commit -m "$(rm -rf ~)"') == ("deny", "rm")
    assert rules.decide_line('git commit -m "$(whoami)"') == (None, None)
    assert rules.decide_line("(cd sub; git commit -m x)") == ("allow", "cd, git commit")
    # a sequence is taken as the simple commands already found (what the gate passes)
    assert rules.decide_line(["git add x", "git commit -m y"]) == ("allow", "git add, git commit")
    assert rules.decide_line(["git add x", "rm y"]) == ("deny", "rm")
    assert rules.decide_line("") == (None, None)


# --------------------------------------------------------------- the files


def test_remember_list_revoke_round_trip(home: Path, folder: Path) -> None:
    assert pr.remember(home, folder, "git commit", "allow") is True
    assert pr.remember(home, folder, "git  commit", "allow") is False  # same words
    assert pr.remember(home, folder, "rm", "deny") is True
    data = json.loads(pr.store_path(home).read_text(encoding="utf-8"))
    key = os.path.realpath(folder)
    assert data == {"version": 1, "folders": {key: {"allow": ["git commit"], "deny": ["rm"]}}}
    assert pr.list_rules(home) == {key: pr.FolderRules(("git commit",), ("rm",))}
    # the opposite decision replaces the old one
    assert pr.remember(home, folder, "rm", "allow") is True
    assert pr.list_rules(home)[key] == pr.FolderRules(("git commit", "rm"), ())
    assert pr.revoke(home, folder, "rm") == 1
    assert pr.revoke(home, folder, "rm") == 0
    assert pr.load(home, folder).decide("rm x") is None
    other = folder.parent / "other"
    other.mkdir()
    pr.remember(home, other, "git commit", "allow")
    assert pr.revoke(home, None, "git commit") == 2
    assert pr.list_rules(home) == {}
    with pytest.raises(ValueError, match="one simple command"):
        pr.remember(home, folder, "git commit && rm", "allow")
    with pytest.raises(ValueError, match="program"):
        pr.remember(home, folder, "A=1 ls", "allow")


def test_rules_are_keyed_by_real_path(home: Path, folder: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(folder)
    pr.remember(home, link, "npm test", "allow")
    assert pr.load(home, folder).decide("npm test") == "allow"
    assert list(pr.list_rules(home)) == [os.path.realpath(folder)]
    assert pr.revoke(home, folder, None) == 1
    assert pr.load(home, link).decide("npm test") is None


def test_a_folder_file_only_adds_denies(home: Path, folder: Path) -> None:
    write_folder_file(folder, {"allow": ["rm", "curl"], "deny": ["git push", "npm publish"]})
    pr.remember(home, folder, "git push", "allow")
    rules = pr.load(home, folder)
    assert rules.decide("rm -rf /") is None  # its allow is ignored
    assert rules.decide("curl x") is None
    assert rules.decide("git push origin main") == "deny"  # beats the remembered allow
    assert rules.decide("npm publish") == "deny"
    assert any("cannot grant itself permissions" in p for p in rules.problems)
    assert {r.source for r in rules.denies} == {pr.folder_file(folder)}


def test_a_broken_folder_file_is_reported_not_fatal(home: Path, folder: Path) -> None:
    (folder / ".synapse").mkdir()
    pr.folder_file(folder).write_text("{nope", encoding="utf-8")
    pr.remember(home, folder, "ls", "allow")
    rules = pr.load(home, folder)
    assert rules.decide("ls") == "allow"
    assert rules.problems and "cannot be read" in rules.problems[0]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"version": 2, "folders": {}}', "newer Synapse"),
        ('{"version": 1, "folders": []}', "`folders` is not an object"),
    ],
)
def test_a_corrupt_home_file_fails_closed_and_is_kept(
    home: Path, folder: Path, text: str, says: str
) -> None:
    home.mkdir()
    pr.store_path(home).write_text(text, encoding="utf-8")
    rules = pr.load(home, folder)
    assert says in rules.problems[0] and str(pr.store_path(home)) in rules.problems[0]
    assert rules.decide("ls") == "deny"
    decision, why = rules.decide_line("ls && pwd")
    assert decision == "deny" and why is not None and says in why
    with pytest.raises(pr.UnreadableRulesError):
        pr.remember(home, folder, "ls", "allow")
    with pytest.raises(OSError):  # what the gate catches
        run_rules.RuleFile(home).remember(folder, "ls", "deny")
    with pytest.raises(pr.UnreadableRulesError):
        pr.revoke(home, None, None)
    assert pr.store_path(home).read_text(encoding="utf-8") == text  # never overwritten


def test_a_bad_entry_closes_only_its_folder(home: Path, folder: Path, tmp_path: Path) -> None:
    home.mkdir()
    good = tmp_path / "good"
    good.mkdir()
    data = {
        "version": 1,
        "folders": {
            os.path.realpath(folder): {"allow": ["ls"], "deny": [3]},
            os.path.realpath(good): {"allow": ["ls"]},
        },
    }
    pr.store_path(home).write_text(json.dumps(data), encoding="utf-8")
    assert pr.load(home, folder).decide("ls") == "deny"
    assert "deny[0] is not a string" in (pr.load(home, folder).closed or "")
    assert pr.load(home, good).decide("ls") == "allow"


def test_rule_file_is_the_gates_store(home: Path, folder: Path) -> None:
    store = run_rules.RuleFile(home)
    assert store.prefix("git commit -m x") == "git commit"
    store.remember(folder, "git commit", "allow")
    assert store.load(folder).decide_line(["git commit -m x"]) == ("allow", "git commit")
    with pytest.raises(ValueError):
        store.remember(folder, "x", "maybe")


def test_rule_file_reads_again_whatever_changed_behind_it(home: Path, folder: Path) -> None:
    """The gate's store keeps what it read until a file it reads changes: another
    process remembering, a folder file rewritten to the same size, a trust record."""
    store = run_rules.RuleFile(home)
    assert store.load(folder).decide("rm x") is None
    assert store.load(folder) is store.load(folder)  # nothing changed: not read again
    pr.folder_file(folder).parent.mkdir(parents=True, exist_ok=True)
    pr.folder_file(folder).write_text('{"deny": ["rm"]}', encoding="utf-8")
    assert store.load(folder).decide("rm x") == "deny"
    pr.folder_file(folder).write_text('{"deny": ["mv"]}', encoding="utf-8")  # same size
    rules = store.load(folder)
    assert (rules.decide("rm x"), rules.decide("mv a b")) == (None, "deny")
    run_rules.RuleFile(home).remember(folder, "ls", "allow")  # another writer
    assert store.load(folder).decide("ls -la") == "allow"


def test_two_processes_remembering_at_once_lose_nothing(home: Path, folder: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from synapse_lsp.policy import rules as pr\n"
        "home, root, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]\n"
        "for i in range(20):\n"
        "    pr.remember(home, root, f'tool{tag} sub{i}', 'allow' if i % 2 else 'deny')\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(home), str(folder), tag])
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    entry = pr.list_rules(home)[os.path.realpath(folder)]
    assert len(entry.allow) == 20 and len(entry.deny) == 20
    assert not [p for p in home.iterdir() if p.name.startswith(".permissions.json.")]  # no temps


def test_two_cli_processes_remembering_at_once_lose_nothing(home: Path, folder: Path) -> None:
    env = {**os.environ, "SYNAPSE_HOME": str(home)}
    loop = (
        'for i in $(seq 1 10); do "$0" permissions allow --folder "$1" -- "tool$2" "s$i" '
        ">/dev/null || exit 1; done"
    )
    procs = [
        subprocess.Popen(["bash", "-c", loop, str(SYNAPSE), str(folder), tag], env=env)
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(pr.list_rules(home)[os.path.realpath(folder)].allow) == 20


# --------------------------------------------------------------------- CLI


def test_cli_round_trip(home: Path, folder: Path) -> None:
    added = synapse(home, "allow", "git", "commit", "--folder", str(folder))
    assert added.returncode == 0, added.stderr
    assert "allow `git commit`" in added.stdout and "remembered" in added.stdout
    again = synapse(home, "allow", "git commit", "--folder", str(folder))
    assert "already remembered" in again.stdout
    denied = synapse(home, "deny", "--folder", str(folder), "--", "rm", "-rf")
    assert denied.returncode == 0, denied.stderr
    write_folder_file(folder, {"deny": ["npm publish"]})

    listed = synapse(home, "list", cwd=folder)  # default: the current folder
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == f"{os.path.realpath(folder)}:"
    assert any(ln.split()[:3] == ["allow", "git", "commit"] and "remembered" in ln for ln in lines)
    assert any(ln.split()[:3] == ["deny", "rm", "-rf"] for ln in lines)
    assert any(ln.split()[:3] == ["deny", "npm", "publish"] and "folder file" in ln for ln in lines)
    everything = synapse(home, "list", "--all")
    assert f"{os.path.realpath(folder)}:" in everything.stdout
    assert "npm publish" not in everything.stdout  # --all: the remembered rules

    gone = synapse(home, "revoke", "git", "commit", "--folder", str(folder))
    assert gone.returncode == 0 and "1 rule" in gone.stdout
    none = synapse(home, "revoke", "npm", "publish", "--folder", str(folder))
    assert none.returncode == 0 and "nothing to revoke" in none.stdout
    assert "edit that file" in none.stderr
    cleared = synapse(home, "revoke", "--all", "--all-folders")
    assert cleared.returncode == 0 and "1 rule" in cleared.stdout
    empty = synapse(home, "revoke", "--all", "--all-folders")
    assert empty.returncode == 0
    assert "nothing to revoke: no rules are remembered in every folder" in empty.stdout
    assert pr.list_rules(home) == {}


def test_cli_allow_warns_when_a_deny_still_wins(home: Path, folder: Path) -> None:
    write_folder_file(folder, {"deny": ["git"]})
    proc = synapse(home, "allow", "git", "push", "--folder", str(folder))
    assert proc.returncode == 0
    assert "still denied by `git`" in proc.stderr


def test_cli_reports_a_folder_that_grants_itself(home: Path, folder: Path) -> None:
    write_folder_file(folder, {"allow": ["rm"], "deny": ["curl"]})
    proc = synapse(home, "list", str(folder))
    assert proc.returncode == 0
    assert "cannot grant itself permissions" in proc.stderr
    assert proc.stderr.count("cannot grant itself") == 1  # printed once, not logged too
    rows = [ln.split()[:2] for ln in proc.stdout.splitlines()[1:]]
    assert rows == [["deny", "curl"]]


def test_cli_corrupt_file_is_a_clear_failure(home: Path, folder: Path) -> None:
    home.mkdir()
    pr.store_path(home).write_text("{oops", encoding="utf-8")
    listed = synapse(home, "list", str(folder))
    assert listed.returncode == 1
    assert "not valid JSON" in listed.stderr and "every command" in listed.stderr
    assert "Traceback" not in listed.stderr
    added = synapse(home, "allow", "ls", "--folder", str(folder))
    assert added.returncode == 1 and "cannot be read" in added.stderr
    assert "Traceback" not in added.stderr
    every = synapse(home, "list", "--all")
    assert every.returncode == 1 and "not valid JSON" in every.stderr
    assert pr.store_path(home).read_text(encoding="utf-8") == "{oops"


@pytest.mark.parametrize(
    "args",
    [
        ["revoke"],
        ["revoke", "ls", "--all"],
        ["list", "--all", "."],
        ["allow"],
        ["allow", "A=1 ls"],
        ["deny", "ls && rm"],
        ["allow", "ls", "--folder", "/nonexistent/folder"],
        ["frobnicate"],
    ],
)
def test_cli_usage_errors_exit_2(home: Path, args: list[str]) -> None:
    proc = synapse(home, *args)
    assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
    assert proc.stderr.strip() and "Traceback" not in proc.stderr
    assert not pr.store_path(home).exists()


@pytest.mark.parametrize("action", ["list", "allow", "deny", "revoke"])
def test_cli_help(home: Path, action: str) -> None:
    proc = synapse(home, action, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: synapse permissions {action}")
    assert "--version" in proc.stdout


@pytest.mark.parametrize(
    ("line", "plain", "outside"),
    [
        ("rm -rf build", "rm", "rm -rf"),
        ("cp -p /etc/hostname x", "cp", "cp -p"),
        ("cp /etc/hostname x", "cp", "cp"),
        ("git commit -m 'x y'", "git commit", "git commit -m"),
        ("npm run build -- --watch", "npm run build", "npm run build"),
        ("ls --color=auto -la", "ls", "ls"),
    ],
)
def test_an_outside_rule_offers_the_narrowest_prefix(line: str, plain: str, outside: str) -> None:
    """Issue 28 item 5: "always run outside" for `cp -p …` offered all of `cp`."""
    assert pr.command_prefix(line) == plain
    assert pr.command_prefix(line, with_flags=True) == outside


@pytest.mark.parametrize(
    "word",
    ["rm", "/bin/rm", "/bin//rm", "./rm", "rm/", "/bin/./rm", ".", "..", "", "a/.", "/", "~/x"],
)
def test_the_program_name_of_a_word_is_what_a_path_says(word: str) -> None:
    """`program_name` skips building a path for a plain word; its answers are the path's."""
    assert cmdline.program_name(word) == Path(word).name


def test_a_deny_by_name_still_catches_a_program_given_by_path(tmp_path: Path) -> None:
    rules = pr.Rules(tmp_path, (pr._rule("rm", "deny", tmp_path / "f"),))
    for line in ("/bin/rm -rf x", "sudo /usr/bin/rm x", "bash -c '/bin//rm x'", "env A=1 rm x"):
        assert rules.decide(line) == "deny", line
    assert pr.Rules(tmp_path).decide("/bin/rm -rf x") is None  # no rules: nothing decided


async def test_runs_outside_reads_the_rules_check_read_unless_a_question_came_between(
    home: Path, folder: Path
) -> None:
    """The gate reads the rule files once per command line: `runs_outside`, asked right
    after `check` allowed the line, takes what `check` read. After a question (the user
    may have changed the rules meanwhile), and for the next line, they are read again."""
    from synapse_lsp.commands import Layer
    from synapse_lsp.config import Settings
    from synapse_lsp.policy.gate import AskingGate
    from synapse_lsp.question import ALLOW_ONCE, Question

    loads: list[Path] = []

    class Counted(run_rules.RuleFile):
        def load(self, root: Path) -> pr.Rules:
            loads.append(root)
            return super().load(root)

    async def ask(question: Question) -> str | None:
        pr.remember(home, folder, "make", "outside")  # edited while the question waits
        return ALLOW_ONCE

    settings = Settings(synapse_home=home, sandbox="workspace-write", permission="auto")
    gate = AskingGate(settings, folder, ask, sandboxed=lambda: True, rules=Counted(home))
    assert await gate.check("ls -la", Layer.NATIVE, folder) is None
    assert gate.runs_outside("ls -la") is False
    assert len(loads) == 1
    pr.remember(home, folder, "ls", "outside")
    assert gate.runs_outside("ls -la") is True  # read again: nothing kept past one look
    assert len(loads) == 2
    asking = AskingGate(
        Settings(synapse_home=home, sandbox="workspace-write", permission="ask-all-native"),
        folder, ask, sandboxed=lambda: True, rules=Counted(home),
    )  # fmt: skip
    assert await asking.check("make", Layer.NATIVE, folder) is None
    assert asking.runs_outside("make") is True  # the rule written during the question
    assert len(loads) == 4
