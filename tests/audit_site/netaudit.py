"""Refuse and record every network connection that leaves loopback (for the tests' audited runs).

`install(log_path)` adds a `sys.addaudithook` on "socket.connect": a connection to an address
outside 127.0.0.0/8 / ::1 is written to `log_path` (with the process that tried it) and refused
with ConnectionRefusedError. Audit hooks cannot be removed, so install it in a process dedicated
to the audited run.

This directory's `sitecustomize.py` installs it at start-up in every Python process whose
PYTHONPATH holds this directory while MEMLIFE_NET_AUDIT names the log: the audited run and the
processes it starts, the MemOS worker under its own interpreter (`.venv-memos`) included. So the
one copy here audits both environments, and neither memlife nor the worker carries test code.
"""
from __future__ import annotations

import ipaddress
import os
import sys

ENV = "MEMLIFE_NET_AUDIT"


def is_loopback(address) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX path: local by construction
    host = address[0]
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def install(log_path: str) -> None:
    def hook(event, args):
        if event == "socket.connect" and not is_loopback(args[1]):
            who = os.path.basename((getattr(sys, "argv", None) or [""])[0]) or "python"
            with open(log_path, "a") as fh:
                fh.write(f"{who} (pid {os.getpid()}) {args[1]!r}\n")
            raise ConnectionRefusedError(f"network audit: connection to {args[1]!r} refused")

    sys.addaudithook(hook)
