-- Pure tests of synapse.state (no server, no buffers).
-- Run: nvim --headless --clean -u NONE --cmd 'set rtp^=nvim-client' \
--        -c 'luafile nvim-client/tests/state_spec.lua' OUT.json
-- Writes {"passed": [...], "failed": {"name": "error"}} to OUT.json (or
-- prints it) and quits; exit code 1 when something failed.

local State = require("synapse.state")

local cases = {}
local function case(name, fn)
  cases[#cases + 1] = { name = name, fn = fn }
end

local function show(v)
  return vim.inspect(v)
end

local function eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error((what or "value") .. ":\nexpected " .. show(expected) .. "\n     got " .. show(actual), 2)
  end
end

-- Applies a change set to a line list the way the view applies it to a buffer.
local function apply_changes(buf, start, lines)
  for i = #buf, start + 1, -1 do
    buf[i] = nil
  end
  for _, l in ipairs(lines) do
    buf[#buf + 1] = l
  end
end

local function text(s)
  return { type = "text", text = s }
end

case("streamed text splits on newlines and keeps order", function()
  local s = State.new()
  s:apply({ sessionUpdate = "user_message_chunk", content = text("Why?") })
  for _, chunk in ipairs({ "The test", " fails because\n", "\nparse()", " drops ", "the tail." }) do
    s:apply({ sessionUpdate = "agent_message_chunk", content = text(chunk) })
  end
  eq({
    "### You",
    "Why?",
    "",
    "### Synapse",
    "The test fails because",
    "",
    "parse() drops the tail.",
    "",
  }, s:lines())
end)

case("incremental changes rebuild the full transcript", function()
  local s = State.new()
  local buf = {}
  local function sync()
    local start, lines = s:take_changes()
    if start then
      apply_changes(buf, start, lines)
    end
  end
  s:apply({ sessionUpdate = "user_message_chunk", content = text("go") })
  sync()
  s:apply({ sessionUpdate = "agent_message_chunk", content = text("Running") })
  sync()
  s:apply({ sessionUpdate = "tool_call", toolCallId = "t1", title = "List files", kind = "execute",
    status = "in_progress", rawInput = { command = "ls -1" } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t1", output = { stream = "stdout", text = "a.py\nb" } })
  sync()
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t1", output = { stream = "stdout", text = ".py\n" } })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "t2", title = "Read a.py", status = "in_progress",
    rawInput = { command = "read a.py" } })
  sync()
  -- an older card changes while a newer one exists
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t1", status = "completed",
    rawOutput = { exitCode = 0 } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t2", status = "failed",
    rawOutput = { exitCode = 2 }, content = { { type = "content", content = text("[Error] no such file") } } })
  s:apply({ sessionUpdate = "agent_message_chunk", content = text("Done.") })
  sync()
  eq(s:lines(), buf, "buffer copy")
  eq({
    "### You",
    "go",
    "",
    "### Synapse",
    "Running",
    "",
    "#### Tool: List files [completed]",
    "    $ ls -1",
    "    a.py",
    "    b.py",
    "",
    "#### Tool: Read a.py [failed, exit 2]",
    "    $ read a.py",
    "    [Error] no such file",
    "",
    "Done.",
    "",
  }, buf)
  eq(nil, (s:take_changes()), "no change pending")
end)

case("fold levels cover tool bodies only", function()
  local s = State.new()
  s:apply({ sessionUpdate = "user_message_chunk", content = text("x") })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "t", title = "Run tests", rawInput = { command = "pytest" } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t", output = { stream = "stdout", text = "1\n2\n" } })
  local levels = {}
  for l = 1, s:line_count() do
    levels[l] = s:foldlevel(l)
  end
  eq({ "0", "0", "0", ">1", "1", "1", "1", "0" }, levels)
  eq(4, s:tool_line("t"))
end)

