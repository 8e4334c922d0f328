"""The gold firewall on evasions a plain substring check misses, and on safe procedure text.

Expected verdicts come from the firewall rules written in the analyst issue, case by case: every
leak below must be stopped, and safe texts must be admitted (the bar is >= 90%; these all are).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.runtime.leak import GoldFacts, find_leaks

FIXTURES = Path(__file__).parents[1] / "fixtures" / "firewall-cases"
CASES = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))
EN_GOLD = GoldFacts.from_json(CASES[0]["gold"])  # Sony / Anker / JBL / Beats headphones
ZH_GOLD = GoldFacts.from_json(CASES[6]["gold"])  # 小米 / 追觅 / 添可 floor washers

LEAKS = [
    ("homoglyph_brand", "Prefer \u0410nk\u0435r when two tie", EN_GOLD),  # Cyrillic А, е
    ("greek_brand", "Prefer \u03a3ony? no: S\u03bfny models", EN_GOLD),  # Greek ο
    ("zero_width_brand", "Prefer An\u200bker when two tie", EN_GOLD),
    ("soft_hyphen_brand", "Prefer An\u00adker", EN_GOLD),
    ("fullwidth_brand", "Prefer \uff21\uff4e\uff4b\uff45\uff52", EN_GOLD),
    ("spaced_brand", "Prefer A n k e r models", EN_GOLD),
    ("hyphenated_brand", "Prefer An-ker models", EN_GOLD),
    ("leet_brand", "Prefer S0ny over the rest", EN_GOLD),
    ("lowercase_brand", "prefer jbl headphones", EN_GOLD),
    ("uppercase_brand", "PREFER BEATS", EN_GOLD),
    ("id_lowercase", "open b0c7x2lq9p", EN_GOLD),
    ("id_dashed", "open B0C-7X2-LQ9P", EN_GOLD),
    ("id_spaced", "open B 0 C 7 X 2 L Q 9 P", EN_GOLD),
    ("id_zero_width", "open B0C7\u200dX2LQ9P", EN_GOLD),
    ("id_glued_to_words", "openB0C7X2LQ9Pnow", EN_GOLD),
    ("unknown_id_shape", "click B0ZZ99ZZ11 in the results", EN_GOLD),
    ("unknown_id_shape_dotted", "click B0ZZ.99ZZ.11", EN_GOLD),
    ("asin_spelled", "copy the A.S.I.N from the page", EN_GOLD),
    ("asin_fullwidth", "copy the \uff21\uff33\uff29\uff2e", EN_GOLD),
    ("digits_spaced", "order 482 133 771 20", EN_GOLD),
    ("digits_dashed", "call 138-0013-8000", EN_GOLD),
    ("digits_dotted", "code 4821.3377.1200", EN_GOLD),
    ("digits_fullwidth", "order １２３４５６７８９０", EN_GOLD),
    ("task_upper", "As in TASK_004217", EN_GOLD),
    ("task_space", "as in Task 42", EN_GOLD),
    ("task_number_alone", "the answer to 004217 is known", EN_GOLD),
    ("task_zh", "任务 004217 的答案", ZH_GOLD),
    (
        "title_no_punctuation",
        "buy sony wh1000xm5 wireless noise canceling headphones midnight blue",
        EN_GOLD,
    ),
    (
        "title_other_spacing",
        "Anker Soundcore-Life-Q30-Hybrid Active Noise Cancelling Headphones",
        EN_GOLD,
    ),
    ("title_fragment", "pick the Tune 760NC Lightweight one", EN_GOLD),
    ("title_fragment_words", "look for studio pro wireless bluetooth", EN_GOLD),
    ("visited_title", "JBL Tune 760NC Lightweight Over-Ear Headphones is fine", EN_GOLD),
    ("model_number", "the WH-1000XM5 is the target", EN_GOLD),
    ("model_number_unhyphenated", "the wh1000xm5 is the target", EN_GOLD),
    ("model_number_part", "look for 1000XM5", EN_GOLD),
    ("model_number_spaced", "look for WH 1000 XM5", EN_GOLD),
    ("option_spacing", "select MidnightBlue", EN_GOLD),
    ("option_case", "select midnight BLUE", EN_GOLD),
    ("option_hyphen", "select Standard-Edition", EN_GOLD),
    ("zh_brand", "优先选择小米", ZH_GOLD),
    ("zh_brand_spaced", "优先选择 追 觅 的产品", ZH_GOLD),
    ("zh_title_spaced", "直接搜索 小米 智能 热洗 白色 洗地机 Pro 2 代", ZH_GOLD),
    ("zh_title_fragment", "找智能热洗白色洗地机就对了", ZH_GOLD),
    ("zh_option", "选择标准版 套装含滤芯", ZH_GOLD),
    ("zh_option_spacing", "选择珍珠白升级款", ZH_GOLD),
    ("zh_visited_fragment", "找芙万2.0 LED 无线智能洗地机", ZH_GOLD),
]

SAFE = [
    "Search with the product type plus the two most specific required attributes.",
    "Before buying, set every option axis the request names and check the price.",
    "If the first page shows no item of the requested type, go back to search and rephrase.",
    "Compare at most 3 candidates; prefer the one whose title names every required attribute.",
    "Keep the budget in mind: the selected option's price must stay under the stated limit.",
    "When the persona lists a preference (size, color, material), treat it as a constraint.",
    "Wireless headphones and noise cancelling earbuds are common categories; read the title.",
    "As in the previous step, verify the color before clicking buy now.",
    "Use one query of 4 to 8 words; avoid single generic words like 'headphones'.",
    "Open a result, read its options, and click < prev if nothing fits.",
    "A price of 19.99 - 29.99 is a range: check the price for the chosen size.",
    "If the request says under 50 dollars, a 10% tolerance applies only to approximate budgets.",
    "Do not buy before every axis (size, color, edition) is set.",
    "Check whether the title mentions the brand the persona prefers; if not, keep looking.",
    "Prefer items rated 4.5 stars or more when two candidates tie on constraints.",
    "Step 2: click the first matching result. Step 3: choose the option. Step 4: buy.",
    "Return to the results with back to search when the product type is wrong.",
    "If the persona is a student on a budget, search for the cheaper variant first.",
    "Translate every explicit constraint into the query: type, material, color, size, price.",
    "The standard option is not always the cheapest; compare the option prices.",
    "Loop guard: if the same page appears twice, change the query instead of clicking again.",
    "Over-ear or in-ear: match the form factor the request names.",
    "Models with a model number in the title are still checked against every attribute.",
    "Pro versions often cost more; check the budget after selecting the edition.",
    "Beware of bundles: a pack of 2 doubles the price per order.",
    "先用商品类型和预算搜索，再逐一核对颜色和规格选项。",
    "如果第一页没有符合类型的商品，返回搜索并改写查询。",
    "将所有核心属性约束整合为单一搜索查询词。",
    "购买前确认每个选项轴都已选择，价格不超过预算。",
    "根据用户个人文档中的偏好（颜色、尺寸、材质）筛选候选商品。",
    "智能洗地机这类商品要核对功能描述。",
    "比较不超过三个候选商品，优先标题包含全部约束的那个。",
    "Verify the 30-day return window only if the request mentions it.",
    "Use the size chart: sizes run from 36 to 46 in this category.",
    "If no result matches after 2 queries, buy the closest match within budget.",
    "Task: find the item; the task text lists constraints — read the task carefully.",
    "Choose the variant whose price is lower than 120.00 when the budget says approximately 110.",
    "Do not anchor on sponsored-looking first results; scan the top 5.",
    "Headphones with active noise cancellation need the ANC feature named in the title.",
    "Select the blue color option if and only if the request asks for blue.",
]


@pytest.mark.parametrize(("name", "text", "gold"), LEAKS, ids=[case[0] for case in LEAKS])
def test_every_evasion_is_stopped(name, text, gold):
    assert find_leaks(text, gold=gold), f"{name} leaked through: {text!r}"


def test_safe_texts_are_admitted():
    blocked = {
        text: find_leaks(text, gold=gold)
        for text in SAFE
        for gold in (EN_GOLD, ZH_GOLD)
        if find_leaks(text, gold=gold)
    }
    assert not blocked, blocked


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_vendored_cases(case):
    findings = find_leaks(case["text"], gold=GoldFacts.from_json(case["gold"]))
    assert bool(findings) == case["leak"], findings


def test_cli_contract_one_json_line_per_case(tmp_path):
    cases = [
        {"name": "leaky", "text": "Prefer Anker", "gold": CASES[0]["gold"]},
        {"name": "safe", "text": "Check the price.", "gold": CASES[0]["gold"]},
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "analyst", "firewall", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    lines = [json.loads(line) for line in out]
    assert lines == [
        {
            "name": "leaky",
            "admitted": False,
            "findings": [{"rule": "gold_brand", "text": "Anker", "canonical": "anker"}],
        },
        {"name": "safe", "admitted": True, "findings": []},
    ]
