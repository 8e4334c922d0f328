import sys
from pathlib import Path

# Lets the test modules share `reference_data` without making tests/ a package.
sys.path.insert(0, str(Path(__file__).parent))
