"""Bounding command output for the model: head and tail kept, the cut said.

`bound_text` cuts a string already in memory. `BoundedCapture` does the same for
a stream of any size with bounded memory: it keeps the head, a rolling tail and
counters, and once the output passes the limits it spills *everything* (from the
first byte) to a file whose path the cut marker names.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import logging
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from synapse_lsp.config import OutputLimits

log = logging.getLogger(__name__)

# Spill files older than this are removed when a new one is created.
SPILL_MAX_AGE_S = 24 * 3600.0
# Eviction never removes a file written to this recently (another process's command
# may be writing it; a live writer also holds a lock on it, see `enforce_total`).
EVICT_MIN_AGE_S = 5.0
# While a command spills, the total of the spill directory is checked this often.
EVICT_CHECK_BYTES = 16 << 20
LOCK_FILE = ".lock"
BINARY_SAMPLE = 8192


@dataclass
class SpillBudget:
    """One command's allowance on disk: its stdout and stderr spill files share
    `max_bytes`; the whole spill directory is kept under `total_bytes` (oldest files
    evicted first). Past `max_bytes` the command runs on and the rest is counted in
    `dropped` instead of written."""

    max_bytes: int = 64 << 20
    total_bytes: int = 1 << 30
    used: int = 0
    dropped: int = 0


# Magic numbers of common binary formats: what the model is told instead of bytes.
_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x1f\x8b", "gzip data"),
    (0, b"\x7fELF", "ELF"),
    (0, b"\x89PNG\r\n\x1a\n", "PNG image"),
    (0, b"\xff\xd8\xff", "JPEG image"),
    (0, b"GIF8", "GIF image"),
    (0, b"%PDF-", "PDF document"),
    (0, b"PK\x03\x04", "Zip archive"),
    (0, b"BZh", "bzip2 data"),
    (0, b"\xfd7zXZ\x00", "XZ data"),
    (0, b"\x28\xb5\x2f\xfd", "Zstandard data"),
    (0, b"7z\xbc\xaf\x27\x1c", "7-zip archive"),
    (0, b"SQLite format 3\x00", "SQLite database"),
    (0, b"\x00asm", "WebAssembly"),
    (0, b"\xca\xfe\xba\xbe", "Java class / Mach-O universal"),
    (0, b"\xcf\xfa\xed\xfe", "Mach-O"),
    (0, b"MZ", "PE/DOS executable"),
    (257, b"ustar", "tar archive"),
)


def sniff(data: bytes | bytearray) -> str:
    """A name for binary `data` from its first bytes (like `file`), else "binary data"."""
    for offset, magic, name in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            return name
    return "binary data"


def looks_binary(sample: bytes | bytearray) -> bool:
    """NUL bytes, or mostly not UTF-8 (the model would get replacement characters)."""
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    body = bytes(sample[:-3]) if len(sample) > 16 else bytes(sample)  # may end mid-char
    text = body.decode("utf-8", "replace")
    return text.count("\ufffd") * 2 > len(text)


def _count_lines(data: bytes | bytearray) -> int:
    """Lines as a person counts them: newlines, plus a last line without one."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _head(data: bytes | bytearray, max_bytes: int, max_lines: int) -> bytes:
    """The first bytes of `data` within both budgets, ending on a line (or char) boundary."""
    cut = min(len(data), max_bytes)
    pos = -1
    for _ in range(max_lines):
        pos = data.find(b"\n", pos + 1, cut)
        if pos < 0:
            break
    else:
        cut = pos + 1 if pos >= 0 else 0
    if cut < len(data) and cut > 0:
        newline = data.rfind(b"\n", 0, cut)
        if newline >= cut // 2:
            cut = newline + 1  # a whole line when that loses little
        else:
            back = 0
            while back < 3 and cut > 0 and _is_continuation(data[cut]):
                cut -= 1
                back += 1
    return bytes(data[:cut])


def _tail(data: bytes | bytearray, max_bytes: int, max_lines: int) -> bytes:
    """The last bytes of `data` within both budgets, starting on a line (or char) boundary."""
    start = max(0, len(data) - max_bytes)
    end = len(data) - 1 if data.endswith(b"\n") else len(data)  # the final newline ends a line
    pos = end
    for _ in range(max_lines):
        pos = data.rfind(b"\n", start, pos)
        if pos < 0:
            break
    else:
        start = pos + 1
    if start > 0:
        newline = data.find(b"\n", start - 1, len(data))
        if newline >= 0 and newline + 1 - start <= (len(data) - start) // 2:
            start = newline + 1
        else:
            fwd = 0
            while fwd < 3 and start < len(data) and _is_continuation(data[start]):
                start += 1
                fwd += 1
    return bytes(data[start:])


