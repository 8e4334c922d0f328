"""Run a command as a container with a read-only root filesystem would: inside a private mount
namespace (`unshare --mount`), every declared volume folder bind-mounted (read-only where the
manifest says so), then the root remounted read-only; anything written elsewhere fails with
"Read-only file system", as in the pod.

    unshare --mount --propagation private -- python -m shared.deploy.sandbox \\
        --rw /tmp/x/data --ro /tmp/x/config -- COMMAND ARGS...

Needs CAP_SYS_ADMIN (root, or a user namespace); `available()` says whether it works here.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rw", action="append", default=[], help="a writable folder")
    parser.add_argument("--ro", action="append", default=[], help="a read-only folder")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    for folder in args.rw + args.ro:  # each its own mount, so the root's remount spares it
        mount("--bind", folder, folder)
    for folder in args.ro:
        mount("-o", "remount,bind,ro", folder, folder)
    mount("-o", "remount,bind,ro", "/")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    os.execvp(command[0], command)


@functools.cache
def available() -> bool:
    """Whether this machine lets us make a private mount namespace with a read-only root."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = ["unshare", "--mount", "--propagation", "private", "--", "mount", "-o",
             "remount,bind,ro", "/"]  # fmt: skip
    return subprocess.run(probe, capture_output=True).returncode == 0


def wrap(argv: list[str], writable: list[str], read_only: list[str]) -> list[str]:
    """`argv` run inside the sandbox (unchanged where the sandbox is not available)."""
    if not available():
        return argv
    flags = [part for folder in writable for part in ("--rw", folder)]
    flags += [part for folder in read_only for part in ("--ro", folder)]
    return ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-m",
            "shared.deploy.sandbox", *flags, "--", *argv]  # fmt: skip


if __name__ == "__main__":
    main()
