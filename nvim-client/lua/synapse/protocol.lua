-- The Synapse protocol as this plugin speaks it (docs/protocol.md): the
-- version it was built for, the command names and the synapse/sessionUpdate
-- kinds. The server reports its version in the `initialize` result
-- (capabilities.experimental.synapse.protocolVersion); `mismatch` says what
-- to tell the user when the two differ. No Neovim API: testable anywhere.
local M = {}

-- synapse_lsp/lsp/protocol.py PROTOCOL_VERSION
M.VERSION = 1

M.SESSION_UPDATE = "synapse/sessionUpdate"
-- client -> server: a touched file's settled diagnostics (synapse.feedback)
M.DIAGNOSTICS = "synapse/diagnostics"
-- Server -> client request: save these documents (the agent's edits) before a command
-- reads the disk, { uris } -> { saved }; offered in capabilities.experimental.synapse.
M.SAVE_DOCUMENTS = "synapse/saveDocuments"

M.commands = {
  session_new = "synapse.session.new",
  session_list = "synapse.session.list",
  session_load = "synapse.session.load",
  session_delete = "synapse.session.delete",
  session_prompt = "synapse.session.prompt",
  session_cancel = "synapse.session.cancel",
  session_context = "synapse.session.context",
  session_checkpoints = "synapse.session.checkpoints",
  session_rewind = "synapse.session.rewind",
  shell_run = "synapse.shell.run",
  shell_restart = "synapse.shell.restart",
  tools_search = "synapse.tools.search",
  tools_refresh = "synapse.tools.refresh",
  status = "synapse.status",
}

-- Every `sessionUpdate` kind; synapse.state folds each of them.
M.update_kinds = {
  "user_message_chunk",
  "agent_message_chunk",
  "agent_thought_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
  "usage_update",
  "notice",
  "turn_finished",
}

--- The protocol version an `initialize` result reports, or nil.
function M.server_version(init_result)
  local caps = type(init_result) == "table" and init_result.capabilities or nil
  local experimental = type(caps) == "table" and caps.experimental or nil
  local synapse = type(experimental) == "table" and experimental.synapse or nil
  local version = type(synapse) == "table" and synapse.protocolVersion or nil
  if type(version) == "number" and version == math.floor(version) then
    return version
  end
  return nil
end

--- nil when the server speaks `expected` (default M.VERSION), else the message
--- for the user, naming the side to update.
function M.mismatch(init_result, expected)
  expected = expected or M.VERSION
  local version = M.server_version(init_result)
  if version == expected then
    return nil
  end
  if version == nil then
    return string.format(
      "The Synapse server does not report a protocol version (it predates protocol %d), "
        .. "this plugin expects %d — update the Synapse server (pip install -U synapse-lsp).",
      expected,
      expected
    )
  end
  local update = version < expected and "update the Synapse server (pip install -U synapse-lsp)"
    or "update the synapse.nvim plugin"
  return string.format("Synapse server speaks protocol %d, this plugin expects %d — %s.", version, expected, update)
end

return M
