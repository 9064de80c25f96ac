-- Headless integration driver for tests/test_nvim.py.
--
--   SYN_CLIENT=<nvim-client dir> SYN_OUT=<result.json> SYN_SCENARIO=<name>
--   SYN_CONFIG=<json: {cmd=[...], cmd_env={...}, settings={...}, permission=...}>
--   nvim --headless --clean -u nvim-client/tests/driver.lua [file]
--
-- Runs one scenario against the real server, writes what it observed (buffer
-- lines, disk text, transcript lines, requests answered) as JSON, quits.
vim.opt.runtimepath:prepend(os.getenv("SYN_CLIENT"))
vim.cmd("runtime plugin/synapse.lua")

local out_path = os.getenv("SYN_OUT")
local scenario = os.getenv("SYN_SCENARIO")
local config = vim.fn.json_decode(os.getenv("SYN_CONFIG") or "{}")
local WAIT = tonumber(os.getenv("SYN_WAIT_MS") or "90000")

local result = { scenario = scenario, nvim = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) }

local function finish()
  vim.fn.writefile({ vim.fn.json_encode(result) }, out_path)
  -- let the servers shut down cleanly (shutdown + exit) before quitting
  local ids = vim.tbl_values(require("synapse.client").clients)
  if #ids > 0 then
    vim.lsp.stop_client(ids)
    vim.wait(3000, function()
      for _, id in ipairs(ids) do
        if vim.lsp.get_client_by_id(id) then
          return false
        end
      end
      return true
    end, 20)
  end
  vim.cmd("qa!")
end

local function wait_for(what, cond)
  local ok = vim.wait(WAIT, cond, 10)
  if not ok then
    error("timed out waiting for " .. what, 2)
  end
end

local function read_disk(path)
  local f = io.open(path, "r")
  if not f then
    return vim.NIL
  end
  local s = f:read("*a")
  f:close()
  return s
end

local synapse = require("synapse")

local function transcript(chat)
  return vim.api.nvim_buf_get_lines(chat.buf, 0, -1, false)
end

-- Flushes what is pending so the buffer holds everything received so far.
local function settle(chat)
  vim.wait(100, function()
    return not chat.pending
  end, 5)
end

local T0 = vim.loop.hrtime()
local function mark(name)
  result.timings = result.timings or {}
  result.timings[name] = math.floor((vim.loop.hrtime() - T0) / 1e6)
end

local function ready_client()
  local root = synapse.current_root()
  wait_for("the server to initialize", function()
    local id = synapse.client.clients[root]
    return id ~= nil and synapse.client.ready[id] == true
  end)
  mark("ready")
  return vim.lsp.get_client_by_id(synapse.client.clients[root]), root
end

local function first_tool(chat)
  for id, block in pairs(chat.state.tools) do
    if block.label == "Tool" then
      return id, block
    end
  end
end

local scenarios = {}

function scenarios.attach()
  local client, root = ready_client()
  local buf = vim.api.nvim_get_current_buf()
  result.root = root
  result.attached = vim.lsp.buf_is_attached(buf, client.id)
  result.clients_for_root = 0
  for r, _ in pairs(synapse.client.clients) do
    if r == root then
      result.clients_for_root = result.clients_for_root + 1
    end
  end
  local caps = client.server_capabilities or {}
  result.commands = (caps.executeCommandProvider or {}).commands or {}
  result.protocol_version = require("synapse.protocol").server_version({ capabilities = caps }) or vim.NIL
  -- a second buffer of the same root reuses the client
  vim.cmd("edit second.txt")
  result.second_attached = vim.lsp.buf_is_attached(vim.api.nvim_get_current_buf(), client.id)
  result.client_count = #vim.tbl_keys(synapse.client.roots)
  local status
  synapse.client.exec(root, "synapse.status", vim.empty_dict(), function(err, res)
    status = { err = err and err.message or vim.NIL, res = res }
  end)
  wait_for("synapse.status", function()
    return status ~= nil
  end)
  result.status = status
  wait_for("the statusline's sandbox", function()
    return synapse.client.sandbox[client.id] ~= nil
  end)
  result.statusline = synapse.status()
end

