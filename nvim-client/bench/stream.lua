-- Benchmark: N streamed deltas into a chat transcript (no server).
--
--   BENCH_OUT=out.json BENCH_N=2000 BENCH_MODE=burst|paced BENCH_CLIENT=nvim-client \
--   nvim --headless --clean -u nvim-client/bench/stream.lua
--
-- Deltas are delivered the way Neovim's LSP client delivers notifications:
-- each one a separate vim.schedule() callback calling the plugin's
-- synapse/sessionUpdate handler. "burst" queues all of them at once; "paced"
-- releases one per millisecond from a libuv timer (a fast model). Every 8th
-- delta ends a line, every 200th is a tool call with output. Measured with
-- vim.loop.hrtime: each handler call, each transcript redraw (flush), the
-- longest gap of a 1 ms probe timer (= longest main-loop block), and the
-- total time until the last delta is in the buffer.
vim.opt.runtimepath:prepend(os.getenv("BENCH_CLIENT") or "nvim-client")
local chat_mod = require("synapse.chat")
local uv = vim.uv or vim.loop

local N = tonumber(os.getenv("BENCH_N") or "2000")
local MODE = os.getenv("BENCH_MODE") or "burst"
local OUT = os.getenv("BENCH_OUT")
local NOOP = os.getenv("BENCH_NOOP") == "1" -- baseline: deliver, but do not handle

local function run()
  local chat = chat_mod.new(vim.fn.getcwd(), "bench-session")
  chat_mod.config.prompt = "none"
  chat:show({ focus = "transcript" })
  chat_mod.reset_stats()

  local updates = {
    { sessionId = "bench-session", update = { sessionUpdate = "user_message_chunk", content = { type = "text", text = "go" } } },
  }
  local expect_text = {}
  local tool = 0
  for i = 1, N do
    if i % 200 == 0 then
      tool = tool + 1
      local id = "t" .. tool
      updates[#updates + 1] = { sessionId = "bench-session", update = { sessionUpdate = "tool_call", toolCallId = id, title = "Run step " .. tool, status = "in_progress", rawInput = { command = "step " .. tool } } }
      updates[#updates + 1] = { sessionId = "bench-session", update = { sessionUpdate = "tool_call_update", toolCallId = id, output = { stream = "stdout", text = "line 1\nline 2\n" } } }
      updates[#updates + 1] = { sessionId = "bench-session", update = { sessionUpdate = "tool_call_update", toolCallId = id, status = "completed", rawOutput = { exitCode = 0 } } }
    else
      local piece = (i % 8 == 0) and ("w" .. i .. "\n") or ("w" .. i .. " ")
      expect_text[#expect_text + 1] = piece
      updates[#updates + 1] = { sessionId = "bench-session", update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = piece } } }
    end
  end
  local last_word = "w" .. (N % 200 == 0 and N - 1 or N)

  -- main-loop probe: a 1 ms repeating timer; a late tick = a blocked loop
  local probe = uv.new_timer()
  local last_tick = uv.hrtime()
  local max_gap = 0
  probe:start(1, 1, function()
    local now = uv.hrtime()
    local gap = now - last_tick
    if gap > max_gap then
      max_gap = gap
    end
    last_tick = now
  end)

  local t0 = uv.hrtime()
  local t_last = t0
  local delivered = 0
  local function deliver(u)
    vim.schedule(function()
      delivered = delivered + 1
      if not NOOP then
        chat_mod.dispatch(u, 0)
      end
      t_last = uv.hrtime()
    end)
  end
  if MODE == "burst" then
    for _, u in ipairs(updates) do
      deliver(u)
    end
  else
    local i = 0
    local feeder = uv.new_timer()
    feeder:start(1, 1, function()
      i = i + 1
      if i > #updates then
        feeder:stop()
        feeder:close()
        return
      end
      deliver(updates[i])
    end)
  end

  local done = vim.wait(120000, function()
    if NOOP then
      return delivered == #updates
    end
    if chat.pending or chat.state:has_changes() then
      return false
    end
    local n = vim.api.nvim_buf_line_count(chat.buf)
    for l = n, math.max(1, n - 6), -1 do
      local line = vim.api.nvim_buf_get_lines(chat.buf, l - 1, l, false)[1] or ""
      if line:find(last_word, 1, true) then
        return true
      end
    end
    return false
  end, 1)
  local t_end = uv.hrtime()
  local total = t_end - t0
  if t_end - last_tick > max_gap then
    max_gap = t_end - last_tick
  end
  probe:stop()
  probe:close()

  local s = chat_mod.stats
  local res = {
    mode = MODE,
    deltas = N,
    notifications = #updates,
    done = done,
    total_ms = total / 1e6,
    last_delta_to_screen_ms = (t_end - t_last) / 1e6,
    handler_calls = s.handler_calls,
    handler_max_ms = s.handler_max_ns / 1e6,
    handler_mean_us = s.handler_calls > 0 and (s.handler_total_ns / s.handler_calls / 1e3) or 0,
    flushes = s.flushes,
    flush_max_ms = s.flush_max_ns / 1e6,
    flush_mean_ms = s.flushes > 0 and (s.flush_total_ns / s.flushes / 1e6) or 0,
    loop_max_gap_ms = max_gap / 1e6,
    lines = vim.api.nvim_buf_line_count(chat.buf),
    nvim = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) .. "." .. tostring(vim.version().patch),
  }
  vim.fn.writefile({ vim.fn.json_encode(res) }, OUT)
  vim.cmd("qa!")
end

vim.api.nvim_create_autocmd("VimEnter", {
  once = true,
  callback = function()
    vim.schedule(function()
      local ok, err = pcall(run)
      if not ok then
        vim.fn.writefile({ vim.fn.json_encode({ error = tostring(err) }) }, OUT)
        vim.cmd("cq")
      end
    end)
  end,
})
