"""`intraskill bank ...` and `intraskill chunk ...` against a real registry process.

Expected values come from what the test itself wrote through the registry client (banks, rho,
versions, alias moves) and from the operator guide's promises (stale ETag -> "re-run show").
"""

from __future__ import annotations

import json

import pytest

from shared.apps.operator.bank_cli import main as bank
from shared.apps.operator.chunk_cli import main as chunk
from shared.contracts.registry_api.client import RegistryClient
from tests.operator.live_registry import live_registry

PRICE = {
    "title": "Check the price before buying",
    "applies_when": "the task states a budget",
    "procedure": ["open the item page", "compare the selected option's price with the budget"],
    "verify": "the selected option's price is within budget",
    "avoid": "buying before every option axis is chosen",
}
QUERY = {
    "title": "搜索查询构建 - 显式约束整合",
    "applies_when": "任务包含明确属性约束时",
    "procedure": ["将所有核心属性约束整合为单一搜索查询词"],
    "verify": "验证搜索结果首屏是否出现匹配所有核心约束的商品",
    "avoid": "搜索词过于宽泛",
}
PRICE_V2 = {**PRICE, "verify": "the price shown after choosing every option is within budget"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request, tmp_path_factory):
    """A registry with S0 (bank 1) and its child (bank 2, one chunk rewritten, rho moved)."""
    with live_registry(request.param, tmp_path_factory.mktemp(request.param)) as live:
        with RegistryClient(live.url, live.tokens["operator"]) as client:
            price = client.create_chunk("price-check", PRICE)
            query = client.create_chunk("query-constraints", QUERY)
            s0 = client.create_bank(
                [
                    {"chunk_version_id": price.latest.id, "rho": 0.9, "coefficient": 0.06},
                    {"chunk_version_id": query.latest.id, "rho": 0.2, "coefficient": 0.01},
                ]
            )
            client.freeze_bank(s0.id)
            price2 = client.add_chunk_version(price.id, PRICE_V2)
            s1 = client.create_bank(
                [
                    {"chunk_version_id": price2.id, "rho": 0.9, "coefficient": 0.05},
                    {"chunk_version_id": query.latest.id, "rho": 0.55, "coefficient": 0.02},
                ],
                round=1,
                parent_bank_id=s0.id,
            )
            client.freeze_bank(s1.id)
            client.create_alias("current", s0.id, reason="cold start")
            etag = client.get_alias("current").etag
            client.move_alias("current", s1.id, reason="gate 1", if_match=etag)
            client.create_alias("production", s0.id, reason="first release")
        yield live, {"s0": s0.id, "s1": s1.id, "price": price.id, "query": query.id}


@pytest.fixture
def as_role(world, monkeypatch):
    live, _ = world

    def use(role: str) -> str:
        monkeypatch.setenv("INTRASKILL_REGISTRY_TOKEN", live.tokens[role])
        return live.url

    return use


