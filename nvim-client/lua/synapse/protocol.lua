-- The Synapse protocol as this plugin speaks it (docs/protocol.md): the
-- version it was built for, the method and command names, the
-- synapse/sessionUpdate kinds and their fields. The server reports its version in
-- the `initialize` result (capabilities.experimental.synapse.protocolVersion);
-- `mismatch` says what to tell the user when the two differ. No Neovim API:
-- testable anywhere.
--
-- The GENERATED region is made from the server's classes
-- (synapse_lsp/lsp/protocol.py) by `python -m synapse_lsp.lsp.protocol_gen --write`;
-- a test fails when it differs.
local M = {}

-- BEGIN GENERATED protocol from synapse_lsp/lsp/protocol.py by `python -m synapse_lsp.lsp.protocol_gen --write`; do not edit
-- Bumped on any change a client built for the previous version would misread.
M.VERSION = 1
-- the one notification, server -> client
M.SESSION_UPDATE = "synapse/sessionUpdate"
-- client -> server: a touched file's settled diagnostics after an agent edit
-- (DiagnosticsParams)
M.DIAGNOSTICS = "synapse/diagnostics"
-- server -> client request: save these documents (the agent's edits) before a command
-- reads the disk, `{"uris": [...]}` -> `{"saved": [...]}`; offered by a client with
-- `capabilities.experimental.synapse.saveDocuments: true` (docs/protocol.md)
M.SAVE_DOCUMENTS = "synapse/saveDocuments"
-- server -> client request: a permission question as data (RequestPermissionParams) ->
-- `{"optionId": ...}`; offered by a client with
-- `capabilities.experimental.synapse.requestPermission: true`, else the question is a
-- `window/showMessageRequest` (docs/protocol.md)
M.REQUEST_PERMISSION = "synapse/requestPermission"

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

-- Each kind's fields by wire key: its type as docs/protocol.md writes it
-- ("optional ...": the key may be absent).
M.update_fields = {
  user_message_chunk = {
    sessionUpdate = "'user_message_chunk'",
    content = "TextContent",
    parentToolCallId = "optional string",
  },
  agent_message_chunk = {
    sessionUpdate = "'agent_message_chunk'",
    content = "TextContent",
    parentToolCallId = "optional string",
  },
  agent_thought_chunk = {
    sessionUpdate = "'agent_thought_chunk'",
    content = "TextContent",
    parentToolCallId = "optional string",
  },
  tool_call = {
    sessionUpdate = "'tool_call'",
    toolCallId = "string",
    title = "string",
    kind = "ToolKind",
    status = "'in_progress'",
    rawInput = "RawInput",
    locations = "Location[]",
    parentToolCallId = "optional string",
  },
  tool_call_update = {
    sessionUpdate = "'tool_call_update'",
    toolCallId = "string",
    status = "optional 'completed' | 'failed' | 'cancelled' | 'denied'",
    content = "optional (ToolContent | DiffContent)[]",
    rawOutput = "optional RawOutput",
    output = "optional OutputChunk",
    parentToolCallId = "optional string",
  },
  plan = {
    sessionUpdate = "'plan'",
    explanation = "string | null",
    entries = "PlanEntry[]",
    parentToolCallId = "optional string",
  },
  usage_update = {
    sessionUpdate = "'usage_update'",
    usage = "TokenUsage",
    parentToolCallId = "optional string",
  },
  notice = {
    sessionUpdate = "'notice'",
    level = "'info' | 'warning' | 'error'",
    message = "string",
    parentToolCallId = "optional string",
  },
  turn_finished = {
    sessionUpdate = "'turn_finished'",
    stopReason = "StopReason",
    usage = "TokenUsage",
    error = "optional string",
  },
}

-- The object types those fields name.
M.types = {
  TokenUsage = {
    inputTokens = "number",
    outputTokens = "number",
    cacheCreationInputTokens = "number",
    cacheReadInputTokens = "number",
  },
  TextContent = {
    type = "'text'",
    text = "string",
  },
  RawInput = {
    command = "string",
    restart = "boolean",
  },
  Location = {
    path = "string",
  },
  OutputChunk = {
    stream = "'stdout' | 'stderr'",
    text = "string",
  },
  ToolContent = {
    type = "'content'",
    content = "TextContent",
  },
  DiffContent = {
    type = "'diff'",
    path = "string",
    oldText = "string | null",
    newText = "string",
  },
  EditOutcome = {
    path = "string",
    applied = "boolean",
  },
  RawOutput = {
    exitCode = "number | null",
    isError = "boolean",
    layer = "string | null",
    category = "string | null",
    edit = "optional EditOutcome",
  },
  PlanEntry = {
    content = "string",
    priority = "'high' | 'medium' | 'low'",
    status = "'pending' | 'in_progress' | 'completed'",
  },
}

-- The string unions those fields name, by value.
M.enums = {
  StopReason = { "end_turn", "max_tokens", "max_turns", "cancelled", "refusal", "error" },
  ToolKind = { "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other" },
  PermissionOptionKind = { "allow_once", "allow_always", "reject_once", "reject_always" },
}
-- END GENERATED protocol

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
