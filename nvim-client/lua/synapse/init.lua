-- Synapse for Neovim: the `synapse lsp` agent on the built-in LSP client.
--
--   require("synapse").setup({
--     cmd = { "synapse", "lsp" },              -- how to start the server (default: synapse
--                                              -- on PATH, else <repo>/.venv/bin/synapse)
--     settings = { model = "claude-sonnet-5-5" },  -- the protocol's settings (camelCase)
--     permission = "ask-writes-outside-workspace", -- shortcut for settings.permission
--   })
--
-- See :help synapse and docs/neovim.md.
local client = require("synapse.client")
local chat = require("synapse.chat")
local commands = require("synapse.protocol").commands

local M = {}

M.defaults = {
  cmd = { "synapse", "lsp" },
  cmd_env = nil, -- extra environment for the server (e.g. the API key); never logged
  settings = {}, -- initializationOptions and workspace/configuration section "synapse"
  permission = nil, -- "auto" | "ask-writes-outside-workspace" | "ask-all-native" | {policy=, allow=, deny=}
  root_markers = { ".git" },
  root_dir = nil, -- string or function(path) -> root
  autostart = true, -- attach to file buffers as they are opened
  write_unopened = true, -- agent edits to files not loaded in Neovim are written to disk
  chat = {}, -- see synapse.chat config: interval, width, prompt_height, foldlevel, prompt, ...
}

M.config = nil
M.last_file_buf = nil

local augroup = nil

local function current_root()
  local buf = vim.api.nvim_get_current_buf()
  local c = chat.by_buf[buf]
  if c then
    return c.root
  end
  local r = client.root_for_buf(buf)
  if r then
    return r
  end
  if M.last_file_buf and vim.api.nvim_buf_is_valid(M.last_file_buf) then
    r = client.root_for_buf(M.last_file_buf)
    if r then
      return r
    end
  end
  return client.normalize(vim.fn.getcwd())
end
M.current_root = current_root

--- The chat shown last for the current root; created when there is none.
function M.current_chat(create)
  local root = current_root()
  local c = chat.by_buf[vim.api.nvim_get_current_buf()] or chat.current[root]
  if c and vim.api.nvim_buf_is_valid(c.buf) then
    return c
  end
  if create == false then
    return nil
  end
  c = chat.new(root, nil)
  chat.current[root] = c
  return c
end

-- What the editor shows, sent with every prompt.
local function context_for(c, selection)
  local ctx = {}
  local buf = M.last_file_buf
  if buf and vim.api.nvim_buf_is_valid(buf) and client.is_file_buffer(buf) then
    ctx.activeFile = vim.uri_from_bufnr(buf)
  end
  local open = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buflisted and client.is_file_buffer(b) then
      local name = vim.api.nvim_buf_get_name(b)
      if name:sub(1, #c.root + 1) == c.root .. "/" then
        open[#open + 1] = vim.uri_from_bufnr(b)
        if #open >= 50 then
          break
        end
      end
    end
  end
  if #open > 0 then
    ctx.openFiles = open
  end
  if selection then
    ctx.selection = selection
  end
  return ctx
end
M.context_for = context_for

--- The server command when setup() names none: `synapse` on PATH, else the one
--- `./dev setup` made in this plugin's own repository (<repo>/.venv/bin/synapse),
--- found through a symlinked plugin folder too (a `pack/*/start` link).
function M.default_cmd(plugin_file)
  if vim.fn.executable("synapse") == 1 then
    return { "synapse", "lsp" }
  end
  local here = plugin_file or debug.getinfo(1, "S").source:sub(2) -- <repo>/nvim-client/lua/synapse/init.lua
  here = vim.fn.resolve(vim.fn.fnamemodify(here, ":p"))
  local venv = vim.fn.fnamemodify(here, ":h:h:h:h") .. "/.venv/bin/synapse"
  if vim.fn.executable(venv) == 1 then
    return { venv, "lsp" }
  end
  return { "synapse", "lsp" }
end

function M.setup(opts)
  local cfg = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if not (opts and opts.cmd) then
    cfg.cmd = M.default_cmd()
  end
  if type(cfg.cmd) == "string" then
    cfg.cmd = { cfg.cmd }
  end
  M.config = cfg
  client.config = cfg
  for k, v in pairs(cfg.chat or {}) do
    chat.config[k] = v
  end
  client.on_update = chat.dispatch
  client.on_question = chat.question
  client.on_exit = function(id, root, code, signal)
    for _, c in ipairs(chat.chats) do
      if c.root == root and c.busy then
        c.busy = false
        c.state:finish_turn("error", nil, "the Synapse server exited (code " .. tostring(code) .. ")")
        c:schedule()
      end
    end
    if code ~= 0 and not M._stopping then
      client.notify("server for " .. tostring(root) .. " exited with code " .. tostring(code) .. " (signal " .. tostring(signal) .. ")", vim.log.levels.WARN)
    end
  end
  chat.context_provider = function(c)
    return context_for(c)
  end

  augroup = vim.api.nvim_create_augroup("synapse", { clear = true })
  vim.api.nvim_create_autocmd("BufEnter", {
    group = augroup,
    callback = function(ev)
      if client.is_file_buffer(ev.buf) then
        M.last_file_buf = ev.buf
      end
    end,
  })
  if cfg.autostart then
    vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile" }, {
      group = augroup,
      callback = function(ev)
        if client.is_file_buffer(ev.buf) then
          client.attach(ev.buf)
        end
      end,
    })
    vim.api.nvim_create_autocmd("VimLeavePre", {
      group = augroup,
      callback = function()
        M._stopping = true
      end,
    })
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(b) and client.is_file_buffer(b) then
        client.attach(b)
      end
    end
    if client.is_file_buffer(vim.api.nvim_get_current_buf()) then
      M.last_file_buf = vim.api.nvim_get_current_buf()
    end
  end
  return M
