"""Services as loopback ports: one per port of each Service, and every URL, `--port` and port
setting of a container moved onto them. A URL naming a port its Service does not serve fails,
as its connection would fail in the cluster."""

from __future__ import annotations

import re

from shared.apps.deploy.smoke.pods import SmokeFailure, Unit
from shared.kit.loopback import free_port

DEFAULT_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "postgres": 5432}


class ServicePorts:
    """The render's Services, each port of each on a loopback port of its own."""

    def __init__(self, services: dict[str, dict]) -> None:
        self.services = services
        self.ports: dict[tuple[str, int], int] = {
            (name, int(port["port"])): free_port()
            for name, service in services.items()
            for port in service["spec"]["ports"]
        }

    def of(self, service: str) -> list[int]:
        """The loopback ports standing for `service`'s ports."""
        return [loopback for (name, _), loopback in self.ports.items() if name == service]

    def map_urls(self, text: str, where: str = "") -> str:
        """Each URL naming a Service -> the loopback port of that Service port; a port the
        Service does not serve fails, naming `where`."""
        names = "|".join(sorted(map(re.escape, self.services), key=len, reverse=True))
        if not names:
            return text
        pattern = rf"(\w+)://([^@/\s]+@)?({names})(?![\w-])(?:\.[\w.-]+)?(?::(\d+))?"
        return re.sub(pattern, lambda match: self.url(match, where), text)

    def url(self, match: re.Match, where: str) -> str:
        scheme, userinfo, name, port = match.group(1, 2, 3, 4)
        number = int(port) if port else DEFAULT_PORTS.get(scheme, 80)
        if (name, number) not in self.ports:
            served = sorted(p for n, p in self.ports if n == name)
            raise SmokeFailure(
                where or "a rendered value",
                f"{match.group(0)!r} names port {number}, but Service {name} serves "
                f"{', '.join(map(str, served))}: the connection would fail in the cluster",
            )
        return f"{scheme}://{userinfo or ''}127.0.0.1:{self.ports[(name, number)]}"

    def services_of(self, unit: Unit) -> list[dict]:
        labels = unit.workload["spec"]["template"]["metadata"]["labels"]
        return [
            service
            for service in self.services.values()
            if service["spec"]["selector"].items() <= labels.items()
        ]

    def loopback_for(self, unit: Unit, container_port: str | int) -> int | None:
        """The loopback port standing for the Service port that forwards to this container
        port (given by name or number), if a Service fronts it."""
        declared = unit.container.get("ports", [])
        match = next(
            (p for p in declared if container_port in (p.get("name"), p["containerPort"])), None
        )
        if match is None:
            return None
        refs = {match.get("name"), match["containerPort"]}
        for service in self.services_of(unit):
            for port in service["spec"]["ports"]:
                if port.get("targetPort", port["port"]) in refs:
                    return self.ports[(service["metadata"]["name"], int(port["port"]))]
        return None

    def port_settings(self, unit: Unit) -> dict[str, str]:
        """Each declared container port (as text, how `--port 8000` or a setting such as
        REGISTRY_METRICS_PORT names it) -> the loopback port of the Service port fronting it,
        else a free one (two smokes on one machine must not both bind the trainer's 9400)."""
        out = {}
        for port in unit.container.get("ports", []):
            loopback = self.loopback_for(unit, port["containerPort"])
            out[str(port["containerPort"])] = str(loopback or free_port())
        return out
