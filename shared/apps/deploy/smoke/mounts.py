"""A pod's volumes as local folders: claims shared between pods, a ConfigMap written out
read-only (the trainer's config with the TEST DOUBLE's changes), each folder owned as the
kubelet's fsGroup makes it; the image's passwd entry; container paths mapped to the folders."""

from __future__ import annotations

import os
import re
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from shared.apps.deploy.manifests import REPO
from shared.apps.deploy.smoke.pods import Unit


@dataclass
class Volumes:
    """Container path -> local folder (its mounts and the image's paths), and the folders it
    may write and those mounted read-only."""

    folders: dict[str, Path]
    writable: list[str] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)


def config_with_test_double(key: str, text: str) -> str:
    """The trainer's config with the TEST DOUBLE substitutions: the procedural policy on CPU,
    one round, no rollout servers, no warm start; any other file as it is."""
    if key != "trainer.toml":
        return text
    for name, value in (("policy", '"procedural"'), ("device", '"cpu"'), ("rounds", "1")):
        text = re.sub(rf"(?m)^{name} = .*$", f"{name} = {value}", text)
    text = re.sub(r"(?ms)^\[rollout_servers\].*?(?=^\[|\Z)", "", text)
    return re.sub(r"(?ms)(^\[warm_start\].*?^enabled = )true", r"\1false", text)


def map_paths(text: str, folders: dict[str, Path]) -> str:
    """Container paths to local folders, in one pass (a mapped folder may itself lie under a
    container path such as /tmp), the longest prefix first."""
    prefixes = "|".join(re.escape(p) for p in sorted(folders, key=len, reverse=True))
    pattern = rf"(?<![\w.-])({prefixes})(?![\w.-])"
    return re.sub(pattern, lambda match: str(folders[match.group(1)]), text)


class PodFolders:
    """The folders of every pod under one work folder; safe to use from the pods' threads."""

    def __init__(self, work: Path, config_maps: dict[str, dict[str, str]]) -> None:
        self.work = work
        self.config_maps = config_maps
        self.lock = threading.Lock()

    def volumes(self, unit: Unit, venv_bin: Path | None) -> Volumes:
        """The container's mounts (and /app/configs, /opt/venv/bin from its image)."""
        spec = unit.pod_spec
        by_name = {v["name"]: v for v in spec.get("volumes", [])}
        templates = {
            t["metadata"]["name"] for t in unit.workload["spec"].get("volumeClaimTemplates", [])
        }
        out = Volumes({"/app/configs": REPO / "configs"})
        if venv_bin is not None:
            out.folders["/opt/venv/bin"] = venv_bin
        for mount in unit.container.get("volumeMounts", []):
            volume = by_name.get(mount["name"], {})
            folder = self.folder(unit, mount["name"], volume, templates)
            out.folders[mount["mountPath"]] = folder
            read_only = mount.get("readOnly") or "configMap" in volume or "secret" in volume
            (out.read_only if read_only else out.writable).append(str(folder))
        return out

    def folder(self, unit: Unit, name: str, volume: dict, templates: set[str]) -> Path:
        """One volume's folder, made on first use: a claim's is shared by the pods naming it."""
        if "persistentVolumeClaim" in volume:
            folder = self.work / "claims" / volume["persistentVolumeClaim"]["claimName"]
        elif name in templates:
            folder = self.work / "claims" / f"{name}-{unit.pod}-0"
        else:
            folder = self.work / "pods" / unit.pod / name
        with self.lock:
            if "configMap" in volume and not folder.exists():
                self.write_config_map(volume["configMap"]["name"], folder)
            if not folder.exists():
                folder.mkdir(parents=True)
                self.own(folder, unit)
        return folder

    def write_config_map(self, name: str, folder: Path) -> None:
        folder.mkdir(parents=True)
        for key, value in self.config_maps[name].items():
            path = folder / key
            path.write_text(config_with_test_double(key, value))
            path.chmod(0o444)
        folder.chmod(0o555)

    @staticmethod
    def own(folder: Path, unit: Unit) -> None:
        """A volume as the kubelet hands it over: the pod's user (or fsGroup) may write it."""
        user = unit.user()
        if os.geteuid() == 0:
            os.chown(folder, user.uid, user.groups[0] if user.groups else user.gid)
        folder.chmod(0o770 | stat.S_ISGID)

    def home(self, unit: Unit) -> Path:
        """The image's HOME and WORKDIR: on a read-only root filesystem, not writable."""
        home = self.work / "pods" / unit.pod / "home"
        with self.lock:
            if not home.exists():
                home.mkdir(parents=True)
                home.chmod(0o555)
        return home

    def passwd(self, unit: Unit) -> Path:
        """This machine's /etc/passwd plus the image's user for the pod's uid (the images run
        `useradd --uid 10001 app`; the postgres image has its postgres user)."""
        user = unit.user()
        path = self.work / "passwd" / f"{user.uid}"
        with self.lock:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                lines = Path("/etc/passwd").read_text().splitlines()
                if not any(line.split(":")[2:3] == [str(user.uid)] for line in lines):
                    name = "postgres" if unit.is_postgres else "app"
                    lines.append(f"{name}:x:{user.uid}:{user.gid}::/home/{name}:/usr/sbin/nologin")
                path.write_text("\n".join(lines) + "\n")
                path.chmod(0o644)
        return path
