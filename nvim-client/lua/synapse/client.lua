-- One Synapse language server per root, on Neovim's built-in LSP client.
local compat = require("synapse.compat")
local protocol = require("synapse.protocol")

local M = {}

M.config = nil -- set by require("synapse").setup()
M.clients = {} -- root -> client id
M.roots = {} -- client id -> root
M.ready = {} -- client id -> true once `initialize` answered
M.waiting = {} -- client id -> functions to run once ready
M.sandbox = {} -- client id -> synapse.status's `sandbox` (mode, sandboxed, description)
M.on_update = nil -- function(params, client_id): synapse/sessionUpdate
M.on_exit = nil -- function(client_id, root, code, signal)

local function notify(msg, level)
  vim.notify("[synapse] " .. msg, level or vim.log.levels.INFO)
end
M.notify = notify

local uv = compat.uv()

local function normalize(path)
  path = vim.fn.fnamemodify(path, ":p")
  if #path > 1 then
    path = path:gsub("/+$", "")
  end
  return path
end
M.normalize = normalize

local function is_dir(path)
  local st = uv.fs_stat(path)
  return st ~= nil and st.type == "directory"
end

local function exists(path)
  return uv.fs_stat(path) ~= nil
end

--- The root for a file path: the closest parent holding a root marker,
--- else the current directory when the file is inside it, else its folder.
function M.root_for_path(path)
  local cfg = M.config or {}
  if type(cfg.root_dir) == "function" then
    local r = cfg.root_dir(path)
    if r then
      return normalize(r)
    end
  elseif type(cfg.root_dir) == "string" then
    return normalize(cfg.root_dir)
  end
  local dir = is_dir(path) and normalize(path) or normalize(vim.fn.fnamemodify(path, ":h"))
  local markers = cfg.root_markers or { ".git" }
  local cur = dir
  while cur and cur ~= "" do
    for _, m in ipairs(markers) do
      if exists(cur .. "/" .. m) then
        return cur
      end
    end
    local parent = vim.fn.fnamemodify(cur, ":h")
    if parent == cur then
      break
    end
    cur = parent
  end
  local cwd = normalize(vim.fn.getcwd())
  if dir == cwd or dir:sub(1, #cwd + 1) == cwd .. "/" then
    return cwd
  end
  return dir
end

--- A buffer Synapse should sync: a normal buffer backed by a file path.
function M.is_file_buffer(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return false
  end
  if vim.bo[bufnr].buftype ~= "" then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  return name ~= "" and not name:match("^%a[%w+.-]*://")
end

function M.root_for_buf(bufnr)
  if not M.is_file_buffer(bufnr) then
    return nil
  end
  return M.root_for_path(vim.api.nvim_buf_get_name(bufnr))
end

local function get(id)
  local c = id and vim.lsp.get_client_by_id(id)
  if c and compat.is_stopped(c) then
    return nil
  end
  return c
end
M.get = get

-- Neovim's own workspace/applyEdit handler applies the edit to buffers (the
-- disk is left alone). Two additions around it: an edit made against an
-- older version of a buffer is refused (0.7-0.10 would skip it silently and
-- still answer applied = true), and files that were not loaded before the
-- edit are written (config.write_unopened) so native commands see them.
local function edit_targets(edit)
  local uris = {}
  if type(edit) ~= "table" then
    return uris
  end
  if type(edit.documentChanges) == "table" then
    for _, change in ipairs(edit.documentChanges) do
      if change.textDocument and change.textDocument.uri then
        uris[#uris + 1] = { uri = change.textDocument.uri, version = change.textDocument.version }
      elseif change.kind == "create" and change.uri then
        uris[#uris + 1] = { uri = change.uri }
      end
    end
  elseif type(edit.changes) == "table" then
    for uri in pairs(edit.changes) do
      uris[#uris + 1] = { uri = uri }
    end
  end
  return uris
end

local function find_buf(uri)
  local fname = vim.uri_to_fname(uri)
  local b = vim.fn.bufnr(fname)
  if b ~= -1 and vim.api.nvim_buf_get_name(b) == fname then
    return b
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) == fname then
      return buf
    end
  end
  return nil
end

function M.apply_edit(err, params, ctx, cfg)
  local targets = edit_targets(params and params.edit)
  local unopened = {}
  for _, t in ipairs(targets) do
    local b = find_buf(t.uri)
    local loaded = b ~= nil and vim.api.nvim_buf_is_loaded(b)
    if type(t.version) == "number" and t.version > 0 and loaded then
      local have = compat.buf_version(b)
      if have and have > t.version then
        return {
          applied = false,
          failureReason = string.format(
            "%s changed in the editor (version %d, edit made for %d)",
            vim.uri_to_fname(t.uri),
            have,
            t.version
          ),
        }
      end
    end
    if not loaded then
      unopened[t.uri] = true
    end
  end
  -- Neovim 0.7 creates files with io.open(): make the parent folders first
  local changes = params and params.edit and params.edit.documentChanges
  if type(changes) == "table" then
    for _, change in ipairs(changes) do
      if change.kind == "create" and type(change.uri) == "string" then
        local dir = vim.fn.fnamemodify(vim.uri_to_fname(change.uri), ":h")
        if vim.fn.isdirectory(dir) == 0 then
          vim.fn.mkdir(dir, "p")
        end
      end
    end
  end
  local result = vim.lsp.handlers["workspace/applyEdit"](err, params, ctx, cfg)
  local cfg_all = M.config or {}
  if cfg_all.write_unopened ~= false and type(result) == "table" and result.applied then
    for uri in pairs(unopened) do
      local b = find_buf(uri)
      if b and vim.api.nvim_buf_is_loaded(b) and vim.bo[b].modified then
        local ok, werr = pcall(vim.api.nvim_buf_call, b, function()
          vim.cmd("silent keepalt write")
        end)
        if not ok then
          return { applied = false, failureReason = "could not write " .. vim.uri_to_fname(uri) .. ": " .. tostring(werr) }
        end
      end
    end
  end
  return result
end

--- A server of another protocol version may misread us (or we it): say so
--- plainly (commands are still sent; most may work). Returns the message or nil.
function M.report_protocol(init_result)
  local mismatch = protocol.mismatch(init_result)
  if mismatch then
    notify(mismatch, vim.log.levels.ERROR)
  end
  return mismatch
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.workspace = caps.workspace or {}
  caps.workspace.applyEdit = true
  caps.workspace.workspaceEdit = caps.workspace.workspaceEdit or {}
  caps.workspace.workspaceEdit.documentChanges = true
  caps.workspace.configuration = true
  caps.window = caps.window or {}
  caps.window.showMessage = caps.window.showMessage or { messageActionItem = { additionalPropertiesSupport = false } }
  -- The agent's edits are saved before its next command reads the disk (the server
  -- never asks for a buffer that also holds the user's own unsaved edits); permission
  -- questions come as data (synapse/requestPermission), naming their tool call by id.
  caps.experimental = caps.experimental or {}
  caps.experimental.synapse = { saveDocuments = true, requestPermission = true }
  return caps
end

--- `synapse/saveDocuments`: write each loaded buffer the server names that has unsaved
--- changes; the URIs that are now on disk.
function M.save_documents(_, params)
  local saved = {}
  for _, uri in ipairs((params or {}).uris or {}) do
    local b = find_buf(uri)
    if b and vim.api.nvim_buf_is_loaded(b) then
      local ok = true
      if vim.bo[b].modified then
        ok = pcall(vim.api.nvim_buf_call, b, function()
          vim.cmd("silent keepalt write")
        end)
      end
      if ok then
        table.insert(saved, uri)
      end
    end
  end
  return { saved = saved }
end

--- Asks the user to pick one of a permission question's options (`params.options`),
--- blocking as Neovim's own `window/showMessageRequest` does: the option, or nil.
--- Replaceable (a test, another UI).
function M.choose(params)
  local options = type(params.options) == "table" and params.options or {}
  local lines = vim.split(tostring(params.message or "Permission"), "\n", { plain = true })
  for i, o in ipairs(options) do
    lines[#lines + 1] = i .. ". " .. tostring(o.title)
  end
  return options[vim.fn.inputlist(lines)]
end

--- `synapse/requestPermission`: the permission gate's question as data. The card of the
--- tool call it names by id says "waiting for your answer" (`on_question`) while the user
--- picks an option (`choose`); the option's id answers, null = dismissed (denied).
function M.request_permission(_, params, ctx)
  params = type(params) == "table" and params or {}
  local id = type(params.toolCallId) == "string" and params.toolCallId or nil
  local function mark(question)
    if id and M.on_question then
      pcall(M.on_question, id, question, ctx and ctx.client_id)
    end
  end
  mark(params)
  local ok, option = pcall(M.choose, params)
  mark(nil)
  local chosen = ok and type(option) == "table" and type(option.optionId) == "string"
  return { optionId = chosen and option.optionId or vim.NIL }
end

--- The settings sent as initializationOptions and workspace/configuration.
function M.server_settings()
  local cfg = M.config or {}
  local settings = vim.deepcopy(cfg.settings or {})
  if type(cfg.permission) == "string" then
    settings.permission = cfg.permission
  elseif type(cfg.permission) == "table" then
    for k, v in pairs(cfg.permission) do
      settings[k == "policy" and "permission" or k] = v
    end
  end
  return settings
end

--- One line saying the server command cannot run, and how to fix it; nil when it can.
function M.missing_server(cmd)
  local exe = type(cmd) == "table" and cmd[1] or nil
  if type(exe) == "string" and vim.fn.executable(exe) == 1 then
    return nil
  end
  return "cannot start the Synapse server: "
    .. (exe and ("`" .. tostring(exe) .. (tostring(exe):find("/", 1, true) and "` is not an executable file" or "` is not an executable on PATH")) or "no `cmd` given")
    .. '; set cmd = { "/path/to/synapse-repo/.venv/bin/synapse", "lsp" } in'
    .. " require('synapse').setup({...}) (`./dev setup` makes that file), or put `synapse` on PATH"
end

local function start(root)
  local cfg = M.config or {}
  local missing = M.missing_server(cfg.cmd)
  if missing then
    if not M.told_missing then -- once per session, not per buffer entered
      M.told_missing = true
      notify(missing, vim.log.levels.ERROR)
    end
    return nil
  end
  local settings = M.server_settings()
  local config = {
    name = "synapse",
    cmd = cfg.cmd,
    cmd_cwd = root,
    cmd_env = cfg.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ":t") } },
    init_options = settings,
    settings = { synapse = settings },
    capabilities = capabilities(),
    handlers = {
      [protocol.SESSION_UPDATE] = function(_, params, ctx)
        if M.on_update and params then
          M.on_update(params, ctx.client_id)
        end
        require("synapse.feedback").observe(params, ctx.client_id)
      end,
      ["workspace/applyEdit"] = M.apply_edit,
      [protocol.SAVE_DOCUMENTS] = M.save_documents,
      [protocol.REQUEST_PERMISSION] = M.request_permission,
    },
    flags = { debounce_text_changes = 50 },
    on_init = function(client, result)
      vim.schedule(function()
        M.report_protocol(result)
      end)
      M.ready[client.id] = true
      -- The sandbox in force, for statuslines (`require("synapse").status()`).
      compat.request(client, "workspace/executeCommand", { command = protocol.commands.status, arguments = { vim.empty_dict() } }, function(err, status)
        if not err and type(status) == "table" and type(status.sandbox) == "table" then
          M.sandbox[client.id] = status.sandbox
        end
      end)
      local queue = M.waiting[client.id] or {}
      M.waiting[client.id] = nil
      for _, fn in ipairs(queue) do
        local ok, e = pcall(fn, client)
        if not ok then
          notify(tostring(e), vim.log.levels.ERROR)
        end
      end
    end,
    on_exit = function(code, signal, id)
      vim.schedule(function()
        local r = M.roots[id]
        M.roots[id], M.ready[id], M.sandbox[id] = nil, nil, nil
        local queue = M.waiting[id] or {}
        M.waiting[id] = nil
        if r and M.clients[r] == id then
          M.clients[r] = nil
        end
        for _, fn in ipairs(queue) do
          pcall(fn, nil, "the Synapse server exited before it was ready (code " .. tostring(code) .. ")")
        end
        if M.on_exit then
          M.on_exit(id, r, code, signal)
        end
      end)
    end,
  }
  -- vim.lsp logs the spawn parameters, environment included, at INFO: keep
  -- an API key given in cmd_env out of lsp.log.
  local has_log, log = pcall(require, "vim.lsp.log")
  local level = has_log and log.get_level and log.get_level()
  local raised = cfg.cmd_env and level and level < vim.log.levels.WARN
  if raised then
    log.set_level(vim.log.levels.WARN)
  end
  local ok, id = pcall(compat.start_client, config)
  if raised then
    log.set_level(level)
  end
  if not ok or not id then
    notify("could not start " .. table.concat(cfg.cmd or {}, " ") .. ": " .. tostring(id), vim.log.levels.ERROR)
    return nil
  end
  M.clients[root] = id
  M.roots[id] = root
  return id
end

--- The client id for `root`, starting the server if needed.
function M.ensure(root)
  local id = M.clients[root]
  if id and get(id) then
    return id
  end
  return start(root)
end

function M.attach(bufnr)
  local root = M.root_for_buf(bufnr)
  if not root then
    return nil
  end
  local id = M.ensure(root)
  if id and not vim.lsp.buf_is_attached(bufnr, id) then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

--- Calls fn(client) once the server for `root` is initialized; fn(nil, err)
--- if it cannot start.
function M.with_client(root, fn)
  local id = M.ensure(root)
  if not id then
    fn(nil, "the Synapse server could not start (see :messages)")
    return
  end
  if M.ready[id] then
    local c = get(id)
    if c then
      fn(c)
    else
      fn(nil, "the Synapse server has stopped")
    end
    return
  end
  M.waiting[id] = M.waiting[id] or {}
  table.insert(M.waiting[id], fn)
end

--- workspace/executeCommand with Synapse's single-object argument;
--- cb(err, result) where err is a JSON-RPC error table or {message = ...}.
function M.exec(root, command, arg, cb)
  cb = cb or function() end
  M.with_client(root, function(client, start_err)
    if not client then
      cb({ message = start_err }, nil)
      return
    end
    local ok = compat.request(client, "workspace/executeCommand", { command = command, arguments = { arg or vim.empty_dict() } }, function(err, result)
      cb(err, result)
    end)
    if not ok then
      cb({ message = "the Synapse server is not running" }, nil)
    end
  end)
end

function M.stop_all()
  for root, id in pairs(M.clients) do
    local c = vim.lsp.get_client_by_id(id)
    if c then
      compat.stop(c)
    end
    M.clients[root] = nil
  end
end

return M
