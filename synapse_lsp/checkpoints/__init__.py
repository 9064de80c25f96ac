"""Checkpoints: the work tree before and after every turn, in a shadow git store.

Claude Code's checkpoints cover its own file edits only; these cover whatever the
turn changed, `sed -i`, `rm` and a build included, because they photograph the
folder itself. The package owns the whole idea; each module one part of it:

- `keeper.py`: `Checkpoints`, one session's checkpoints in one folder (the facade:
  a turn's two snapshots, its record, a rewind, a deleted session's cleanup);
- `store.py`: the shadow git store (`store_dir`), git run on it, refs, objects, gc;
- `snapshot.py`: taking a snapshot (what is staged, skipped as too large, ignored);
- `seed.py`: a new session's index starts from the folder's last snapshot;
- `fingerprints.py`: nested repositories, the user's index and HEAD, ignored changes;
- `folder_events.py`: what changed under the folder, as the kernel reports it (inotify);
- `record.py`: the `Checkpoint` record and `CheckpointError`;
- `records.py`: the record files of a session's turns (at most `MAX_CHECKPOINTS`);
- `restore.py`: a rewind's files, decided then put back (`Restorer`, `RewindReport`);
- `journal.py`: a rewind's journal, safe writes, and recovery of one interrupted.

Others import the names below from here (`journal` as the module itself).
"""

from __future__ import annotations

from synapse_lsp.checkpoints.keeper import Checkpoints, forget_session
from synapse_lsp.checkpoints.record import Checkpoint, CheckpointError
from synapse_lsp.checkpoints.restore import Decide, RewindReport
from synapse_lsp.checkpoints.store import store_dir

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "Checkpoints",
    "Decide",
    "RewindReport",
    "forget_session",
    "store_dir",
]
