"""The evaluator's and the analyst's probes wait for no worker thread: FastAPI runs a sync
endpoint or a sync dependency on its thread pool, which a registry that does not answer can
fill (issue 34, item 3). So every probe endpoint, and everything it depends on, is a
coroutine; and both services serve their probes from this router."""

from __future__ import annotations

import inspect

import pytest

from shared.kit.readiness import probes_router


def calls(dependant):
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from calls(dependency)


@pytest.mark.parametrize("service, folder", [("evaluator", "jobs_dir"), ("analyst", "data_dir")])
def test_every_probe_and_what_it_depends_on_is_a_coroutine(service, folder):
    routes = {route.path: route for route in probes_router(service, folder).routes}
    assert set(routes) == {"/healthz", "/readyz"}
    for path, route in routes.items():
        assert inspect.iscoroutinefunction(route.endpoint), f"{service} {path} is sync"
        sync = [c for c in calls(route.dependant) if not inspect.iscoroutinefunction(c)]
        assert not sync, f"{service} {path} depends on sync {sync}"


def test_both_services_serve_their_probes_from_this_router():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for service, folder in (("evaluator", "jobs_dir"), ("analyst", "data_dir")):
        source = (root / "services" / service / "app.py").read_text()
        assert f'probes_router("{service}", "{folder}")' in source, service
