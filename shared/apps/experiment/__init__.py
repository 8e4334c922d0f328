"""`intraskill experiment`: ablation arms x training seeds, compared on the same test tasks."""
