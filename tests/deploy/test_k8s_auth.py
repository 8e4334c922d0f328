"""Issue 20 item 6, in the rendered trees: the evaluator and the analyst admit the namespace's
one grant list, every caller of theirs sends a token whose grant has the role the route wants
(dev's generated tokens, checked against the services' own role tables), the vLLM servers take
their API key from a Secret that the trainer and the evaluator send, and nothing but the trainer
and the evaluator reaches a vLLM pod."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from services.analyst import app as analyst_app
from services.evaluator import app as evaluator_app
from tests.deploy.test_k8s import TREES, containers, of_kind, pod_labels
from tests.deploy.test_monitoring import matches

SERVICE_TREES = [tree for tree in TREES if tree != "prod/fill-models"]
GRANTS = {"secretKeyRef": {"name": "registry-tokens", "key": "REGISTRY_TOKENS"}}
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


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_evaluator_and_analyst_admit_the_registrys_grant_list(trees, tree) -> None:
    docs = trees[tree]
    assert source(env_of(docs, "registry")["REGISTRY_TOKENS"]) == GRANTS
    assert source(env_of(docs, "evaluator")["EVALUATOR_TOKENS"]) == GRANTS
    assert source(env_of(docs, "analyst")["ANALYST_TOKENS"]) == GRANTS


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_every_caller_sends_its_token_from_a_secret(trees, tree) -> None:
    docs = trees[tree]
    trainer, analyst = env_of(docs, "trainer"), env_of(docs, "analyst")
    for env, name in (
        (trainer, "TRAINER_REGISTRY_TOKEN"),
        (trainer, "TRAINER_EVALUATOR_TOKEN"),
        (trainer, "TRAINER_ANALYST_TOKEN"),
        (analyst, "ANALYST_EVALUATOR_TOKEN"),
    ):
        assert source(env[name])["secretKeyRef"]["name"] == "service-tokens", name


def test_dev_tokens_have_the_roles_the_routes_admit(trees) -> None:
    """The dev overlay's tokens, resolved through its Secrets, hashed and looked up in its grant
    list, carry the roles the evaluator's and the analyst's own role tables admit."""
    docs = trees["dev"]
    secrets = {
        unhashed(name): {k: base64.b64decode(v).decode() for k, v in s["data"].items()}
        for name, s in of_kind(docs, "Secret").items()
    }
    grants = json.loads(secrets["registry-tokens"]["REGISTRY_TOKENS"])
    role_of = {grant["token_sha256"]: grant["role"] for grant in grants}

    def role(workload: str, variable: str) -> str:
        ref = source(env_of(docs, workload)[variable])["secretKeyRef"]
        token = secrets[ref["name"]][ref["key"]]
        return role_of[hashlib.sha256(token.encode()).hexdigest()]

    gate, gate_a = evaluator_app.SUBMITTERS["gate"], evaluator_app.SUBMITTERS["gate-a"]
    assert role("trainer", "TRAINER_EVALUATOR_TOKEN") == gate.value
    assert role("analyst", "ANALYST_EVALUATOR_TOKEN") == gate_a.value
    compile_roles = analyst_app.TRAINER.dependency.roles  # type: ignore[attr-defined]
    assert [role("trainer", "TRAINER_ANALYST_TOKEN")] == compile_roles
    operator = secrets["operator-token"]["OPERATOR_TOKEN"]
    assert role_of[hashlib.sha256(operator.encode()).hexdigest()] == "operator"


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
    if tree == "dev":
        (secret,) = [s for n, s in of_kind(docs, "Secret").items() if unhashed(n) == "vllm-api-key"]
        assert base64.b64decode(secret["data"]["api-key"]).decode()  # an empty key: no check


@pytest.mark.parametrize("tree", SERVICE_TREES)
def test_only_the_trainer_and_the_evaluator_reach_a_vllm_pod(trees, tree) -> None:
    """Every policy that selects a vLLM pod admits pods labelled trainer or evaluator and
    nothing else (no namespace, no address block, no rule open to all): the weight-reload
    endpoints answer whoever reaches the port."""
    docs = trees[tree]
    policies = list(of_kind(docs, "NetworkPolicy").values())
    servers = [
        labels
        for doc in docs
        if doc["metadata"]["name"] in ("vllm-rollout", "vllm-eval")
        for labels in pod_labels(doc)
    ]
    assert len(servers) == 2
    admitting = 0
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
                    assert names == {"trainer", "evaluator"}, policy["metadata"]["name"]
                admitting += 1
    assert admitting == len(servers)  # a policy admits them (the default denies the rest)
