"""`intraskill report RUN_DIR`: a run's report as `report.md` and one self-contained `report.html`.

Inputs are files in the run folder (the trainer's `metrics.jsonl`, the demo's `summary.json`, the
evaluator's `test/evaluation.json`) and a snapshot of the registry (`registry.json`: banks, gate
runs with their decisions, candidates, cards and evidence counts), refreshed from a live registry
when `--registry` is given. Plots are matplotlib PNGs under `RUN_DIR/report/`.
"""
