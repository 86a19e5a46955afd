"""The seccomp filter of a worker that bubblewrap does not isolate, stated by syscall name and argument.

    program = worker_filter(refuse_message_queues=True)   # BPF bytes, for the launcher to install

Where bubblewrap runs the worker, its network namespace has no network. Without it (a worker that runs as
an unprivileged user of its own, or the unsandboxed opt-out) this filter, installed by the launcher
before the worker exists and inherited by everything it starts, never removable, closes what outlives a
process or reaches beyond this machine:

- `socket` of any family but AF_UNIX (local pipes, which Python's multiprocessing uses) and
  `io_uring_setup` (which could open sockets around the filter) fail with EACCES;
- where the worker has no IPC namespace of its own, `mq_open` fails too: a POSIX message queue outlives
  its processes, and nothing but a mounted /dev/mqueue would list it for the sweep (user.py);
- a call of another architecture's table (x32, i386 on x86_64) fails whole (libseccomp's bad-arch action).

libseccomp (Debian's libseccomp2, through the pyseccomp binding) compiles the rules for this machine's
architecture: its syscall numbers and the filter's own arithmetic are libseccomp's, not ours.
"""

from __future__ import annotations

import errno
import functools
import socket
import tempfile


class FilterUnavailable(RuntimeError):
    """libseccomp cannot be loaded here: the network of a worker without bubblewrap cannot be closed."""


@functools.lru_cache(maxsize=None)
def worker_filter(refuse_message_queues: bool = False) -> bytes:
    """The filter as a classic BPF program (struct sock_filter[]), ready for prctl(PR_SET_SECCOMP)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:
        raise FilterUnavailable(f"libseccomp could not be loaded ({exc}): install Debian's libseccomp2 and the "
                                "pyseccomp package (requirements-instructor.lock has it)") from None
    refuse = seccomp.ERRNO(errno.EACCES)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    rules.set_attr(seccomp.Attr.ACT_BADARCH, refuse)
    rules.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    rules.add_rule(refuse, "io_uring_setup")
    if refuse_message_queues:
        rules.add_rule(refuse, "mq_open")
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()
