"""The ShopSimulator paper reward, one pure function per rule (summary: docs/method.md).

`score_purchase` combines them into a `RewardBreakdown`; `no_purchase_breakdown` is the
all-zero result of an episode that ended without buying.
"""

from shared.runtime.shopsim.reward.budget import (
    annotation_price_upper,
    explicit_budget_from_instruction,
    goal_price_upper,
)
from shared.runtime.shopsim.reward.price import PriceResolution, price_reward, resolve_sku_price
from shared.runtime.shopsim.reward.score import (
    REWARD_VERSION,
    RewardGoal,
    RewardProduct,
    no_purchase_breakdown,
    reward_detail,
    score_purchase,
)
from shared.runtime.shopsim.reward.text import fuzzy_match, token_set_ratio

__all__ = [
    "REWARD_VERSION",
    "PriceResolution",
    "RewardGoal",
    "RewardProduct",
    "annotation_price_upper",
    "explicit_budget_from_instruction",
    "fuzzy_match",
    "goal_price_upper",
    "no_purchase_breakdown",
    "price_reward",
    "resolve_sku_price",
    "reward_detail",
    "score_purchase",
    "token_set_ratio",
]
