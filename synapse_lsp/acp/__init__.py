"""The ACP face: Synapse as an Agent Client Protocol agent on stdio (`synapse acp`).

Built on the official SDK (`agent-client-protocol`, module `acp`): NDJSON JSON-RPC
over stdin/stdout. `server.py` runs it, `agent.py` answers the protocol, `updates.py`
maps agent events to `session/update`s, `files.py` routes `read`/`edit`/`write`
through the client's buffers, `transport.py` frames messages. docs/acp.md.
"""
