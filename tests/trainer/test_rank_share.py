"""How a step's micro-batches are shared out over ranks: each micro-batch on exactly one rank,
and every rank the same number of turns (padding turns are None), since every forward and
backward is a collective that all ranks must join."""

from __future__ import annotations

import pytest

from services.trainer.distributed import share_of


@pytest.mark.parametrize("size", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [0, 1, 2, 5, 8])
def test_every_micro_batch_goes_to_one_rank_and_every_rank_takes_as_many_turns(size, count):
    batches = [[index] for index in range(count)]
    shares = [share_of(batches, rank, size) for rank in range(size)]
    assert len({len(share) for share in shares}) == 1
    assert len(shares[0]) == -(-count // size)  # no rank pads more than it must
    dealt = sorted(batch[0] for share in shares for batch in share if batch is not None)
    assert dealt == list(range(count))


def test_one_rank_keeps_the_plan_as_it_is():
    batches = [[2, 0], [1], [3]]
    assert share_of(batches, 0, 1) == batches
