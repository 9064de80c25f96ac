-- Editor feedback after the agent's edits (docs/protocol.md, "Editor feedback"):
-- once the diagnostics of a file the agent changed have settled (no
-- DiagnosticChanged for 500 ms, at most 5 s after the edit), send
-- vim.diagnostic.get() of its buffer as `synapse/diagnostics`, with those it had
-- when the tool call started (`before`), so the model hears only of new problems.
-- Nothing is sent when no diagnostic changed and the buffer has none (no
-- language server). The user's own edits need nothing here: the server sees
-- them in the buffers Neovim syncs.
local compat = require("synapse.compat")
local protocol = require("synapse.protocol")

local M = {}

M.QUIET_MS = 500
M.MAX_MS = 5000
M.MAX_SNAPSHOTS = 20
M.sent = {} -- the params sent (newest last, at most 20): for tests and debugging

local uv = compat.uv()
local started = {} -- toolCallId -> { at = ms, before = { [path] = diagnostics } }
local last_change = {} -- bufnr -> ms of its last DiagnosticChanged
local pending = {} -- "sessionId\npath" -> state of one file waiting to settle
local group = nil

local function now()
  return uv.hrtime() / 1e6
end

local function enabled()
  local cfg = require("synapse.client").config or {}
  return (cfg.settings or {}).editorFeedback ~= false
end

local function buf_for(path)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.api.nvim_buf_get_name(b) == path then
      return b
    end
  end
  return nil
end

--- A vim.diagnostic item as an LSP Diagnostic.
function M.to_wire(d)
  local lsp = d.user_data and d.user_data.lsp or {}
  local out = {
    range = {
      start = { line = d.lnum or 0, character = d.col or 0 },
      ["end"] = { line = d.end_lnum or d.lnum or 0, character = d.end_col or d.col or 0 },
    },
    severity = d.severity,
    message = tostring(d.message or ""),
  }
  if type(d.source) == "string" and d.source ~= "" then
    out.source = d.source
  end
  local code = d.code or lsp.code
  if type(code) == "string" or type(code) == "number" then
    out.code = code
  end
  return out
end

local function diagnostics_of(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    out[#out + 1] = M.to_wire(d)
  end
  return out
end

--- The files a final tool_call_update says the agent changed.
function M.edited_paths(update)
  local paths, seen = {}, {}
  if type(update) ~= "table" or update.sessionUpdate ~= "tool_call_update" or update.status == nil then
    return paths
  end
  for _, block in ipairs(update.content or {}) do
    if type(block) == "table" and block.type == "diff" and type(block.path) == "string" and not seen[block.path] then
      seen[block.path] = true
      paths[#paths + 1] = block.path
    end
  end
  local edit = type(update.rawOutput) == "table" and update.rawOutput.edit or nil
  if type(edit) == "table" and edit.applied == true and type(edit.path) == "string" and not seen[edit.path] then
    paths[#paths + 1] = edit.path
  end
  return paths
end

--- "send", "skip" or "wait" for one pending file at time t (ms).
function M.decide(p, t, has_diagnostics)
  if p.last and t - p.last >= M.QUIET_MS then
    return "send"
  end
  if t - p.landed >= M.MAX_MS then
    return (p.last or has_diagnostics) and "send" or "skip"
  end
  return "wait"
end

local function next_check(p, t)
  local cap = p.landed + M.MAX_MS - t
  local quiet = p.last and (p.last + M.QUIET_MS - t) or cap
  return math.max(10, math.floor(math.min(cap, quiet)))
end

local check

local function schedule(p)
  p.gen = p.gen + 1
  local gen = p.gen
  vim.defer_fn(function()
    if p.gen == gen then
      check(p)
    end
  end, next_check(p, now()))
end

local function send(p, buf, diagnostics)
  local client = vim.lsp.get_client_by_id(p.client_id)
  if not client then
    return
  end
  local params = { sessionId = p.session_id, uri = vim.uri_from_fname(p.path), diagnostics = diagnostics }
  if p.before then
    params.before = p.before
  end
  local version = compat.buf_version(buf)
  if type(version) == "number" then
    params.version = version
  end
  if compat.nvim_011 then
    client:notify(protocol.DIAGNOSTICS, params)
  else
    client.notify(protocol.DIAGNOSTICS, params)
  end
  table.insert(M.sent, params)
  if #M.sent > 20 then
    table.remove(M.sent, 1)
  end
end

-- The file's buffer (it may appear after the edit) and its last DiagnosticChanged.
local function refresh_buf(p)
  local buf = buf_for(p.path)
  if buf and p.buf ~= buf then
    p.buf = buf
    local lc = last_change[buf]
    if lc and lc >= p.started and (not p.last or lc > p.last) then
      p.last = lc
    end
  end
  return buf
end

check = function(p)
  local key = p.session_id .. "\n" .. p.path
  if pending[key] ~= p then
    return
  end
  local buf = refresh_buf(p)
  local diagnostics = buf and diagnostics_of(buf) or {}
  local decision = M.decide(p, now(), #diagnostics > 0)
  if decision == "wait" then
    schedule(p)
    return
  end
  pending[key] = nil
  if decision == "send" and buf and enabled() then
    send(p, buf, diagnostics)
  end
end

local function ensure_autocmd()
  if group then
    return
  end
  group = vim.api.nvim_create_augroup("synapse_feedback", { clear = true })
  vim.api.nvim_create_autocmd("DiagnosticChanged", {
    group = group,
    callback = function(ev)
      local t = now()
      last_change[ev.buf] = t
      for _, p in pairs(pending) do
        if p.buf == ev.buf and t >= p.started then
          p.last = t
          schedule(p)
        end
      end
    end,
  })
end

--- Every synapse/sessionUpdate of a client passes here (replays are ignored).
function M.observe(params, client_id)
  if type(params) ~= "table" or params.replay or type(params.update) ~= "table" or not enabled() then
    return
  end
  local u = params.update
  if u.sessionUpdate == "tool_call" and type(u.toolCallId) == "string" then
    ensure_autocmd()
    local before = {}
    for i, loc in ipairs(u.locations or {}) do
      if i > M.MAX_SNAPSHOTS then
        break
      end
      local b = type(loc) == "table" and type(loc.path) == "string" and buf_for(loc.path) or nil
      if b then
        before[loc.path] = diagnostics_of(b)
      end
    end
    started[u.toolCallId] = { at = now(), before = before }
    return
  end
  local paths = M.edited_paths(u)
  if u.sessionUpdate == "tool_call_update" and u.status ~= nil then
    local s = started[u.toolCallId]
    started[u.toolCallId] = nil
    local t = now()
    for _, path in ipairs(paths) do
      local key = params.sessionId .. "\n" .. path
      local prev = pending[key]
      local p = {
        session_id = params.sessionId,
        path = path,
        client_id = client_id,
        started = s and s.at or t,
        landed = t,
        -- the earliest `before` wins: two edits in a row are judged against the first
        before = (prev and prev.before) or (s and s.before[path]) or nil,
        gen = 0,
      }
      ensure_autocmd()
      refresh_buf(p)
      pending[key] = p
      schedule(p)
    end
  end
end

return M
