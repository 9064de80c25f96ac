-- Chat views: one transcript buffer (+ prompt buffer) per chat session.
--
-- synapse/sessionUpdate handlers only feed the pure model (synapse.state)
-- and arm a timer; the buffer is updated at most once per `interval` ms
-- with the changed tail only. Nothing here waits on the server.
local State = require("synapse.state")
local client = require("synapse.client")
local compat = require("synapse.compat")
local commands = require("synapse.protocol").commands

local uv = compat.uv()
local M = {}

M.config = {
  interval = 16, -- ms between transcript redraws while streaming
  width = 80, -- width of the chat split (vertical); 0 = half the screen
  prompt_height = 3,
  foldlevel = 99, -- tool calls start unfolded; zc/zM fold them
  max_output_lines = 2000,
  prompt = "buffer", -- "buffer" (a prompt buffer under the transcript) or "input" (vim.ui.input)
  open_on_run = true, -- :SynapseRun shows the chat split if it is hidden
}

M.chats = {} -- all chats, oldest first
M.by_session = {} -- session id -> chat
M.by_buf = {} -- transcript/prompt buffer -> chat
M.current = {} -- root -> chat shown last for that root
M.stats = { handler_calls = 0, handler_max_ns = 0, handler_total_ns = 0, flushes = 0, flush_max_ns = 0, flush_total_ns = 0 }

local Chat = {}
Chat.__index = Chat
local counter = 0

local function notify(msg, level)
  client.notify(msg, level)
end

local function fire(pattern)
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = pattern, modeline = false })
end

