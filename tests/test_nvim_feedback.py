"""Editor feedback from the Neovim plugin, in real headless Neovim against the real server
and the fake Messages API: the agent writes a broken JSON file (the edit lands in a
buffer), a language server's diagnostics appear on that buffer (set here with
vim.diagnostic.set, as a language server's handler would), the plugin sends them once
they settle (`synapse/diagnostics`), and the model's next request carries the note."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_nvim import CLIENT, NVIM, kill_group

pytestmark = [
    pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install neovim)"),
    pytest.mark.timeout(300),
]

DRIVER = r"""
vim.opt.runtimepath:prepend(os.getenv("SYN_CLIENT"))
vim.cmd("runtime plugin/synapse.lua")
local config = vim.fn.json_decode(os.getenv("SYN_CONFIG"))
local result = {}
local function wait_for(what, cond)
  if not vim.wait(90000, cond, 10) then
    error("timed out waiting for " .. what, 2)
  end
end
local function main()
  local ok, err = pcall(function()
    local synapse = require("synapse")
    local feedback = require("synapse.feedback")
    synapse.setup({ cmd = config.cmd, cmd_env = config.cmd_env, settings = config.settings,
      chat = { prompt = "buffer" } })
    local root = synapse.current_root()
    wait_for("the server", function()
      local id = synapse.client.clients[root]
      return id ~= nil and synapse.client.ready[id] == true
    end)
    vim.cmd("SynapseChat write the data")
    local chat = synapse.current_chat(false)
    wait_for("the first turn", function() return chat.turns >= 1 end)
    local buf = vim.fn.bufnr(root .. "/data.json")
    result.buf_loaded = buf ~= -1 and vim.api.nvim_buf_is_loaded(buf)
    result.sent_before = #feedback.sent
    -- What a JSON language server would publish for the broken file.
    local ns = vim.api.nvim_create_namespace("fake-json-language-server")
    vim.diagnostic.set(ns, buf, {
      { lnum = 0, col = 8, end_lnum = 0, end_col = 11, severity = vim.diagnostic.severity.ERROR,
        message = "Expected comma", source = "json", code = 514 },
      { lnum = 0, col = 0, severity = vim.diagnostic.severity.HINT, message = "just a hint" },
    })
    wait_for("the diagnostics sent", function() return #feedback.sent >= 1 end)
    result.sent = feedback.sent
    vim.cmd("SynapseChat is it valid now?")
    wait_for("the second turn", function() return chat.turns >= 2 end)
  end)
  result.ok = ok
  if not ok then result.error = tostring(err) end
  vim.fn.writefile({ vim.fn.json_encode(result) }, os.getenv("SYN_OUT"))
  local ids = vim.tbl_values(require("synapse.client").clients)
  if #ids > 0 then
    vim.lsp.stop_client(ids)
    vim.wait(3000, function()
      for _, id in ipairs(ids) do
        if vim.lsp.get_client_by_id(id) then return false end
      end
      return true
    end, 20)
  end
  vim.cmd("qa!")
end
vim.api.nvim_create_autocmd("VimEnter", {
  once = true, callback = function() vim.schedule(main) end,
})
"""


async def run(tmp: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from synapse_lsp.agent.scripted_api import FakeAnthropic

    assert NVIM is not None
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "a.py").write_text("x = 1\n")
    driver = tmp / "driver.lua"
    driver.write_text(DRIVER)
    out = tmp / "result.json"
    script = [
        {"commands": ["""write data.json '{"a": 1 "b": 2}'"""]},
        {"text": "Wrote data.json."},
        {"text": "Let me fix that comma."},
    ]
    async with FakeAnthropic(script) as api:
        config = {
            "cmd": [sys.executable, "-m", "synapse_lsp"],
            "cmd_env": {
                "ANTHROPIC_BASE_URL": api.base_url,
                "ANTHROPIC_API_KEY": "test-key-not-real",
                "SYNAPSE_HOME": str(tmp / "synapse-home"),
            },
            "settings": {},
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "NVIM"))}
        env.update(
            SYN_CLIENT=str(CLIENT),
            SYN_OUT=str(out),
            SYN_CONFIG=json.dumps(config),
            HOME=str(tmp / "home"),
            XDG_STATE_HOME=str(tmp / "state"),
        )
        proc = await asyncio.create_subprocess_exec(
            NVIM, "--headless", "--clean", "-u", str(driver), "a.py",
            cwd=proj, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=200)
        finally:
            await kill_group(proc)
        requests = api.message_requests
    assert out.exists(), stderr.decode(errors="replace")[-2000:]
    return json.loads(out.read_text()), requests


def test_neovim_sends_settled_diagnostics_and_the_model_gets_the_note(tmp_path: Path) -> None:
    result, requests = asyncio.run(run(tmp_path))
    assert result["ok"], result.get("error")
    assert result["buf_loaded"] is True and result["sent_before"] == 0
    (sent,) = result["sent"]
    assert sent["uri"] == (tmp_path / "proj" / "data.json").resolve().as_uri()
    assert [d["message"] for d in sent["diagnostics"]] == ["Expected comma", "just a hint"]
    assert sent["diagnostics"][0]["severity"] == 1 and sent["diagnostics"][0]["code"] == 514
    assert len(requests) == 3
    last_user = requests[-1]["messages"][-1]["content"]
    texts = [b["text"] for b in last_user if b.get("type") == "text"]
    note = next(t for t in texts if "New problems after your edit" in t)
    assert "- data.json:1: error: Expected comma [json 514]" in note
    assert "just a hint" not in note
    assert texts[-1] == "is it valid now?"
