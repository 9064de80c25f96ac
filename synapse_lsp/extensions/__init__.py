"""Extension commands: MCP tools (`mcp:<server>:<tool>`) and skill scripts
(`skill:<skill>:<script>`), their registry, search, watcher and PATH wrappers."""
