"""The set-id filter of the sandbox: a seccomp program that `bwrap --seccomp FD` loads
for the shell (`sandbox.bwrap_argv`); split from `sandbox.py`, which re-exports it."""

from __future__ import annotations

import os
import platform
import struct

# A classic BPF program for seccomp (what `bwrap --seccomp FD` loads): a command in the
# sandbox cannot set the set-user-ID or set-group-ID bit on a file (chmod and its
# siblings, a file created with such a mode by open/openat/creat/mknod), so it cannot
# leave a setuid binary that the host's mounts would honour (bwrap's own mounts are
# nosuid inside, but the bit is stored in the file). openat2 passes its mode in a
# struct the filter cannot read: it fails with ENOSYS, as on an older kernel, and
# programs fall back to openat.
_SETID = 0o6000
_O_CREAT = 0o100 | 0o20000000  # O_CREAT, or __O_TMPFILE (a file linked in later)
_LD_W_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW = 0x7FFF0000
_EPERM = 0x00050000 | 1
_ENOSYS = 0x00050000 | 38
_KILL = 0x80000000  # SECCOMP_RET_KILL_PROCESS
# (audit arch, [(syscall, index of its mode argument, index of its flags or -1)], openat2)
_SYSCALLS: dict[str, tuple[int, list[tuple[int, int, int]], int]] = {
    "x86_64": (
        0xC000003E,
        [(90, 1, -1), (91, 1, -1), (268, 2, -1), (452, 2, -1),  # chmod fchmod fchmodat(2)
         (2, 2, 1), (257, 3, 2), (85, 1, -1), (133, 1, -1), (259, 2, -1)],  # open.. mknodat
        437,
    ),
    "aarch64": (
        0xC00000B7,
        [(52, 1, -1), (53, 2, -1), (452, 2, -1), (56, 3, 2), (33, 2, -1)],
        437,
    ),
}  # fmt: skip


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The set-id filter for this machine's architecture, or None where we have none
    (the sandbox then runs without it, and says so in the log)."""
    entry = _SYSCALLS.get(machine or platform.machine())
    if entry is None:
        return None
    arch, calls, openat2 = entry
    # Layout: [arch check][x32 check][per syscall: jeq][ret allow][per syscall: checks]
    # [deny][allow]. Built back to front so every jump offset is known.
    deny = [_insn(_RET, 0, 0, _EPERM)]
    allow = [_insn(_RET, 0, 0, _ALLOW)]
    blocks: list[list[bytes]] = []
    for _nr, mode_arg, flags_arg in calls:
        block: list[bytes] = []
        if flags_arg >= 0:  # open/openat: only a file being created has a mode
            block.append(_insn(_LD_W_ABS, 0, 0, 16 + 8 * flags_arg))
            block.append(_insn(_JSET, 0, 0, _O_CREAT))  # jf patched below
        block.append(_insn(_LD_W_ABS, 0, 0, 16 + 8 * mode_arg))
        block.append(_insn(_JSET, 0, 0, _SETID))  # jt/jf patched below
        blocks.append(block)
    # Offsets: after the blocks come `deny` then `allow`.
    body: list[bytes] = []
    starts: list[int] = []
    total_blocks = sum(len(b) for b in blocks)
    position = 0
    for block in blocks:
        starts.append(position)
        patched: list[bytes] = []
        for index, raw in enumerate(block):
            code, _jt, _jf, k = struct.unpack("=HBBI", raw)
            here = position + index
            to_deny = total_blocks - here - 1  # deny is right after the blocks
            to_allow = to_deny + 1
            if code == _JSET and k == _O_CREAT:
                patched.append(_insn(code, 0, to_allow, k))  # not creating: allow
            elif code == _JSET:
                patched.append(_insn(code, to_deny, to_allow, k))
            else:
                patched.append(raw)
        body += patched
        position += len(block)
    tail = body + deny + allow
    # The head: arch, x32 (x86_64 only), openat2, one jeq per syscall to its block.
    head: list[bytes] = []
    # A program of another ABI (i386 on x86_64) has other syscall numbers, which this
    # filter does not check: such a process is not run at all.
    head.append(_insn(_LD_W_ABS, 0, 0, 4))  # arch
    head.append(_insn(_JEQ, 1, 0, arch))
    head.append(_insn(_RET, 0, 0, _KILL))  # a foreign ABI (i386 on x86_64): not run
    head.append(_insn(_LD_W_ABS, 0, 0, 0))  # nr
    if arch == 0xC000003E:
        # x32 numbers have bit 30 set: refuse them (nothing here uses the x32 ABI)
        head.append(_insn(_JSET, 0, 1, 0x40000000))
        head.append(_insn(_RET, 0, 0, _ENOSYS))
    head.append(_insn(_JEQ, 0, 1, openat2))
    head.append(_insn(_RET, 0, 0, _ENOSYS))
    for index, (nr, _mode, _flags) in enumerate(calls):
        # from this jeq to its block: the rest of the jeqs, the `ret allow`, then the start
        distance = (len(calls) - index - 1) + 1 + starts[index]
        head.append(_insn(_JEQ, distance, 0, nr))
    head.append(_insn(_RET, 0, 0, _ALLOW))
    return b"".join(head + tail)


def seccomp_fd() -> int:
    """A file descriptor holding the set-id filter for `bwrap --seccomp` (inheritable;
    the caller passes it and closes it), or -1 when there is no filter here."""
    program = seccomp_program()
    if program is None:
        return -1
    try:
        fd = os.memfd_create("synapse-seccomp", 0)
    except (AttributeError, OSError):
        return -1
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        return -1
    return fd
