"""`intraskill deploy smoke --overlay dev`: run the rendered manifests' containers as processes.

No cluster and no container engine here, so the manifests are proved by running them: the
overlay is rendered with kustomize, and every pod starts at once, as Kubernetes starts them:
the overlay's Postgres, the registry-migrate Job, the Deployments (each pod's init containers to
completion, then its containers until their readiness probes answer), the bank-s0 Job and the
trainer Job, which must finish one round with a gate. Each IntraSkill container runs with
exactly its rendered command and args (or its image's ENTRYPOINT and CMD), its rendered
environment with ConfigMap and Secret values resolved, over its image's ENV, and like its pod:

* with only its image's Python packages: a venv built from its Dockerfile's install line
  (`image_venvs.py`), at /opt/venv;
* as the pod's user (runAsUser, runAsGroup, fsGroup: uid 10001), in a memory cgroup whose
  limit is its `limits.memory` (the kernel OOM-kills it as in the pod; its peak is reported);
* in a private mount namespace whose root is read-only, with only its writable volumes
  writable (`sandbox.py`);
* reaching other pods only through a Service's own port: `http://registry:8000` becomes the
  loopback port standing for the registry Service's port 8000, and a URL naming a port the
  Service does not serve fails the smoke, as the connection would fail in the cluster;
* on the overlay's own Postgres (its rendered env, password authentication for TCP, its init
  script), which the smoke starts as the postgres image's entrypoint does.

Modules: `pods` (what starts: each pod's containers, the failure naming one), `ports` (Services
as loopback ports, URLs checked against them), `mounts` (volumes as folders, the TEST DOUBLE's
trainer config), `postgres`, `fake_vllm` (the TEST DOUBLE behind vllm-eval), `containers` (one
container as a process: start, wait, stop), `run` (the whole smoke).

What still differs from a cluster is printed at the start and listed, with what each could
hide, in docs/deploy.md ("What the smoke still substitutes").
"""

from shared.apps.deploy.smoke.pods import SmokeFailure, Unit, plan
from shared.apps.deploy.smoke.run import Smoke, work_folder

__all__ = ["Smoke", "SmokeFailure", "Unit", "plan", "work_folder"]
