"""The console in a real browser (Debian's Chromium through Selenium) against a real registry
and a real console process, as an operator and as a reader meet it.

What is expected comes from the issue and from what the fixture wrote: the seed's rewrite of
price-check (S0 = bank 1 -> bank 3), the review round's gold title, the reason typed here.
Screenshots of every page land in runs/console-screenshots/ (1280 x 800; layout/ holds each
main page at 1400 and 390 px).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from services.console.numbers import VERDICTS
from services.registry.seed_demo import CHUNKS, PRICE_CHECK_V2
from shared.contracts.registry_api.client import RegistryClient
from tests.console.browser import chromium, require_browser, wait_for
from tests.console.live_console import GOLD_TITLE, RETRY_ACTIONS, live_world

# Chromium, a registry and a console: about a minute in all; .ci/run runs this module itself.
pytestmark = pytest.mark.slow
SHOTS = Path(__file__).resolve().parents[2] / "runs" / "console-screenshots"
REASON = "reviewed in the console: round 2 bank"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    require_browser()
    with live_world(tmp_path_factory.mktemp("console")) as live:
        yield live


def shot(driver, name: str) -> None:
    (SHOTS / f"{name}.png").parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def log_in(driver, world, role: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(f"{world.console_url}/banks")
    assert "/login" in driver.current_url  # no session: the login form first
    driver.find_element(By.ID, "token").send_keys(world.tokens[role])
    driver.find_element(By.ID, "login").click()
    assert wait_for(driver, "role").text == role
    assert driver.current_url.endswith("/banks")


def texts(driver, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [element.text for element in driver.find_elements(By.CSS_SELECTOR, css)]


def text_without(driver, element, tag: str) -> str:
    return driver.execute_script(
        "const copy = arguments[0].cloneNode(true);"
        "copy.querySelectorAll(arguments[1]).forEach(e => e.remove());"
        "return copy.textContent;",
        element,
        tag,
    )


def procedure_sides(driver, procedure) -> tuple[list[str], list[str]]:
    """A drawn procedure diff read back as (old steps, new steps): each step that has a
    number on that side, without the other side's words."""
    from selenium.webdriver.common.by import By

    steps = procedure.find_elements(By.CSS_SELECTOR, ".step")
    return tuple(
        [
            text_without(driver, step.find_element(By.CSS_SELECTOR, ".text"), other)
            for step in steps
            if step.get_attribute(side)
        ]
        for side, other in (("data-old", "ins"), ("data-new", "del"))
    )


