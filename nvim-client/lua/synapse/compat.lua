-- The few places where Neovim 0.7 and 0.10+ differ.
local M = {}

local function has(v)
  return vim.fn.has(v) == 1
end

M.nvim_010 = has("nvim-0.10")
M.nvim_011 = has("nvim-0.11")

-- Client methods became `client:method()` in 0.11 (the dot form is deprecated).
function M.request(client, method, params, handler, bufnr)
  if M.nvim_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.cancel_request(client, id)
  if M.nvim_011 then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

function M.stop(client, force)
  if M.nvim_011 then
    return client:stop(force)
  end
  return client.stop(force)
end

function M.is_stopped(client)
  if M.nvim_011 then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- Starts an LSP client without attaching it (0.7: start_client; 0.11+:
--- vim.lsp.start_client is deprecated, vim.lsp.start with attach = false).
--- Returns the client id or nil.
function M.start_client(config)
  if M.nvim_011 then
    return vim.lsp.start(config, {
      attach = false,
      reuse_client = function()
        return false
      end,
    })
  end
  return vim.lsp.start_client(config)
end

--- The version Neovim's own handler compares a TextDocumentEdit against.
function M.buf_version(bufnr)
  local versions = vim.lsp.util.buf_versions
  local v = versions and versions[bufnr]
  if v == nil and M.nvim_011 then
    v = vim.b[bufnr].changedtick
  end
  return v
end

function M.uv()
  return vim.uv or vim.loop
end

return M
