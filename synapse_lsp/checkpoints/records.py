"""The turns' record files of one session: `<records>/<turn>.json`, one per turn (in
the session's folder), written atomically, read back oldest first, and at most
`MAX_CHECKPOINTS` of them kept (the facade drops the refs of the older ones too).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path

from synapse_lsp.checkpoints.record import Checkpoint
from synapse_lsp.files import FileError, atomic_write

log = logging.getLogger(__name__)

MAX_CHECKPOINTS = 50  # turns kept per session


class Records:
    """The record files of one session's turns, in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, checkpoint: Checkpoint) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{checkpoint.turn}.json"
            atomic_write(path, json.dumps(checkpoint.to_json()))
        except (OSError, FileError) as exc:  # a full disk must not end the conversation
            log.warning("cannot store checkpoint: %s", exc)

    def kept(self) -> list[Checkpoint]:
        """The kept checkpoints, oldest first."""
        out: list[Checkpoint] = []
        try:
            names = list(self.folder.iterdir())
        except OSError:
            return []
        for path in names:
            if path.suffix != ".json" or not path.stem.isdigit():
                continue
            try:
                out.append(Checkpoint.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("unreadable checkpoint record %s", path)
        return sorted(out, key=lambda c: c.turn)

    def next_turn(self) -> int:
        kept = self.kept()
        return kept[-1].turn + 1 if kept else 1

    def over_limit(self) -> list[Checkpoint]:
        """The oldest records beyond the last `MAX_CHECKPOINTS`."""
        kept = self.kept()
        return kept[: max(0, len(kept) - MAX_CHECKPOINTS)]

    def remove(self, turns: Iterable[int]) -> None:
        for turn in turns:
            with contextlib.suppress(OSError):
                (self.folder / f"{turn}.json").unlink()
