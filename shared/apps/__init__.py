"""Apps: what a person runs. The `intraskill` CLI, the demo, the experiment, the report, the
operator CLIs and the deploy smoke. May import everything in shared; no service imports them."""