function scenarios.run_edit()
  local _, root = ready_client()
  local buf = vim.api.nvim_get_current_buf()
  -- an unsaved change the server must see (and keep)
  vim.api.nvim_buf_set_lines(buf, 0, 1, false, { "x = 10" })
  vim.cmd("SynapseRun edit a.py 'foo' 'bar'")
  local chat = synapse.current_chat(false)
  wait_for("the run to finish", function()
    return chat.runs_done >= 1
  end)
  settle(chat)
  result.buffer = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  result.modified = vim.bo[buf].modified
  result.disk = read_disk(root .. "/a.py")
  result.transcript = transcript(chat)
  -- files not loaded in Neovim: the edit lands in a buffer that is then saved
  vim.cmd("SynapseRun edit b.py 'old' 'new'")
  vim.cmd("SynapseRun write notes/todo.md 'ship it'")
  wait_for("the other runs", function()
    return chat.runs_done >= 3
  end)
  settle(chat)
  result.b_disk = read_disk(root .. "/b.py")
  result.todo_disk = read_disk(root .. "/notes/todo.md")
  local b = vim.fn.bufnr(root .. "/b.py")
  if b ~= -1 then
    result.b_modified = vim.bo[b].modified
  end
  result.transcript_all = transcript(chat)

end

-- Issue 29: the agent edits the open buffer, then runs a command that reads the disk.
-- `user_line`: the buffer first holds an unsaved line of the user's own.
local function save_turn(user_line)
  local _, root = ready_client()
  local buf = vim.api.nvim_get_current_buf()
  if user_line then
    vim.api.nvim_buf_set_lines(buf, 0, 1, false, { user_line })
  end
  vim.cmd("SynapseChat make foo three and check it")
  local chat = synapse.current_chat(false)
  wait_for("the turn to finish", function()
    return chat.turns >= 1
  end)
  settle(chat)
  result.buffer = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  result.modified = vim.bo[buf].modified
  result.disk = read_disk(root .. "/a.py")
end

-- the server asks Neovim to save the buffer first (synapse/saveDocuments)
function scenarios.save()
  save_turn(nil)
end

-- the user's own unsaved line: the buffer must not be saved unasked
function scenarios.save_user()
  save_turn("x = 10")
end

function scenarios.chat()
  ready_client()
  local seen_partial = false
  vim.cmd("SynapseChat list things")
  local chat = synapse.current_chat(false)
  -- watch the transcript while the answer streams
  wait_for("the turn to finish", function()
    local lines = transcript(chat)
    for _, l in ipairs(lines) do
      if l:match("^Streaming") and l ~= "Streaming the answer in small pieces." then
        seen_partial = true
      end
    end
    return chat.turns >= 1
  end)
  settle(chat)
  result.seen_partial = seen_partial
  result.transcript = transcript(chat)
  result.flushes = require("synapse.chat").stats.flushes
  result.updates = require("synapse.chat").stats.handler_calls
  result.session_id = chat.session_id
  local _, block = first_tool(chat)
  local line = block and chat.state:tool_line(block.id)
  if line then
    -- the tool call is a fold in the chat window
    local win = vim.fn.win_findbuf(chat.buf)[1]
    result.fold = vim.api.nvim_win_call(win, function()
      return { level = vim.fn.foldlevel(line + 1), start = vim.fn.foldclosed(line) }
    end)
  end
end

function scenarios.cancel()
  ready_client()
  vim.cmd("SynapseChat wait for it")
  local chat = synapse.current_chat(false)
  wait_for("the sleep to start", function()
    local id = first_tool(chat)
    return id ~= nil
  end)
  -- a second prompt while the turn runs is refused, not queued
  result.second_send = chat:send("and another thing")
  local t0 = vim.loop.hrtime()
  vim.cmd("SynapseCancel")
  wait_for("the turn to end", function()
    return chat.turns >= 1
  end)
  settle(chat)
  result.cancel_ms = (vim.loop.hrtime() - t0) / 1e6
  result.stop_reason = chat.state.stop_reason
  result.transcript = transcript(chat)
end

