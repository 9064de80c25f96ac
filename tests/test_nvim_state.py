"""The Neovim plugin's pure transcript model (nvim-client/lua/synapse/state.lua), run headless.

The Lua cases live in nvim-client/tests/state_spec.lua; this test runs them in
the real Neovim (Debian's 0.7 in CI) and reports each failing case by name.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "nvim-client"
NVIM = shutil.which("nvim")

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


def test_state_model_cases(tmp_path: Path) -> None:
    out = tmp_path / "state.json"
    proc = run_lua_file(CLIENT / "tests" / "state_spec.lua", out)
    assert out.exists(), f"no result file; stderr:\n{proc.stderr}"
    result = json.loads(out.read_text())
    assert result["failed"] == {}, "\n\n".join(f"{k}:\n{v}" for k, v in result["failed"].items())
    assert len(result["passed"]) >= 10
    assert proc.returncode == 0


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