def test_operator_reviews_a_diff_promotes_and_finds_it_in_the_audit_log(world, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    s0, _, final = world.seeded.bank_ids
    with chromium(tmp_path / "profile") as driver:
        log_in(driver, world, "operator")
        shot(driver, "banks")

        Select(driver.find_element(By.ID, "diff-from")).select_by_value(str(s0))
        Select(driver.find_element(By.ID, "diff-to")).select_by_value(str(final))
        driver.find_element(By.ID, "diff-go").click()
        summary = wait_for(driver, "diff-summary").text
        assert "1 added" in summary and "1 rewritten" in summary and "0 retired" in summary
        price = world.seeded.chunk_ids["price-check"]
        rewrite = driver.find_element(By.ID, f"rewrite-{price}")
        procedure = rewrite.find_element(By.CSS_SELECTOR, "dd[data-field=procedure]")
        # Step by step, then word by word: the old steps without the insertions, the new ones
        # without the deletions; the inserted step 2 is one insertion, and old step 2 is
        # diffed against new step 3 (what it became), not spread across both.
        assert procedure_sides(driver, procedure) == (
            CHUNKS["price-check"]["procedure"],
            PRICE_CHECK_V2["procedure"],
        )
        inserted = procedure.find_element(By.CSS_SELECTOR, ".step.added")
        assert inserted.get_attribute("data-new") == "2"
        assert texts(inserted, ".text ins") == [
            "read the price of the selected option, not the range"
        ]
        moved = procedure.find_element(By.CSS_SELECTOR, ".step[data-old='2']")
        assert moved.get_attribute("data-new") == "3"
        assert texts(moved, ".text del") == ["the price"] and texts(moved, ".text ins") == ["it"]
        assert driver.find_element(By.ID, f"added-{world.seeded.chunk_ids['verify-before-buy']}")
        shot(driver, "bank-diff")

        rewrite.find_element(By.LINK_TEXT, "price-check").click()
        version_2 = wait_for(driver, "version-2")
        procedure = version_2.find_element(By.CSS_SELECTOR, "dd[data-field=procedure]")
        assert procedure_sides(driver, procedure)[1] == PRICE_CHECK_V2["procedure"]
        assert "production" in driver.find_element(By.ID, "active").text
        shot(driver, "chunk")

        driver.get(f"{world.console_url}/gates/{world.seeded.gate_ids[1]}")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#decision tbody tr")) == 6
        assert len(driver.find_elements(By.CSS_SELECTOR, "#coefficient-plot circle")) == 6
        # Numbers that say what they are: a labelled axis, n per row, one colour per verdict.
        axis = driver.find_element(By.ID, "coefficient-plot-axis").text
        assert axis == "change in P(strict success) with the chunk in the prompt"
        header = driver.find_element(By.CSS_SELECTOR, "#decision thead").text
        assert " n " in f" {header} " and "coefficient (r_strict)" in header
        legend = driver.find_elements(By.CSS_SELECTOR, "#verdicts .status")
        colours = {pill.value_of_css_property("color") for pill in legend}
        assert len(legend) == len(VERDICTS) and len(colours) == len(VERDICTS)
        dots = driver.find_elements(By.CSS_SELECTOR, "#coefficient-plot circle")
        fill = {}
        for dot in dots:
            fill.setdefault(dot.get_attribute("class"), set()).add(
                dot.value_of_css_property("fill")
            )
        assert all(len(f) == 1 for f in fill.values())  # one colour per status
        assert len({f.pop() for f in fill.values()}) == len(fill)  # and no two statuses share
        shot(driver, "gate")

        driver.get(f"{world.console_url}/review")
        assert GOLD_TITLE in driver.find_element(By.ID, "cards").text  # operators see findings
        shot(driver, "review")
        driver.get(f"{world.console_url}/cards/{world.review.eligible_card}")
        assert GOLD_TITLE in driver.find_element(By.ID, "privileged-audit").text
        shot(driver, "card")
        driver.find_element(By.ID, "replay").click()
        assert wait_for(driver, "turn-0")  # the retry episode, turn by turn
        actions = texts(driver, ".turn .action")
        assert actions == RETRY_ACTIONS
        shot(driver, "episode")

        driver.get(f"{world.console_url}/banks/{final}")
        driver.find_element(By.ID, "reason-production").send_keys(REASON)
        driver.find_element(By.ID, "promote-production").click()
        wait_for(driver, "aliases")
        flash = driver.find_element(By.CSS_SELECTOR, ".flash").text
        assert flash == f"production now points at bank {final}."
        with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
            assert registry.get_alias("production").bank_id == final

        driver.get(f"{world.console_url}/audit?object_type=alias&object_id=production")
        newest = driver.find_element(By.CSS_SELECTOR, "#audit tbody tr").text
        assert REASON in newest and "optest-operator" in newest
        shot(driver, "audit")


def test_a_stale_promote_form_says_someone_moved_it_first(world, tmp_path):
    from selenium.webdriver.common.by import By

    s0, middle, _ = world.seeded.bank_ids
    with chromium(tmp_path / "profile") as driver:
        log_in(driver, world, "operator")
        driver.get(f"{world.console_url}/banks/{s0}")  # the form carries production's ETag now
        with RegistryClient(world.registry_url, world.tokens["operator"]) as registry:
            alias = registry.get_alias("production")
            target = middle if alias.bank_id != middle else s0
            registry.move_alias("production", target, reason="moved elsewhere", if_match=alias.etag)
        driver.find_element(By.ID, "reason-production").send_keys("too late")
        driver.find_element(By.ID, "promote-production").click()
        problem = wait_for(driver, "problem").text
        assert "Someone moved it first" in problem and f"bank {target}" in problem
        with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
            assert registry.get_alias("production").bank_id == target  # nothing overwritten
        shot(driver, "moved-first")


def test_a_reader_sees_no_write_controls_and_a_forged_post_is_refused(world, tmp_path):
    from selenium.webdriver.common.by import By

    _, _, final = world.seeded.bank_ids
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        before = registry.get_alias("production")
    with chromium(tmp_path / "profile") as driver:
        log_in(driver, world, "reader")
        assert not driver.find_elements(By.CSS_SELECTOR, "form[action*='/rollback']")
        driver.get(f"{world.console_url}/banks/{final}")
        assert not driver.find_elements(By.ID, "actions")
        assert not driver.find_elements(By.CSS_SELECTOR, "form[action*='/aliases/']")
        shot(driver, "bank-as-reader")

        driver.get(f"{world.console_url}/review")
        assert GOLD_TITLE not in driver.page_source  # findings name the gold item
        assert driver.find_element(By.ID, "privileged-note")
        driver.get(f"{world.console_url}/cards/{world.review.blocked_card}")
        assert GOLD_TITLE not in driver.page_source
        shot(driver, "review-as-reader")

        # A forged promote with the reader's own session and CSRF token (the logout form's):
        # the console forwards it with the reader's token, and the registry says no.
        fields = {"bank_id": str(final), "reason": "forged", "if_match": before.etag}
        driver.execute_script(
            """
            const form = document.createElement("form");
            form.method = "post";
            form.action = "/aliases/production/move";
            const fields = {...arguments[0],
                            csrf: document.querySelector("input[name=csrf]").value};
            for (const [name, value] of Object.entries(fields)) {
              const input = document.createElement("input");
              input.type = "hidden"; input.name = name; input.value = value;
              form.appendChild(input);
            }
            document.body.appendChild(form);
            form.submit();
            """,
            fields,
        )
        problem = wait_for(driver, "problem").text
        assert "Not allowed for your role" in problem and "'reader'" in problem
        shot(driver, "forged-post-as-reader")
        # The same request's status, with the browser's session cookie.
        csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value")
        cookie = driver.get_cookie("console_session")["value"]
    answer = httpx.post(
        f"{world.console_url}/aliases/production/move",
        data={**fields, "csrf": csrf},
        cookies={"console_session": cookie},
    )
    assert answer.status_code == 403 and "Traceback" not in answer.text
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        assert registry.get_alias("production").revision == before.revision


def rollback_target_in_registry(world, name: str) -> int:
    """Where the registry's own history says a roll back goes: its latest move's origin."""
    with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
        return registry.alias_history(name)[-1].from_bank_id


def test_roll_back_names_its_target_bank_and_asks_before_it_moves(world, tmp_path):
    from selenium.webdriver.common.by import By

    with chromium(tmp_path / "profile") as driver:
        log_in(driver, world, "operator")
        # `current` was only ever created (seed-demo): there is nothing to roll back to.
        assert not driver.find_elements(By.ID, "rollback-current")
        assert "no earlier bank" in driver.find_element(By.ID, "aliases").text
        with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
            now = registry.get_alias("production").bank_id
        target = rollback_target_in_registry(world, "production")
        link = driver.find_element(By.ID, "rollback-production")
        assert link.text == f"Roll back to bank {target}…"
        link.click()

        heading = wait_for(driver, "rollback-form") and driver.find_element(By.TAG_NAME, "h1")
        assert heading.text == f"Roll back production to bank {target}?"
        summary = driver.find_element(By.ID, "rollback-summary").text
        assert f"points at bank {now} now" in summary and f"bank {target}" in summary
        assert (
            f"From bank {now} to bank {target}" in driver.find_element(By.ID, "rollback-diff").text
        )
        button = driver.find_element(By.ID, "rollback-confirm")
        assert button.text == f"Roll back production to bank {target}"
        shot(driver, "rollback-confirmation")
        with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
            assert registry.get_alias("production").bank_id == now  # the page moved nothing

        button.click()  # no reason typed: the browser's own `required` check holds the form
        assert driver.find_elements(By.ID, "rollback-form")
        driver.find_element(By.ID, "rollback-reason").send_keys("bank regressed on review")
        driver.find_element(By.ID, "rollback-confirm").click()
        wait_for(driver, "aliases")
        flash = driver.find_element(By.CSS_SELECTOR, ".flash").text
        assert flash == f"production rolled back to bank {target}."
        with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
            assert registry.get_alias("production").bank_id == target
            assert registry.alias_history("production")[-1].reason == "bank regressed on review"


def test_a_stale_roll_back_changes_nothing_and_keeps_the_typed_reason(world, tmp_path):
    from selenium.webdriver.common.by import By

    with chromium(tmp_path / "profile") as driver:
        log_in(driver, world, "operator")
        driver.get(f"{world.console_url}/aliases/production/rollback")
        wait_for(driver, "rollback-form")
        with RegistryClient(world.registry_url, world.tokens["operator"]) as registry:
            alias = registry.get_alias("production")
            elsewhere = next(b for b in world.seeded.bank_ids if b != alias.bank_id)
            registry.move_alias("production", elsewhere, reason="meanwhile", if_match=alias.etag)
        driver.find_element(By.ID, "rollback-reason").send_keys("typed before the move")
        driver.find_element(By.ID, "rollback-confirm").click()
        problem = wait_for(driver, "problem").text
        assert "Someone moved it first" in problem and f"bank {elsewhere}" in problem
        kept = driver.find_element(By.ID, "rollback-reason").get_attribute("value")
        assert kept == "typed before the move"
        with RegistryClient(world.registry_url, world.tokens["reader"]) as registry:
            assert registry.get_alias("production").bank_id == elsewhere


# --------------------------------------------------------------- layout at two widths

WIDTHS = (1400, 390)  # a desktop and a phone (the two widths)

LAYOUT_PROBE = (Path(__file__).parent / "layout_probe.js").read_text(encoding="utf-8")


def main_pages(world) -> dict[str, str]:
    """Each main page of the console, by the name its screenshot gets."""
    s0, _, final = world.seeded.bank_ids
    return {
        "banks": "/banks",
        "bank": f"/banks/{final}",
        "bank-diff": f"/banks/diff?from={s0}&to={final}",
        "rollback": "/aliases/production/rollback",
        "chunks": "/chunks",
        "chunk": f"/chunks/{world.seeded.chunk_ids['price-check']}",
        "gates": "/gates",
        "gate": f"/gates/{world.seeded.gate_ids[1]}",
        "observations": f"/gates/{world.seeded.gate_ids[1]}/observations",
        "review": "/review",
        "card": f"/cards/{world.review.eligible_card}",
        "candidate": f"/candidates/{world.review.candidate}",
        "episode": f"/cards/{world.review.eligible_card}/episode",
        "audit": "/audit",
    }


def layout_problems(driver, width: int) -> list[str]:
    """What is wrong with the page on screen: page overflow, a hidden or unreadable Log out."""
    probe = driver.execute_script(LAYOUT_PROBE)
    problems = []
    if probe["overflow"] > 0:
        problems.append(f"the page is {probe['overflow']} px wider than the {width} px screen")
    logout = probe["logout"]
    if logout is None:
        return [*problems, "no Log out button"]
    if logout["width"] < 1 or logout["left"] < 0 or logout["right"] > width or logout["top"] < 0:
        problems.append(f"Log out is outside the screen: {logout}")
    elif not logout["on_top"]:
        problems.append(f"Log out is covered by another element: {logout}")
    if logout["contrast"] < 4.5:
        problems.append(f"Log out's text contrast is {logout['contrast']:.2f}:1 (< 4.5:1)")
    return problems


@pytest.mark.parametrize("width", WIDTHS)
def test_every_main_page_fits_the_screen_with_a_readable_log_out(world, tmp_path, width):
    from selenium.webdriver.common.by import By

    problems = {}
    with chromium(tmp_path / "profile", width=width) as driver:
        log_in(driver, world, "operator")
        for name, path in main_pages(world).items():
            driver.get(world.console_url + path)
            assert driver.find_elements(By.ID, "role"), f"{name}: not a logged-in page"
            shot(driver, f"layout/{name}-{width}")
            if found := layout_problems(driver, width):
                problems[name] = found
        # An alias's history, opened: each reason reads as lines, not a few letters a line.
        driver.get(f"{world.console_url}/banks")
        driver.find_element(By.CSS_SELECTOR, "#history-production summary").click()
        reasons = driver.find_elements(By.CSS_SELECTOR, "#history-production td.reason")
        if not reasons or min(r.size["width"] for r in reasons) < 180:
            problems["alias history"] = ["a reason column narrower than 180 px"]
        # A bank's titles keep a readable column on a phone too.
        driver.get(f"{world.console_url}/banks/{world.seeded.bank_ids[-1]}")
        titles = driver.find_elements(By.CSS_SELECTOR, "#entries td.wrap")
        if not titles or min(t.size["width"] for t in titles) < 140:
            problems["bank titles"] = ["a title column narrower than 140 px"]
    assert problems == {}