function scenarios.deny()
  local asked = {}
  -- The plugin's question UI answers "Deny" (by the option's kind). Meanwhile it notes the
  -- card the question shows in: the tool call the question names by id (a question that
  -- came before its call's update shows once the update arrives: events run meanwhile).
  synapse.client.choose = function(params)
    local chat = synapse.current_chat(false)
    vim.wait(5000, function()
      return chat.state:question_card(params.toolCallId) ~= nil
    end, 10)
    local card = chat.state:question_card(params.toolCallId)
    asked[#asked + 1] = {
      params = params,
      card_id = card and card.id or vim.NIL,
      header = card and card.lines[1] or vim.NIL,
    }
    for _, option in ipairs(params.options or {}) do
      if option.kind == "reject_once" then
        return option
      end
    end
  end
  local _, root = ready_client()
  vim.cmd("SynapseChat make a file")
  local chat = synapse.current_chat(false)
  wait_for("the turn to finish", function()
    return chat.turns >= 1
  end)
  settle(chat)
  result.asked = asked
  result.tool_id = first_tool(chat) or vim.NIL
  result.transcript = transcript(chat)
  result.created = read_disk(root .. "/created.txt") ~= vim.NIL
end

function scenarios.sessions()
  ready_client()
  vim.cmd("SynapseChat remember this")
  local first = synapse.current_chat(false)
  wait_for("the first turn", function()
    return first.turns >= 1
  end)
  settle(first)
  result.original = transcript(first)
  result.first_session = first.session_id
  vim.cmd("SynapseNew")
  local second = synapse.current_chat(false)
  wait_for("the new session", function()
    return second.session_id ~= nil
  end)
  result.new_is_other = second ~= first and second.session_id ~= first.session_id
  result.new_transcript = transcript(second)
  -- pick the first session in the list; forget its chat so it is loaded and replayed
  require("synapse.chat").by_session[first.session_id] = nil
  local listed
  vim.ui.select = function(items, opts, on_choice)
    listed = {}
    for _, it in ipairs(items) do
      listed[#listed + 1] = { id = it.sessionId, label = opts.format_item(it) }
    end
    for _, it in ipairs(items) do
      if it.sessionId == first.session_id then
        return on_choice(it)
      end
    end
    on_choice(nil)
  end
  vim.cmd("SynapseSessions")
  wait_for("the replay", function()
    local c = synapse.current_chat(false)
    return c ~= second and c ~= first and c.session_id == first.session_id and #transcript(c) > 1
  end)
  local replayed = synapse.current_chat(false)
  vim.wait(300, function()
    return false
  end)
  settle(replayed)
  result.listed = listed
  result.replayed = transcript(replayed)
  result.shown = vim.api.nvim_win_get_buf(vim.fn.win_findbuf(replayed.buf)[1]) == replayed.buf
end

function scenarios.ask()
  ready_client()
  vim.cmd("1,2SynapseAsk what does this do?")
  local chat = synapse.current_chat(false)
  wait_for("the turn to finish", function()
    return chat.turns >= 1
  end)
  settle(chat)
  result.transcript = transcript(chat)
end

-- Issue 20: the turn's changed files in the transcript, :SynapseDiff in diff mode.
local function diff_tab(file_buf)
  local wins = {}
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(w)
    wins[#wins + 1] = {
      diff = vim.api.nvim_win_get_option(w, "diff"),
      name = vim.api.nvim_buf_get_name(b),
      lines = vim.api.nvim_buf_get_lines(b, 0, -1, false),
      is_file_buf = b == file_buf,
      modifiable = vim.api.nvim_buf_get_option(b, "modifiable"),
      buftype = vim.api.nvim_buf_get_option(b, "buftype"),
      current = w == vim.api.nvim_get_current_win(),
    }
  end
  return wins
end

function scenarios.diff()
  local _, root = ready_client()
  local file_buf = vim.api.nvim_get_current_buf()
  vim.cmd("SynapseChat change foo and add a file")
  local chat = synapse.current_chat(false)
  wait_for("the turn to finish", function()
    return chat.turns >= 1
  end)
  settle(chat)
  result.transcript = transcript(chat)
  result.disk = read_disk(root .. "/a.py")
  result.new_disk = read_disk(root .. "/new.txt")
  -- an id no call has: a message, no tab
  local tabs = #vim.api.nvim_list_tabpages()
  vim.cmd("SynapseDiff no-such-call")
  result.bad_id_new_tabs = #vim.api.nvim_list_tabpages() - tabs
  -- no id: the last call that changed a file (the write of new.txt)
  vim.cmd("SynapseDiff")
  result.new_tabs = #vim.api.nvim_list_tabpages() - tabs
  result.last_diff = diff_tab(vim.fn.bufnr(root .. "/new.txt"))
  -- the first call by its id: a.py, the open buffer with the unsaved edit
  vim.cmd("SynapseDiff " .. chat.state.diff_ids[1])
  result.first_diff = diff_tab(file_buf)
  result.diff_ids = chat.state.diff_ids
  result.completion = vim.fn.getcompletion("SynapseDiff ", "cmdline")
end

-- Issue 20: checkpoints. A turn edits the open buffer and runs shell commands;
-- :SynapseRewind 1 puts everything back (the buffer through applyEdit).
function scenarios.rewind()
  local _, root = ready_client()
  local file_buf = vim.api.nvim_get_current_buf()
  vim.cmd("SynapseChat change things")
  local chat = synapse.current_chat(false)
  wait_for("the turn to finish", function()
    return chat.turns >= 1
  end)
  settle(chat)
  result.after_turn = {
    buffer = vim.api.nvim_buf_get_lines(file_buf, 0, -1, false),
    made = read_disk(root .. "/made.txt"),
    b = read_disk(root .. "/b.py"),
  }
  vim.cmd("SynapseRewind 1")
  wait_for("the rewind", function()
    return read_disk(root .. "/made.txt") == vim.NIL and read_disk(root .. "/b.py") ~= vim.NIL
  end)
  wait_for("the buffer to get its old text", function()
    return vim.api.nvim_buf_get_lines(file_buf, 0, -1, false)[2] == "foo = 2"
  end)
  wait_for("the rewind's report", function()
    return vim.fn.execute("messages"):find("Rewound the files", 1, true) ~= nil
  end)
  result.buffer = vim.api.nvim_buf_get_lines(file_buf, 0, -1, false)
  result.disk = read_disk(root .. "/a.py")
  result.b = read_disk(root .. "/b.py")
  result.made = read_disk(root .. "/made.txt")
  vim.cmd("SynapseRewind nope")
end

-- Benchmark (benchmarks/bench_nvim.py): one long streamed answer end to end.
function scenarios.stream_bench()
  ready_client()
  local chat_mod = require("synapse.chat")
  local uv = vim.uv or vim.loop
  chat_mod.reset_stats()
  local probe = uv.new_timer()
  local last_tick = uv.hrtime()
  local max_gap = 0
  probe:start(1, 1, function()
    local now = uv.hrtime()
    if now - last_tick > max_gap then
      max_gap = now - last_tick
    end
    last_tick = now
  end)
  local t0 = uv.hrtime()
  vim.cmd("SynapseChat stream please")
  local chat = synapse.current_chat(false)
  wait_for("the turn to finish", function()
    return chat.turns >= 1
  end)
  settle(chat)
  local t1 = uv.hrtime()
  probe:stop()
  probe:close()
  local s = chat_mod.stats
  result.bench = {
    total_ms = (t1 - t0) / 1e6,
    handler_calls = s.handler_calls,
    handler_max_ms = s.handler_max_ns / 1e6,
    flushes = s.flushes,
    flush_max_ms = s.flush_max_ns / 1e6,
    loop_max_gap_ms = max_gap / 1e6,
    lines = vim.api.nvim_buf_line_count(chat.buf),
  }
  result.transcript_tail = vim.api.nvim_buf_get_lines(chat.buf, -4, -1, false)
end

local function main()
  local ok, err = pcall(function()
    synapse.setup({
      cmd = config.cmd,
      cmd_env = config.cmd_env,
      settings = config.settings or {},
      permission = config.permission,
      chat = { prompt = "buffer" },
    })
    if os.getenv("SYN_TRACE") then
      local inner = synapse.client.on_update
      result.trace = {}
      synapse.client.on_update = function(params, id)
        local u = params.update or {}
        table.insert(result.trace, math.floor((vim.loop.hrtime() - T0) / 1e6) .. " " .. tostring(u.sessionUpdate) .. " " .. tostring(u.status or ""))
        inner(params, id)
      end
    end
    scenarios[scenario]()
  end)
  mark("done")
  result.ok = ok
  result.messages = vim.api.nvim_exec("messages", true)
  if not ok then
    result.error = tostring(err)
  end
  finish()
end

vim.api.nvim_create_autocmd("VimEnter", {
  once = true,
  callback = function()
    vim.schedule(main)
  end,
})
