"""The console in a real browser (Debian's Chromium through Selenium) against a real registry
and a real console process, as an operator and as a reader meet it.

What is expected comes from the issue and from what the fixture wrote: the seed's rewrite of
price-check (S0 = bank 1 -> bank 3), the review round's gold title, the reason typed here.
Screenshots of every page land in runs/console-screenshots/ (1280 x 800).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from services.registry.seed_demo import CHUNKS, PRICE_CHECK_V2
from shared.registry_api.client import RegistryClient
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
    SHOTS.mkdir(parents=True, exist_ok=True)
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


def numbered(content: dict) -> str:
    return "\n".join(f"{i}. {step}" for i, step in enumerate(content["procedure"], 1))


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
        # A word diff: the old text without the insertions, the new one without the deletions.
        assert text_without(driver, procedure, "ins") == numbered(CHUNKS["price-check"])
        assert text_without(driver, procedure, "del") == numbered(PRICE_CHECK_V2)
        assert "of the selected option, not the range" in " ".join(texts(rewrite, "ins"))
        assert driver.find_element(By.ID, f"added-{world.seeded.chunk_ids['verify-before-buy']}")
        shot(driver, "bank-diff")

        rewrite.find_element(By.LINK_TEXT, "price-check").click()
        version_2 = wait_for(driver, "version-2")
        procedure = version_2.find_element(By.CSS_SELECTOR, "dd[data-field=procedure]")
        assert text_without(driver, procedure, "del") == numbered(PRICE_CHECK_V2)
        assert "production" in driver.find_element(By.ID, "active").text
        shot(driver, "chunk")

        driver.get(f"{world.console_url}/gates/{world.seeded.gate_ids[1]}")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#decision tbody tr")) == 6
        assert len(driver.find_elements(By.CSS_SELECTOR, "#coefficient-plot circle")) == 6
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
