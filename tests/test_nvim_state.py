"""The Neovim plugin's parts that need no server, run in real headless Neovim.

- nvim-client/tests/state_spec.lua: the pure transcript model (synapse.state), folding
  the VS Code tests' recorded stream to the same facts as they do;
- nvim-client/tests/client_spec.lua: root detection, settings, the stale-edit guard,
  the protocol version check;
- the plugin loads, defines its commands, and `:help synapse` resolves.
Each failing Lua case is reported by name. SYNAPSE_TEST_NVIM picks another Neovim.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "nvim-client"
NVIM = os.environ.get("SYNAPSE_TEST_NVIM") or shutil.which("nvim")

pytestmark = pytest.mark.skipif(
    NVIM is None, reason="nvim is not installed (apt-get install neovim)"
)


def run_lua_file(script: Path, out: Path) -> subprocess.CompletedProcess[str]:
    assert NVIM is not None
    return subprocess.run(
        [
            NVIM,
            "--headless",
            "--clean",
            "-u",
            "NONE",
            "--cmd",
            f"set rtp^={CLIENT}",
            "-c",
            f"luafile {script}",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize(("spec", "cases"), [("state_spec.lua", 17), ("client_spec.lua", 14)])
def test_lua_spec_cases(spec: str, cases: int, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = run_lua_file(CLIENT / "tests" / spec, out)
    assert out.exists(), f"no result file; stderr:\n{proc.stderr}"
    result = json.loads(out.read_text())
    assert result["failed"] == {}, "\n\n".join(f"{k}:\n{v}" for k, v in result["failed"].items())
    assert len(result["passed"]) == cases
    assert proc.returncode == 0


def test_help_tags_resolve(tmp_path: Path) -> None:
    """`:helptags` accepts doc/synapse.txt and `:help :SynapseRun` opens it."""
    assert NVIM is not None
    doc = tmp_path / "synapse" / "doc"
    shutil.copytree(CLIENT / "doc", doc)
    out = tmp_path / "help.txt"
    proc = subprocess.run(
        [
            NVIM,
            "--headless",
            "--clean",
            "--cmd",
            f"set rtp^={doc.parent}",
            "-c",
            f"helptags {doc}",
            "-c",
            "help :SynapseRun",
            "-c",
            f"call writefile([expand('%:t'), getline('.')], '{out}')",
            "-c",
            "qa!",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.exists(), proc.stderr
    name, line = out.read_text().splitlines()
    assert name == "synapse.txt"
    assert "*:SynapseRun*" in line


def test_plugin_loads_without_a_server(tmp_path: Path) -> None:
    """The commands exist and every module loads on this Neovim without errors."""
    out = tmp_path / "load.json"
    script = tmp_path / "load.lua"
    script.write_text(
        """
local out = vim.fn.argv()[1]
local ok, err = pcall(function()
  vim.cmd("runtime plugin/synapse.lua")
  local mods = { "synapse", "synapse.state", "synapse.chat", "synapse.client", "synapse.compat" }
  for _, m in ipairs(mods) do
    require(m)
  end
end)
local cmds = {}
local names = { "SynapseChat", "SynapseNew", "SynapseCancel", "SynapseSessions", "SynapseRun",
  "SynapseAsk" }
for _, name in ipairs(names) do
  cmds[name] = vim.fn.exists(":" .. name) == 2
end
vim.fn.writefile({ vim.fn.json_encode({ ok = ok, err = tostring(err), cmds = cmds }) }, out)
vim.cmd("qa!")
"""
    )
    proc = run_lua_file(script, out)
    assert out.exists(), proc.stderr
    result = json.loads(out.read_text())
    assert result["ok"], result["err"]
    assert all(result["cmds"].values()), result["cmds"]
