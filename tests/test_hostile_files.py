"""A cloned folder may hold FIFOs and links to devices where Synapse reads settings: the
reads that happen before the folder is trusted must refuse them, never block on them."""

from __future__ import annotations

import os
from pathlib import Path

from synapse_lsp.policy.folder_files import hook_files


def test_hook_files_of_an_untrusted_folder_never_block_or_fill_memory(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / ".claude" / "settings.local.json")
    (tmp_path / ".synapse").mkdir()
    (tmp_path / ".synapse" / "settings.json").write_text(
        '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}'
    )
    assert hook_files(tmp_path) == [tmp_path / ".synapse" / "settings.json"]
