import sys
from pathlib import Path

# Lets the test modules share `reference_data` and `registry_server` without making tests/ a
# package.
sys.path.insert(0, str(Path(__file__).parent))

from registry_server import registry_url  # noqa: F401  (session fixture: a live registry)