case("cancel marks running calls and notes the stop reason", function()
  local s = State.new()
  s:apply({ sessionUpdate = "user_message_chunk", content = text("wait") })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "t", title = "Run `sleep 30`", rawInput = { command = "sleep 30" } })
  eq("in_progress", s:tool_status("t"))
  s:apply({ sessionUpdate = "turn_finished", stopReason = "cancelled" })
  -- the prompt result comes after the notification: no second note
  eq(false, s:finish_turn("cancelled"))
  eq({
    "### You",
    "wait",
    "",
    "#### Tool: Run `sleep 30` [cancelled]",
    "    $ sleep 30",
    "",
    "*Turn ended: cancelled*",
    "",
  }, s:lines())
end)

case("a denied call reads Denied, not a failure with an exit code", function()
  local s = State.new()
  s:add_user("explore")
  s:apply({ sessionUpdate = "tool_call", toolCallId = "d", title = "Run `git branch -D main`",
    rawInput = { command = "git branch -D main" } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "d", status = "denied",
    rawOutput = { exitCode = 126, isError = true, category = "permission_denied" },
    content = { { type = "content", content = text("Not run: read-only") } } })
  eq("denied", s:tool_status("d"))
  eq("#### Tool: Run `git branch -D main` [Denied]", s:lines()[4])
end)

case("error stop reason shows the message", function()
  local s = State.new()
  s:add_user("hi")
  eq(true, s:finish_turn("error", nil, "no API key: set ANTHROPIC_API_KEY"))
  eq({ "### You", "hi", "", "*Error: no API key: set ANTHROPIC_API_KEY*", "" }, s:lines())
end)

case("runs show stdout, stderr and status", function()
  local s = State.new()
  local a = s:start_run("echo hi; echo oops >&2")
  eq({ "#### Run: echo hi; echo oops >&2 [running]", "" }, s:lines())
  s:finish_run(a, { exitCode = 0, stdout = "hi\n", stderr = "oops\n", isError = false, text = "hi\n" })
  local b = s:start_run("false")
  s:finish_run(b, { exitCode = 1, stdout = "", stderr = "", isError = true, text = "[Error] exit 1\n" })
  local c = s:start_run("x")
  s:finish_run(c, { error = "server gone" })
  eq({
    "#### Run: echo hi; echo oops >&2 [completed]",
    "    hi",
    "    oops",
    "",
    "#### Run: false [failed, exit 1]",
    "    [Error] exit 1",
    "",
    "#### Run: x [failed]",
    "    server gone",
    "",
  }, s:lines())
end)

case("plan is replaced in place; notices and thoughts are quoted", function()
  local s = State.new()
  s:add_user("plan it")
  s:apply({ sessionUpdate = "agent_thought_chunk", content = text("hmm\nok") })
  s:apply({ sessionUpdate = "plan", entries = { { content = "A", status = "in_progress" }, { content = "B", status = "pending" } } })
  s:apply({ sessionUpdate = "notice", level = "warning", message = "Rate limited" })
  s:apply({ sessionUpdate = "plan", explanation = "Fix then test",
    entries = { { content = "A", status = "completed" }, { content = "B", status = "in_progress" } } })
  eq({
    "### You",
    "plan it",
    "",
    "> hmm",
    "> ok",
    "",
    "#### Plan",
    "Fix then test",
    "- [x] A",
    "- [~] B",
    "",
    "> **warning:** Rate limited",
    "",
  }, s:lines())
end)

case("sub-agent updates nest in the parent card", function()
  local s = State.new()
  s:apply({ sessionUpdate = "tool_call", toolCallId = "p", title = "Task: explore", rawInput = { command = "task:explore 'x'" } })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "c", parentToolCallId = "p", title = "Search `x`" })
  s:apply({ sessionUpdate = "agent_message_chunk", parentToolCallId = "p", content = text("found it") })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "p", status = "completed" })
  eq({
    "#### Tool: Task: explore [completed]",
    "    $ task:explore 'x'",
    "    -> Search `x`",
    "    found it",
    "",
  }, s:lines())
end)

case("huge outputs are capped and counted", function()
  local s = State.new({ max_output_lines = 3 })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "t", title = "seq", rawInput = { command = "seq 10" } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t", output = { stream = "stdout", text = "1\n2\n3\n4\n" } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "t", output = { stream = "stdout", text = "5\n6\n" } })
  eq({
    "#### Tool: seq [running]",
    "    $ seq 10",
    "    1",
    "    2",
    "    3",
    "    ... 3 more lines not shown",
    "",
  }, s:lines())
end)

