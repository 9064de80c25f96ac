-- synapse.client pieces that need Neovim but no server: root detection and
-- the stale-edit guard in front of Neovim's workspace/applyEdit handler.
-- Run like state_spec.lua; writes {"passed": [...], "failed": {...}} to argv[1].
local client = require("synapse.client")
local protocol = require("synapse.protocol")

local cases = {}
local function case(name, fn)
  cases[#cases + 1] = { name = name, fn = fn }
end
local function eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error((what or "value") .. ": expected " .. vim.inspect(expected) .. ", got " .. vim.inspect(actual), 2)
  end
end

local tmp = vim.fn.tempname()
vim.fn.mkdir(tmp .. "/proj/.git", "p")
vim.fn.mkdir(tmp .. "/proj/src/deep", "p")
vim.fn.mkdir(tmp .. "/loose", "p")
vim.fn.writefile({ "x = 1", "foo = 2" }, tmp .. "/proj/src/deep/a.py")

case("root is the nearest folder with a marker", function()
  client.config = { root_markers = { ".git" } }
  eq(tmp .. "/proj", client.root_for_path(tmp .. "/proj/src/deep/a.py"))
end)

case("root falls back to the file's folder outside the cwd", function()
  client.config = { root_markers = { ".git" } }
  eq(tmp .. "/loose", client.root_for_path(tmp .. "/loose/b.txt"))
end)

case("root_dir option wins", function()
  client.config = { root_dir = function() return tmp .. "/loose/" end }
  eq(tmp .. "/loose", client.root_for_path(tmp .. "/proj/src/deep/a.py"))
  client.config = {}
end)

case("permission shortcut becomes the permission setting", function()
  client.config = { settings = { model = "m" }, permission = "ask-all-native" }
  eq({ model = "m", permission = "ask-all-native" }, client.server_settings())
  client.config = { permission = { policy = "auto", deny = { "rm *" } } }
  eq({ permission = "auto", deny = { "rm *" } }, client.server_settings())
  client.config = {}
end)

case("scratch and URL buffers are not synced", function()
  local scratch = vim.api.nvim_create_buf(false, true)
  eq(false, client.is_file_buffer(scratch))
  local named = vim.api.nvim_create_buf(true, false)
  vim.api.nvim_buf_set_name(named, "synapse://chat/99")
  eq(false, client.is_file_buffer(named))
end)

case("an edit made for an older buffer version is refused, buffer untouched", function()
  local path = tmp .. "/proj/src/deep/a.py"
  vim.cmd("edit " .. vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(buf, 0, 1, false, { "x = 10" })
  if vim.lsp.util.buf_versions then
    vim.lsp.util.buf_versions[buf] = 7
  end
  local called = false
  local orig = vim.lsp.handlers["workspace/applyEdit"]
  vim.lsp.handlers["workspace/applyEdit"] = function()
    called = true
    return { applied = true }
  end
  local res = client.apply_edit(nil, {
    edit = { documentChanges = { {
      textDocument = { uri = vim.uri_from_fname(path), version = 1 },
      edits = { { range = { start = { line = 1, character = 0 }, ["end"] = { line = 1, character = 3 } }, newText = "bar" } },
    } } },
  }, { client_id = 0 })
  vim.lsp.handlers["workspace/applyEdit"] = orig
  eq(false, res.applied)
  eq(false, called, "Neovim's handler called")
  assert(res.failureReason:find("changed in the editor", 1, true), res.failureReason)
  eq({ "x = 10", "foo = 2" }, vim.api.nvim_buf_get_lines(buf, 0, -1, false))
end)

case("a current version goes to Neovim's own handler", function()
  local path = tmp .. "/proj/src/deep/a.py"
  local seen
  local orig = vim.lsp.handlers["workspace/applyEdit"]
  vim.lsp.handlers["workspace/applyEdit"] = function(_, params)
    seen = params.label
    return { applied = true }
  end
  local res = client.apply_edit(nil, {
    label = "Synapse: edit a.py",
    edit = { documentChanges = { { textDocument = { uri = vim.uri_from_fname(path), version = vim.NIL }, edits = {} } } },
  }, { client_id = 0 })
  vim.lsp.handlers["workspace/applyEdit"] = orig
  eq(true, res.applied)
  eq("Synapse: edit a.py", seen)
end)

local function initialized(version)
  return { capabilities = { experimental = { synapse = { protocolVersion = version } } } }
end

case("the protocol version is read from the initialize result", function()
  eq(protocol.VERSION, protocol.server_version(initialized(protocol.VERSION)))
  eq(nil, protocol.mismatch(initialized(protocol.VERSION)))
  eq(nil, protocol.server_version({ capabilities = {} }))
  eq(nil, protocol.server_version(nil))
end)

case("another protocol version names the side to update", function()
  eq(
    "Synapse server speaks protocol 1, this plugin expects 2 — update the Synapse server (pip install -U synapse-lsp).",
    protocol.mismatch(initialized(1), 2)
  )
  eq(
    "Synapse server speaks protocol 3, this plugin expects 2 — update the synapse.nvim plugin.",
    protocol.mismatch(initialized(3), 2)
  )
  local none = protocol.mismatch({ capabilities = {} }, 2)
  assert(none:find("does not report a protocol version", 1, true), none)
end)

case("a mismatched server is reported with vim.notify at ERROR", function()
  local seen = {}
  local orig = vim.notify
  vim.notify = function(msg, level)
    seen[#seen + 1] = { msg = msg, level = level }
  end
  client.report_protocol(initialized(protocol.VERSION + 1))
  client.report_protocol(initialized(protocol.VERSION))
  vim.notify = orig
  eq(1, #seen)
  eq(vim.log.levels.ERROR, seen[1].level)
  assert(seen[1].msg:find("this plugin expects " .. protocol.VERSION, 1, true), seen[1].msg)
end)

case("a server command that is not on PATH is one clear message, said once", function()
  local seen = {}
  local orig = vim.notify
  vim.notify = function(msg, level)
    seen[#seen + 1] = { msg = msg, level = level }
  end
  client.config = { cmd = { "synapse-not-installed-here", "lsp" } }
  client.told_missing = nil
  local first = client.ensure(tmp .. "/proj")
  local second = client.ensure(tmp .. "/loose")
  vim.notify = orig
  client.config = {}
  eq(nil, first)
  eq(nil, second)
  eq(1, #seen)
  eq(vim.log.levels.ERROR, seen[1].level)
  assert(seen[1].msg:find("`synapse-not-installed-here` is not an executable on PATH", 1, true), seen[1].msg)
  assert(seen[1].msg:find(".venv/bin/synapse", 1, true), seen[1].msg)
end)

case("without synapse on PATH the default command is the repository's .venv one", function()
  local repo = tmp .. "/repo"
  vim.fn.mkdir(repo .. "/nvim-client/lua/synapse", "p")
  vim.fn.mkdir(repo .. "/.venv/bin", "p")
  local exe = repo .. "/.venv/bin/synapse"
  vim.fn.writefile({ "#!/bin/sh" }, exe)
  vim.fn.setfperm(exe, "rwxr-xr-x")
  local path = vim.env.PATH
  vim.env.PATH = "/nonexistent"
  local cmd = require("synapse").default_cmd(repo .. "/nvim-client/lua/synapse/init.lua")
  vim.env.PATH = path
  eq({ exe, "lsp" }, cmd)
end)

case("a plugin folder linked into pack/*/start still finds the repository's .venv", function()
  local repo = tmp .. "/linked-repo"
  vim.fn.mkdir(repo .. "/nvim-client/lua/synapse", "p")
  vim.fn.mkdir(repo .. "/.venv/bin", "p")
  local exe = repo .. "/.venv/bin/synapse"
  vim.fn.writefile({ "#!/bin/sh" }, exe)
  vim.fn.setfperm(exe, "rwxr-xr-x")
  local start = tmp .. "/site/pack/synapse/start"
  vim.fn.mkdir(start, "p")
  vim.fn.system({ "ln", "-s", repo .. "/nvim-client", start .. "/synapse" })
  local path = vim.env.PATH
  vim.env.PATH = "/nonexistent"
  local cmd = require("synapse").default_cmd(start .. "/synapse/lua/synapse/init.lua")
  vim.env.PATH = path
  eq({ vim.fn.resolve(exe), "lsp" }, cmd)
end)


case("a permission question is answered with the chosen option's id; its call marked by id", function()
  local marks = {}
  local saved_choose, saved_on = client.choose, client.on_question
  client.on_question = function(id, question)
    marks[#marks + 1] = { id, question and question.message or false }
  end
  client.choose = function(params)
    return params.options[2]
  end
  local params = {
    toolCallId = "toolu_7",
    message = "Reworded, whatever it says",
    options = {
      { optionId = "allow_once", title = "Allow once", kind = "allow_once" },
      { optionId = "reject_once", title = "Deny", kind = "reject_once" },
    },
  }
  local answer = client.request_permission(nil, params, { client_id = 1 })
  eq({ optionId = "reject_once" }, answer)
  eq({ { "toolu_7", "Reworded, whatever it says" }, { "toolu_7", false } }, marks)
  client.choose = function()
    return nil
  end
  eq({ optionId = vim.NIL }, client.request_permission(nil, { toolCallId = vim.NIL, options = {} }, {}))
  eq(2, #marks) -- about no tool call: no card to mark
  client.choose, client.on_question = saved_choose, saved_on
end)

local passed, failed = {}, {}
for _, c in ipairs(cases) do
  local ok, err = pcall(c.fn)
  if ok then
    passed[#passed + 1] = c.name
  else
    failed[c.name] = tostring(err)
  end
end
vim.fn.writefile({ vim.fn.json_encode({ passed = passed, failed = vim.tbl_isempty(failed) and vim.empty_dict() or failed }) }, vim.fn.argv()[1])
vim.cmd(vim.tbl_isempty(failed) and "qa!" or "cq")