def run(command, argv, capsys) -> tuple[int, str, str]:
    code = command(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_alias_prints_entries_and_the_etag_to_move_it_with(world, as_role, capsys):
    _, ids = world
    url = as_role("reader")
    code, out, _ = run(bank, ["show", "current", "--registry", url], capsys)
    assert code == 0
    assert f"alias current -> bank {ids['s1']}, revision 2" in out
    assert "price-check" in out and "0.55" in out and "搜索查询构建" in out
    code, out, _ = run(bank, ["show", "current", "--registry", url, "--json"], capsys)
    shown = json.loads(out)
    assert shown["summary"]["status"] == "frozen"
    assert [e["rho"] for e in shown["bank"]["entries"]] == [0.9, 0.55]
    assert shown["alias"]["revision"] == 2


def test_diff_against_parent_names_the_rewrite_and_the_rho_change(world, as_role, capsys):
    _, ids = world
    url = as_role("reader")
    code, out, _ = run(bank, ["diff", str(ids["s1"]), "--registry", url, "--json"], capsys)
    change = json.loads(out)
    assert code == 0 and change["from_bank_id"] == ids["s0"]
    assert [(c["slug"], c["from_version"], c["to_version"]) for c in change["rewritten"]] == [
        ("price-check", 1, 2)
    ]
    assert [(c["slug"], c["from_rho"], c["to_rho"]) for c in change["rho_changes"]] == [
        ("query-constraints", 0.2, 0.55)
    ]
    code, out, _ = run(bank, ["diff", "current", "--registry", url], capsys)
    assert "rewritten" in out and "v1 -> v2" in out and "0.20 -> 0.55" in out
    code, _, err = run(bank, ["diff", str(ids["s0"]), "--registry", url], capsys)
    assert code == 1 and "no parent" in err and "--against" in err


def test_render_injects_only_the_chunks_switched_on(world, as_role, capsys):
    _, ids = world
    url = as_role("reader")
    code, out, _ = run(
        bank, ["render", str(ids["s0"]), "--inclusion", "0,1", "--registry", url], capsys
    )
    assert code == 0
    assert "[可选策略提示]" in out and QUERY["title"] in out and PRICE["title"] not in out
    code, _, err = run(bank, ["render", "1", "--inclusion", "1,2", "--registry", url], capsys)
    assert code == 1 and "0s and 1s" in err


def test_promote_then_a_stale_etag_says_someone_moved_it(world, as_role, capsys):
    live, ids = world
    url = as_role("operator")
    with RegistryClient(live.url, live.tokens["reader"]) as reader:
        stale = reader.get_alias("production").etag
    code, out, _ = run(
        bank, ["promote", str(ids["s1"]), "--reason", "gate 1 passed", "--registry", url], capsys
    )
    assert code == 0 and f"bank {ids['s0']} -> bank {ids['s1']}" in out
    code, _, err = run(
        bank,
        ["promote", str(ids["s0"]), "--reason", "x", "--expect", stale, "--registry", url],
        capsys,
    )
    assert code == 1
    assert (
        "someone moved alias production" in err
        and "re-run `intraskill bank show production`" in err
    )
    with RegistryClient(live.url, live.tokens["reader"]) as reader:
        assert reader.get_alias("production").bank_id == ids["s1"]  # the stale move wrote nothing

    code, out, _ = run(
        bank, ["rollback", "production", "--reason", "regression", "--registry", url], capsys
    )
    assert code == 0 and f"bank {ids['s1']} -> bank {ids['s0']}" in out
    code, out, _ = run(bank, ["history", "production", "--json", "--registry", url], capsys)
    actions = [(e["action"], e["to_bank_id"], e["reason"]) for e in json.loads(out)]
    assert actions[-2:] == [
        ("move", ids["s1"], "gate 1 passed"),
        ("rollback", ids["s0"], "regression"),
    ]


def test_promote_refuses_a_draft_unless_told_to_freeze_it(world, as_role, capsys):
    live, ids = world
    url = as_role("operator")
    with RegistryClient(live.url, live.tokens["operator"]) as client:
        draft = client.create_bank(from_bank_id=ids["s1"])
    argv = ["promote", str(draft.id), "--alias", "staging", "--reason", "try", "--registry", url]
    code, _, err = run(bank, argv, capsys)
    assert code == 1 and "draft" in err and "--freeze" in err
    code, out, _ = run(bank, [*argv, "--freeze"], capsys)
    assert code == 0 and f"staging: created -> bank {draft.id}" in out
    code, out, _ = run(bank, ["list", "--json", "--registry", url], capsys)
    listed = {b["id"]: b["status"] for b in json.loads(out)["items"]}
    assert listed[draft.id] == "frozen"


def test_chunk_show_and_history_by_slug(world, as_role, capsys):
    _, ids = world
    url = as_role("reader")
    code, out, _ = run(chunk, ["show", "price-check", "--registry", url], capsys)
    assert code == 0 and "version 2" in out and PRICE_V2["verify"] in out
    code, out, _ = run(
        chunk, ["show", "price-check", "--version", "1", "--json", "--registry", url], capsys
    )
    assert json.loads(out)["content"] == PRICE
    code, out, _ = run(chunk, ["history", str(ids["price"]), "--json", "--registry", url], capsys)
    assert [v["version"] for v in json.loads(out)] == [1, 2]
    code, _, err = run(chunk, ["show", "no-such-slug", "--registry", url], capsys)
    assert code == 1 and "no chunk with slug" in err


def test_errors_say_what_to_do(world, as_role, capsys, monkeypatch):
    _, ids = world
    url = as_role("reader")
    code, _, err = run(
        bank,
        ["promote", str(ids["s0"]), "--alias", "readers-try", "--reason", "x", "--registry", url],
        capsys,
    )
    assert code == 1 and "role may not" in err and "operator token" in err
    code, _, err = run(bank, ["show", "999", "--registry", url], capsys)
    assert code == 1 and "bank 999 does not exist" in err
    monkeypatch.setenv("INTRASKILL_REGISTRY_TOKEN", "not-a-token")
    code, _, err = run(bank, ["show", "current", "--registry", url], capsys)
    assert code == 1 and "refused the token" in err and "INTRASKILL_REGISTRY_TOKEN" in err
    monkeypatch.delenv("INTRASKILL_REGISTRY_TOKEN")
    code, _, err = run(bank, ["show", "current", "--registry", url], capsys)
    assert code == 1 and "no registry token" in err


def test_an_unreachable_registry_says_how_to_start_it(monkeypatch, capsys):
    from shared.kit.loopback import free_port

    monkeypatch.setenv("INTRASKILL_REGISTRY_TOKEN", "t")
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run(bank, ["show", "current", "--registry", url], capsys)
    assert code == 1 and f"cannot reach the registry at {url}" in err
    assert "intraskill registry serve" in err


def test_bank_s0_seeds_the_stand_in_once_with_the_trainer_configs_q(world, as_role, capsys):
    """The deployment's bank-s0 Job (issue 30): a frozen S_0 behind the alias with the trainer
    config's q, once; a second run, or an alias that already exists, writes nothing."""
    live, ids = world
    url = as_role("operator")
    config = "deploy/k8s/overlays/dev/trainer.toml"
    argv = ["s0", "--stand-in", f"--trainer-config={config}", "--alias=s0-test", "--registry", url]
    code, out, err = run(bank, argv, capsys)
    assert code == 0, err
    with RegistryClient(url, live.tokens["operator"]) as client:
        s0 = client.get_bank(client.get_alias("s0-test").bank_id)
        banks_before = client.list_banks().total
    assert s0.frozen_at is not None and s0.q == 0.2 and len(s0.entries) == 4  # dev's q = 0.2
    assert "STAND-IN" in out
    code, out, _ = run(bank, argv, capsys)
    assert code == 0 and "nothing to do" in out and f"bank {s0.id}" in out
    code, out, _ = run(bank, [*argv[:-3], "--alias=current", "--registry", url], capsys)
    assert code == 0 and f"bank {ids['s1']}" in out
    with RegistryClient(url, live.tokens["operator"]) as client:
        assert client.list_banks().total == banks_before
