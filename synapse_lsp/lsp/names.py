"""The protocol's names and numbers, without its classes: what the server needs before
`initialize` answers (the attrs classes of protocol.py load after it, off the
start-up path)."""

from __future__ import annotations

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

PROTOCOL_VERSION = 1
"""Bumped on any change a client built for the previous version would misread."""

SESSION_UPDATE = "synapse/sessionUpdate"  # the one notification, server -> client
# client -> server: the user trusted (or untrusted) the workspace, `{"trusted": bool}`
TRUST_NOTIFICATION = "synapse/didChangeWorkspaceTrust"
TRUST_OPTION = "trustedWorkspace"  # initializationOptions: the editor's trust at start
# client -> server: a touched file's settled diagnostics after an agent edit (DiagnosticsParams)
DIAGNOSTICS_NOTIFICATION = "synapse/diagnostics"
# server -> client request: save these documents (the agent's edits) before a command
# reads the disk, `{"uris": [...]}` -> `{"saved": [...]}`; offered by a client with
# `capabilities.experimental.synapse.saveDocuments: true` (docs/protocol.md)
SAVE_DOCUMENTS = "synapse/saveDocuments"
# server -> client request: a permission question as data (RequestPermissionParams) ->
# `{"optionId": ...}`; offered by a client with
# `capabilities.experimental.synapse.requestPermission: true`, else the question is a
# `window/showMessageRequest` (docs/protocol.md)
REQUEST_PERMISSION = "synapse/requestPermission"

SESSION_NEW = "synapse.session.new"
SESSION_LIST = "synapse.session.list"
SESSION_LOAD = "synapse.session.load"
SESSION_DELETE = "synapse.session.delete"
SESSION_PROMPT = "synapse.session.prompt"
SESSION_CANCEL = "synapse.session.cancel"
SESSION_CONTEXT = "synapse.session.context"
SESSION_CHECKPOINTS = "synapse.session.checkpoints"
SESSION_REWIND = "synapse.session.rewind"
SHELL_RUN = "synapse.shell.run"
SHELL_RESTART = "synapse.shell.restart"
TOOLS_SEARCH = "synapse.tools.search"
TOOLS_REFRESH = "synapse.tools.refresh"
STATUS = "synapse.status"

REQUEST_FAILED = -32803
INTERNAL_ERROR = -32603


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message)


def request_failed(message: str, reason: str) -> JsonRpcException:
    """`RequestFailed` with `data.reason` (`session_busy`, `error`) for clients to branch on."""
    return JsonRpcException(message, code=REQUEST_FAILED, data={"reason": reason})


COMMAND_NAMES = (
    SESSION_NEW,
    SESSION_LIST,
    SESSION_LOAD,
    SESSION_DELETE,
    SESSION_PROMPT,
    SESSION_CANCEL,
    SESSION_CONTEXT,
    SESSION_CHECKPOINTS,
    SESSION_REWIND,
    SHELL_RUN,
    SHELL_RESTART,
    TOOLS_SEARCH,
    TOOLS_REFRESH,
    STATUS,
)
