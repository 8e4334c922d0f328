"""Issue 20 item 6 and issue 30's scoped tokens, in the rendered trees: each service admits the
grant list of its own Secret (`<service>-auth`) and sends tokens from it; no pod reads another
service's Secret; in dev every service token is granted at exactly one service, with the role
the route it calls wants (checked against the services' own role tables); the vLLM servers take
their API key from a Secret their clients send, and only the trainer and the evaluator (and,
with the analyst-policy-server component, the analyst at vllm-eval) reach a vLLM pod."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from services.analyst import deps as analyst_deps
from services.evaluator import deps as evaluator_deps
from tests.deploy.test_k8s import TREES, containers, of_kind, pod_labels
from tests.deploy.test_monitoring import matches

SERVICE_TREES = [tree for tree in TREES if tree != "prod/fill-models"]
SERVICES = ("registry", "evaluator", "analyst", "trainer")
AUTH_SECRETS = {f"{service}-auth" for service in SERVICES}
GRANT_KEYS = {
    "registry": "REGISTRY_TOKENS",
    "evaluator": "EVALUATOR_TOKENS",
    "analyst": "ANALYST_TOKENS",
}
VLLM_KEY = {"secretKeyRef": {"name": "vllm-api-key", "key": "api-key"}}


def env_of(docs: list[dict], name: str) -> dict[str, dict]:
    """Each workload named `name` (or, for the trainer, its TrainingRuntime): the first
    container's variables by name (their whole entries, valueFrom included)."""
    runtimes = {"trainer": "intraskill-torch"}
    found = {}
    for doc in docs:
        if doc["metadata"]["name"] in (name, runtimes.get(name)) and doc["kind"] != "Service":
            for _, kind, container in containers(doc):
                if kind == "containers":
                    found |= {v["name"]: v for v in container.get("env", [])}
                    break
    assert found, f"no workload {name}"
    return found


def unhashed(name: str) -> str:
    """A generated Secret's name without the content hash kustomize appends (dev)."""
    return re.sub(r"-[a-z0-9]{10}$", "", name)


def source(variable: dict) -> dict:
    """Where a variable's value comes from: a literal, or a Secret (by its unhashed name)."""
    if "valueFrom" not in variable:
        return {"value": variable.get("value")}
    ref = dict(variable["valueFrom"]["secretKeyRef"])
    return {"secretKeyRef": {**ref, "name": unhashed(ref["name"])}}


def auth(service: str, key: str) -> dict:
    return {"secretKeyRef": {"name": f"{service}-auth", "key": key}}


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_each_service_admits_the_grants_of_its_own_secret(trees, tree) -> None:
    docs = trees[tree]
    for service, key in GRANT_KEYS.items():
        assert source(env_of(docs, service)[key]) == auth(service, key), service


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_every_caller_sends_its_tokens_from_its_own_secret(trees, tree) -> None:
    docs = trees[tree]
    for service, variable, key in (
        ("trainer", "TRAINER_REGISTRY_TOKEN", "registry-token"),
        ("trainer", "TRAINER_EVALUATOR_TOKEN", "evaluator-token"),
        ("trainer", "TRAINER_ANALYST_TOKEN", "analyst-token"),
        ("analyst", "ANALYST_REGISTRY_TOKEN", "registry-token"),
        ("analyst", "ANALYST_EVALUATOR_TOKEN", "evaluator-token"),
        ("evaluator", "EVALUATOR_REGISTRY_TOKEN", "registry-token"),
    ):
        assert source(env_of(docs, service)[variable]) == auth(service, key), variable


def secret_names(spec: dict) -> set[str]:
    """Every Secret a pod reads: env, envFrom and volumes, in all its containers."""
    names = {
        volume["secret"]["secretName"] for volume in spec.get("volumes", []) if "secret" in volume
    }
    for container in spec.get("initContainers", []) + spec.get("containers", []):
        for variable in container.get("env", []):
            ref = variable.get("valueFrom", {}).get("secretKeyRef")
            names |= {ref["name"]} if ref else set()
        names |= {e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e}
    return {unhashed(name) for name in names}


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_no_pod_reads_another_services_secret(trees, tree) -> None:
    from tests.deploy.test_first_apply import pod_specs

    services = {"intraskill-torch": "trainer"}  # the multi-node trainer's runtime
    seen = set()
    for workload, spec in pod_specs(trees[tree]):
        service = services.get(workload, workload)
        read = secret_names(spec) & AUTH_SECRETS
        assert read <= {f"{service}-auth"}, f"{tree}: {workload} reads {sorted(read)}"
        seen |= read
    assert seen == AUTH_SECRETS  # and each service reads its own


def test_each_dev_service_token_is_valid_at_one_service_only(trees) -> None:
    """A token a service sends (`<audience>-token` in its own Secret) hashes to a grant with
    the sender's role in the audience's list and in no other service's: a token leaked from
    one service opens no other."""
    secrets = dev_secrets(trees)
    grants = {
        service: {g["token_sha256"]: g["role"] for g in json.loads(secrets[f"{service}-auth"][key])}
        for service, key in GRANT_KEYS.items()
    }
    sent = []
    for holder in SERVICES:
        for key, token in secrets[f"{holder}-auth"].items():
            if not key.endswith("-token"):
                continue
            audience, digest = (
                key.removesuffix("-token"),
                hashlib.sha256(token.encode()).hexdigest(),
            )
            assert grants[audience].get(digest) == holder, f"{holder}'s {key}"
            others = [s for s in grants if s != audience and digest in grants[s]]
            assert others == [], f"{holder}'s {key} is also valid at {others}"
            sent.append(token)
    assert len(sent) == len(set(sent)) == 6  # evaluator 1, analyst 2, trainer 3


