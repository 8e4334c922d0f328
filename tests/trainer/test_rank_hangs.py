"""The multi-rank paths that used to hang now fail fast or wait where waiting is right.

Specification (issue 32, docs/trainer.md "Scale-out: ranks and precision"):
- FSDP with more than one rank and in-process rollouts is refused before any work, on every
  rank, with a message that names the fix (rollout servers); so is the warm start under ranks;
- a failed write by rank 0 (weights, optimizer state) reaches every rank at once: the followers
  raise `LeaderFailed` instead of waiting in a barrier until the collective timeout;
- a follower waits for the leader's next call longer than the collective timeout (the leader
  may work alone for hours: rollouts, a gate), while the timeout bounds real collectives.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.trainer.config import TrainerConfig
from services.trainer.distributed import launch_problem

REPO = Path(__file__).resolve().parents[2]


def test_fsdp_over_ranks_with_in_process_rollouts_is_refused():
    problem = launch_problem(ranks=2, sharded=True, in_process_rollouts=True, warm_start=False)
    assert problem is not None and "FSDP" in problem and "[rollout_servers]" in problem
    assert (
        launch_problem(ranks=2, sharded=True, in_process_rollouts=False, warm_start=False) is None
    )
    assert (
        launch_problem(ranks=2, sharded=False, in_process_rollouts=True, warm_start=False) is None
    )
    assert launch_problem(ranks=1, sharded=True, in_process_rollouts=True, warm_start=False) is None


def test_the_warm_start_under_ranks_is_refused():
    problem = launch_problem(ranks=2, sharded=False, in_process_rollouts=False, warm_start=True)
    assert problem is not None and "warm start" in problem
    assert launch_problem(ranks=1, sharded=False, in_process_rollouts=True, warm_start=True) is None


def test_the_collective_timeout_is_minutes_and_configurable():
    assert TrainerConfig().collective_timeout_s <= 30 * 60
    assert TrainerConfig(collective_timeout_s=90.0).collective_timeout_s == 90.0


MODEL_CONFIG = """
model = "tiny"
policy = "model"
env_preset = "test"
rounds = 1
steps_per_round = 1
group_size = 2
groups_per_wave = 2
groups_admitted = 1
global_batch = 2
[gate]
val_tasks = 2
"""


@pytest.mark.parametrize("case", ["fsdp", "warm_start"])
def test_two_ranks_refuse_at_once_instead_of_hanging(tmp_path, case):
    """The real CLI under torchrun: both ranks exit with the refusal, in far less time than a
    hang's collective timeout (600 s)."""
    config = tmp_path / "config.toml"
    text = MODEL_CONFIG + ("[warm_start]\nenabled = true\n" if case == "warm_start" else "")
    config.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    if case == "fsdp":
        env["ACCELERATE_USE_FSDP"] = "true"  # what accelerate launch sets for an FSDP config
    torchrun = Path(sys.executable).with_name("torchrun")
    began = time.monotonic()
    done = subprocess.run(
        [str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "shared.apps.cli", "train",
         "run", "--config", str(config), "--out", str(tmp_path / "run")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode != 0
    expected = "FSDP over 2 ranks" if case == "fsdp" else "warm start cannot run under 2 ranks"
    assert done.stderr.count(expected) == 2, done.stderr[-3000:]  # each rank refused
    assert not (tmp_path / "run" / "services").exists()  # nothing started
    assert time.monotonic() - began < 300


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank(rank: int, port: int, scenario: str, folder: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
        WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
    )  # fmt: skip
    import services.trainer.distributed as distributed

    distributed.start_ranks("cpu", wait_s=COLLECTIVE_TIMEOUT_S)
    outcome = Path(folder) / f"rank-{rank}"
    began = time.monotonic()
    try:
        if scenario == "failed_write":

            def write() -> None:
                raise OSError("No space left on device")

            distributed.main_process_writes(write, "weights to /full")
            outcome.write_text("no error")
        else:  # the leader works alone past the collective timeout, then calls
            distributed.FOLLOWER_POLL_S = 1.0
            if rank == 0:
                time.sleep(3 * COLLECTIVE_TIMEOUT_S)
                distributed.announce("save", "folder")
                outcome.write_text("announced")
            else:
                command, args = distributed.next_command()
                outcome.write_text(f"{command} {args}")
    except Exception as error:
        outcome.write_text(
            f"{type(error).__name__}: {error} after {time.monotonic() - began:.0f} s"
        )
    import torch.distributed as dist

    dist.barrier()  # neither rank leaves while the other may still be receiving
    os._exit(0)  # gloo's threads can outlive interpreter shutdown (test_distributed_optimizer)


COLLECTIVE_TIMEOUT_S = 5.0


def _spawn(scenario: str, folder: Path) -> list[str]:
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(_free_port(), scenario, str(folder)), nprocs=2, join=True)
    return [(folder / f"rank-{rank}").read_text() for rank in (0, 1)]


def test_a_failed_write_on_rank_0_fails_the_followers_at_once(tmp_path):
    leader, follower = _spawn("failed_write", tmp_path)
    assert leader.startswith("OSError: No space left on device")
    assert follower.startswith("LeaderFailed: rank 0 failed to write weights to /full")
    assert float(follower.split(" after ")[1].split()[0]) < COLLECTIVE_TIMEOUT_S


def test_a_follower_waits_past_the_collective_timeout_for_the_next_call(tmp_path):
    follower = _spawn("long_wait", tmp_path)[1]
    assert follower == "save ('folder',)"