function M.new(root, session_id)
  counter = counter + 1
  local self = setmetatable({
    n = counter,
    root = root,
    session_id = session_id,
    state = State.new({ max_output_lines = M.config.max_output_lines, root = root }),
    busy = false,
    pending = false,
    last_flush = 0,
    turns = 0,
    runs_done = 0,
  }, Chat)
  self.timer = uv.new_timer()
  local buf = vim.api.nvim_create_buf(false, true)
  self.buf = buf
  pcall(vim.api.nvim_buf_set_name, buf, "synapse://chat/" .. counter)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].undolevels = -1
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].modifiable = false
  vim.api.nvim_create_autocmd("BufWinEnter", {
    buffer = buf,
    callback = function()
      M.setup_window(vim.api.nvim_get_current_win())
    end,
  })
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    callback = function()
      self:_dispose()
    end,
  })
  local opts = { buffer = buf, silent = true, nowait = true }
  vim.keymap.set("n", "<C-c>", function()
    self:cancel()
  end, opts)
  vim.keymap.set("n", "i", function()
    self:focus_prompt()
  end, opts)
  vim.keymap.set("n", "q", "<cmd>close<cr>", opts)
  M.by_buf[buf] = self
  M.chats[#M.chats + 1] = self
  if session_id then
    M.by_session[session_id] = self
  end
  return self
end

function Chat:_dispose()
  if self.timer and not self.timer:is_closing() then
    self.timer:stop()
    self.timer:close()
  end
  M.by_buf[self.buf] = nil
  if self.prompt_buf then
    M.by_buf[self.prompt_buf] = nil
  end
  if self.session_id and M.by_session[self.session_id] == self then
    M.by_session[self.session_id] = nil
  end
  if M.current[self.root] == self then
    M.current[self.root] = nil
  end
end

function Chat:set_session(id)
  self.session_id = id
  M.by_session[id] = self
end

-- ------------------------------------------------------------- rendering

function M.foldexpr(lnum)
  local chat = M.by_buf[vim.api.nvim_get_current_buf()]
  if not chat or chat.buf ~= vim.api.nvim_get_current_buf() then
    return "0"
  end
  return chat.state:foldlevel(lnum)
end

function M.setup_window(win)
  local wo = vim.wo[win]
  wo.foldmethod = "expr"
  wo.foldexpr = "v:lua.require'synapse.chat'.foldexpr(v:lnum)"
  wo.foldlevel = M.config.foldlevel
  wo.foldtext = "getline(v:foldstart).' ('.(v:foldend - v:foldstart).' lines)'"
  wo.wrap = true
  wo.linebreak = true
  wo.number = false
  wo.relativenumber = false
  wo.list = false
  wo.signcolumn = "no"
  vim.w[win].synapse_transcript = true
end

--- Arms the redraw: immediately when the last redraw is older than the
--- interval, else when the interval has passed. Never more than one pending.
function Chat:schedule()
  if self.pending then
    return
  end
  self.pending = true
  local wait = M.config.interval - (uv.hrtime() - self.last_flush) / 1e6
  if wait <= 0 then
    vim.schedule(function()
      self:flush()
    end)
  else
    self.timer:start(math.ceil(wait), 0, function()
      vim.schedule(function()
        self:flush()
      end)
    end)
  end
end

--- Copies the changed tail of the transcript into the buffer.
function Chat:flush()
  local t0 = uv.hrtime()
  self.pending = false
  self.last_flush = t0
  local buf = self.buf
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local start, lines = self.state:take_changes()
  if not start then
    return
  end
  local old_count = vim.api.nvim_buf_line_count(buf)
  if start > old_count then
    start, lines = 0, self.state:lines()
  end
  local follow = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local row = vim.api.nvim_win_get_cursor(win)[1]
    if row >= old_count - 1 then
      follow[#follow + 1] = win
    end
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, start, -1, false, lines)
  vim.bo[buf].modifiable = false
  local count = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(follow) do
    pcall(vim.api.nvim_win_set_cursor, win, { count, 0 })
  end
  local dt = uv.hrtime() - t0
  local s = M.stats
  s.flushes = s.flushes + 1
  s.flush_total_ns = s.flush_total_ns + dt
  if dt > s.flush_max_ns then
    s.flush_max_ns = dt
  end
end

--- The synapse/sessionUpdate handler: O(size of the update), no redraw.
function M.dispatch(params, client_id)
  local t0 = uv.hrtime()
  local sid = params.sessionId
  if type(sid) ~= "string" then
    return
  end
  local chat = M.by_session[sid]
  if not chat then
    chat = M.new(client.roots[client_id] or vim.fn.getcwd(), sid)
  end
  local update = params.update
  chat.state:apply(update)
  if type(update) == "table" and update.sessionUpdate == "turn_finished" then
    fire("SynapseTurnFinished")
  end
  chat:schedule()
  local dt = uv.hrtime() - t0
  local s = M.stats
  s.handler_calls = s.handler_calls + 1
  s.handler_total_ns = s.handler_total_ns + dt
  if dt > s.handler_max_ns then
    s.handler_max_ns = dt
  end
end

--- A permission question about tool call `id` (`question` nil: answered): each chat's
--- transcript marks the card of that call, matched by id (a call not shown yet gets it
--- when it arrives), and is redrawn now, before the question blocks the editor.
function M.question(id, question)
  for _, c in ipairs(M.chats) do
    if question then
      c.state:ask(id, question)
    else
      c.state:answered(id)
    end
    c:flush()
  end
  pcall(vim.cmd, "redraw")
end

function M.reset_stats()
  for k in pairs(M.stats) do
    M.stats[k] = 0
  end
end

-- ----------------------------------------------------------------- windows

local function find_transcript_win()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local ok, mark = pcall(function()
      return vim.w[win].synapse_transcript
    end)
    if ok and mark and M.by_buf[vim.api.nvim_win_get_buf(win)] then
      return win
    end
  end
  return nil
end

local function find_prompt_win()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local ok, mark = pcall(function()
      return vim.w[win].synapse_prompt
    end)
    if ok and mark then
      return win
    end
  end
  return nil
end

function Chat:_ensure_prompt_buf()
  if self.prompt_buf and vim.api.nvim_buf_is_valid(self.prompt_buf) then
    return self.prompt_buf
  end
  local pbuf = vim.api.nvim_create_buf(false, true)
  vim.bo[pbuf].buftype = "prompt"
  vim.bo[pbuf].bufhidden = "hide"
  vim.bo[pbuf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, pbuf, "synapse://prompt/" .. self.n)
  vim.fn.prompt_setprompt(pbuf, "> ")
  vim.fn.prompt_setcallback(pbuf, function(text)
    self:submit(text)
  end)
  vim.fn.prompt_setinterrupt(pbuf, function()
    self:cancel()
  end)
  vim.keymap.set("n", "<C-c>", function()
    self:cancel()
  end, { buffer = pbuf, silent = true })
  self.prompt_buf = pbuf
  M.by_buf[pbuf] = self
  return pbuf
end

--- Shows the chat: reuses the chat split of this tab if there is one.
--- opts.focus: "prompt" (default), "transcript" or false (stay where you are).
function Chat:show(opts)
  opts = opts or {}
  local focus = opts.focus
  if focus == nil then
    focus = "prompt"
  end
  local prev = vim.api.nvim_get_current_win()
  local win = find_transcript_win()
  if win then
    vim.api.nvim_win_set_buf(win, self.buf)
  else
    local width = M.config.width
    vim.cmd("botright vsplit")
    win = vim.api.nvim_get_current_win()
    if width and width > 0 then
      vim.api.nvim_win_set_width(win, width)
    end
    vim.api.nvim_win_set_buf(win, self.buf)
  end
  M.setup_window(win)
  pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(self.buf), 0 })
  M.current[self.root] = self
  local pwin = find_prompt_win()
  if M.config.prompt == "buffer" then
    local pbuf = self:_ensure_prompt_buf()
    if pwin then
      vim.api.nvim_win_set_buf(pwin, pbuf)
    else
      vim.api.nvim_set_current_win(win)
      vim.cmd("belowright " .. M.config.prompt_height .. "split")
      pwin = vim.api.nvim_get_current_win()
      vim.api.nvim_win_set_buf(pwin, pbuf)
      vim.w[pwin].synapse_prompt = true
      vim.wo[pwin].winfixheight = true
      vim.wo[pwin].number = false
      vim.wo[pwin].relativenumber = false
      vim.wo[pwin].signcolumn = "no"
    end
  end
  if focus == "prompt" and pwin then
    vim.api.nvim_set_current_win(pwin)
    vim.cmd("startinsert!")
  elseif focus == "transcript" or (focus == "prompt" and not pwin) then
    vim.api.nvim_set_current_win(win)
  elseif vim.api.nvim_win_is_valid(prev) then
    vim.api.nvim_set_current_win(prev)
  end
  return win