case("CR and vim.NIL-ish values are tolerated", function()
  local s = State.new()
  s:apply({ sessionUpdate = "tool_call", toolCallId = "t", title = vim.NIL, rawInput = { command = "a\r\nb" } })
  s:apply({ sessionUpdate = "agent_message_chunk", content = text("x\r\ny") })
  s:apply({ sessionUpdate = "no_such_update" })
  s:apply(nil)
  eq({ "#### Tool: a b [running]", "    $ a", "      b", "", "### Synapse", "x", "y", "" }, s:lines())
end)

case("an edit's diffs: counts in its header, the turn's changed files at its end", function()
  local M = "\226\136\146" -- the minus sign
  local s = State.new({ root = "/p" })
  local diff = function(path, old, new)
    return { type = "diff", path = path, oldText = old, newText = new }
  end
  s:apply({ sessionUpdate = "user_message_chunk", content = text("go") })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "e1", title = "Edit a.py", rawInput = { command = "edit a.py" } })
  s:apply({
    sessionUpdate = "tool_call_update",
    toolCallId = "e1",
    status = "completed",
    content = { diff("/p/a.py", "x = 1\ny = 1\n", "x = 2\ny = 1\nz = 3\n"), { type = "content", content = text("ok") } },
  })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "e2", title = "Write", rawInput = { command = "write" } })
  s:apply({
    sessionUpdate = "tool_call_update",
    toolCallId = "e2",
    status = "completed",
    -- vim.NIL: a JSON null the decoder kept
    content = { diff("/elsewhere/new.txt", vim.NIL, "hi\n"), diff("/p/a.py", "x = 2\ny = 1\nz = 3\n", "x = 2\nY = 1\nz = 3\n") },
  })
  s:apply({ sessionUpdate = "tool_call", toolCallId = "r1", title = "List", rawInput = { command = "ls" } })
  s:apply({ sessionUpdate = "tool_call_update", toolCallId = "r1", status = "completed", content = { { type = "content", content = text("a.py") } } })
  s:finish_turn("end_turn")
  eq({
    "### You",
    "go",
    "",
    "#### Tool: Edit a.py [completed] +2 " .. M .. "1",
    "    $ edit a.py",
    "    ok",
    "",
    "#### Tool: Write [completed] +2 " .. M .. "1",
    "    $ write",
    "",
    "#### Tool: List [completed]",
    "    $ ls",
    "    a.py",
    "",
    "Changed files: a.py +3 " .. M .. "2, /elsewhere/new.txt +1",
    "",
  }, s:lines())
  -- :SynapseDiff's lookup: the last call with a diff, or one by id
  local id, diffs = s:diffs_of(nil)
  eq("e2", id)
  eq({ "/elsewhere/new.txt", nil, "hi\n" }, { diffs[1].path, diffs[1].old, diffs[1].new })
  id, diffs = s:diffs_of("e1")
  eq({ "e1", "x = 1\ny = 1\n" }, { id, diffs[1].old })
  eq({ "r1", nil }, { s:diffs_of("r1") })
  -- the next turn starts its own list; one that changes nothing has no summary line
  s:apply({ sessionUpdate = "user_message_chunk", content = text("talk") })
  s:apply({ sessionUpdate = "agent_message_chunk", content = text("nothing to do") })
  s:finish_turn("end_turn")
  eq({ "### You", "talk", "", "### Synapse", "nothing to do", "" }, { unpack(s:lines(), 17) })
end)

