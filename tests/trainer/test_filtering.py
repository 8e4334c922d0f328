"""The dynamic filter against the reference's rules (technical drop -> spread kept ->
zero-variance dropped only while remaining > target; abort after 8 failures in a row)."""

from __future__ import annotations

import pytest

from services.trainer.filtering import TooManyFailures, WaveFilter, group_verdict


def test_verdicts_in_priority_order():
    assert group_verdict([True, False], [1.0, 0.0]) == "technical_failure"
    assert group_verdict([True, True], [1.0, 0.0]) == "spread"
    assert group_verdict([True, True], [0.5, 0.5 + 1e-7]) == "zero_variance"
    assert group_verdict([True, True], [0.5, 0.5 + 2e-6]) == "spread"
    # "exceeds" epsilon: a spread of exactly epsilon is no spread
    assert group_verdict([True, True], [0.0, 1e-6]) == "zero_variance"
    assert group_verdict([True, True], [0.0, 0.5], epsilon=0.5) == "zero_variance"


def run_wave(verdicts, target=16):
    wave = WaveFilter(target=target)
    wave.submit(len(verdicts))
    admitted = [index for index, v in enumerate(verdicts) if wave.offer(index, v)]
    return wave, admitted


def test_zero_variance_groups_fill_only_when_too_few_remain():
    # 10 spread groups and 22 zero-variance ones: 16 zero-variance are dropped (remaining 32 -> 16)
    # and the last 6 fill the batch
    verdicts = ["zero_variance"] * 22 + ["spread"] * 10
    wave, admitted = run_wave(verdicts)
    assert len(admitted) == 16
    assert wave.dropped_zero_variance == 16 and wave.filler == 6
    assert admitted == list(range(16, 32))
    assert wave.kept == admitted  # the groups themselves, in the order they were admitted
    assert not wave.needs_wave()


def test_spread_groups_first_then_extra_groups_are_ignored():
    verdicts = ["spread"] * 20 + ["zero_variance"] * 12
    wave, admitted = run_wave(verdicts)
    assert admitted == list(range(16))
    assert wave.ignored == 16 and wave.filler == 0


def test_technical_failures_are_never_filler_and_force_another_wave():
    verdicts = (["technical_failure"] * 7 + ["spread"]) * 2 + ["zero_variance"] * 16
    wave, admitted = run_wave(verdicts)
    # 14 technical drops leave 18 remaining: 2 zero-variance drops, then 14 fillers
    assert wave.dropped_technical == 14 and wave.dropped_zero_variance == 2
    assert len(admitted) == 16
    # 20 technical drops leave 12: every zero-variance group fills, and 12 < 16 asks for a wave
    wave, admitted = run_wave((["technical_failure"] * 5 + ["spread"]) * 4 + ["zero_variance"] * 8)
    assert len(admitted) == 12 and wave.filler == 8 and wave.dropped_zero_variance == 0
    assert wave.needs_wave()


def test_eight_technical_failures_in_a_row_abort():
    wave = WaveFilter(target=16)
    wave.submit(32)
    for index in range(7):
        wave.offer(index, "technical_failure")
    wave.offer(7, "spread")  # resets the run of failures
    for index in range(7):
        wave.offer(index, "technical_failure")
    with pytest.raises(
        TooManyFailures,
        match="8 technically failed groups in a row: check the environment and the policy backend",
    ):
        wave.offer(99, "technical_failure")


def test_a_second_wave_is_needed_only_when_remaining_drops_below_target():
    wave = WaveFilter(target=16)
    wave.submit(32)
    for index in range(17):
        wave.offer(index, "technical_failure" if index % 2 == 0 else "spread")
    # 9 technical drops, 8 kept; 15 groups still finishing -> remaining 23 >= 16
    assert not wave.needs_wave()
    for index in range(17, 32):
        wave.offer(index, "zero_variance")
    # every zero-variance group past remaining == 16 filled: 8 kept + 8 filler
    assert len(wave.kept) == 16


def test_waves_add_up_and_a_wave_waits_until_fewer_than_the_target_remain():
    wave = WaveFilter(target=16)
    wave.submit(32)
    wave.submit(32)
    assert wave.submitted == 64 and wave.remaining == 64
    wave = WaveFilter(target=16)
    wave.submit(32)
    verdicts = (["technical_failure"] * 7 + ["spread"]) * 2 + ["technical_failure"] * 2
    for index, verdict in enumerate(verdicts):
        wave.offer(index, verdict)
    # 16 technical drops of 32: exactly the target remains (2 kept, 14 still finishing), and
    # "fewer than the target" is not yet true
    assert wave.remaining == 16 and len(wave.kept) == 2
    assert not wave.needs_wave()
    wave.offer(99, "technical_failure")
    assert wave.needs_wave()
