"""Defaults that follow other settings, read by a fresh process as a deployment would."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings


def siwe_domain(**environment: str) -> str:
    env = {key: value for key, value in os.environ.items() if key not in ("SIWE_DOMAIN", "WEB_PORT")}
    code = "import django; django.setup(); from django.conf import settings; print(settings.SIWE_DOMAIN)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=django_settings.BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "agentplatform.settings", **environment},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, "localhost:8000"),
        ({"WEB_PORT": "8101"}, "localhost:8101"),
        ({"WEB_PORT": "8101", "SIWE_DOMAIN": "agents.example.com"}, "agents.example.com"),
    ],
)
def test_siwe_domain_follows_the_port_make_run_serves_on_unless_set(environment, expected):
    assert siwe_domain(**environment) == expected
