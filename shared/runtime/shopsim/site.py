"""The text shop: page state machine, actions and observations of one episode.

Pages: search home (the only page that accepts `search[...]`) -> results (`click` a product id,
`next >`, `< prev`, `back to search`) -> product (`click` `axis=value`, `< prev`,
`back to search`, and `buy now` once every axis is chosen) -> done. An invalid action consumes
a step, leaves the page as it was and reports a reason code. Observations are rendered from
the public state only; the goal never reaches this module.

Two page styles (`SiteConfig.style`):

* `reference` (the default): what the reference environment shows. Page text carries no step
  counter and no action syntax (the protocol belongs in the system prompt), a click must name
  a clickable label exactly, prices are the listing's raw numbers (`63.99 to 75.99`), there
  is no `attributes` page, and an episode cut by the step cap keeps its last page.
* `hints`: this project's earlier variant: `Step N of 30.` and `use search[your query]` in the
  text, clicks matched up to case and spacing, `$x.xx` prices, an `attributes` page (one step
  to re-read the key attributes), and a `finished` page after the step cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.runtime.shopsim.actions import parse_action
from shared.runtime.shopsim.product import Catalog, Product, format_price
from shared.runtime.shopsim.reward import PriceResolution, resolve_sku_price
from shared.runtime.shopsim.search import SearchIndex
from shared.runtime.shopsim.types import Page, PublicState, ReasonCode

OBSERVATION_VERSION = "shopsim-observation-v2"  # v2: the two page styles
BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
ATTRIBUTES = "attributes"
BUY_NOW = "buy now"
OPTION_SEPARATOR = "="
SITE_STYLES = ("reference", "hints")


@dataclass(frozen=True)
class SiteConfig:
    max_steps: int = 30
    results_per_page: int = 20
    top_k: int = 150
    result_details: bool = True  # brand, category and key attributes on the results page
    key_attributes: int = 10
    style: str = "reference"  # one of SITE_STYLES (see the module docstring)

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.results_per_page < 1 or self.top_k < 1:
            raise ValueError("max_steps, results_per_page and top_k must be positive")
        if self.style not in SITE_STYLES:
            raise ValueError(f"unknown site style {self.style!r}; choose one of {SITE_STYLES}")

    @property
    def hints(self) -> bool:
        return self.style == "hints"


@dataclass
class ActionOutcome:
    text: str
    reason: ReasonCode
    message: str

    @property
    def ok(self) -> bool:
        return self.reason == "ok"


def option_label(axis: str, value: str) -> str:
    return f"{axis}{OPTION_SEPARATOR}{value}"


class Site:
    """The mutable page state of one episode over a shared catalogue and index."""

    def __init__(self, catalog: Catalog, index: SearchIndex, config: SiteConfig) -> None:
        self.catalog = catalog
        self.index = index
        self.config = config
        self.page: Page = "search"
        self.query = ""
        self.results: list[int] = []
        self.result_page = 1
        self.product: Product | None = None
        self.selection: dict[str, str] = {}
        self.price_resolution: PriceResolution | None = None
        self.last: ActionOutcome | None = None
        self.searches = 0
        self._rendered: dict[str, list[str]] = {}  # the open product's options, as shown
        self._clickables: tuple[str, ...] | None = None  # per page state; reset by act()

    # -- public state -----------------------------------------------------------------------
    @property
    def total_pages(self) -> int:
        return max(1, -(-len(self.results) // self.config.results_per_page))

    def page_results(self) -> list[Product]:
        size = self.config.results_per_page
        start = (self.result_page - 1) * size
        return [self.catalog.products[p] for p in self.results[start : start + size]]

    def missing_axes(self) -> list[str]:
        if self.product is None:
            return []
        return [axis for axis, _ in self.product.options if axis not in self.selection]

    def option_clickables(self) -> dict[str, tuple[str, str]]:
        """Label -> (axis, value) for every value not already selected."""
        labels: dict[str, tuple[str, str]] = {}
        if self.product is None:
            return labels
        for axis, values in self._rendered.items():
            for value in values:
                if self.selection.get(axis) != value:
                    labels.setdefault(option_label(axis, value), (axis, value))
        return labels

    def clickables(self) -> tuple[str, ...]:
        if self._clickables is None:
            self._clickables = self._compute_clickables()
        return self._clickables

    def _compute_clickables(self) -> tuple[str, ...]:
        if self.page == "results":
            buttons = [BACK_TO_SEARCH]
            if self.result_page > 1:
                buttons.append(PREV_PAGE)
            if self.result_page < self.total_pages:
                buttons.append(NEXT_PAGE)
            return (*buttons, *(product.asin for product in self.page_results()))
        if self.page == "item":
            buttons = [BACK_TO_SEARCH, PREV_PAGE, *([ATTRIBUTES] if self.config.hints else [])]
            if not self.missing_axes():
                buttons.append(BUY_NOW)
            return (*buttons, *self.option_clickables())
        if self.page == "attributes":
            return (BACK_TO_SEARCH, PREV_PAGE)
        return ()

    def public_state(self, step: int) -> PublicState:
        return PublicState(
            page=self.page,
            clickables=self.clickables(),
            search_available=self.page == "search",
            step=step,
            max_steps=self.config.max_steps,
        )

    # -- actions ----------------------------------------------------------------------------
    def act(self, action: object) -> ActionOutcome:
        """Apply one action string; `buy now` is only validated here (the episode scores it)."""
        text = action if isinstance(action, str) else repr(action)
        self._clickables = None
        parsed = parse_action(action)
        if parsed.error:
            return self._remember(ActionOutcome(text, parsed.error, parsed.message))  # type: ignore[arg-type]
        if parsed.verb == "search":
            if self.page != "search":
                return self._remember(
                    ActionOutcome(
                        text, "search_unavailable", "search only works on the search page"
                    )
                )
            self._search(parsed.argument)
            return self._remember(ActionOutcome(text, "ok", f"{len(self.results)} results"))
        return self._remember(self._click(text, parsed.argument))

    def _remember(self, outcome: ActionOutcome) -> ActionOutcome:
        self.last = outcome
        return outcome

    def _resolve_label(self, argument: str, clickables: tuple[str, ...]) -> str | None:
        if argument in clickables:
            return argument
        if not self.config.hints:  # the reference accepts the exact label only
            return None
        folded = " ".join(argument.casefold().split())
        matches = [label for label in clickables if " ".join(label.casefold().split()) == folded]
        return matches[0] if len(matches) == 1 else None

    def _click(self, text: str, argument: str) -> ActionOutcome:
        outcome = self._apply_click(text, argument)
        self._clickables = None
        return outcome

    def _label_key(self, label: str) -> str:
        """What two labels must share to name the same thing: exact, or (hints) folded."""
        return " ".join(label.casefold().split()) if self.config.hints else label

    def _apply_click(self, text: str, argument: str) -> ActionOutcome:
        folded = self._label_key(argument)
        if self.product is not None:  # on the product page and its attributes page
            selected = {self._label_key(option_label(a, v)) for a, v in self.selection.items()}
            if folded in selected:
                return ActionOutcome(text, "already_selected", f"{argument} is already selected")
            if folded == BUY_NOW and self.missing_axes():
                missing = ", ".join(self.missing_axes())
                return ActionOutcome(text, "incomplete_options", f"choose {missing} before buying")
        clickables = self.clickables()
        label = self._resolve_label(argument, clickables)
        if label is None:
            return ActionOutcome(text, "unavailable_action", f"{argument!r} is not clickable here")
        if label == BACK_TO_SEARCH:
            self._go_home()
        elif label == NEXT_PAGE:
            self.result_page += 1
        elif label == PREV_PAGE:
            if self.page == "results":
                self.result_page -= 1
            elif self.page == "item":
                self.page, self.product, self.selection = "results", None, {}
                self.price_resolution = None
            else:
                self.page = "item"
        elif label == ATTRIBUTES:
            self.page = "attributes"
        elif label == BUY_NOW:
            return ActionOutcome(text, "ok", "purchase")
        elif self.page == "results":
            self._open(self.catalog[label])
        else:
            axis, value = self.option_clickables()[label]
            self.selection[axis] = value
            self._price()
        return ActionOutcome(text, "ok", "")

    def _go_home(self) -> None:
        self.page, self.query, self.results, self.result_page = "search", "", [], 1
        self.product, self.selection, self.price_resolution = None, {}, None

    def _search(self, query: str) -> None:
        self._clickables = None
        self.searches += 1
        self.query = " ".join(query.split())
        self.results = self.index.search(self.query, self.config.top_k)
        self.result_page = 1
        self.page = "results"

    def _open(self, product: Product) -> None:
        self.page, self.product, self.selection = "item", product, {}
        self._rendered = product.rendered_options()
        self._price()

    def _price(self) -> None:
        # The price shown is resolved from the current selection; `buy now` uses this one.
        assert self.product is not None
        self.price_resolution = resolve_sku_price(
            self.product.raw_options(), self.product.pricing, self.selection
        )

    def finish(self) -> None:
        self.page = "done"
        self._clickables = None

    def price_text(self, value: float) -> str:
        """A price as this style prints it: the raw number (reference) or `$x.xx` (hints)."""
        return format_price(value) if self.config.hints else str(value)

    def listing_price_text(self, product: Product) -> str:
        """The listing price: `$a to $b` (hints), or as the reference loader tags it (`a`, or
        `a to b` whenever the listing has two prices)."""
        if self.config.hints:
            return product.listing_price_text()
        pricing = product.pricing
        if not pricing:
            return "n/a"
        return str(pricing[0]) if len(pricing) == 1 else f"{pricing[0]} to {pricing[1]}"

    # -- observation ------------------------------------------------------------------------
    def observation(self, step: int) -> str:
        renderer = {
            "search": self._render_home,
            "results": self._render_results,
            "item": self._render_item,
            "attributes": self._render_attributes,
            "done": self._render_done,
        }[self.page]
        lines = renderer()
        if self.last is not None:
            outcome = self.last
            status = "ok" if outcome.ok else f"invalid ({outcome.reason})"
            detail = f": {outcome.message}" if outcome.message and not outcome.ok else ""
            lines += ["", f"Last action: {outcome.text} -> {status}{detail}"]
        if self.config.hints:
            lines.append(f"Step {step} of {self.config.max_steps}.")
        if self.page == "search":
            hint = " (use search[your query])" if self.config.hints else ""
            lines.append(f"Search: available{hint}")
        clickables = self.clickables()
        if clickables:
            lines.append("Clickable:")
            lines += [f"- {label}" for label in clickables]
        elif self.page != "search":
            lines.append("Nothing is clickable on this page.")
        return "\n".join(lines) + "\n"

    def _render_home(self) -> list[str]:
        return ["Page: search home"]

    def _render_results(self) -> list[str]:
        size = self.config.results_per_page
        first = (self.result_page - 1) * size + 1
        shown = self.page_results()
        lines = [
            f'Page: search results for "{self.query}"',
            f"Results page {self.result_page} of {self.total_pages}, {len(self.results)} results, "
            f"showing {first}-{first + len(shown) - 1}"
            if shown
            else "No products matched.",
        ]
        for rank, product in enumerate(shown, start=first):
            lines.append(
                f"{rank}. {product.asin} | {product.title} | {self.listing_price_text(product)}"
            )
            if self.config.result_details:
                lines.append(f"   brand: {product.brand} | category: {product.category}")
                keys = product.attributes[: self.config.key_attributes]
                if keys:
                    lines.append("   key attributes: " + "; ".join(keys))
        return lines

    def _price_text(self) -> str:
        assert self.product is not None
        resolution = self.price_resolution
        if resolution is not None and resolution.verifiable and resolution.price is not None:
            return self.price_text(resolution.price)
        return self.listing_price_text(self.product)

    def _product_header(self, page_name: str) -> list[str]:
        product = self.product
        assert product is not None
        return [
            f"Page: {page_name}",
            f"Title: {product.title}",
            f"ID: {product.asin}",
            f"Price: {self._price_text()}",
            f"Brand: {product.brand}",
            f"Category: {product.category}",
        ]

    def _render_item(self) -> list[str]:
        product = self.product
        assert product is not None
        lines = self._product_header("product")
        keys = product.attributes[: self.config.key_attributes]
        if keys:
            lines.append("Key attributes: " + "; ".join(keys))
        lines.append("Options:")
        options = self._rendered
        if not options:
            lines.append("- this product has no options")
        for axis, values in options.items():
            chosen = self.selection.get(axis)
            state = f"selected {chosen}" if chosen else "not selected"
            lines.append(f"- {axis}: {state}; values: " + " / ".join(values))
        missing = self.missing_axes()
        if missing:
            lines.append("Still to choose: " + ", ".join(missing))
        else:
            lines.append("All options chosen: buy now is available.")
        return lines

    def _render_attributes(self) -> list[str]:
        product = self.product
        assert product is not None
        lines = self._product_header("product attributes")
        lines.append("Attributes: " + ("; ".join(product.attributes) or "none listed"))
        return lines

    def _render_done(self) -> list[str]:
        product = self.product
        if product is None:
            return ["Page: finished", "The episode is over; no more actions."]
        chosen = ", ".join(f"{a}: {v}" for a, v in self.selection.items()) or "no options"
        return ["Page: finished", f"You bought {product.asin} ({chosen}). The episode is over."]

    def describe(self) -> dict[str, Any]:
        """Public state for traces and debugging (never the goal)."""
        return {
            "page": self.page,
            "query": self.query,
            "result_page": self.result_page,
            "total_results": len(self.results),
            "product": None if self.product is None else self.product.asin,
            "selected_options": dict(self.selection),
            "selected_price": None
            if self.price_resolution is None or not self.price_resolution.verifiable
            else self.price_resolution.price,
        }
