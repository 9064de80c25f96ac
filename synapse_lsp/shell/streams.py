"""The commands' stdout and stderr: FIFOs read by the event loop as they fill.

bash's own stderr and a stdout FIFO are made once per bash (`open`); each command
then writes to FIFOs of its own (`>out.N 2>err.N`): a background job it starts
inherits them, so what the job writes later never lands in the next command's
output. A command's FIFO still held open when it is over becomes a `Background`
sink with its own capture (and spill file); the next result carries a notice. The
next command's FIFOs are made, and the last one's unlinked, once its result is out
(`tidy`): 40-50 µs a command, off the path between a command and its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from synapse_lsp.config import OutputLimits, Settings
from synapse_lsp.output import BoundedCapture
from synapse_lsp.shell.command import Run
from synapse_lsp.shell.terminal import READ_SIZE

FIFO_READ_SIZE = 1 << 18
DRAIN_LIMIT = 64
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, Linux; not exported before Python 3.10 on all builds
# Output that arrives between commands (background jobs) is kept up to this size for
# the next command; beyond it we stop reading so the job blocks instead of our memory growing.
IDLE_BUFFER = 1 << 16


class Readers:
    """The event loop's readers of one bash's descriptors. They stay registered between
    commands (re-registering costs ~0.15 ms a run)."""

    def __init__(self) -> None:
        self._fds: set[int] = set()

    def attach(self, readers: Sequence[tuple[int, Callable[[], None]]]) -> None:
        loop = asyncio.get_running_loop()
        for fd, callback in readers:
            if fd >= 0 and fd not in self._fds:
                loop.add_reader(fd, callback)
                self._fds.add(fd)

    def pause(self, fd: int) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(fd)
        self._fds.discard(fd)

    def detach(self) -> None:
        for fd in list(self._fds):
            self.pause(fd)

    def read_idle(self, fd: int, buf: bytearray) -> None:
        """Between commands: keep what `fd` gives in `buf` for the next command."""
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.pause(fd)  # EOF while idle: bash is gone; the next run() respawns
            return
        buf += data
        if len(buf) >= IDLE_BUFFER:
            self.pause(fd)


@dataclass
class Background:
    """A finished command's FIFO still held open by the background jobs it started:
    their output goes to its own capture (and spill file), never into a later command's
    output; the next results carry a notice saying how much arrived and where it is."""

    seq: int
    stream: str
    fd: int
    capture: BoundedCapture
    reported: int = 0


class Streams:
    """The FIFOs of one bash (`settings`: the live settings, for spill files)."""

    def __init__(self, settings: Callable[[], Settings], readers: Readers) -> None:
        self._settings = settings
        self._readers = readers
        self.err_r = self.err_w = self.out_r = self.out_w = -1
        self._idle_err = bytearray()
        self._idle_fifo = bytearray()
        self._background: dict[int, Background] = {}  # by FIFO fd
        # FIFOs made ahead for the next command (`tidy`): its seq, paths and read ends,
        # and those of the read ends already watched by the loop (`_on_fifo`).
        self._ahead: tuple[int, tuple[str, str], tuple[int, int]] | None = None
        self._ahead_watched: set[int] = set()
        self._run: Run | None = None  # the command whose FIFOs `_on_fifo` feeds
        self._unlink: list[str] = []  # finished commands' FIFOs, for `tidy`

    def open(self, directory: Path) -> Path:
        """Make bash's stderr FIFO and a stdout FIFO in `directory`; the stderr one's path."""
        fifo = directory / "stderr"
        out_fifo = directory / "stdout"
        os.mkfifo(fifo, 0o600)
        os.mkfifo(out_fifo, 0o600)
        # Our own write ends keep the FIFOs from reporting EOF between commands.
        self.err_r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.err_w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        self.out_r = os.open(out_fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.out_w = os.open(out_fifo, os.O_WRONLY | os.O_NONBLOCK)
        with contextlib.suppress(OSError):  # fewer wake-ups for big outputs
            fcntl.fcntl(self.out_r, F_SETPIPE_SZ, 1 << 20)
        return fifo

    def begin(self, run: Run) -> None:
        """What arrived while no command ran is `run`'s first output."""
        err, fifo = bytes(self._idle_err), bytes(self._idle_fifo)
        self._idle_err.clear()
        self._idle_fifo.clear()
        if err:
            run.stderr.feed(err)
        if fifo:
            run.stdout.feed(fifo)

    def on_stderr(self, run: Run | None) -> None:
        if run is None:
            self._readers.read_idle(self.err_r, self._idle_err)
            return
        self.drain(run, self.err_r, "stderr", limit=8)

    def on_stdout(self, run: Run | None) -> None:
        if run is None:
            self._readers.read_idle(self.out_r, self._idle_fifo)
            return
        self.drain(run, self.out_r, "stdout", limit=8)

    def drain(self, run: Run, fd: int, stream: str, limit: int = DRAIN_LIMIT) -> bool:
        """Read a FIFO until it is empty (at most `limit` chunks: a background job that
        writes without pause must not hold us here). True at end of file (no writer)."""
        capture = run.stdout if stream == "stdout" else run.stderr
        decoder = run.out_decoder if stream == "stdout" else run.err_decoder
        for _ in range(limit):
            if fd < 0:
                return False
            try:
                data = os.read(fd, FIFO_READ_SIZE)
            except OSError:  # BlockingIOError: empty for now
                return False
            if not data:
                return True
            capture.feed(data)
            run.emit(stream, decoder.decode(data))
        return False

    def finish(self, run: Run, *, alive: bool) -> None:
        """The command is over: the rest of its output, its captures closed."""
        self.drain(run, self.out_r, "stdout")
        self.drain(run, self.err_r, "stderr")
        self.release_command_fifos(run, alive=alive)
        for name, tail in (
            ("stdout", run.out_decoder.decode(b"", final=True)),
            ("stdout", run.frame.flush()),
            ("stderr", run.err_decoder.decode(b"", final=True)),
        ):
            if tail:
                run.emit(name, tail)
        run.stdout.close()
        run.stderr.close()

    # ------------------------------------------- per-command output FIFOs

    def open_command_fifos(self, run: Run, directory: Path) -> None:
        """Each command writes to FIFOs of its own (`>out.N 2>err.N`). A background job
        it starts inherits them, so what the job writes later is told apart from the
        next command's output: the FIFO outlives the command (`Background`) until the
        last writer closes it."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] != run.seq:
            self._drop(ahead)
            ahead = None
        paths, (run.out_fd, run.err_fd) = ahead[1:] if ahead else _make_fifos(run.seq, directory)
        run.fifo_paths = paths
        self._run = run
        watched, self._ahead_watched = self._ahead_watched, set()
        for fd, stream in ((run.out_fd, "stdout"), (run.err_fd, "stderr")):
            if fd not in watched:
                asyncio.get_running_loop().add_reader(fd, self._on_fifo, fd, stream)

    def tidy(self, seq: int, directory: Path) -> None:
        """Between commands: unlink the finished ones' FIFOs; make command `seq`'s, and
        watch them already (two `add_reader`s, ~10 µs, off the next command's path)."""
        self._unlink_finished()
        if self._ahead is None and self.err_r >= 0:
            with contextlib.suppress(OSError):
                self._ahead = ahead = (seq, *_make_fifos(seq, directory))
                loop = asyncio.get_running_loop()
                for fd, stream in zip(ahead[2], ("stdout", "stderr"), strict=True):
                    loop.add_reader(fd, self._on_fifo, fd, stream)
                    self._ahead_watched.add(fd)

    def _on_fifo(self, fd: int, stream: str) -> None:
        run = self._run
        if run is None or fd != (run.out_fd if stream == "stdout" else run.err_fd):
            # A FIFO made ahead, written before its command began (a job that found its
            # name): unwatched until the command begins; what it holds is that command's.
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            self._ahead_watched.discard(fd)
            return
        self._on_command_fifo(run, stream)

    def _unlink_finished(self) -> None:
        for path in self._unlink:
            with contextlib.suppress(OSError):
                os.unlink(path)  # noqa: PTH108 - per command; the str is at hand
        self._unlink.clear()

    def _drop(self, ahead: tuple[int, tuple[str, str], tuple[int, int]]) -> None:
        for fd in ahead[2]:
            if fd in self._ahead_watched:
                self._ahead_watched.discard(fd)
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().remove_reader(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        self._unlink.extend(ahead[1])

    def _on_command_fifo(self, run: Run, stream: str) -> None:
        fd = run.out_fd if stream == "stdout" else run.err_fd
        if fd < 0:
            return
        if self.drain(run, fd, stream, limit=8):
            self._close_command_fd(run, stream)  # the command closed it (`exec >&-`)

    def _close_command_fd(self, run: Run, stream: str) -> None:
        fd = run.out_fd if stream == "stdout" else run.err_fd
        if fd < 0:
            return
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(fd)
        with contextlib.suppress(OSError):
            os.close(fd)
        if stream == "stdout":
            run.out_fd = -1
        else:
            run.err_fd = -1

    def release_command_fifos(self, run: Run, *, alive: bool) -> None:
        """The command is over: drain its FIFOs; one that a background job still holds
        becomes a `Background` sink (while bash is `alive`), the others are closed."""
        for stream in ("stdout", "stderr"):
            fd = run.out_fd if stream == "stdout" else run.err_fd
            if fd < 0:
                continue
            if self.drain(run, fd, stream) or not alive:
                self._close_command_fd(run, stream)
                continue
            capture = BoundedCapture(
                OutputLimits(max_bytes=2048, max_lines=40),
                self._settings().synapse_home / "outputs",
                name=f"background-{run.seq}-{stream}",
                # The command's own allowance: what its jobs write later counts against
                # the same per-command cap (a `yes &` gets one cap, not one per sink).
                budget=run.stdout.budget,
            )
            loop = asyncio.get_running_loop()
            with contextlib.suppress(Exception):
                loop.remove_reader(fd)
            sink = Background(run.seq, stream, fd, capture)
            self._background[fd] = sink
            loop.add_reader(fd, self._on_background, sink)
            if stream == "stdout":
                run.out_fd = -1
            else:
                run.err_fd = -1
        self._unlink.extend(run.fifo_paths)  # `tidy`, or at once on `close`
        run.fifo_paths = ()

    # ------------------------------------------------------- background jobs

    def _on_background(self, sink: Background) -> None:
        for _ in range(8):
            try:
                data = os.read(sink.fd, FIFO_READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._close_background(sink)
                return
            sink.capture.feed(data)

    def _close_background(self, sink: Background) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(sink.fd)
        with contextlib.suppress(OSError):
            os.close(sink.fd)
        sink.capture.close()
        sink.fd = -1
        # Kept until its last bytes are reported (`notice`).
        if sink.capture.total_bytes <= sink.reported:
            self._background = {k: v for k, v in self._background.items() if v is not sink}

    def notice(self) -> str:
        """What background jobs of earlier commands wrote since the last result."""
        notes = []
        for key, sink in list(self._background.items()):
            new = sink.capture.total_bytes - sink.reported
            if new > 0:
                capture = sink.capture
                where = (
                    f"saved in {capture.full_output_path}"
                    if capture.full_output_path is not None
                    else "dropped"
                    if capture.truncated
                    else "it follows:\n" + capture.text().rstrip("\n")
                )
                if capture.dropped:
                    where += f" ({capture.dropped} bytes past the per-command cap dropped)"
                notes.append(
                    f"[background jobs of command {sink.seq} wrote {new} bytes to "
                    f"{sink.stream} since; not part of this command's output; {where}]"
                )
                sink.reported = capture.total_bytes
            if sink.fd < 0:
                del self._background[key]
        return "".join(f"\n{note}\n" for note in notes)

    def close(self, run: Run | None) -> None:
        """bash is gone: `run`'s FIFOs drained and closed, every sink and FIFO closed."""
        if run is not None:
            for stream in ("stdout", "stderr"):
                fd = run.out_fd if stream == "stdout" else run.err_fd
                if fd >= 0:
                    self.drain(run, fd, stream)
                    self._close_command_fd(run, stream)
        for sink in list(self._background.values()):
            if sink.fd >= 0:
                self._close_background(sink)
        self._background.clear()
        if self._ahead is not None:
            self._drop(self._ahead)
            self._ahead = None
        self._unlink_finished()
        for fd in (self.err_r, self.err_w, self.out_r, self.out_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.err_r = self.err_w = self.out_r = self.out_w = -1


def _make_fifos(seq: int, directory: Path) -> tuple[tuple[str, str], tuple[int, int]]:
    """Command `seq`'s stdout and stderr FIFOs, and their read ends (non-blocking)."""
    paths = (f"{directory}/out.{seq}", f"{directory}/err.{seq}")
    fds: list[int] = []
    try:
        for path in paths:
            with contextlib.suppress(FileExistsError):
                os.mkfifo(path, 0o600)
            # No write end of ours: end of file says every writer (bash, jobs) is done.
            fds.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    with contextlib.suppress(OSError):  # fewer wake-ups for big outputs
        fcntl.fcntl(fds[0], F_SETPIPE_SZ, 1 << 20)
    return paths, (fds[0], fds[1])
