-- Commands only; nothing starts until require("synapse").setup() or a command.
if vim.g.loaded_synapse then
  return
end
vim.g.loaded_synapse = true

local function s()
  return require("synapse")
end

local cmd = vim.api.nvim_create_user_command

cmd("SynapseChat", function(o)
  s().chat(o.args)
end, { nargs = "*", desc = "Synapse: open the chat (with text: send it)" })

cmd("SynapseNew", function()
  s().new_session()
end, { nargs = 0, desc = "Synapse: start a new chat session" })

cmd("SynapseCancel", function()
  s().cancel()
end, { nargs = 0, desc = "Synapse: stop the running turn" })

cmd("SynapseSessions", function()
  s().sessions()
end, { nargs = 0, desc = "Synapse: pick a stored chat session" })

cmd("SynapseRun", function(o)
  s().run(o.args)
end, { nargs = "+", complete = "shellcmd", desc = "Synapse: run a command line through the router" })

cmd("SynapseAsk", function(o)
  s().ask(o.line1, o.line2, o.args)
end, { nargs = "*", range = true, desc = "Synapse: ask about the selected lines" })

cmd("SynapseCheckpoints", function()
  s().checkpoints()
end, { nargs = 0, desc = "Synapse: the turns that can be rewound (pick one to rewind)" })

cmd("SynapseRewind", function(o)
  s().rewind(o.args, o.bang)
end, { nargs = 1, bang = true, desc = "Synapse: put the files back as before turn N (! also over later changes)" })

cmd("SynapseDiff", function(o)
  require("synapse.diff").command(o.args)
end, {
  nargs = "?",
  complete = function(lead)
    return require("synapse.diff").complete(lead)
  end,
  desc = "Synapse: what a tool call changed, in a diff split (default: the last call that changed a file)",
})
