"""`$VAR` expansion in MCP config files under the credential rule: one implementation
for Synapse's `mcp_servers.json` (`env`, `headers`) and Claude Code's `.mcp.json` (the
same, and `command`, `args`, `url`: `claude_sources.expands_all`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from synapse_lsp.config import Settings
from synapse_lsp.policy import secrets as secret_rules

# Expands one config value; (server, key, field) name it in a refusal's warning.
Expander = Callable[[str, str, str, str], str]


def is_home_file(path: Path, settings: Settings) -> bool:
    try:
        return path.resolve().parent == (settings.synapse_home / "mcp").resolve()
    except OSError:
        return False


def expander(path: Path, settings: Settings) -> Callable[[list[str]], Expander]:
    """`$VAR`/`${VAR}`/`${VAR:-default}` expansion for one file's values that never
    yields a secret, given the list its warnings go to. A model credential (the
    `apiKeyEnv` variable, any ANTHROPIC_*, or a variable holding a credential's value)
    expands only in $SYNAPSE_HOME/mcp/mcp_servers.json and only with
    `mcpEnvAllowCredentials`; a `secretEnv` variable only in that home file. A
    refused reference stays as written and is named (never its value) in a warning."""
    home = is_home_file(path, settings)
    refuse = secret_rules.credential_refuser(
        settings,
        allow_credentials=home and settings.mcp_env_allow_credentials,
        allow_secrets=home,
    )

    def bind(problems: list[str]) -> Expander:
        def expand(value: str, server: str, field_name: str, key: str) -> str:
            text, refused = secret_rules.expand(value, refuse)
            for item in refused:
                if item.why == "credential":
                    how = (
                        'set "mcpEnvAllowCredentials": true in $SYNAPSE_HOME/settings.json'
                        if home
                        else "a model credential reaches an MCP server only from "
                        '$SYNAPSE_HOME/mcp/mcp_servers.json, with "mcpEnvAllowCredentials": '
                        "true in $SYNAPSE_HOME/settings.json"
                    )
                    what = (
                        "a model credential"
                        if secret_rules.is_model_credential(item.name, settings)
                        else "set to a model credential's value"
                    )
                else:
                    how = "a secretEnv variable expands only in $SYNAPSE_HOME/mcp/mcp_servers.json"
                    what = "a variable named secret by the secretEnv setting"
                problems.append(
                    f"{path}: server {server!r}: {field_name} {key!r}: ${item.name} is {what}; "
                    f"left unexpanded ({how})"
                )
            return text

        return expand

    return bind
