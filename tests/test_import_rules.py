"""The import rule of the layout (shared/__init__.py, docs/CONTRIBUTING.md), read from the code.

Every .py under services/ and shared/ is parsed, imports inside functions included (the code
imports heavy modules lazily, and a lazy import is still a dependency), relative ones resolved:

* a service imports contracts, kit and runtime, never an app nor another service;
* contracts import nothing from shared outside contracts, kit only contracts and kit, runtime
  only contracts, kit and runtime; none of the three imports a service;
* nothing in services/ or shared/ imports tests (nor runs one as `python -m tests...`): the
  installed package has no tests folder.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("contracts", "kit", "runtime", "apps")
# what each part of shared may import (its own kind included); services add their own service
ALLOWED = {
    "contracts": {"contracts"},
    "kit": {"contracts", "kit"},
    "runtime": {"contracts", "kit", "runtime"},
    "apps": {"contracts", "kit", "runtime", "apps", "services"},
}
TESTS_MODULE = re.compile(r"^tests(\.\w+)+$")  # a string naming a tests module (python -m ...)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, *, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every import in `source`, anywhere in it, relative ones resolved.

    `from shared import kit` names the module shared.kit; `from shared.kit import auth` names
    shared.kit (and maybe shared.kit.auth: the kind is the same either way).
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - (node.level - 1)]
                base = ".".join([*prefix, *([base] if base else [])])
            if base in ("shared", "services", "tests") or not node.module:
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, base))
        elif isinstance(node, ast.Constant) and TESTS_MODULE.match(str(node.value)):
            found.append((node.lineno, node.value))
    return sorted(found)


def part_of(module: str) -> str | None:
    """The layer a module belongs to: a kind of shared, `services.<name>`, `tests` or None."""
    parts = module.split(".")
    if parts[0] == "shared" and len(parts) > 1 and parts[1] in KINDS:
        return parts[1]
    if parts[0] == "services" and len(parts) > 1:
        return f"services.{parts[1]}"
    if parts[0] == "tests":
        return "tests"
    return None


def refusal(importer: str, imported: str) -> str | None:
    """Why `importer` (a layer) must not import `imported` (a layer); None where it may."""
    if imported is None or imported == importer:
        return None
    if imported == "tests":
        return "nothing in services/ or shared/ imports tests"
    if importer.startswith("services."):
        if imported == "apps":
            return "services never import apps"
        if imported.startswith("services."):
            return "a service never imports another service"
        return None
    allowed = ALLOWED.get(importer)
    if allowed is None:
        return None
    kind = "services" if imported.startswith("services.") else imported
    if kind not in allowed:
        return f"shared.{importer} imports only {', '.join(sorted(allowed))}"
    return None


def violations(paths) -> list[str]:
    found = []
    for path in paths:
        module = module_name(path)
        importer = part_of(module)
        source = path.read_text()
        for line, target in imported_modules(source, module, is_package=path.stem == "__init__"):
            reason = refusal(importer, part_of(target))
            if reason:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {target}: {reason}")
    return found


def code_files():
    return sorted([*(ROOT / "services").rglob("*.py"), *(ROOT / "shared").rglob("*.py")])


def test_every_import_in_services_and_shared_follows_the_layout():
    broken = violations(code_files())
    assert not broken, "import rule broken:\n" + "\n".join(broken)


def test_shared_holds_only_the_four_kinds():
    """A module straight under shared/ would belong to no kind and escape the rule."""
    loose = [p.name for p in (ROOT / "shared").iterdir() if p.suffix == ".py" or p.is_dir()]
    assert sorted(n for n in loose if n != "__pycache__") == sorted(["__init__.py", *KINDS])


def test_the_scanner_sees_lazy_relative_and_from_package_imports():
    source = (
        "from . import sibling\n"
        "from ..kit import auth\n"
        "from shared import apps\n"
        "def later():\n"
        "    import services.trainer.cli\n"
        "    return ['python', '-m', 'tests.trainer.fake']\n"
    )
    found = imported_modules(source, "shared.runtime.leak.numbers", is_package=False)
    assert [name for _, name in found] == [
        "shared.runtime.leak.sibling",
        "shared.runtime.kit",  # `..` from shared.runtime.leak is shared.runtime
        "shared.apps",
        "services.trainer.cli",
        "tests.trainer.fake",
    ]


@pytest.mark.parametrize(
    ("importer", "imported", "refused"),
    [
        ("services.console", "apps", True),
        ("services.console", "services.registry", True),
        ("services.console", "services.console", False),
        ("services.trainer", "runtime", False),
        ("contracts", "kit", True),
        ("contracts", "runtime", True),
        ("contracts", "services.registry", True),
        ("kit", "contracts", False),
        ("kit", "runtime", True),
        ("runtime", "kit", False),
        ("runtime", "apps", True),
        ("apps", "services.registry", False),
        ("apps", "tests", True),
    ],
)
def test_the_rule_table(importer, imported, refused):
    assert (refusal(importer, imported) is not None) is refused
