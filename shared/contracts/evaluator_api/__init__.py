"""What the evaluator's HTTP answers promise their clients beyond FastAPI's usual shapes.

The trainer reads these over HTTP; it never imports the evaluator."""

# The `type` of a 422 detail item when a gate's random mask design cannot identify every
# coefficient with defined HC3 errors (rank deficient, or a task of leverage 1). The request
# is sound: another mask seed, or more tasks, gives another design.
DESIGN_NOT_IDENTIFIED = "design_not_identified"
