"""Refuse and record every network connection that leaves loopback (for tests and audits).

`install(log_path)` adds a `sys.addaudithook` on "socket.connect": a connection to an address
outside 127.0.0.0/8 / ::1 is written to `log_path` and refused with ConnectionRefusedError.
Audit hooks cannot be removed, so install it in a process dedicated to the audited run.
"""
from __future__ import annotations

import ipaddress
import sys


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
            with open(log_path, "a") as fh:
                fh.write(f"{args[1]!r}\n")
            raise ConnectionRefusedError(f"network audit: connection to {args[1]!r} refused")

    sys.addaudithook(hook)