def dev_secrets(trees) -> dict[str, dict[str, str]]:
    return {
        unhashed(name): {k: base64.b64decode(v).decode() for k, v in s["data"].items()}
        for name, s in of_kind(trees["dev"], "Secret").items()
    }


def test_dev_tokens_have_the_roles_the_routes_admit(trees) -> None:
    """The dev overlay's tokens, resolved through its Secrets, hashed and looked up in the
    grant list of the service they are sent to, carry the roles the evaluator's and the
    analyst's own role tables admit; the operator's token is an operator at all three."""
    docs, secrets = trees["dev"], dev_secrets(trees)

    def role_at(service: str, token: str) -> str | None:
        grants = json.loads(secrets[f"{service}-auth"][GRANT_KEYS[service]])
        digest = hashlib.sha256(token.encode()).hexdigest()
        return {g["token_sha256"]: g["role"] for g in grants}.get(digest)

    def role(workload: str, variable: str, service: str) -> str | None:
        ref = source(env_of(docs, workload)[variable])["secretKeyRef"]
        return role_at(service, secrets[ref["name"]][ref["key"]])

    gate, gate_a = evaluator_deps.SUBMITTERS["gate"], evaluator_deps.SUBMITTERS["gate-a"]
    assert role("trainer", "TRAINER_EVALUATOR_TOKEN", "evaluator") == gate.value
    assert role("analyst", "ANALYST_EVALUATOR_TOKEN", "evaluator") == gate_a.value
    compile_roles = analyst_deps.TRAINER.dependency.roles  # type: ignore[attr-defined]
    assert [role("trainer", "TRAINER_ANALYST_TOKEN", "analyst")] == compile_roles
    operator = secrets["operator-token"]["OPERATOR_TOKEN"]
    assert {role_at(service, operator) for service in GRANT_KEYS} == {"operator"}


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_vllm_servers_take_their_api_key_from_a_secret_their_clients_send(trees, tree) -> None:
    docs = trees[tree]
    servers = [
        (doc, container)
        for doc in docs
        for _, _, container in containers(doc)
        if container.get("image", "").startswith("vllm/vllm-openai:")
    ]
    assert {doc["metadata"]["name"] for doc, _ in servers} == {"vllm-rollout", "vllm-eval"}
    for doc, container in servers:
        env = {v["name"]: v for v in container.get("env", [])}
        # vLLM's --api-key falls back to VLLM_API_KEY: from the Secret, never in the arguments
        assert source(env["VLLM_API_KEY"]) == VLLM_KEY, doc["metadata"]["name"]
        assert "--api-key" not in container["args"]
    assert source(env_of(docs, "trainer")["TRAINER_VLLM_API_KEY"]) == VLLM_KEY
    assert source(env_of(docs, "evaluator")["EVALUATOR_OPENAI_API_KEY"]) == VLLM_KEY
    analyst = env_of(docs, "analyst")
    if "ANALYST_POLICY_SERVER_URL" in analyst:
        assert source(analyst["ANALYST_POLICY_SERVER_API_KEY"]) == VLLM_KEY
    if tree == "dev":
        (secret,) = [s for n, s in of_kind(docs, "Secret").items() if unhashed(n) == "vllm-api-key"]
        assert base64.b64decode(secret["data"]["api-key"]).decode()  # an empty key: no check


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_only_the_trainer_and_the_evaluator_reach_a_vllm_pod(trees, tree) -> None:
    """Every policy that selects a vLLM pod admits pods labelled trainer or evaluator and
    nothing else (no namespace, no address block, no rule open to all): the weight-reload
    endpoints answer whoever reaches the port. The one exception is designed: where the
    analyst runs its retries on vllm-eval (ANALYST_POLICY_SERVER_URL), one policy admits it
    to vllm-eval, and nowhere else."""
    docs = trees[tree]
    on_server = env_of(docs, "analyst").get("ANALYST_POLICY_SERVER_URL", {}).get("value")
    assert on_server in (None, "http://vllm-eval:8000/v1")
    policies = list(of_kind(docs, "NetworkPolicy").values())
    servers = [
        labels
        for doc in docs
        if doc["metadata"]["name"] in ("vllm-rollout", "vllm-eval")
        for labels in pod_labels(doc)
    ]
    assert len(servers) == 2
    admitting, analyst_paths = 0, 0
    for labels in servers:
        for policy in policies:
            if not matches(policy["spec"]["podSelector"], labels):
                continue
            for rule in policy["spec"].get("ingress", []):
                peers = rule.get("from", [])
                assert peers, f"{policy['metadata']['name']} admits everyone"
                for peer in peers:
                    assert set(peer) == {"podSelector"}, policy["metadata"]["name"]
                    names = {
                        value
                        for expression in peer["podSelector"].get("matchExpressions", [])
                        for value in expression["values"]
                    } | set(peer["podSelector"].get("matchLabels", {}).values())
                    if names == {"analyst"}:
                        assert labels["app.kubernetes.io/name"] == "vllm-eval"
                        assert rule["ports"] == [{"port": 8000}]
                        analyst_paths += 1
                        continue
                    assert names == {"trainer", "evaluator"}, policy["metadata"]["name"]
                admitting += 1
    assert analyst_paths == (1 if on_server else 0)
    assert admitting == len(servers) + analyst_paths  # one rule each (the default denies the rest)
