"""A face's side of the slash commands, for tests: a current chat session and no
session switching (what the REPL's Runtime offers `/context`, `/rewind`, `/hooks`...)."""

from __future__ import annotations

from synapse_lsp.agent.session import ChatSession


class SessionHost:
    def __init__(self, session: ChatSession) -> None:
        self.session = session

    def chat_session(self) -> ChatSession:
        return self.session

    def list_sessions(self) -> list[tuple[str, str, str]]:
        return []

    async def new_session(self) -> str:
        return ""

    async def resume(self, session_id: str) -> str:
        return ""

    def request_exit(self) -> None:
        return None
