-- Pure transcript model for one Synapse chat session.
--
-- No `vim` here: this module turns `synapse/sessionUpdate` payloads (and
-- local events such as :SynapseRun) into transcript lines, remembers which
-- part of the transcript changed since the last render, and answers fold
-- levels. The view (synapse.chat) only copies the changed tail into a buffer.
--
-- Layout (Markdown):
--   ### You               user prompt
--   ### Synapse           first answer text of a turn (later text blocks have no header)
--   > thought lines       agent_thought_chunk
--   #### Tool: <title> [<status>]   one tool call: fold level 1 over its body
--                                   (an edit's: [<status>] +added −removed)
--       $ <command>
--       <output lines>
--   #### Run: <command> [<status>]  :SynapseRun, same shape as a tool call
--   #### Plan             the latest plan of the turn, replaced in place
--   > **warning:** ...    notices
--   Changed files: a.py +3 −1, new.txt +1   a turn whose tool calls changed files
--   *Turn ended: <reason>*          any stop reason but end_turn
--
-- Every block ends with one empty line.

local M = {}

local INDENT = "    "

M.DEFAULTS = {
  max_output_lines = 2000, -- per tool call; the rest is counted, not shown
}

local State = {}
State.__index = State

--- Splits on "\n" keeping empty pieces ("a\n" -> {"a", ""}).
local function split_lines(text)
  local out = {}
  local start = 1
  while true do
    local i = string.find(text, "\n", start, true)
    if not i then
      out[#out + 1] = string.sub(text, start)
      return out
    end
    out[#out + 1] = string.sub(text, start, i - 1)
    start = i + 1
  end
end
M.split_lines = split_lines

local function strip_cr(s)
  if string.find(s, "\r", 1, true) then
    return (string.gsub(s, "\r", ""))
  end
  return s
end

function M.new(opts)
  local self = setmetatable({}, State)
  self.opts = {}
  for k, v in pairs(M.DEFAULTS) do
    self.opts[k] = v
  end
  for k, v in pairs(opts or {}) do
    self.opts[k] = v
  end
  self.blocks = {}
  self.tools = {} -- toolCallId -> block
  self.offsets = {} -- offsets[i] = 0-based first line of block i (valid for i < self.valid)
  self.valid = 1 -- offsets valid for blocks 1 .. valid-1
  self.dirty_block = nil -- first changed block index
  self.dirty_line = nil -- first changed line within it (1-based)
  self.turn_open = false
  self.turn_has_text = false
  self.plan_block = nil
  self.usage = nil
  self.stop_reason = nil
  self.title = nil
  self.runs = 0
  self.root = opts and opts.root or nil -- paths under it are shown relative
  self.diffs = {} -- toolCallId -> list of {path=, old=(nil: new file), new=}
  self.diff_ids = {} -- toolCallIds with diffs, in the order they came
  self.turn_diffs = {} -- this turn's changed files: list of {path=, old=, new=}
  self.questions = {} -- toolCallId -> the permission question asked about it (unanswered)
  self.child_of = {} -- a sub-agent's toolCallId -> the id of the card it runs in
  return self
end

-- ------------------------------------------------------------------ diffs

local MINUS = "\226\136\146" -- U+2212, the minus sign of "+3 −1"

--- Lines of a text, without the empty piece after a final newline.
local function text_lines(text)
  if text == nil or text == "" then
    return {}
  end
  local lines = split_lines(text)
  if lines[#lines] == "" then
    lines[#lines] = nil
  end
  return lines
end
M.text_lines = text_lines

-- Past this many cells the middle of a diff counts as all removed and all added.
local MAX_LCS_CELLS = 2000000

--- (lines added, lines removed) from old to new, as `git diff --numstat` counts them.
function M.line_counts(old, new)
  local a, b = text_lines(old), text_lines(new)
  local head = 0
  while head < #a and head < #b and a[head + 1] == b[head + 1] do
    head = head + 1
  end
  local tail = 0
  while tail < #a - head and tail < #b - head and a[#a - tail] == b[#b - tail] do
    tail = tail + 1
  end
  local n, m = #a - head - tail, #b - head - tail
  local lcs = 0
  if n > 0 and m > 0 and n * m <= MAX_LCS_CELLS then
    local prev, cur = {}, {}
    for j = 0, m do
      prev[j] = 0
    end
    for i = 1, n do
      cur[0] = 0
      local ai = a[head + i]
      for j = 1, m do
        if ai == b[head + j] then
          cur[j] = prev[j - 1] + 1
        else
          local up, left = prev[j], cur[j - 1]
          cur[j] = up > left and up or left
        end
      end
      prev, cur = cur, prev
    end
    lcs = prev[m]
  end
  return m - lcs, n - lcs
end

--- "+3 −1": a side that is 0 is left out ("+0" when nothing changed).
function M.counts_text(added, removed)
  local parts = {}
  if added > 0 or removed == 0 then
    parts[#parts + 1] = "+" .. added
  end
  if removed > 0 then
    parts[#parts + 1] = MINUS .. removed
  end
  return table.concat(parts, " ")
end

--- The `diff` blocks of a tool call's content (ACP shape), as {path=, old=, new=}.
local function content_diffs(content)
  local out = {}
  if type(content) ~= "table" then
    return out
  end
  for _, item in ipairs(content) do
    if type(item) == "table" and item.type == "diff" and type(item.path) == "string" then
      out[#out + 1] = {
        path = item.path,
        old = type(item.oldText) == "string" and item.oldText or nil,
        new = type(item.newText) == "string" and item.newText or "",
      }
    end
  end
  return out
end

function State:display_path(path)
  local root = self.root
  if root and root ~= "/" and string.sub(path, 1, #root + 1) == root .. "/" then
    return string.sub(path, #root + 2)
  end
  return path
end

function State:_record_diffs(id, diffs)
  if #diffs == 0 or type(id) ~= "string" then
    return
  end
  if not self.diffs[id] then
    self.diff_ids[#self.diff_ids + 1] = id
  end
  self.diffs[id] = diffs
  for _, d in ipairs(diffs) do
    local seen = nil
    for _, t in ipairs(self.turn_diffs) do
      if t.path == d.path then
        seen = t
      end
    end
    if seen then
      seen.new = d.new -- the first text before, the last after
    else
      self.turn_diffs[#self.turn_diffs + 1] = { path = d.path, old = d.old, new = d.new, created = d.old == nil }
    end
  end
end

--- The diffs of tool call `id` (default: the last call that has any): id, list.
function State:diffs_of(id)
  if id == nil or id == "" then
    id = self.diff_ids[#self.diff_ids]
  end
  if id == nil then
    return nil, nil
  end
  return id, self.diffs[id]
end

--- "Changed files: a.py +3 −1, new.txt +1" for the turn so far; nil when nothing changed.
function State:turn_summary()
  local parts = {}
  for _, t in ipairs(self.turn_diffs) do
    if t.old ~= t.new then
      local added, removed = M.line_counts(t.old, t.new)
      parts[#parts + 1] = self:display_path(t.path) .. " " .. M.counts_text(added, removed)
    end
  end
  if #parts == 0 then
    return nil
  end
  return "Changed files: " .. table.concat(parts, ", ")
end

-- ---------------------------------------------------------------- bookkeeping

local function index_of(self, block)
  -- blocks are appended and never removed, so each keeps its index
  return block.index
end

function State:_touch(block, line)
  local i = index_of(self, block)
  if self.dirty_block == nil or i < self.dirty_block then
    self.dirty_block = i
    self.dirty_line = line
  elseif i == self.dirty_block and line < self.dirty_line then
    self.dirty_line = line
  end
  -- a block's length may change: offsets after it are stale
  if self.valid > i + 1 then
    self.valid = i + 1
  end
end

function State:_push(block)
  block.index = #self.blocks + 1
  self.blocks[block.index] = block
  self:_touch(block, 1)
  return block
end

-- Appends `text` to a block whose text region ends just before its trailing
-- separator line. `prefix` starts every new line; block.open tells whether
-- the last text line is still open (no newline seen yet).
local function append_text(self, block, text, prefix)
  text = strip_cr(text)
  if text == "" then
    return
  end
  local lines = block.lines
  local parts = split_lines(text)
  local sep = #lines -- the trailing empty line
  local first_changed
  if block.open then
    local last = sep - 1
    lines[last] = lines[last] .. parts[1]
    first_changed = last
  else
    table.insert(lines, sep, prefix .. parts[1])
    first_changed = sep
    sep = sep + 1
  end
  for k = 2, #parts do
    table.insert(lines, sep, prefix .. parts[k])
    sep = sep + 1
  end
  block.open = true
  self:_touch(block, first_changed)
end

-- Output of a tool call: like append_text, but a trailing newline closes the
-- line (no empty line is shown for it) and a cap keeps huge outputs cheap.
local function append_output(self, block, text)
  text = strip_cr(text)
  if text == "" then
    return
  end
  block.has_output = true
  local parts = split_lines(text)
  local ends_closed = parts[#parts] == ""
  if ends_closed then
    parts[#parts] = nil
  end
  local lines = block.lines
  local cap = self.opts.max_output_lines
  local first_changed = nil
  for k, part in ipairs(parts) do
    if k == 1 and block.open then
      local last = block.body_end
      lines[last] = lines[last] .. part
      first_changed = first_changed or last
    elseif block.shown < cap then
      block.body_end = block.body_end + 1
      table.insert(lines, block.body_end, INDENT .. part)
      block.shown = block.shown + 1
      first_changed = first_changed or block.body_end
    else
      block.hidden = block.hidden + 1
    end
  end
  if block.hidden > 0 then
    local note = INDENT .. "... " .. block.hidden .. " more lines not shown"
    if block.note_line then
      lines[block.note_line] = note
      first_changed = first_changed or block.note_line
    else
      block.note_line = block.body_end + 1
      table.insert(lines, block.note_line, note)
      first_changed = first_changed or block.note_line
    end
    block.open = false
  else
    block.open = not ends_closed
  end
  if first_changed then
    self:_touch(block, first_changed)
  end
end

-- ------------------------------------------------------------------ blocks

local function status_label(status, exit_code)
  if status == nil or status == "in_progress" or status == "pending" then
    return "running"
  end
  if status == "denied" then
    return "Denied" -- the permission rule refused it: it never ran (no exit code to show)
  end
  if status == "failed" and type(exit_code) == "number" and exit_code ~= 0 then
    return "failed, exit " .. exit_code
  end
  return status
end
M.status_label = status_label

local function str(x)
  if type(x) == "string" then
    return x
  end
  return nil
end

local function one_line(s)
  s = tostring(s or "")
  s = string.gsub(s, "\r?\n", " ")
  return s
end

local function tool_header(block)
  local status = block.question and "waiting for your answer" or status_label(block.status, block.exit_code)
  local header = "#### " .. block.label .. ": " .. one_line(block.title) .. " [" .. status .. "]"
  if block.counts then
    header = header .. " " .. block.counts
  end
  return header
end

function State:_new_tool(id, label, title, command)
  local block = {
    kind = "tool",
    id = id,
    label = label,
    title = title,
    status = "in_progress",
    lines = {},
    open = false,
    shown = 0,
    hidden = 0,
    has_output = false,
    question = id and self.questions[id] or nil, -- asked before the call arrived
  }
  block.lines[1] = tool_header(block)
  local body_end = 1
  if command and command ~= "" then
    local cmd_lines = split_lines(strip_cr(command))
    for k, l in ipairs(cmd_lines) do
      body_end = body_end + 1
      block.lines[body_end] = INDENT .. (k == 1 and "$ " or "  ") .. l
    end
  end
  block.body_end = body_end
  block.lines[body_end + 1] = ""
  self:_push(block)
  if id then
    self.tools[id] = block
  end
  return block
end

function State:_set_header(block)
  local header = tool_header(block)
  if block.lines[1] ~= header then
    block.lines[1] = header
    self:_touch(block, 1)
  end
end

local function last_block(self)
  return self.blocks[#self.blocks]
end

function State:_text_block(kind)
  local last = last_block(self)
  if last and last.kind == kind then
    return last
  end
  local block = { kind = kind, lines = {}, open = false }
  if kind == "agent" and not self.turn_has_text then
    block.lines[1] = "### Synapse"
  elseif kind == "user" then
    block.lines[1] = "### You"
  end
  block.lines[#block.lines + 1] = ""
  if kind == "agent" then
    self.turn_has_text = true
  end
  return self:_push(block)
end

local function content_text(content)
  -- ACP content: {type="text", text=...} or a list of tool call contents
  if type(content) ~= "table" then
    return nil
  end
  if content.type == "text" and type(content.text) == "string" then
    return content.text
  end
  local parts = {}
  for _, item in ipairs(content) do
    if type(item) == "table" then
      local inner = item.content
      if type(inner) == "table" and type(inner.text) == "string" then
        parts[#parts + 1] = inner.text
      elseif type(item.text) == "string" then
        parts[#parts + 1] = item.text
      end
    end
  end
  if #parts == 0 then
    return nil
  end
  return table.concat(parts, "\n")
end
M.content_text = content_text

-- ------------------------------------------------------------- public API

--- Adds the user's prompt (the server also echoes it as user_message_chunk).
function State:add_user(text)
  self.turn_open = true
  self.turn_has_text = false
  self.plan_block = nil
  self.turn_diffs = {}
  local block = self:_text_block("user")
  append_text(self, block, text, "")
end

local function apply_child(self, parent, u)
  -- Updates of a sub-agent (parentToolCallId) go inside the parent's card.
  local kind = u.sessionUpdate
  if kind == "agent_message_chunk" then
    local text = content_text(u.content)
    if text then
      append_output(self, parent, text)
    end
  elseif kind == "tool_call" then
    if type(u.toolCallId) == "string" then
      self.child_of[u.toolCallId] = parent.id
      if self.questions[u.toolCallId] then
        parent.question = self.questions[u.toolCallId]
        self:_set_header(parent)
      end
    end
    if parent.open then
      append_output(self, parent, "\n")
    end
    append_output(self, parent, "-> " .. one_line(u.title or (u.rawInput and u.rawInput.command) or "tool") .. "\n")
  end
end

--- Applies one `update` of a synapse/sessionUpdate notification.
function State:apply(u)
  if type(u) ~= "table" then
    return
  end
  local kind = u.sessionUpdate
  u = {
    sessionUpdate = kind,
    parentToolCallId = u.parentToolCallId,
    content = u.content,
    title = str(u.title),
    status = str(u.status),
    toolCallId = u.toolCallId,
    rawInput = type(u.rawInput) == "table" and u.rawInput or nil,
    rawOutput = type(u.rawOutput) == "table" and u.rawOutput or nil,
    output = u.output,
    entries = type(u.entries) == "table" and u.entries or nil,
    explanation = u.explanation,
    usage = u.usage,
    level = str(u.level),
    message = str(u.message),
    stopReason = str(u.stopReason),
    error = str(u.error),
  }
  if kind == "tool_call_update" then
    -- what the call changed (a sub-agent's calls too): for :SynapseDiff and the turn summary
    self:_record_diffs(u.toolCallId, content_diffs(u.content))
  end
  if type(u.parentToolCallId) == "string" and u.parentToolCallId ~= "" then
    local parent = self.tools[u.parentToolCallId]
    if parent then
      apply_child(self, parent, u)
      return
    end
  end
  if kind == "user_message_chunk" then
    local text = content_text(u.content) or ""
    local last = last_block(self)
    if not (last and last.kind == "user") then
      self.turn_open = true
      self.turn_has_text = false
      self.plan_block = nil
      self.turn_diffs = {}
    end
    append_text(self, self:_text_block("user"), text, "")
  elseif kind == "agent_message_chunk" then
    local text = content_text(u.content)
    if text then
      append_text(self, self:_text_block("agent"), text, "")
    end
  elseif kind == "agent_thought_chunk" then
    local text = content_text(u.content)
    if text then
      append_text(self, self:_text_block("thought"), text, "> ")
    end
  elseif kind == "tool_call" then
    local cmd = u.rawInput and str(u.rawInput.command)
    local block = self.tools[u.toolCallId]
    if block then
      block.title = u.title or block.title
      block.status = u.status or block.status
      self:_set_header(block)
    else
      block = self:_new_tool(u.toolCallId, "Tool", u.title or cmd or "tool call", cmd)
      block.status = u.status or "in_progress"
      self:_set_header(block)
    end
  elseif kind == "tool_call_update" then
    local block = self.tools[u.toolCallId]
    if not block then
      local cmd = u.rawInput and str(u.rawInput.command)
      block = self:_new_tool(u.toolCallId, "Tool", u.title or cmd or "tool call", cmd)
    end
    if type(u.output) == "table" and type(u.output.text) == "string" then
      append_output(self, block, u.output.text)
    end
    if u.title then
      block.title = u.title
    end
    if type(u.rawOutput) == "table" and type(u.rawOutput.exitCode) == "number" then
      block.exit_code = u.rawOutput.exitCode
    end
    local diffs = self.diffs[u.toolCallId]
    if diffs and not block.counts then
      local added, removed = 0, 0
      for _, d in ipairs(diffs) do
        local a, r = M.line_counts(d.old, d.new)
        added, removed = added + a, removed + r
      end
      block.counts = M.counts_text(added, removed)
    end
    if u.status then
      block.status = u.status
      if u.status ~= "in_progress" and u.status ~= "pending" and not block.has_output then
        local text = content_text(u.content)
        if text and text ~= "" then
          append_output(self, block, text)
        end
      end
    end
    self:_set_header(block)
  elseif kind == "plan" then
    self:set_plan(u.entries or {}, u.explanation)
  elseif kind == "usage_update" then
    self.usage = u.usage
  elseif kind == "notice" then
    local block = self:_push({ kind = "notice", lines = {}, open = false })
    block.lines[1] = ""
    append_text(self, block, "**" .. tostring(u.level or "info") .. ":** " .. tostring(u.message or ""), "> ")
  elseif kind == "turn_finished" then
    self:finish_turn(u.stopReason, u.usage, u.error)
  elseif kind == "session_info_update" or kind == "session_title" then
    self.title = u.title or self.title
  end
end

local PLAN_MARK = { completed = "[x]", in_progress = "[~]", pending = "[ ]" }

function State:set_plan(entries, explanation)
  local lines = { "#### Plan" }
  if type(explanation) == "string" and explanation ~= "" then
    for _, l in ipairs(split_lines(one_line(explanation))) do
      lines[#lines + 1] = l
    end
  end
  for _, e in ipairs(entries) do
    lines[#lines + 1] = "- " .. (PLAN_MARK[e.status] or "[ ]") .. " " .. one_line(e.content)
  end
  lines[#lines + 1] = ""
  local block = self.plan_block
  if block then
    block.lines = lines
    self:_touch(block, 1)
  else
    self.plan_block = self:_push({ kind = "plan", lines = lines, open = false })
  end
end

--- Ends the turn (turn_finished or the prompt result); idempotent per turn.
function State:finish_turn(stop_reason, usage, err)
  self.stop_reason = stop_reason
  if usage then
    self.usage = usage
  end
  if not self.turn_open then
    return false
  end
  self.turn_open = false
  -- a cancelled turn leaves its running tool calls cancelled
  if stop_reason == "cancelled" then
    for _, block in pairs(self.tools) do
      if block.status == "in_progress" or block.status == "pending" then
        block.status = "cancelled"
        self:_set_header(block)
      end
    end
  end
  local summary = self:turn_summary()
  if summary then
    self:_push({ kind = "changes", lines = { summary, "" }, open = false })
  end
  local line
  if stop_reason == "error" then
    line = "*Error: " .. one_line(err or "unknown error") .. "*"
  elseif stop_reason and stop_reason ~= "end_turn" then
    line = "*Turn ended: " .. one_line(stop_reason) .. "*"
  end
  if line then
    self:_push({ kind = "end", lines = { line, "" }, open = false })
  end
  return true
end

--- :SynapseRun: starts a block; returns its id for finish_run.
function State:start_run(command)
  self.runs = self.runs + 1
  local id = "run:" .. self.runs
  self:_new_tool(id, "Run", command, nil)
  return id
end

--- result: synapse.shell.run result, or {error = "..."} for a failed request.
function State:finish_run(id, result)
  local block = self.tools[id]
  if not block then
    return
  end
  result = result or {}
  if result.error then
    block.status = "failed"
    append_output(self, block, tostring(result.error) .. "\n")
  else
    block.exit_code = result.exitCode
    block.status = result.isError and "failed" or "completed"
    local shown = false
    for _, key in ipairs({ "stdout", "stderr" }) do
      local s = result[key]
      if type(s) == "string" and s ~= "" then
        if block.open then
          append_output(self, block, "\n")
        end
        append_output(self, block, s)
        shown = true
      end
    end
    if not shown and type(result.text) == "string" and result.text ~= "" then
      append_output(self, block, result.text)
    end
  end
  self:_set_header(block)
end

-- ---------------------------------------------------------------- rendering

function State:_offsets()
  local offsets, blocks = self.offsets, self.blocks
  local i = self.valid
  if i <= #blocks then
    local at = (i == 1) and 0 or (offsets[i - 1] + #blocks[i - 1].lines)
    for j = i, #blocks do
      offsets[j] = at
      at = at + #blocks[j].lines
    end
    self.valid = #blocks + 1
  end
  return offsets
end

function State:line_count()
  local n = #self.blocks
  if n == 0 then
    return 0
  end
  local offsets = self:_offsets()
  return offsets[n] + #self.blocks[n].lines
end

--- All transcript lines.
function State:lines()
  local out = {}
  for _, block in ipairs(self.blocks) do
    for _, l in ipairs(block.lines) do
      out[#out + 1] = l
    end
  end
  return out
end

--- What changed since the last call: (start, lines) meaning "replace buffer
--- lines from 0-based `start` to the end with `lines`"; nil when unchanged.
function State:take_changes()
  local d = self.dirty_block
  if d == nil then
    return nil
  end
  local offsets = self:_offsets()
  local blocks = self.blocks
  local first = self.dirty_line
  local out = {}
  local block = blocks[d]
  for k = first, #block.lines do
    out[#out + 1] = block.lines[k]
  end
  for j = d + 1, #blocks do
    for _, l in ipairs(blocks[j].lines) do
      out[#out + 1] = l
    end
  end
  self.dirty_block = nil
  self.dirty_line = nil
  return offsets[d] + first - 1, out
end

function State:has_changes()
  return self.dirty_block ~= nil
end

--- Fold level for 1-based line `lnum` ('foldexpr' value): tool and run
--- blocks fold their body under the header.
function State:foldlevel(lnum)
  local blocks = self.blocks
  local n = #blocks
  if n == 0 then
    return "0"
  end
  local offsets = self:_offsets()
  local line0 = lnum - 1
  local lo, hi = 1, n
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if offsets[mid] <= line0 then
      lo = mid
    else
      hi = mid - 1
    end
  end
  local block = blocks[lo]
  local rel = line0 - offsets[lo] + 1
  if rel > #block.lines then
    return "0"
  end
  if block.kind ~= "tool" then
    return "0"
  end
  if rel == 1 then
    return ">1"
  end
  if rel == #block.lines then
    return "0"
  end
  return "1"
end

--- 1-based header line of a tool call / run block, or nil.
function State:tool_line(id)
  local block = self.tools[id]
  if not block then
    return nil
  end
  return self:_offsets()[block.index] + 1
end

function State:tool_status(id)
  local block = self.tools[id]
  return block and block.status or nil
end

-- ---------------------------------------------------------- permission questions

--- The card a question about tool call `id` shows in: its own, or, for a sub-agent's
--- call, the card of the call it runs in; nil when the call has not arrived (yet).
function State:question_card(id)
  return self.tools[id] or self.tools[self.child_of[id] or false]
end

--- A permission question (`synapse/requestPermission`) about tool call `id`, matched by
--- id: its card says "waiting for your answer" until `answered(id)`. A question about
--- a call that has not arrived yet is kept; its card shows it when it does.
function State:ask(id, question)
  self.questions[id] = question
  local card = self:question_card(id)
  if card then
    card.question = question
    self:_set_header(card)
  end
end

function State:answered(id)
  self.questions[id] = nil
  local card = self:question_card(id)
  if card and card.question then
    card.question = nil
    self:_set_header(card)
  end
end

M.State = State
return M
