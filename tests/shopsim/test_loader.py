"""The public ShopSimulator layout: a Chinese data set, the round trip, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.loader import LoaderError, load_world_dir, write_world

PRODUCTS = [
    {
        "asin": "B0CHINA001",
        "title": "智能热洗白色洗地机",
        "shop_name": "某品牌旗舰店",
        "category": "家电›清洁电器›洗地机",
        "attribute": ["智能", "热洗"],
        "small_description": ["一键自清洁"],
        "full_description": "智能热洗白色洗地机",
        "pricing": [1999.0, 2099.0, 2199.0],
        "customization_options": {
            "颜色分类": [{"value": "白色", "price": 1999.0}, {"value": "黑色", "price": 2099.0}],
            "尺码": [{"value": "S / 均码", "price": None}],
        },
        "user_persona": {"预算偏好": "节省", "__reasoning__": "hidden"},
        "instructions": [
            {
                "task_id": 7,
                "instruction": "买白色智能热洗洗地机，预算不超过2100元",
                "instruction_simple": "买一台洗地机",
                "attributes": ["智能", "热洗"],
                "instruction_options": ["白色"],
                "price_upper": None,
            },
            {"task_id": 8, "instruction": "没有属性的任务", "attributes": []},
        ],
    },
    {"asin": "B0CHINA002", "title": "普通黑色洗地机", "category": "家电›清洁电器›洗地机",
     "attribute": ["普通"], "pricing": None},
]  # fmt: skip


def _write(folder: Path, products: object, splits: object | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "products.json").write_text(json.dumps(products, ensure_ascii=False))
    if splits is not None:
        (folder / "splits.json").write_text(json.dumps(splits))
    return folder


def test_chinese_public_layout_loads_and_plays(tmp_path: Path) -> None:
    splits = {"splits": {"test": {"task_ids": [7]}, "train": {"task_ids": []}}}
    world = load_world_dir(_write(tmp_path, PRODUCTS, splits))
    assert world.catalog.language == "zh"
    assert world.task_ids("test") == ["task-000007"]
    task = world.tasks["task-000007"]
    assert task.price_upper == 2100.0  # parsed from the complete instruction (spec 8.1)
    assert task.persona == {"预算偏好": "节省"}
    assert world.catalog["B0CHINA002"].pricing == (100.0,)  # loader default
    assert world.catalog["B0CHINA001"].pricing == (1999.0, 2099.0)  # first two kept
    env = ShopEnv(world)
    episode, _ = env.reset("task-000007")
    result = episode.step("search[白色洗地机]")
    assert "B0CHINA001" in result.state.clickables
    episode.step("click[B0CHINA001]")
    episode.step("click[颜色分类=白色]")
    result = episode.step("click[尺码=s | 均码]")
    assert "Price: 1999.0\n" in result.observation  # the reference's raw number
    result = episode.step("click[buy now]")
    assert (
        result.breakdown.r_success == 1 and result.breakdown.price_method == "selected_price_axis"
    )


def test_shop_name_is_the_brand_and_sub_title_is_searched_not_scored(tmp_path: Path) -> None:
    """The reference drops `brand` while loading (the page and search show `shop_name`) and
    searches `sub_title` when a product has no bullets; the reward never reads it."""
    mouse = {
        "asin": "B0MOUSE001",
        "title": "无线鼠标",
        "shop_name": "店铺甲",
        "brand": "品牌乙",
        "category": "电脑›外设›鼠标",
        "attribute": ["静音"],
        "sub_title": ["人体工学设计"],
        "pricing": [59.0],
        "instructions": [{"task_id": 1, "instruction": "买静音鼠标", "attributes": ["人体工学"]}],
    }
    world = load_world_dir(_write(tmp_path, [mouse, PRODUCTS[1]]))
    product = world.catalog["B0MOUSE001"]
    assert product.brand == "店铺甲" and product.bullets == ()
    env = ShopEnv(world)
    episode, _ = env.reset("task-000001")
    assert "B0MOUSE001" in episode.step("search[人体工学]").state.clickables
    episode.step("click[back to search]")
    assert "B0MOUSE001" not in episode.step("search[品牌乙]").state.clickables
    episode.step("click[back to search]")
    result = episode.step("search[店铺甲]")
    assert "B0MOUSE001" in result.state.clickables
    episode.step("click[B0MOUSE001]")
    result = episode.step("click[buy now]")
    # "人体工学" is only in sub_title: the attribute reward's text fallback does not see it
    assert result.breakdown.r_att == 0.0


def test_without_a_splits_file_tasks_split_by_gold(tmp_path: Path) -> None:
    world = load_world_dir(_write(tmp_path, PRODUCTS))
    assert sum(len(world.task_ids(s)) for s in ("train", "val", "test")) == 1


def test_generated_world_round_trips(env: ShopEnv, tmp_path: Path) -> None:
    write_world(env.world, tmp_path)
    loaded = load_world_dir(tmp_path)
    assert loaded.version == env.version
    assert loaded.tasks == env.world.tasks


@pytest.mark.parametrize(
    ("products", "message"),
    [
        ({"asin": "x"}, "JSON array"),
        ([["not", "an", "object"]], "product record 0: must be a JSON object"),
        ([{"title": "t"}], "product record 0: field 'asin' is required"),
        ([{"asin": "A", "title": "t", "pricing": ["cheap"]}], "(asin 'A'): field 'pricing'"),
        ([{"asin": "A", "title": "t", "customization_options": ["x"]}], "customization_options"),
        ([{"asin": "A", "title": "t", "customization_options": {"c": [{"price": 1}]}}],
         "customization_options['c'][0] needs a 'value'"),
        ([{"asin": "A", "title": "t", "attribute": "ok", "instructions": [
            {"instruction": "x", "attributes": ["a"], "price_upper": -5}]}],
         "instructions[0]: field 'price_upper'"),
        ([{"asin": "A", "title": "t", "instructions": [{"attributes": ["a"]}]}],
         "instructions[0]: field 'instruction' is required"),
        ([{"asin": "A", "title": "t"}, {"asin": "A", "title": "u"}],
         "product record 1 (asin 'A'): field 'asin' repeats record 0"),
        ([{"asin": "A", "title": ["t"]}], "field 'title' must be a string"),
    ],
)  # fmt: skip
def test_bad_records_name_record_and_field(tmp_path: Path, products: object, message: str) -> None:
    with pytest.raises(LoaderError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):  # fmt: skip
        load_world_dir(_write(tmp_path, products))


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(LoaderError, match="not found"):
        load_world_dir(tmp_path / "nowhere")
