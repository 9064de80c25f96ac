"""Agent Shell built-ins (SPEC §4). Each is one class implementing `commands.Command`."""

from __future__ import annotations

from synapse_lsp.builtins.edit import EditCommand
from synapse_lsp.builtins.plan import PlanCommand
from synapse_lsp.builtins.read import ReadCommand
from synapse_lsp.builtins.task import TaskCommand
from synapse_lsp.builtins.todowrite import TodoWriteCommand
from synapse_lsp.builtins.write import WriteCommand
from synapse_lsp.commands import Command


def default_builtins() -> list[Command]:
    """The built-ins every router has. Extension-backed ones (command:search, skill:*)
    are added by whoever owns the extension registry."""
    return [
        ReadCommand(),
        WriteCommand(),
        EditCommand(),
        TaskCommand(),
        PlanCommand(),
        TodoWriteCommand(),
    ]