case("line counts are git's (+added, -removed)", function()
  eq({ 1, 1 }, { State.line_counts("a\nb\nc\n", "a\nB\nc\n") })
  eq({ 3, 0 }, { State.line_counts(nil, "a\nb\nc\n") })
  eq({ 0, 2 }, { State.line_counts("a\nb\n", "") })
  eq({ 0, 0 }, { State.line_counts("same\n", "same\n") })
  -- the smallest edit among repeated lines (Myers' example: 5 edits)
  local a, r = State.line_counts("a\nb\nc\na\nb\nb\na\n", "c\nb\na\nb\na\nc\n")
  eq(5, a + r)
  eq("+3 " .. "\226\136\146" .. "1", State.counts_text(3, 1))
  eq("+1", State.counts_text(1, 0))
  eq("\226\136\146" .. "2", State.counts_text(0, 2))
end)

-- ------------------------------------------------ the VS Code tests' recorded stream

-- The repository: this plugin's lua/synapse/state.lua is three levels below nvim-client/.
local function repo_root()
  local state_file = vim.api.nvim_get_runtime_file("lua/synapse/state.lua", false)[1]
  return vim.fn.fnamemodify(state_file, ":p:h:h:h:h")
end

local function read_json(path)
  return vim.fn.json_decode(table.concat(vim.fn.readfile(path), "\n"))
end

-- Folds the actions the VS Code extension recorded the way synapse.chat meets them:
-- updates go to State:apply, a prompt's result to finish_turn, a session load starts
-- an empty transcript and sets the title. Returns the state and finish_turn's answers.
local function fold(actions)
  local s = State.new()
  local finished = {}
  for _, a in ipairs(actions) do
    if a.type == "update" then
      s:apply(a.params.update)
    elseif a.type == "promptFinished" then
      finished[#finished + 1] = s:finish_turn(a.result.stopReason, a.result.usage, a.result.error)
    elseif a.type == "loadStarted" then
      s = State.new()
    elseif a.type == "sessionLoaded" then
      s.title = a.session.title
    end
  end
  return s, finished
end

local PLAN_MARK = { completed = "[x]", in_progress = "[~]", pending = "[ ]" }

-- The facts test/state.test.ts checks, as far as this state keeps them (no tool kind).
local function expect_facts(s, facts, where)
  local lines = s:lines()
  local text = table.concat(lines, "\n")
  local function has(needle, what)
    if not string.find(text, needle, 1, true) then
      error(where .. ": " .. what .. " missing: " .. show(needle) .. "\nin:\n" .. text, 2)
    end
  end
  for _, prompt in ipairs(facts.prompts) do
    has("### You\n" .. prompt .. "\n", "prompt")
  end
  for _, thought in ipairs(facts.thoughts) do
    has("> " .. thought, "thought")
  end
  for _, t in ipairs(facts.agentText) do
    has(t, "agent text")
  end
  local ids = {}
  for id in pairs(s.tools) do
    ids[#ids + 1] = id
  end
  table.sort(ids)
  local expected_ids = {}
  for _, fact in ipairs(facts.tools) do
    expected_ids[#expected_ids + 1] = fact.id
  end
  table.sort(expected_ids)
  eq(expected_ids, ids, where .. ": tool calls")
  for _, fact in ipairs(facts.tools) do
    local block = s.tools[fact.id]
    eq(fact.title, block.title, where .. ": title of " .. fact.id)
    eq(fact.status, s:tool_status(fact.id), where .. ": status of " .. fact.id)
    if fact.exitCode ~= nil then
      eq(fact.exitCode, block.exit_code, where .. ": exit code of " .. fact.id)
    end
    if fact.command ~= nil then
      eq("    $ " .. fact.command, block.lines[2], where .. ": command of " .. fact.id)
    end
    for _, line in ipairs(fact.outputLines or {}) do
      if not vim.tbl_contains(block.lines, "    " .. line) then
        error(where .. ": output of " .. fact.id .. " lacks " .. show(line) .. ": " .. show(block.lines))
      end
    end
  end
  local plan = { "#### Plan", facts.plan.explanation }
  for _, e in ipairs(facts.plan.entries) do
    plan[#plan + 1] = "- " .. PLAN_MARK[e.status] .. " " .. e.content
  end
  has(table.concat(plan, "\n") .. "\n", "plan")
  -- one turn-end line per turn that did not end normally
  for _, reason in ipairs(facts.stopReasons) do
    local _, n = string.gsub(text, vim.pesc("*Turn ended: " .. reason .. "*"), "")
    eq(reason == "end_turn" and 0 or 1, n, where .. ": turn-end lines for " .. reason)
  end
  eq(facts.stopReasons[#facts.stopReasons], s.stop_reason, where .. ": last stop reason")
end

case("the VS Code tests' recorded stream folds to the same facts, live and replayed", function()
  local fixtures = repo_root() .. "/vscode-client/test/fixtures/"
  local stream = read_json(fixtures .. "recorded-stream.json")
  local facts = read_json(fixtures .. "recorded-stream.facts.json")
  local load_at
  for i, a in ipairs(stream) do
    if a.type == "loadStarted" then
      load_at = i
      break
    end
  end
  assert(load_at, "the stream has no loadStarted")
  local live, finished = fold(vim.list_slice(stream, 1, load_at - 1))
  expect_facts(live, facts, "live")
  -- turn_finished ended each turn; the prompt result after it adds nothing
  eq({ false, false }, finished, "finish_turn after turn_finished")
  local replayed = fold(stream)
  expect_facts(replayed, facts, "replayed")
  eq(facts.title, replayed.title, "title after the load")
end)

case("the update fields synapse.state reads are the protocol's (protocol.update_fields)", function()
  local protocol = require("synapse.protocol")
  local known = {}
  for _, kind in ipairs(protocol.update_kinds) do
    for field in pairs(protocol.update_fields[kind]) do
      known[field] = true
    end
  end
  local source = table.concat(vim.fn.readfile(vim.api.nvim_get_runtime_file("lua/synapse/state.lua", false)[1]), "\n")
  local unknown, read = {}, 0
  for field in string.gmatch(source, "[^%w_]u%.([%a_][%w_]*)") do
    read = read + 1
    if not known[field] then
      unknown[#unknown + 1] = field
    end
  end
  assert(read > 20, "found too few `u.<field>` reads in state.lua: " .. read)
  eq({}, unknown, "fields state.lua reads that no update kind has")
  eq(#protocol.update_kinds, #vim.tbl_keys(protocol.update_fields), "kinds with fields")
  for _, kind in ipairs(protocol.update_kinds) do
    eq("'" .. kind .. "'", protocol.update_fields[kind].sessionUpdate, kind)
  end
end)


local function tool(id, command, parent)
  return {
    sessionUpdate = "tool_call",
    toolCallId = id,
    title = "Run " .. command,
    kind = "execute",
    status = "in_progress",
    rawInput = { command = command },
    parentToolCallId = parent,
  }
end

local function header_of(s, id)
  return s:lines()[s:tool_line(id)]
end

case("a permission question marks the card of the call it names by id", function()
  local s = State.new()
  s:apply({ sessionUpdate = "user_message_chunk", content = text("go") })
  s:apply(tool("a", "ls"))
  s:apply(tool("b", "echo hi > /tmp/x"))
  -- the prose names the other call's command, in a wording no pattern knows: the id decides
  s:ask("b", { message = "May I run `ls`? (reworded)", options = {} })
  eq("#### Tool: Run echo hi > /tmp/x [waiting for your answer]", header_of(s, "b"))
  eq("#### Tool: Run ls [running]", header_of(s, "a"))
  s:answered("b")
  eq("#### Tool: Run echo hi > /tmp/x [running]", header_of(s, "b"))
  eq({}, s.questions)
end)

case("a question before its call shows when the call arrives; a sub-agent's in its card", function()
  local s = State.new()
  s:apply({ sessionUpdate = "user_message_chunk", content = text("go") })
  s:ask("early", { message = "early" })
  eq(nil, s:question_card("early"))
  s:apply(tool("early", "touch x"))
  eq("#### Tool: Run touch x [waiting for your answer]", header_of(s, "early"))
  s:answered("early")
  s:apply(tool("task", "task:explore look"))
  s:apply(tool("child", "rm y", "task"))
  s:ask("child", { message = "child" })
  eq("#### Tool: Run task:explore look [waiting for your answer]", header_of(s, "task"))
  s:answered("child")
  eq("#### Tool: Run task:explore look [running]", header_of(s, "task"))
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
local out = vim.fn.json_encode({ passed = passed, failed = vim.tbl_isempty(failed) and vim.empty_dict() or failed })
local path = vim.fn.argv()[1]
if path and path ~= "" then
  vim.fn.writefile({ out }, path)
else
  io.stdout:write(out .. "\n")
end
vim.cmd(vim.tbl_isempty(failed) and "qa!" or "cq")
