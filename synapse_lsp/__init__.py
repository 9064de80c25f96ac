"""Synapse: an LLM coding agent whose only tool is Bash, served to editors over LSP."""

__version__ = "0.1.0"