def _marker(omitted_bytes: int, omitted_lines: int, full_path: Path | None, note: str = "") -> str:
    where = f"; full output: {full_path}" if full_path is not None else ""
    return f"\n[... {omitted_bytes} bytes / {omitted_lines} lines omitted{where}{note} ...]\n"


def _render(
    head: bytes,
    tail: bytes,
    total_bytes: int,
    total_newlines: int,
    full_path: Path | None,
    note: str = "",
) -> str:
    omitted_bytes = max(0, total_bytes - len(head) - len(tail))
    omitted_lines = max(0, total_newlines - head.count(b"\n") - tail.count(b"\n"))
    head_text = head.decode("utf-8", "replace")
    tail_text = tail.decode("utf-8", "replace")
    marker = _marker(omitted_bytes, omitted_lines, full_path, note)
    if head_text.endswith("\n"):
        marker = marker[1:]
    return head_text + marker + tail_text


def _budgets(limits: OutputLimits) -> tuple[int, int, int, int]:
    """(head bytes, head lines, tail bytes, tail lines): the limits split in half."""
    max_bytes = max(2, limits.max_bytes)
    max_lines = max(2, limits.max_lines)
    return max_bytes // 2, max_lines // 2, max_bytes - max_bytes // 2, max_lines - max_lines // 2


def _over(total_bytes: int, lines: int, limits: OutputLimits) -> bool:
    return total_bytes > limits.max_bytes or lines > limits.max_lines


def bound_text(text: str, limits: OutputLimits) -> tuple[str, bool]:
    """`text` cut to head + tail within `limits` (UTF-8 bytes and lines); (text, truncated)."""
    if len(text) <= limits.max_bytes // 4 and text.count("\n") < limits.max_lines:
        return text, False  # fast path: cannot be over either limit
    data = text.encode("utf-8", "surrogatepass")
    if not _over(len(data), _count_lines(data), limits):
        return text, False
    hb, hl, tb, tl = _budgets(limits)
    head = _head(data, hb, hl)
    tail = _tail(data[len(head) :], tb, tl)
    return _render(head, tail, len(data), data.count(b"\n"), None), True


