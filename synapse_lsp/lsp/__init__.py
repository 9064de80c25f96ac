"""The editor face: a pygls language server over stdio (docs/protocol.md)."""
