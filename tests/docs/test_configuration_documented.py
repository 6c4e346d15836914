"""Every environment variable the service reads is explained once, in docs/configuration.md (one
heading each), and listed once in .env.example; nothing is documented that is not read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
ENV_EXAMPLE = ROOT / ".env.example"


def settings_variables() -> set[str]:
    """The names the settings read, recorded while a fresh interpreter imports them with no
    configuration at all (so every default's branch runs; the dummy DATABASE_URL keeps the embedded
    PostgreSQL from starting, and nothing connects to it)."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.docs.environment_reads"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(result.stdout))


def procfile_variables() -> set[str]:
    return set(re.findall(r"\$\{(\w+)", (ROOT / "Procfile").read_text()))


def documented_headings() -> Counter[str]:
    return Counter(re.findall(r"^### ([A-Z][A-Z0-9_]*)\s*$", CONFIGURATION.read_text(), flags=re.MULTILINE))


def env_example_names() -> Counter[str]:
    # `NAME=value`, or `# NAME=value` for a default that depends on the host.
    return Counter(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), flags=re.MULTILINE))


def test_the_recorder_sees_the_settings_reading_the_environment():
    variables = settings_variables()

    # Read by django-environ, by a helper of the settings, and only on a default's branch (WEB_PORT
    # feeds SIWE_DOMAIN's default): a recorder missing any of these would let the test below pass.
    assert {"DATABASE_URL", "REDIS_URL", "RATE_LIMIT_PUBLIC", "SEARCH_TRUST_WEIGHTS", "WEB_PORT"} <= variables
    # What libraries read for themselves is not ours.
    assert not {name for name in variables if name.startswith(("CELERY_BENCH", "KOMBU_", "PSYCOPG_", "PYTHON"))}


def test_every_variable_read_has_exactly_one_heading_in_the_configuration_page():
    read = settings_variables() | procfile_variables()
    headings = documented_headings()

    assert sorted(name for name in read if headings[name] == 0) == []
    assert sorted(name for name, count in headings.items() if count > 1) == []
    assert sorted(name for name in headings if name not in read) == []


def test_every_variable_read_is_listed_once_in_env_example():
    read = settings_variables() | procfile_variables()
    listed = env_example_names()

    assert sorted(name for name in read if listed[name] == 0) == []
    assert sorted(name for name, count in listed.items() if count > 1) == []
    assert sorted(name for name in listed if name not in read) == []
