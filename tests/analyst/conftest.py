import sys
from pathlib import Path

# The evaluator's tests hold the live-registry fixture (the real service in a subprocess);
# the analyst's integration tests use the same one.
sys.path.insert(0, str(Path(__file__).parents[1] / "evaluator"))

from registry_server import registry_url  # noqa: F401  (session fixture)
