-- :SynapseDiff [toolCallId]: what a tool call changed, in Neovim's diff mode.
--
-- For every file the call's built-ins changed (the `diff` blocks of its last
-- tool_call_update), a new tab page: on the left a read-only scratch buffer with
-- the text from before the call, on the right the file's own buffer as it is
-- now (unsaved changes included), `:diffthis` on both. Without an id: the last
-- tool call of the current chat that changed a file.
local client = require("synapse.client")
local State = require("synapse.state")

local M = {}

local function chat_of_current()
  local synapse = require("synapse")
  if not synapse.config then
    return nil -- not set up: no chat can have changed anything
  end
  return synapse.current_chat(false)
end

--- Opens one file's diff in a new tab page; returns {before = win, file = win}.
function M.open_file_diff(id, d)
  local path = d.path
  vim.cmd("tabedit " .. vim.fn.fnameescape(path))
  local file_win = vim.api.nvim_get_current_win()
  local file_buf = vim.api.nvim_get_current_buf()
  local ft = vim.bo[file_buf].filetype
  vim.cmd("leftabove vnew")
  local before_win = vim.api.nvim_get_current_win()
  local before = vim.api.nvim_get_current_buf()
  vim.bo[before].buftype = "nofile"
  vim.bo[before].bufhidden = "wipe"
  vim.bo[before].swapfile = false
  vim.api.nvim_buf_set_lines(before, 0, -1, false, State.text_lines(d.old))
  vim.bo[before].modifiable = false
  if ft and ft ~= "" then
    vim.bo[before].filetype = ft
  end
  local label = d.old == nil and "(new file)" or "(before)"
  pcall(vim.api.nvim_buf_set_name, before, "synapse://diff/" .. id .. "/" .. vim.fn.fnamemodify(path, ":t") .. " " .. label)
  vim.api.nvim_win_call(before_win, function()
    vim.cmd("diffthis")
  end)
  vim.api.nvim_win_call(file_win, function()
    vim.cmd("diffthis")
  end)
  vim.api.nvim_set_current_win(file_win)
  return { before = before_win, file = file_win }
end

--- :SynapseDiff [id]: opens the diffs of tool call `id` (default: the last with one).
--- Returns the list of {before=, file=} windows opened, or nil (and a message).
function M.command(id, chat)
  chat = chat or chat_of_current()
  if id == "" then
    id = nil
  end
  if not chat then
    client.notify("no chat here yet: :SynapseDiff shows what a tool call of the chat changed", vim.log.levels.WARN)
    return nil
  end
  local found, diffs = chat.state:diffs_of(id)
  if not found then
    client.notify("no tool call of this chat changed a file yet", vim.log.levels.WARN)
    return nil
  end
  if not diffs then
    client.notify("tool call " .. found .. " changed no file (or is not in this chat)", vim.log.levels.WARN)
    return nil
  end
  local opened = {}
  for _, d in ipairs(diffs) do
    opened[#opened + 1] = M.open_file_diff(found, d)
  end
  return opened
end

--- Completion for :SynapseDiff: the current chat's tool calls that changed files, newest first.
function M.complete(lead)
  local chat = chat_of_current()
  local out = {}
  if chat then
    local ids = chat.state.diff_ids
    for i = #ids, 1, -1 do
      if string.sub(ids[i], 1, #lead) == lead then
        out[#out + 1] = ids[i]
      end
    end
  end
  return out
end

return M
