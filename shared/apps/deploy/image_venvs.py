"""Each image's Python environment, built here from its Dockerfile's own install line.

The smoke runs a container with only what its image installs: the build stage's
`/opt/venv/bin/pip install ...` commands are read from the Dockerfile and replayed into a local
venv, with two translations: the project's wheel (`/wheels/intraskill-*.whl`, with its extras) is
a wheel built from this checkout, and an `--index-url` is dropped (pip's configured sources
serve the same pinned packages; torch==2.13.0 from local disk). A venv is built once per
distinct install (the commands and the project's declared dependencies) and reused:

    python -m shared.apps.deploy.image_venvs            # build every image's venv (minutes)
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shared.apps.deploy.manifests import DOCKER, IMAGE_PREFIX, REPO, parse_dockerfile

VENVS = Path(os.environ.get("INTRASKILL_SMOKE_VENVS", REPO / ".smoke-venvs"))
# The images' interpreter: python:3.11 (the trainer's Ubuntu base has 3.12; see docs/deploy.md)
PYTHONS = ("/usr/bin/python3.11", "/usr/local/bin/python3.11", shutil.which("python3.11"))
PROJECT_WHEEL = re.compile(r"^(?:\$\(ls )?/wheels/intraskill-\*\.whl\)?(\[[\w,]+\])?$")
READY = "built-from"


class ImageVenvError(RuntimeError):
    """An image's install line cannot be replayed here."""


def reachable_by_all(path: Path) -> bool:
    """Whether every user may run `path` (the pods' users are not root): each folder above its
    real path searchable by others, the file executable by others."""
    real = path.resolve()
    folders_ok = all(folder.stat().st_mode & 0o001 for folder in real.parents)
    return real.exists() and folders_ok and bool(real.stat().st_mode & 0o001)


def interpreter() -> str:
    """A Python 3.11 the pods' users may run (a pyenv under /root is root's alone)."""
    chosen = os.environ.get("INTRASKILL_SMOKE_PYTHON")
    if chosen:
        return chosen
    for candidate in PYTHONS:
        if candidate and reachable_by_all(Path(candidate)):
            return candidate
    raise ImageVenvError("no Python 3.11 that every user may run (set INTRASKILL_SMOKE_PYTHON)")


def service_of(reference: str) -> str:
    return reference.removeprefix(IMAGE_PREFIX).split(":")[0]


def install_commands(dockerfile: str) -> list[list[str]]:
    """The build stage's `/opt/venv/bin/pip install` commands, as argument lists after `install`."""
    text = re.sub(r"\\\n", " ", dockerfile)
    build = text[: text.rindex("\nFROM ")]
    commands = []
    for line in build.splitlines():
        if not line.strip().startswith("RUN "):
            continue
        for step in line.strip()[4:].split("&&"):
            words = shlex.split(step)
            if words[:2] == ["/opt/venv/bin/pip", "install"]:
                commands.append(words[2:])
    if not commands:
        raise ImageVenvError("no `/opt/venv/bin/pip install` in the build stage")
    return commands


def localize(arguments: list[str], wheel: str) -> list[str]:
    """One install command as it runs here: the checkout's wheel, pip's configured sources."""
    out: list[str] = []
    skip = False
    for word in arguments:
        if skip:
            skip = False
            continue
        if word in ("--index-url", "-i"):
            skip = True
            continue
        if word.startswith("--index-url="):
            continue
        match = PROJECT_WHEEL.match(word)
        out.append(f"{wheel}{match.group(1) or ''}" if match else word)
    return out


def dependencies_key() -> str:
    """What decides the project wheel's dependencies: the [project] table of pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pip_environment() -> dict[str, str]:
    """This process's environment without PYTHONPATH: with the checkout on it, pip finds the
    `intraskill.egg-info` that building the wheel leaves there, takes the project as installed
    ("Requirement already satisfied") and installs its dependencies but not the project."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def check_entrypoint(folder: Path, dockerfile: str) -> None:
    """The image's ENTRYPOINT command must be in the venv's bin, as the image's PATH finds it."""
    entrypoint = parse_dockerfile(dockerfile).entrypoint
    if (
        entrypoint
        and not entrypoint[0].startswith("/")
        and not (folder / "bin" / entrypoint[0]).exists()
    ):
        raise ImageVenvError(
            f"the install line left no {entrypoint[0]!r} (the image's ENTRYPOINT) in "
            f"{folder / 'bin'}"
        )


def venv_for(service: str, *, docker: Path = DOCKER, say=print) -> Path:
    """The venv of `intraskill/<service>`'s image (its Dockerfile in `docker`), built if this
    install was never built."""
    dockerfile = (docker / f"{service}.Dockerfile").read_text()
    commands = install_commands(dockerfile)
    python = interpreter()
    recipe = repr(([localize(c, "WHEEL") for c in commands], dependencies_key(), python))
    # images with the same install share one venv (registry, evaluator and console do)
    folder = VENVS / hashlib.sha256(recipe.encode()).hexdigest()[:12]
    if (folder / READY).exists():
        return folder
    say(f"  building {service}'s venv from its Dockerfile's install line: {folder}")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="intraskill-wheel-") as wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", wheels,
             str(REPO)], check=True, cwd=wheels, env=pip_environment(),
        )  # fmt: skip
        (wheel,) = Path(wheels).glob("intraskill-*.whl")
        subprocess.run([python, "-m", "venv", str(folder)], check=True)
        for command in commands:
            # --no-compile: bytecode is a cache, not a dependency (the images set
            # PYTHONDONTWRITEBYTECODE); compiling torch's files takes minutes on a busy machine
            argv = [str(folder / "bin" / "pip"), "install", "-q", "--no-compile",
                    *localize(command, str(wheel))]  # fmt: skip
            say("    " + shlex.join(argv))
            subprocess.run(argv, check=True, env=pip_environment())
    check_entrypoint(folder, dockerfile)
    # the container reads it as uid 10001
    subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)
    (folder / READY).write_text(recipe + "\n")
    return folder


def main() -> None:
    services = sys.argv[1:] or sorted(p.name.split(".")[0] for p in DOCKER.glob("*.Dockerfile"))
    for service in services:
        print(f"{service}: {venv_for(service)}", flush=True)


if __name__ == "__main__":
    main()
