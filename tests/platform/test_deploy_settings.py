"""Production settings from the environment: `manage.py check --deploy` finds nothing to report
with the variables docs/operations.md's "Production settings" lists, and a bad value stops start-up naming it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings as django_settings

BASE_DIR = Path(django_settings.BASE_DIR)
HTTPS_VARIABLES = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "TRUSTED_PROXY_COUNT",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
)
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "k7Qf2pX9vL4mZr8sT1wY6nB3cH5jD0gA-uE_oI7yR2tW9qS4xV8zN1mK6bJ3hF5d",
    "ALLOWED_HOSTS": "agents.example.com",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}


def run(arguments: list[str], environment: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in HTTPS_VARIABLES}
    # A server database that check --deploy never connects to; nothing starts the embedded one.
    env.update({"DATABASE_URL": "postgres://agents:secret@127.0.0.1:1/agents", "VAR_DIR": str(tmp_path)})
    env.update(environment)
    return subprocess.run(
        [sys.executable, *arguments], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_reports_nothing_with_the_production_variables(tmp_path):
    result = run(["manage.py", "check", "--deploy", "--fail-level", "DEBUG"], PRODUCTION, tmp_path)

    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "System check identified no issues (0 silenced).\n",
        "",
    )


def test_without_them_check_deploy_names_what_is_missing(tmp_path):
    result = run(["manage.py", "check", "--deploy"], {"SECRET_KEY": PRODUCTION["SECRET_KEY"]}, tmp_path)

    assert result.returncode == 0  # warnings only
    reported = sorted(re.findall(r"^\?: \((security\.W\d+)\)", result.stderr, re.MULTILINE))
    assert reported == ["security.W004", "security.W008", "security.W012", "security.W016"]


def test_cookies_follow_the_redirect_and_trusted_proxies_say_when_the_request_was_https(tmp_path):
    script = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "getattr(s, 'SECURE_PROXY_SSL_HEADER', None)]))"
    )
    environment = {"DJANGO_SETTINGS_MODULE": "agentplatform.settings"}

    plain = run(["-c", script], environment, tmp_path)
    redirected = run(
        ["-c", script], {**environment, "SECURE_SSL_REDIRECT": "true", "TRUSTED_PROXY_COUNT": "1"}, tmp_path
    )
    overridden = run(
        ["-c", script], {**environment, "SECURE_SSL_REDIRECT": "yes", "SESSION_COOKIE_SECURE": "off"}, tmp_path
    )

    assert json.loads(plain.stdout) == [False, False, None]
    assert json.loads(redirected.stdout) == [True, True, ["HTTP_X_FORWARDED_PROTO", "https"]]
    assert json.loads(overridden.stdout) == [False, True, None]


def test_a_value_that_is_not_a_boolean_stops_start_up_naming_the_variable(tmp_path):
    result = run(["manage.py", "check"], {"SECURE_SSL_REDIRECT": "ture"}, tmp_path)

    assert result.returncode == 1
    assert "ImproperlyConfigured: SECURE_SSL_REDIRECT must be true or false, got 'ture'" in result.stderr
