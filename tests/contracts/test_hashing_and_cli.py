import hashlib

from shared.apps import cli
from shared.contracts.hashing import content_hash, hash_uniform


def test_hash_uniform_is_the_reference_layout():
    digest = hashlib.sha256(b"20260901:state:3:skill-free").digest()
    assert (
        hash_uniform(20260901, "state", 3, "skill-free")
        == int.from_bytes(digest[:8], "big") / 2**64
    )


def test_hash_uniform_is_roughly_uniform():
    draws = [hash_uniform("seed", i) for i in range(4000)]
    assert 0.47 < sum(d < 0.5 for d in draws) / len(draws) < 0.53
    assert all(0.0 <= d < 1.0 for d in draws)


def test_content_hash_ignores_key_order_and_keeps_unicode():
    assert content_hash({"a": 1, "b": "白色"}) == content_hash({"b": "白色", "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


def test_cli_lists_commands_and_rejects_unknown(capsys):
    assert cli.main(["--help"]) == 0
    assert "registry" in capsys.readouterr().out
    assert cli.main(["no-such-command"]) == 2
    assert "unknown command" in capsys.readouterr().err
