"""The reference run's released figures, shown beside a run's own for orientation.

Source: the public reference implementation of the method (ShopSimRL: Qwen3.5-4B, 4 rounds of 20
rollout steps, 400 validation and 400 test tasks), as summarised in docs/method.md.
"""

from __future__ import annotations

ATTRIBUTION = (
    "released figures of the public reference run of the method (ShopSimRL, Qwen3.5-4B, "
    "4 rounds x 20 steps, 400 val / 400 test tasks; see docs/method.md)"
)

# round -> the slow loop's funnel
FUNNEL: dict[int, dict[str, int]] = {
    0: {"all_wrong_groups": 104, "failed_retries": 87, "cards": 87, "eligible": 61,
        "candidates": 6, "deficits": 9},
    1: {"all_wrong_groups": 57, "failed_retries": 56, "cards": 56, "eligible": 22,
        "candidates": 6, "deficits": 1},
    2: {"all_wrong_groups": 54, "failed_retries": 53, "cards": 53, "eligible": 20,
        "candidates": 6, "deficits": 1},
    3: {"all_wrong_groups": 39, "failed_retries": 39, "cards": 39, "eligible": 11,
        "candidates": 4, "deficits": 0},
}  # fmt: skip

BANK_SIZES = (10, 7, 5, 8, 8)  # S_0 .. S_4
BARE_VAL_SUCCESS = {20: 0.7475, 40: 0.8000, 60: 0.8475, 80: 0.8600}  # step -> success

# condition -> (strict reward, success)
TEST: dict[str, tuple[float, float]] = {
    "base/bare": (0.5422, 0.5175),
    "base/S0": (0.5663, 0.5450),
    "trained/bare": (0.8501, 0.8425),
    "trained/S_T": (0.8671, 0.8625),
}
# (a, b) -> success difference a - b and its 95% paired bootstrap interval, in points
TEST_DIFFERENCES: dict[tuple[str, str], tuple[float, float, float]] = {
    ("trained/bare", "base/bare"): (32.50, 27.50, 37.50),
    ("base/S0", "base/bare"): (2.75, -1.50, 7.25),
    ("trained/S_T", "trained/bare"): (2.00, -0.50, 4.75),
}
