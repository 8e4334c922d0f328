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
        assert f"From bank {now} to bank {target}" in driver.find_element(By.ID, "rollback-diff").text
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

# What a user sees of the page: the scrolled-to width against the viewport, and the "Log out"
# button's box, whether it is the element on top at its centre, and its text's contrast with
# the background actually painted behind it (WCAG's formula; 4.5:1 for normal text).
LAYOUT_PROBE = """
const root = document.documentElement;
const button = [...document.querySelectorAll("header button")].find(b => b.textContent.trim() === "Log out");
if (!button) return {overflow: root.scrollWidth - root.clientWidth, logout: null};
const box = button.getBoundingClientRect();
const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
const rgb = s => s.match(/[\\d.]+/g).map(Number);
const luminance = ([r, g, b]) => { const c = [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]; };
let node = button, background = null;
while (node && node.nodeType === 1) { const c = rgb(getComputedStyle(node).backgroundColor); if (c.length < 4 || c[3] > 0) { background = c; break; } node = node.parentElement; }
background = background || [255, 255, 255];
const a = luminance(rgb(getComputedStyle(button).color)), b = luminance(background);
return {
  overflow: root.scrollWidth - root.clientWidth,
  logout: {left: box.left, right: box.right, top: box.top, bottom: box.bottom,
           width: box.width, height: box.height, on_top: top === button || button.contains(top),
           contrast: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)},
  viewport: [window.innerWidth, window.innerHeight],
};
"""


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
        assert reasons and min(r.size["width"] for r in reasons) >= 180, width
        # A bank's titles keep a readable column on a phone too.
        driver.get(f"{world.console_url}/banks/{world.seeded.bank_ids[-1]}")
        titles = driver.find_elements(By.CSS_SELECTOR, "#entries td.wrap")
        assert titles and min(t.size["width"] for t in titles) >= 140, width
        if found := layout_problems(driver, width):
            problems["bank"] = found
    assert problems == {}