end

local function ensure_setup()
  if not M.config then
    M.setup({})
  end
end

--- Starts (or finds) the server for the current root; returns its client id.
function M.start()
  ensure_setup()
  local buf = vim.api.nvim_get_current_buf()
  if client.is_file_buffer(buf) then
    return client.attach(buf)
  end
  return client.ensure(current_root())
end

-- ---------------------------------------------------------------- commands

--- :SynapseChat [text]: opens the chat split; with text, sends it.
function M.chat(text)
  ensure_setup()
  M.start()
  local c = M.current_chat()
  if text and text ~= "" then
    c:show({ focus = false })
    c:send(text, context_for(c))
  else
    c:show()
    if chat.config.prompt ~= "buffer" then
      chat.ask_input(c)
    end
  end
  return c
end

--- :SynapseNew: a new chat session in the chat split.
function M.new_session()
  ensure_setup()
  local root = current_root()
  local c = chat.new(root, nil)
  chat.current[root] = c
  c:with_session(function() end)
  c:show()
  return c
end

function M.cancel()
  ensure_setup()
  local c = M.current_chat(false)
  if c then
    c:cancel()
  end
end

--- :SynapseSessions: pick a stored session (vim.ui.select) and show it.
function M.sessions()
  ensure_setup()
  local root = current_root()
  client.exec(root, commands.session_list, { workspaceUri = chat.uri(root) }, function(err, result)
    if err then
      client.notify("could not list sessions: " .. tostring(err.message), vim.log.levels.ERROR)
      return
    end
    local items = (type(result) == "table" and result.sessions) or {}
    if #items == 0 then
      client.notify("no stored sessions for " .. root)
      return
    end
    vim.ui.select(items, {
      prompt = "Synapse sessions",
      format_item = function(s)
        local t = (type(s.title) == "string" and s.title ~= "") and s.title or s.sessionId
        local when = type(s.updatedAt) == "string" and s.updatedAt or ""
        return t .. "  " .. when .. (s.busy and "  [running]" or "")
      end,
    }, function(choice)
      if not choice then
        return
      end
      M.open_session(choice.sessionId, root)
    end)
  end)
end

--- Shows session `id` (loading and replaying it if this Neovim has not seen it).
function M.open_session(id, root)
  root = root or current_root()
  local c = chat.by_session[id]
  if c and vim.api.nvim_buf_is_valid(c.buf) then
    chat.current[root] = c
    c:show()
    return c
  end
  c = chat.new(root, id)
  chat.current[root] = c
  c:load()
  c:show()
  return c
end