class BoundedCapture:
    """Capture of one output stream: bounded memory, exact counters, full spill to disk.

    `feed(bytes)` as data arrives, `close()` at the end, then `text()` for what the
    model sees. Memory stays under about twice the byte limit whatever the volume.
    """

    def __init__(
        self,
        limits: OutputLimits,
        spill_dir: Path | None = None,
        *,
        name: str = "output",
        budget: SpillBudget | None = None,
    ) -> None:
        self.limits = limits
        self.spill_dir = spill_dir
        self.name = name
        self.budget = budget
        self.dropped = 0  # bytes not written to the spill file: past the budget
        self._unchecked = 0  # bytes written since the directory's total was checked
        self._sample = bytearray()  # the first bytes, to tell binary output
        self.total_bytes = 0
        self.total_newlines = 0
        self._all = bytearray()  # everything, until the limits are passed
        self._head: bytes | None = None  # fixed once spilled
        self._tail = bytearray()  # rolling, after the head
        self._file: BinaryIO | None = None
        self.full_output_path: Path | None = None
        self.spill_error: str | None = None
        self._hb, self._hl, self._tb, self._tl = _budgets(limits)

    @property
    def truncated(self) -> bool:
        return self._head is not None

    @property
    def total_lines(self) -> int:
        if self.total_bytes == 0:
            return 0
        last = self._tail[-1:] if self._head is not None else self._all[-1:]
        return self.total_newlines + (0 if last == b"\n" else 1)

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total_bytes += len(data)
        self.total_newlines += data.count(b"\n")
        if len(self._sample) < BINARY_SAMPLE:
            self._sample += data[: BINARY_SAMPLE - len(self._sample)]
        if self._head is None:
            self._all += data
            if _over(len(self._all), _count_lines(self._all), self.limits):
                self._spill()
            return
        self._write(data)
        self._tail += data
        if len(self._tail) > 2 * self._tb + 65536:
            self._trim_tail()

    def _spill(self) -> None:
        head = _head(self._all, self._hb, self._hl)
        self._head = head
        self._tail = bytearray(self._all[len(head) :])
        self._open_spill()
        self._write(bytes(self._all))
        self._all = bytearray()
        self._trim_tail()

    def _trim_tail(self) -> None:
        # Keep a little more than the tail budget: `_tail()` looks one byte before its
        # cut to start on a line boundary, exactly as `bound_text` does on the whole text.
        keep = self._tb + 1024
        if len(self._tail) > keep:
            del self._tail[: len(self._tail) - keep]

    def _open_spill(self) -> None:
        try:
            directory = self.spill_dir or Path(tempfile.gettempdir()) / "synapse-outputs"
            directory.mkdir(parents=True, exist_ok=True)
            _prune(directory)
            if self.budget is not None:
                enforce_total(directory, self.budget.total_bytes, reserve=self.budget.max_bytes)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = directory / f"{stamp}-{secrets.token_hex(4)}-{self.name}.txt"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with contextlib.suppress(OSError):  # eviction skips a file locked by its writer
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._file = os.fdopen(fd, "wb")
            self.full_output_path = path
        except OSError as exc:
            # Not fatal: the model still gets head and tail; the marker says no file.
            self.spill_error = str(exc)
            log.warning("cannot spill full output: %s", exc)

    def _write(self, data: bytes) -> None:
        if self._file is None:
            return
        budget = self.budget
        if budget is not None:
            room = max(0, budget.max_bytes - budget.used)
            if len(data) > room:
                over = len(data) - room
                budget.dropped += over
                self.dropped += over
                data = data[:room]
            if not data:
                return
            budget.used += len(data)
            self._unchecked += len(data)
            if self._unchecked >= EVICT_CHECK_BYTES and self.spill_dir is not None:
                self._unchecked = 0
                enforce_total(self.spill_dir, budget.total_bytes, reserve=0)
        try:
            self._file.write(data)
        except OSError as exc:
            self.spill_error = str(exc)
            log.warning("full output file %s incomplete: %s", self.full_output_path, exc)
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    @property
    def binary(self) -> bool:
        return looks_binary(self._sample)

    def close(self) -> None:
        if self._head is None and self.total_bytes and self.binary:
            self._spill()  # the model gets a summary: the bytes themselves go to the file
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def text(self) -> str:
        """Everything when under the limits; else head + cut marker + tail."""
        if self.total_bytes and self.binary:
            where = (
                f"full output: {self.full_output_path}" if self.full_output_path else "not saved"
            )
            note = f"; {self.dropped} bytes past the spill cap not saved" if self.dropped else ""
            return (
                f"[binary output: {self.total_bytes} bytes, {sniff(self._sample)}; {where}{note}]\n"
            )
        if self._head is None:
            return codecs.decode(bytes(self._all), "utf-8", "replace")
        tail = _tail(self._tail, self._tb, self._tl)
        note = ""
        if self.dropped:
            cap = self.budget.max_bytes if self.budget is not None else 0
            note = (
                f"; the file stops at the {_size(cap)} per-command cap: the last "
                f"{self.dropped} bytes were dropped (the tail below is the real end)"
            )
        return _render(
            self._head, tail, self.total_bytes, self.total_newlines, self.full_output_path, note
        )


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def enforce_total(directory: Path, total_bytes: int, *, reserve: int = 0) -> int:
    """Evict spill files, oldest first, until the directory holds at most
    `total_bytes - reserve`. Safe with several Synapse processes on one $SYNAPSE_HOME:
    evictions are serialized by an flock on `.lock`, and a file is skipped while its
    writer holds its lock or when it changed in the last few seconds. Returns the
    bytes freed."""
    freed = 0
    try:
        lock = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return 0
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries: list[tuple[float, int, Path]] = []
        with contextlib.suppress(OSError):
            for entry in directory.iterdir():
                if entry.name == LOCK_FILE:
                    continue
                with contextlib.suppress(OSError):
                    st = entry.stat()
                    entries.append((st.st_mtime, st.st_size, entry))
        total = sum(size for _, size, _ in entries)
        limit = max(0, total_bytes - reserve)
        now = time.time()
        for mtime, size, path in sorted(entries):
            if total <= limit:
                break
            if now - mtime < EVICT_MIN_AGE_S:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # a live command is writing it
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                freed += size
            os.close(fd)
    finally:
        os.close(lock)
    return freed


def _prune(directory: Path) -> None:
    """Drop spill files older than a day so 1 GB outputs do not pile up."""
    cutoff = time.time() - SPILL_MAX_AGE_S
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_file() and entry.stat().st_mtime < cutoff:
                entry.unlink()