end

function Chat:focus_prompt()
  if M.config.prompt ~= "buffer" then
    M.ask_input(self)
    return
  end
  self:show({ focus = "prompt" })
end

function Chat:is_visible()
  return #vim.fn.win_findbuf(self.buf) > 0
end

-- ----------------------------------------------------------------- actions

local function uri(root)
  return vim.uri_from_fname(root)
end
M.uri = uri

--- Calls fn(nil) once the chat has a server session (creating one if
--- needed), fn(message) when none could be created.
function Chat:with_session(fn)
  if self.session_id then
    fn(nil)
    return
  end
  if self.creating then
    table.insert(self.creating, fn)
    return
  end
  self.creating = { fn }
  client.exec(self.root, commands.session_new, { workspaceUri = uri(self.root) }, function(err, result)
    local queue = self.creating
    self.creating = nil
    local msg = nil
    if err or type(result) ~= "table" or type(result.sessionId) ~= "string" then
      msg = "could not start a chat session: " .. tostring(err and err.message or "no session id in the answer")
      self.state:apply({ sessionUpdate = "notice", level = "error", message = msg })
      self:schedule()
    else
      self:set_session(result.sessionId)
    end
    for _, f in ipairs(queue) do
      f(msg)
    end
  end)
end

--- Sends a prompt. context: the protocol's prompt context (optional).
function Chat:send(text, context)
  if type(text) ~= "string" or text:match("^%s*$") then
    return false
  end
  if self.busy then
    notify("a turn is running; :SynapseCancel stops it (your text is kept)", vim.log.levels.WARN)
    self:restore_prompt(text)
    return false
  end
  self.busy = true
  self:with_session(function(session_err)
    if session_err then
      self.busy = false
      self:restore_prompt(text)
      fire("SynapsePromptDone")
      return
    end
    local arg = { sessionId = self.session_id, text = text }
    if context and next(context) then
      arg.context = context
    end
    client.exec(self.root, commands.session_prompt, arg, function(err, result)
      self.busy = false
      self.turns = self.turns + 1
      if err then
        local reason = type(err.data) == "table" and err.data.reason
        if reason == "session_busy" then
          notify("this session is already running a turn; your text was not sent", vim.log.levels.WARN)
          self:restore_prompt(text)
        else
          self.state:apply({ sessionUpdate = "notice", level = "error", message = tostring(err.message) })
          self.state:finish_turn("error", nil, err.message)
        end
      elseif type(result) == "table" then
        if self.state:finish_turn(result.stopReason, result.usage, result.error) then
          fire("SynapseTurnFinished")
        end
      end
      self:schedule()
      fire("SynapsePromptDone")
    end)
  end)
  return true
end

function Chat:restore_prompt(text)
  local pbuf = self.prompt_buf
  if pbuf and vim.api.nvim_buf_is_valid(pbuf) then
    local last = vim.api.nvim_buf_line_count(pbuf)
    vim.api.nvim_buf_set_lines(pbuf, last - 1, last, false, { "> " .. text })
  end
end

function Chat:submit(text)
  self:send(text, M.context_provider and M.context_provider(self) or nil)
end

function Chat:cancel()
  if not self.session_id then
    return
  end
  client.exec(self.root, commands.session_cancel, { sessionId = self.session_id }, function(err, result)
    if err then
      notify("cancel failed: " .. tostring(err.message), vim.log.levels.ERROR)
    elseif type(result) == "table" and result.cancelled == false then
      notify("nothing to cancel")
    end
    fire("SynapseCancelDone")
  end)
end

--- :SynapseRun: one command line through the workspace's router.
function Chat:run(command)
  local id = self.state:start_run(command)
  self:schedule()
  client.exec(self.root, commands.shell_run, { workspaceUri = uri(self.root), command = command }, function(err, result)
    if err then
      self.state:finish_run(id, { error = err.message or vim.inspect(err) })
    else
      self.state:finish_run(id, result)
    end
    self.runs_done = self.runs_done + 1
    self:schedule()
    fire("SynapseRunDone")
  end)
  return id
end

--- Replays a stored session into this (empty) chat.
function Chat:load(cb)
  client.exec(self.root, commands.session_load, { sessionId = self.session_id }, function(err, result)
    if err then
      self.state:apply({ sessionUpdate = "notice", level = "error", message = "could not load the session: " .. tostring(err.message) })
    elseif type(result) == "table" then
      self.state.title = result.title
    end
    self:schedule()
    if cb then
      cb(err, result)
    end
  end)
end

function M.ask_input(chat, context)
  vim.ui.input({ prompt = "Synapse> " }, function(text)
    if text and text ~= "" then
      chat:send(text, context or (M.context_provider and M.context_provider(chat)) or nil)
    end
  end)
end

M.Chat = Chat
return M
