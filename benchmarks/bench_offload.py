"""Offload figures: history size in tokens before and after, on a long session.

    .venv/bin/python benchmarks/bench_offload.py [--turns 200] [--lines 120]

A real ChatSession (store, real bash, the real SDK against the fake Messages API) runs
`--turns` turns; in each the model runs one command printing `--lines` lines (~4 KB,
over the 2,000-character offload threshold) and answers. Nothing compacts during the
run (a large context window), so the history holds every output. Then:

- offload alone: the history with every output but the last turn's moved to a file
  (compaction's `_offloaded`, what a compaction does to the turns it keeps);
- `/compact`: the summary of all but the last turn, the outputs saved to files and
  listed in the summary.

Tokens are the fake API's `count_tokens` answer (ceil(characters / 4) of the messages'
JSON), before and after, with the ratio; and the bytes that went to files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from synapse_lsp.agent.compaction import OFFLOAD_CHARS, _offloaded, turn_boundary
from synapse_lsp.agent.history import Message
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic, fake_token_count
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession


def tokens(messages: list[Message]) -> int:
    return fake_token_count({"messages": messages})


async def run(turns: int, lines: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        settings = Settings(synapse_home=root / "home", command_timeout=30.0, sandbox="full-access")
        shell = ShellSession(work, settings)
        await shell.start()
        command = f"seq -f 'row %g of a long listing the agent asked for' 1 {lines}"
        script = [{"commands": [command]}, {"text": "Looked at the listing."}]
        async with FakeAnthropic({"responses": script, "loop": True}, keep_requests=4) as api:
            model = ModelClient(api_key="bench", base_url=api.base_url, model="claude-sonnet-5-5")
            store = ChatStore(settings.synapse_home / "sessions")
            session = ChatSession(
                BashRouter(shell, settings),
                settings,
                model=model,
                store=store,
                workspace_root=work,
                context_window=100_000_000,  # nothing compacts during the run
            )
            try:
                started = time.perf_counter()
                for index in range(turns):
                    async for _ in session.run_turn(f"turn {index}: show me the listing"):
                        pass
                elapsed = time.perf_counter() - started
                history = session.messages
                before = tokens(history)
                print(
                    f"{turns} turns ({elapsed:.1f} s), one {lines}-line output each; "
                    f"history: {len(history)} messages, {before:,} tokens"
                )

                saved_bytes = 0

                def offload(tool_use_id: str, text: str) -> str:
                    nonlocal saved_bytes
                    saved_bytes += len(text.encode())
                    return f"/offload/{tool_use_id}.txt"

                alone, saved = _offloaded(
                    history, turn_boundary(history, 1), offload, OFFLOAD_CHARS
                )
                after_alone = tokens(alone)
                print(
                    f"offload alone (outputs > {OFFLOAD_CHARS} chars before the last turn): "
                    f"{before:,} -> {after_alone:,} tokens ({before / after_alone:.1f}x smaller; "
                    f"{len(saved)} outputs, {saved_bytes / 1024:.0f} KiB to files)"
                )

                api.add({"text": "SUMMARY: the user asked for the listing every turn."})
                notice = await session.compact()
                after = tokens(session.messages)
                folder = store.folder(session.id) / "offload"
                files = list(folder.iterdir())
                on_disk = sum(f.stat().st_size for f in files)
                summary_chars = len(json.dumps(session.messages[0]))
                print(
                    f"/compact (summary + offload): {before:,} -> {after:,} tokens "
                    f"({before / after:.1f}x smaller); {len(files)} files, "
                    f"{on_disk / 1024:.0f} KiB in {folder.name}/; the summary message is "
                    f"{summary_chars:,} chars (it lists the newest saved outputs)"
                )
                print(f"  {notice}")
            finally:
                await session.close()
                await model.close()
                await shell.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--lines", type=int, default=120)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.lines))


if __name__ == "__main__":
    main()
