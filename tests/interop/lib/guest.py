#!/usr/bin/env python3
"""Drive an interop test guest through its serial console (a QEMU UNIX-socket chardev).

The guest's /init runs a prompt-less, echo-less loop that evaluates one shell line at a time.
Each command is sent wrapped between a start marker and an end marker that carries the exit
status, so its output and status come back exactly.

usage:
  guest.py SOCK ready [--timeout S]          wait until the command loop answers
  guest.py SOCK run [--timeout S] [--log F] CMD...
                                             run each CMD in turn; print its output; exit with
                                             the last status (124 on timeout, 125 console lost)

A timed-out command keeps running in the guest (there is no job control on the console):
bound long commands in the guest with busybox `timeout`, shorter than --timeout.
"""
import argparse
import re
import socket
import sys
import time
import uuid

TIMEOUT, LOST = 124, 125


class ConsoleLost(Exception):
    pass


class Console:
    def __init__(self, path, timeout):
        deadline = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                return
            except OSError as e:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise ConsoleLost(f"cannot connect to {path}: {e}")
                time.sleep(0.2)

    def run(self, cmd, timeout):
        """Returns (status or None on timeout, output)."""
        tag = uuid.uuid4().hex[:12]
        start = f"__S_{tag}__".encode()
        end = re.compile(rb"__E_" + tag.encode() + rb"_(\d+)__")
        if "\n" in cmd:
            raise ValueError("the guest reads one line per command: no newlines in CMD")
        sep = " " if cmd.rstrip().endswith("&") else " ;"
        self.sock.sendall(f"echo __S_{tag}__; {{ {cmd}{sep} }} 2>&1; echo __E_{tag}_$?__\n".encode())
        buf = b""
        deadline = time.monotonic() + timeout
        while True:
            m = end.search(buf)
            if m:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return None, clean(buf[buf.find(start) + len(start):] if start in buf else buf)
            self.sock.settimeout(min(left, 0.5))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise ConsoleLost("console closed (guest gone?)")
            buf += chunk
        i = buf.find(start)
        body = buf[i + len(start):m.start()] if i >= 0 else buf[:m.start()]
        return int(m.group(1)), clean(body)


def clean(b):
    return b.decode(errors="replace").replace("\r\n", "\n").replace("\r", "").lstrip("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sock")
    ap.add_argument("action", choices=["ready", "run"])
    ap.add_argument("cmds", nargs="*")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--log", help="append each command and its output to this file")
    a = ap.parse_intermixed_args()
    t0 = time.monotonic()
    try:
        con = Console(a.sock, a.timeout)
        if a.action == "ready":
            while time.monotonic() - t0 < a.timeout:
                rc, _ = con.run("true", 2)
                if rc == 0:
                    return 0
            sys.stderr.write(f"guest.py: {a.sock}: no answer from the command loop within {a.timeout:.0f} s\n")
            return TIMEOUT
        rc = 0
        for cmd in a.cmds:
            left = a.timeout - (time.monotonic() - t0)
            rc, out = con.run(cmd, max(left, 1))
            sys.stdout.write(out)
            sys.stdout.flush()
            if a.log:
                with open(a.log, "a") as f:
                    f.write(f"$ {cmd}\n{out}[status {'timeout' if rc is None else rc}]\n")
            if rc is None:
                sys.stderr.write(f"guest.py: timeout after {a.timeout:.0f} s running: {cmd}\n")
                return TIMEOUT
        return rc
    except ConsoleLost as e:
        sys.stderr.write(f"guest.py: {e}\n")
        return LOST


if __name__ == "__main__":
    sys.exit(main())