--- :SynapseCheckpoints: the current chat's turns that can be rewound, with the files
--- each changed; picking one rewinds to before it (files changed since are skipped).
function M.checkpoints()
  ensure_setup()
  local c = M.current_chat(false)
  if not c or not c.session_id then
    client.notify("no chat session here yet", vim.log.levels.WARN)
    return
  end
  client.exec(c.root, commands.session_checkpoints, { sessionId = c.session_id }, function(err, result)
    if err then
      client.notify("could not list checkpoints: " .. tostring(err.message), vim.log.levels.ERROR)
      return
    end
    local items = (type(result) == "table" and result.checkpoints) or {}
    if #items == 0 then
      client.notify(type(result) == "table" and result.disabled and ("checkpoints are off: " .. result.disabled) or "no checkpoints yet")
      return
    end
    vim.ui.select(items, {
      prompt = "Rewind to before turn",
      format_item = function(cp)
        local files = {}
        for _, f in ipairs(cp.changed or {}) do
          local mark = f.status == "added" and "+" or (f.status == "deleted" and "-" or "~")
          files[#files + 1] = mark .. f.path
        end
        return string.format("turn %d  %s  %s", cp.turn, cp.prompt or "", table.concat(files, " "))
      end,
    }, function(choice)
      if choice then
        M.rewind(choice.turn, false)
      end
    end)
  end)
end

--- :SynapseRewind {turn}[!]: put the files back as they were before {turn} and end the
--- chat there; with !, files someone changed since are restored too (else skipped).
--- Open buffers get the old text as an edit (undo brings the agent's version back).
function M.rewind(turn, force, done)
  ensure_setup()
  local c = M.current_chat(false)
  local n = tonumber(turn)
  if not c or not c.session_id then
    client.notify("no chat session here yet", vim.log.levels.WARN)
    return
  end
  if not n then
    client.notify("usage: :SynapseRewind {turn}[!] (see :SynapseCheckpoints)", vim.log.levels.WARN)
    return
  end
  local arg = { sessionId = c.session_id, turn = n, onConflict = force and "overwrite" or "skip" }
  client.exec(c.root, commands.session_rewind, arg, function(err, result)
    if err then
      client.notify("rewind failed: " .. tostring(err.message), vim.log.levels.ERROR)
    else
      client.notify(result.text)
    end
    if done then
      done(err, result)
    end
  end)
end

--- :SynapseRun {cmd}
function M.run(command)
  ensure_setup()
  if not command or command:match("^%s*$") then
    client.notify("usage: :SynapseRun {command line}", vim.log.levels.WARN)
    return
  end
  M.start()
  local c = M.current_chat()
  if chat.config.open_on_run and not c:is_visible() then
    c:show({ focus = false })
  end
  return c, c:run(command)
end

--- :'<,'>SynapseAsk [question]: the selected lines go with the prompt.
function M.ask(line1, line2, question)
  ensure_setup()
  local buf = vim.api.nvim_get_current_buf()
  if not client.is_file_buffer(buf) then
    client.notify(":SynapseAsk works on a file buffer", vim.log.levels.WARN)
    return
  end
  M.start()
  M.last_file_buf = buf
  local lines = vim.api.nvim_buf_get_lines(buf, line1 - 1, line2, false)
  local selection = {
    uri = vim.uri_from_bufnr(buf),
    range = { start = { line = line1 - 1, character = 0 }, ["end"] = { line = line2, character = 0 } },
    text = table.concat(lines, "\n") .. "\n",
  }
  local c = M.current_chat()
  local function send(q)
    if not q or q:match("^%s*$") then
      return
    end
    c:show({ focus = false })
    c:send(q, context_for(c, selection))
  end
  if question and question ~= "" then
    send(question)
  else
    vim.ui.input({ prompt = "Ask about lines " .. line1 .. "-" .. line2 .. ": " }, send)
  end
  return c
end

--- The sandbox words for a statusline: the mode, or "<mode>: NOT sandboxed".
local function sandbox_label(root)
  local id = root and client.clients[root]
  local info = id and client.sandbox[id]
  if type(info) ~= "table" then
    return nil
  end
  if info.sandboxed or info.mode == "full-access" then
    return info.mode
  end
  return info.mode .. ": NOT sandboxed"
end

--- For a statusline: "" before a server runs, else "synapse · <sandbox mode>",
--- "synapse: running · <sandbox mode>" while a turn runs.
function M.status()
  local c = M.current_chat(false)
  local root = c and c.root or client.root_for_buf(vim.api.nvim_get_current_buf())
  local mode = sandbox_label(root)
  local suffix = mode and (" · " .. mode) or ""
  if c and c.busy then
    return "synapse: running" .. suffix
  end
  return mode and ("synapse" .. suffix) or ""
end

M.client = client
M.chat_module = chat
return M
