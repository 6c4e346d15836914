"""The shared plumbing (agentplatform/plumbing/) imports no app and none of the wiring: every
module is read with `ast`, module-level and function-local imports alike, and the names handed to
`import_module`/`import_string`/`__import__` as literal strings."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

PLUMBING = Path(settings.BASE_DIR) / "agentplatform" / "plumbing"
LOADERS = {"import_module", "import_string", "__import__"}


def project_apps() -> set[str]:
    """The project's own apps: INSTALLED_APPS entries that are folders of this checkout."""
    roots = {name.split(".")[0] for name in settings.INSTALLED_APPS}
    return {root for root in roots if (Path(settings.BASE_DIR) / root).is_dir()} - {"agentplatform"}


def imported_names(source: str, module: str) -> set[str]:
    """Every module name `source` (the text of `module`) imports or loads by a literal name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            function = node.func
            called = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
            if called in LOADERS and node.args and isinstance(node.args[0], ast.Constant):
                names.add(str(node.args[0].value))
    return names


def forbidden(name: str, apps: set[str]) -> bool:
    """An app, or a module of agentplatform outside the plumbing (the wiring, which imports the apps)."""
    root = name.split(".")[0]
    in_wiring = root == "agentplatform" and name not in {"agentplatform", "agentplatform.plumbing"}
    return root in apps or (in_wiring and not name.startswith("agentplatform.plumbing."))


def test_project_apps_are_the_five_apps() -> None:
    assert project_apps() == {"agents", "brandassets", "chat", "coin", "groundtruth"}


def test_the_walk_finds_function_local_relative_and_loaded_imports() -> None:
    source = (
        "import json\n"
        "from ..urls import urlpatterns\n"
        "def f():\n"
        "    from agents.models import Agent\n"
        "    return import_string('chat.selectors.feed'), importlib.import_module('coin')\n"
    )
    names = imported_names(source, "agentplatform.plumbing.errors")
    assert names == {
        "json",
        "agentplatform.urls",
        "agentplatform.urls.urlpatterns",
        "agents.models",
        "agents.models.Agent",
        "chat.selectors.feed",
        "coin",
    }
    assert {name for name in names if not forbidden(name, project_apps())} == {"json"}


def test_no_plumbing_module_imports_an_app_or_the_wiring() -> None:
    apps = project_apps()
    modules = sorted(PLUMBING.rglob("*.py"))
    assert len(modules) > 25  # the walk reads the package, not an empty folder
    offending = []
    for path in modules:
        module = ".".join(path.relative_to(settings.BASE_DIR).with_suffix("").parts)
        for name in sorted(imported_names(path.read_text(), module)):
            if forbidden(name, apps):
                offending.append(f"{path.relative_to(settings.BASE_DIR)}: {name}")
    assert offending == []


def test_no_app_imports_the_wiring() -> None:
    """The apps use the plumbing; the wiring (which imports the apps) is imported by none of them."""
    offending = []
    for app in sorted(project_apps()):
        for path in sorted((Path(settings.BASE_DIR) / app).rglob("*.py")):
            module = ".".join(path.relative_to(settings.BASE_DIR).with_suffix("").parts)
            for name in sorted(imported_names(path.read_text(), module)):
                if name.split(".")[0] == "agentplatform" and forbidden(name, set()):
                    offending.append(f"{path.relative_to(settings.BASE_DIR)}: {name}")
    assert offending == []
