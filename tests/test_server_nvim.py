"""A real editor: headless Neovim's built-in LSP client starts the server, opens a buffer
with unsaved text, runs `synapse.shell.run` with an `edit`, and the buffer — not the
disk — shows the change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NVIM = shutil.which("nvim") or "/usr/bin/nvim"

INIT_LUA = r"""
local root = os.getenv("PROJ")
local out = os.getenv("OUT")
vim.cmd("edit " .. vim.fn.fnameescape(root .. "/a.py"))
local buf = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "y = 2  # unsaved" })
local ready = false
local id = vim.lsp.start_client({
  name = "synapse",
  cmd = { os.getenv("PY"), "-m", "synapse_lsp" },
  root_dir = root,
  on_init = function() ready = true end,
})
vim.lsp.buf_attach_client(buf, id)
local report = { started = vim.wait(60000, function() return ready end, 20) }
if report.started then
  local client = vim.lsp.get_client_by_id(id)
  local done = false
  client.request("workspace/executeCommand", {
    command = "synapse.shell.run",
    arguments = { { command = "edit a.py 'y = 2' 'y = 3'" } },
  }, function(err, result)
    report.err = err and err.message or vim.NIL
    report.result = result
    done = true
  end, buf)
  report.answered = vim.wait(60000, function() return done end, 20)
  report.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  report.modified = vim.api.nvim_buf_get_option(buf, "modified")
  client.stop()
  vim.wait(5000, function() return client.is_stopped() end, 20)
end
vim.fn.writefile({ vim.fn.json_encode(report) }, out)
vim.cmd("qa!")
"""


@pytest.mark.skipif(not Path(NVIM).exists(), reason="nvim not installed (./dev test installs it)")
def test_neovim_buffer_shows_the_edit_and_disk_does_not(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text("x = 1\n")
    init = tmp_path / "init.lua"
    init.write_text(INIT_LUA)
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(
        PROJ=str(proj),
        OUT=str(out),
        PY=sys.executable,
        SYNAPSE_HOME=str(tmp_path / "home"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-u", str(init)],
        cwd=proj,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), f"nvim wrote no report (rc={proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert report["started"] is True
    assert report["answered"] is True
    assert report["err"] is None
    assert report["result"]["isError"] is False, report["result"]
    assert report["lines"] == ["x = 1", "y = 3  # unsaved"]
    assert report["modified"] is True  # in the buffer, not saved
    assert (proj / "a.py").read_text() == "x = 1\n"
