"""Run a command as a container would: in its memory cgroup, with a read-only root filesystem,
as the pod's user.

    unshare --mount --propagation private -- python -m shared.apps.deploy.sandbox \\
        --cgroup /sys/fs/cgroup/memory/x --rw /tmp/x/data --ro /tmp/x/config \\
        --user 10001:10001:10001 --passwd /tmp/x/passwd -- COMMAND ARGS...

In order: join the memory cgroup (its limit is the container's `limits.memory`, so the kernel
OOM-kills it as the kubelet's cgroup would); inside a private mount namespace, bind-mount each
declared volume folder (read-only where the manifest says so), bind a passwd file naming the
pod's user (the images create uid 10001) over /etc/passwd, and remount the root read-only; then
drop to the pod's uid, gid and supplemental groups (fsGroup) and exec the command. Writing
outside the volumes fails with "Read-only file system", as in the pod.

Needs root (CAP_SYS_ADMIN for the mounts, a writable cgroup tree for the limit); `available()`
and `MemoryCgroup.supported()` say what works here.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup/memory")
CGROUP_V2 = Path("/sys/fs/cgroup")


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rw", action="append", default=[], help="a writable folder")
    parser.add_argument("--ro", action="append", default=[], help="a read-only folder")
    parser.add_argument("--cgroup", help="a memory cgroup folder to join first")
    parser.add_argument("--user", help="UID:GID[:GROUP,...] to run the command as")
    parser.add_argument("--passwd", help="a passwd file to bind over /etc/passwd")
    parser.add_argument("--no-mounts", action="store_true", help="no mount namespace here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.cgroup:
        (Path(args.cgroup) / "cgroup.procs").write_text(str(os.getpid()))
    if not args.no_mounts:
        for folder in args.rw + args.ro:  # each its own mount, so the root's remount spares it
            mount("--bind", folder, folder)
        for folder in args.ro:
            mount("-o", "remount,bind,ro", folder, folder)
        if args.passwd:
            mount("--bind", args.passwd, "/etc/passwd")
        mount("-o", "remount,bind,ro", "/")
    if args.user:
        uid, gid, *groups = args.user.split(":")
        os.setgroups([int(g) for g in (groups[0].split(",") if groups and groups[0] else [])])
        os.setgid(int(gid))
        os.setuid(int(uid))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    executable = shutil.which(command[0])  # as the pod's user, on the container's PATH
    if executable is None:
        # what the kubelet reports for a command the image lacks (a dependency left out of
        # its install line); exec itself would say "Permission denied" for the host's private
        # folders on PATH
        print(f'exec: "{command[0]}": executable file not found in $PATH', file=sys.stderr)
        sys.exit(127)
    os.execv(executable, command)


@functools.cache
def available() -> bool:
    """Whether this machine lets us make a private mount namespace with a read-only root."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = ["unshare", "--mount", "--propagation", "private", "--", "mount", "-o",
             "remount,bind,ro", "/"]  # fmt: skip
    return subprocess.run(probe, capture_output=True).returncode == 0


@dataclass(frozen=True)
class User:
    """The pod's runAsUser, runAsGroup and supplemental groups (fsGroup)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    def flag(self) -> str:
        return f"{self.uid}:{self.gid}:{','.join(map(str, self.groups))}"


def wrap(
    argv: list[str],
    writable: list[str],
    read_only: list[str],
    *,
    user: User | None = None,
    cgroup: Path | None = None,
    passwd: Path | None = None,
) -> list[str]:
    """`argv` run inside the sandbox: as `user`, in `cgroup`, with the mounts where the machine
    allows them (without a mount namespace: the folders' modes only)."""
    flags = [part for folder in writable for part in ("--rw", folder)]
    flags += [part for folder in read_only for part in ("--ro", folder)]
    if user is not None and os.geteuid() == 0:
        flags += ["--user", user.flag()]
    if cgroup is not None:
        flags += ["--cgroup", str(cgroup)]
    # by its path, isolated (-I): the container's PYTHONPATH must not pick another copy of it
    helper = [sys.executable, "-I", str(Path(__file__).resolve())]
    if not available():
        return [*helper, "--no-mounts", *flags, "--", *argv]
    if passwd is not None:
        flags += ["--passwd", str(passwd)]
    return ["unshare", "--mount", "--propagation", "private", "--", *helper, *flags, "--", *argv]


@dataclass
class MemoryCgroup:
    """One container's memory cgroup (v1 or v2): its limit, its peak and its OOM kills."""

    path: Path

    @staticmethod
    def supported() -> bool:
        """Whether we may make memory cgroups here (root and a writable memory hierarchy)."""
        if os.geteuid() != 0:
            return False
        root = CGROUP_V1 if (CGROUP_V1 / "memory.limit_in_bytes").exists() else CGROUP_V2
        return os.access(root, os.W_OK) and (
            root == CGROUP_V1 or "memory" in (CGROUP_V2 / "cgroup.controllers").read_text()
        )

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> MemoryCgroup:
        v1 = (CGROUP_V1 / "memory.limit_in_bytes").exists()
        group = cls((CGROUP_V1 if v1 else CGROUP_V2) / name)
        group.path.mkdir(parents=True, exist_ok=True)
        group.write("memory.limit_in_bytes" if v1 else "memory.max", str(limit_bytes))
        if not v1:
            group.write("memory.swap.max", "0")
        return group

    @property
    def v1(self) -> bool:
        return self.path.is_relative_to(CGROUP_V1)

    def write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def peak_bytes(self) -> int:
        """The most memory the container used (the kernel's charge: RSS and page cache)."""
        text = self.read("memory.max_usage_in_bytes" if self.v1 else "memory.peak").strip()
        return int(text) if text.isdigit() else 0

    def oom_kills(self) -> int:
        text = self.read("memory.oom_control" if self.v1 else "memory.events")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        for _ in range(50):  # the last process may still be leaving the group
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                import time

                time.sleep(0.1)


def parse_quantity(text: str) -> int:
    """A Kubernetes memory quantity (`512Mi`, `2Gi`, `1G`, `1000`) in bytes."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
             "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}  # fmt: skip
    for suffix, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text))


if __name__ == "__main__":
    main()
