"""Settings: defaults, editor/CLI overrides, the environment, and what is refused."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from synapse_lsp.config import HOME_ONLY, Settings
from synapse_lsp.policy import trust


def test_environment_sets_model_tokens_and_thinking(tmp_path: Path) -> None:
    env = {
        "SYNAPSE_HOME": str(tmp_path / "home"),
        "ANTHROPIC_MODEL": "from-anthropic-var",
        "SYNAPSE_MODEL": "from-synapse-var",
        "SYNAPSE_MAX_TOKENS": " 16000 ",
        "SYNAPSE_THINKING_BUDGET": "4096",
    }
    settings, problems = Settings.from_env(env)
    assert problems == []
    assert settings.synapse_home == tmp_path / "home"
    assert settings.model == "from-synapse-var"  # ours wins over ANTHROPIC_MODEL
    assert settings.max_tokens == 16000
    assert settings.thinking_budget == 4096
    only_anthropic, _ = Settings.from_env({"ANTHROPIC_MODEL": "m2", "SYNAPSE_MODEL": ""})
    assert only_anthropic.model == "m2"
    # Editor settings / flags are applied on top and win.
    over, problems = settings.with_overrides({"model": "from-editor", "thinkingBudget": 0})
    assert problems == [] and over.model == "from-editor" and over.thinking_budget == 0


def test_bad_environment_values_are_reported_and_defaults_kept() -> None:
    settings, problems = Settings.from_env(
        {"SYNAPSE_MAX_TOKENS": "lots", "SYNAPSE_THINKING_BUDGET": "-5"}
    )
    assert settings.max_tokens == Settings().max_tokens
    assert settings.thinking_budget == 0
    text = "; ".join(problems)
    assert "$SYNAPSE_MAX_TOKENS: expected a whole number, got 'lots'" in text
    assert "thinkingBudget" in text and "keeping 0" in text


def test_thinking_budget_must_fit_the_api_limits() -> None:
    base = Settings()
    small, problems = base.with_overrides({"thinkingBudget": 100})
    assert small.thinking_budget == 0 and "at least 1024" in problems[0]
    big, problems = base.with_overrides({"thinkingBudget": base.max_tokens})
    assert big.thinking_budget == 0 and "less than maxTokens" in problems[0]
    on, problems = base.with_overrides({"thinkingBudget": 2048})
    assert problems == [] and on.thinking_budget == 2048
    # A bad new budget keeps the good one already set, and says so.
    kept, problems = on.with_overrides({"thinkingBudget": 50})
    assert kept.thinking_budget == 2048 and problems[0].endswith("thinking stays at 2048")
    # Lowering maxTokens under a budget already on turns thinking off, with the reason.
    lowered, problems = on.with_overrides({"maxTokens": 2000})
    assert lowered.max_tokens == 2000 and lowered.thinking_budget == 0
    assert "less than maxTokens (2000)" in problems[0] and problems[0].endswith("thinking is off")
    # Both at once, consistent: accepted.
    both, problems = base.with_overrides({"maxTokens": 32000, "thinkingBudget": 16000})
    assert problems == [] and (both.max_tokens, both.thinking_budget) == (32000, 16000)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_every_setting_is_documented_and_known_to_the_vscode_client() -> None:
    root = Path(__file__).resolve().parent.parent
    keys = {_camel(f.name) for f in dataclasses.fields(Settings)}
    first_cells = re.findall(r"^\| (`[^|]*)\|", (root / "docs" / "protocol.md").read_text(), re.M)
    table = {key for cell in first_cells for key in re.findall(r"`(\w+)`", cell)}
    assert keys <= table, keys - table
    ts = (root / "vscode-client" / "src" / "protocol.ts").read_text()
    block = ts.split("SERVER_SETTING_KEYS = [", 1)[1].split("]", 1)[0]
    client_keys = set(re.findall(r"'(\w+)'", block))
    # `output` is an object setting left to initializationOptions / settings.json; the
    # HOME_ONLY keys are refused from editor settings, so the client never sends them.
    assert keys - {"output"} - HOME_ONLY == client_keys


def test_skill_enhancement_is_set_only_in_the_home_settings_file(tmp_path: Path) -> None:
    """A background run writes under $SYNAPSE_HOME/skills unwatched: a repository's
    .vscode/settings.json, a folder's settings file or an ACP client's _meta must not
    switch it on (security review H2)."""
    import json

    from synapse_lsp.acp.session import _REFUSED
    from synapse_lsp.config import LiveSettings

    assert {"skillEnhance", "skillEnhanceMinTools"} <= HOME_ONLY <= _REFUSED
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".synapse").mkdir(parents=True)
    home.mkdir()
    asked = {"skillEnhance": True, "skillEnhanceMinTools": 1}
    (work / ".synapse" / "settings.json").write_text(json.dumps(asked))
    live = LiveSettings({"SYNAPSE_HOME": str(home)}, folder=work)
    assert any("skillEnhance, skillEnhanceMinTools cannot be set" in p for p in live.problems)
    assert (live().skill_enhance, live().skill_enhance_min_tools) == (False, 5)
    refused = live.set_face(asked)
    assert any("skillEnhance, skillEnhanceMinTools can be set only" in p for p in refused)
    assert live().skill_enhance is False
    (home / "settings.json").write_text(json.dumps(asked))
    trust.record_home(home)  # the user confirms the change (`synapse trust --home`)
    at_home = LiveSettings({"SYNAPSE_HOME": str(home)})
    assert (at_home().skill_enhance, at_home().skill_enhance_min_tools) == (True, 1)
