"""The rules backend's library of repair mechanisms: one per failure surface the diagnosis can
name, each with a deployable chunk template (applies when / procedure / verify / avoid).

Templates hold no gold and no task detail: they are the reusable procedure, conditioned by
their own trigger. Their titles carry the cue phrases the `procedural` test-double policy
recognises (`shared.runtime.agent.backends.procedural.MECHANISM_CUES`), so a live test with the
procedural policy follows exactly the repair a card proposes.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.contracts.chunks import ChunkContent


@dataclass(frozen=True)
class Mechanism:
    key: str
    failure_surface: str  # what the diagnosis saw go wrong
    trigger: str  # the observable situation in which the repair applies
    template: ChunkContent
    # Words that show a chunk addresses this mechanism even when the policy does not follow
    # it (a REWRITE target): any group whose words all occur in the chunk's text.
    topic_words: tuple[tuple[str, ...], ...]


LIBRARY: dict[str, Mechanism] = {
    mechanism.key: mechanism
    for mechanism in (
        Mechanism(
            key="explicit_query",
            failure_surface="constraint missing from the query",
            trigger="the request states attributes and the query names only the product type",
            template=ChunkContent(
                title="Search query: put every explicit constraint in one query",
                applies_when="The request names the product type together with attributes it "
                "must have.",
                procedure=[
                    "Write one search query: the product type followed by every attribute the "
                    "request states.",
                    "Keep attribute wording as the request writes it; do not search in steps.",
                ],
                verify="The first results page shows items of that type whose titles carry "
                "the stated attributes.",
                avoid="A query with the product type alone, which ranks items lacking the "
                "required attributes first.",
            ),
            topic_words=(("query", "attribute"), ("query", "constraint"), ("搜索", "约束")),
        ),
        Mechanism(
            key="persona_constraints",
            failure_surface="persona constraint ignored",
            trigger="the profile's shopping notes mention the requested product type",
            template=ChunkContent(
                title="Persona document: apply the profile's constraints for this product type",
                applies_when="The user profile has shopping notes that mention the product "
                "type being bought.",
                procedure=[
                    "Read every profile note that names the product type.",
                    "Treat attributes it requires as required, option values it picks as "
                    "wanted, and a spending limit it states as the budget.",
                    "Add the required attributes to the search query.",
                ],
                verify="Each constraint from those notes is met by the item and option you "
                "are about to buy.",
                avoid="Shopping from the task sentence alone when the profile adds constraints.",
            ),
            topic_words=(("persona",), ("profile",), ("用户", "偏好"), ("个人文档",)),
        ),
        Mechanism(
            key="inspect_candidates",
            failure_surface="wrong product opened",
            trigger="an opened product page lacks an attribute the request requires",
            template=ChunkContent(
                title="Candidate inspection: open results and check every required attribute",
                applies_when="Several results look similar and the request requires specific "
                "attributes.",
                procedure=[
                    "Open the result whose title covers the most required attributes.",
                    "On its page, compare the key attributes with every required attribute.",
                    "If one is missing, go back and open the next best result (up to five).",
                ],
                verify="The product page lists every required attribute before you choose options.",
                avoid="Buying the first result without reading its key attributes.",
            ),
            topic_words=(("candidate",), ("inspect",), ("候选",), ("核验", "属性")),
        ),
        Mechanism(
            key="option_choice",
            failure_surface="option axis wrong",
            trigger="the request names an option value and the page offers that value",
            template=ChunkContent(
                title="Option values: pick the variant the request names",
                applies_when="The request or the profile names a value for an option axis "
                "(size, color, edition).",
                procedure=[
                    "For each option axis on the product page, find the value the request names.",
                    "Click exactly that value, even when another value is listed first.",
                ],
                verify="The page shows each named axis selected with the requested value.",
                avoid="Taking the first listed value of an axis the request specifies.",
            ),
            topic_words=(("option", "value"), ("variant",), ("选项", "取值"), ("规格",)),
        ),
        Mechanism(
            key="complete_options",
            failure_surface="premature purchase with option axes unset (loop to the step cap)",
            trigger="the product page still lists axes to choose when buying is attempted",
            template=ChunkContent(
                title="Before buying: set every option axis",
                applies_when="The product page lists option axes that are not selected yet.",
                procedure=[
                    "Read the line that lists the axes still to choose.",
                    "Select a value on every listed axis, one click each.",
                    "Click buy now only once the page says all options are chosen.",
                ],
                verify="The page says all options are chosen and buy now is clickable.",
                avoid="Clicking buy now again and again while an axis is unset; it wastes "
                "steps until the episode ends.",
            ),
            topic_words=(("every", "axis"), ("all", "options"), ("选项维度",)),
        ),
        Mechanism(
            key="price_check",
            failure_surface="budget exceeded on the resolved SKU",
            trigger="a budget is known and the selected variant's price is shown",
            template=ChunkContent(
                title="Price check: verify the selected variant's price against the budget",
                applies_when="The request or the profile states a budget.",
                procedure=[
                    "After choosing the options, read the price the page shows for that selection.",
                    "If it exceeds the budget, go back and try the next matching result.",
                ],
                verify="The price of the selected variant is within the budget (about 10% "
                "above for an approximate budget).",
                avoid="Judging the price from the results list or before choosing options.",
            ),
            topic_words=(("price", "budget"), ("价格", "预算")),
        ),
    )
}

# The workflow order: a divergence earlier in it happens earlier in an episode.
WORKFLOW = (
    "explicit_query",
    "persona_constraints",
    "inspect_candidates",
    "option_choice",
    "complete_options",
    "price_check",
)


def addressed_mechanisms(content: ChunkContent) -> set[str]:
    """The mechanisms a chunk's text is about (whether or not a policy would follow it)."""
    text = " ".join(
        [content.title, content.applies_when, *content.procedure, content.verify, content.avoid]
    ).casefold()
    return {
        key
        for key, mechanism in LIBRARY.items()
        if any(all(word in text for word in group) for group in mechanism.topic_words)
    }


def title_mechanism(content: ChunkContent) -> str | None:
    """The mechanism a chunk's title names, by the library's own titles' topic words."""
    title = content.title.casefold()
    for key in WORKFLOW:
        if any(all(word in title for word in group) for group in LIBRARY[key].topic_words):
            return key
    return None
