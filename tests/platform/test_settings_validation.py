"""The settings module: a bad value stops start-up naming the variable, and importing it creates
and writes nothing. Each case runs in a fresh process, as a deployment starts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

# A server database nothing connects to, so that no embedded PostgreSQL is started.
SERVER_DATABASE = "postgres://agents:secret@127.0.0.1:1/agents"


def python(code: str, tmp_path: Path, **environment: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "VAR_DIR")}
    env.update({"DATABASE_URL": SERVER_DATABASE, "VAR_DIR": str(tmp_path / "var"), **environment})
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def setting(name: str, tmp_path: Path, **environment: str) -> str:
    result = python(f"import agentplatform.settings as s; print(repr(s.{name}))", tmp_path, **environment)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("ASSET_CONTENT_CACHE_BYTES", "-1", "ASSET_CONTENT_CACHE_BYTES must not be negative, got -1"),
        ("ASSET_CONTENT_CACHE_BYTES", "64MB", "ASSET_CONTENT_CACHE_BYTES must be an integer"),
        ("TRUSTED_PROXY_COUNT", "-1", "TRUSTED_PROXY_COUNT must not be negative, got -1"),
        ("TRUSTED_PROXY_COUNT", "one", "TRUSTED_PROXY_COUNT must be an integer"),
        ("INGEST_RETRY_MAX", "-3", "INGEST_RETRY_MAX must not be negative, got -3"),
        ("INGEST_RETRY_MAX", "lots", "INGEST_RETRY_MAX must be an integer"),
        (
            "DATABASE_CONNECT_TIMEOUT_SECONDS",
            "1",
            "DATABASE_CONNECT_TIMEOUT_SECONDS must be at least 2 (libpq's minimum), got 1",
        ),
        (
            "DATABASE_STATEMENT_TIMEOUT_SECONDS",
            "-5",
            "DATABASE_STATEMENT_TIMEOUT_SECONDS must not be negative, got -5.0",
        ),
        (
            "SEARCH_TRUST_WEIGHTS",
            "canonical",
            "SEARCH_TRUST_WEIGHTS must look like canonical=1.0,reviewed=0.98,... with a finite number each, "
            "got 'canonical'",
        ),
        ("SEARCH_RERANK_DEPTH", "-1", "SEARCH_RERANK_DEPTH must not be negative, got -1"),
        (
            "RATE_LIMIT_ADMIN_LOGIN",
            "10/0m",
            "RATE_LIMIT_ADMIN_LOGIN must look like 100/m (count/[n]s|m|h|d), got '10/0m'",
        ),
        (
            "CHAT_STREAM_HEARTBEAT_SECONDS",
            "0",
            "CHAT_STREAM_HEARTBEAT_SECONDS must be a positive number of seconds, got 0.0",
        ),
        (
            "CHAT_STREAM_URL",
            "stream.example.com/api/chat/stream",
            "CHAT_STREAM_URL must be an http(s) URL with a path and no query, got 'stream.example.com/api/chat/stream'",
        ),
        ("CHAT_STREAM_MAX_PER_IP", "0", "CHAT_STREAM_MAX_PER_IP must be a positive integer, got 0"),
        (
            "WEB_BASE_URL",
            "https://docs.example.com/api",
            "WEB_BASE_URL must be http(s)://host[:port] without a path, got 'https://docs.example.com/api'",
        ),
        ("MCP_THREADS", "0", "MCP_THREADS must be a positive integer, got 0"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(tmp_path, variable, value, message):
    result = python("import agentplatform.settings", tmp_path, **{variable: value})

    assert result.returncode == 1
    assert f"django.core.exceptions.ImproperlyConfigured: {message}\n" in result.stderr


def test_good_values_are_read(tmp_path):
    assert setting("ASSET_CONTENT_CACHE_BYTES", tmp_path, ASSET_CONTENT_CACHE_BYTES="0") == "0"
    assert setting("TRUSTED_PROXY_COUNT", tmp_path, TRUSTED_PROXY_COUNT="2") == "2"
    assert setting("INGEST_RETRY_MAX", tmp_path, INGEST_RETRY_MAX="0") == "0"
    assert setting("INGEST_RETRY_MAX", tmp_path) == "3"
    assert setting("WEB_BASE_URL", tmp_path, WEB_PORT="8100") == "'http://127.0.0.1:8100'"
    assert setting("WEB_BASE_URL", tmp_path, WEB_BASE_URL="https://docs.example.com/") == "'https://docs.example.com'"
    assert setting("SEARCH_RERANK_DEPTH", tmp_path, SEARCH_RERANK_DEPTH="0") == "0"
    weights = "canonical=1,reviewed=0.99,community=0.95,transcript=0.9"
    assert setting("SEARCH_TRUST_WEIGHTS", tmp_path, SEARCH_TRUST_WEIGHTS=weights) == (
        "{'canonical': 1.0, 'reviewed': 0.99, 'community': 0.95, 'transcript': 0.9}"
    )


def test_importing_the_settings_creates_no_directory_and_writes_no_file(tmp_path):
    result = python("import agentplatform.settings as s; print(s.VAR_DIR, s.STATIC_ROOT)", tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'var'} {tmp_path / 'var' / 'staticfiles'}\n"
    assert list(tmp_path.iterdir()) == []


def test_the_secret_key_is_made_once_by_the_first_process_that_signs_and_kept(tmp_path):
    sign = (
        "import django; django.setup(); from django.core import signing; print(signing.loads(signing.dumps('hello')))"
    )
    key_of = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    environment = {"DJANGO_SETTINGS_MODULE": "agentplatform.settings"}

    signed = python(sign, tmp_path, **environment)
    key_file = tmp_path / "var" / "secret_key"
    first, second = python(key_of, tmp_path, **environment), python(key_of, tmp_path, **environment)
    configured = python(key_of, tmp_path, SECRET_KEY="from-the-environment", **environment)

    assert (signed.returncode, signed.stdout) == (0, "hello\n"), signed.stderr
    assert sorted(path.name for path in (tmp_path / "var").iterdir()) == ["secret_key"]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(key_file.read_text()) >= 50
    assert first.stdout == second.stdout == f"{key_file.read_text()}\n"
    assert configured.stdout == "from-the-environment\n"
