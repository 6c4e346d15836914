"""The settings package: the environment is read in env.py alone, and no settings module imports
an app (the fitted parameters they once validated are data of groundtruth/search/fitted/)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from tests.platform.test_plumbing_imports import imported_names, project_apps

SETTINGS = Path(settings.BASE_DIR) / "agentplatform" / "settings"


def _modules() -> list[Path]:
    return sorted(SETTINGS.glob("*.py"))


def test_the_settings_are_one_module_per_concern():
    assert [path.name for path in _modules()] == [
        "__init__.py",
        "api.py",
        "brand_assets.py",
        "cache.py",
        "celery.py",
        "chat.py",
        "core.py",
        "database.py",
        "env.py",
        "health.py",
        "inference.py",
        "ingest.py",
        "logging.py",
        "mcp.py",
        "rate_limits.py",
        "search.py",
        "security.py",
    ]


def test_only_env_reads_the_environment():
    readers = {
        path.name
        for path in _modules()
        if {"environ", "os.environ", "os.getenv"} & imported_names(path.read_text(), "agentplatform.settings")
        or "os.environ" in path.read_text()
        or "getenv" in path.read_text()
    }

    assert readers == {"env.py"}


def test_no_settings_module_imports_an_app():
    apps = project_apps()
    offending = [
        f"{path.name}: {name}"
        for path in _modules()
        for name in sorted(imported_names(path.read_text(), f"agentplatform.settings.{path.stem}"))
        if name.split(".")[0] in apps
    ]

    assert offending == []
