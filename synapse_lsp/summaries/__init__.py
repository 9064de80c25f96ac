"""Command summaries for people: Codex's `parse_command` port, our own kinds and titles."""
