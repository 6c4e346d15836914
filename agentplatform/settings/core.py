"""Django itself: where the checkout keeps its files, the secret key, hosts, apps, middleware,
templates, locale and static files."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from pathlib import Path

from django.utils.functional import lazy

from agentplatform.settings.env import BASE_DIR, env, env_positive_int

# Importing the settings creates and writes nothing: what lives under VAR_DIR (the secret key file,
# static files, git caches, demo data) is made by whatever first needs it. (The embedded
# PostgreSQL, used while DATABASE_URL is unset, is still started by settings/database.py; it
# creates VAR_DIR.)
VAR_DIR = Path(env.str("VAR_DIR", default="") or BASE_DIR / "var")


@functools.cache
def _secret_key_of_this_checkout() -> str:
    """The key generated once and kept in VAR_DIR/secret_key (mode 0600), made by the first
    process that signs something (a session, a CSRF token), not by importing the settings."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        draft = VAR_DIR / f"secret_key.{os.getpid()}"
        draft.write_text(secrets.token_urlsafe(50))
        draft.chmod(0o600)
        # Published whole: of processes starting at once, one link wins and all read its key.
        with contextlib.suppress(FileExistsError):
            os.link(draft, key_file)
        draft.unlink()
    return key_file.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or lazy(_secret_key_of_this_checkout, str)()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "agentplatform.apps.ThrottledAdminConfig",  # django.contrib.admin, sign-ins rate-limited
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_ratelimit",  # its system check: RATELIMIT_USE_CACHE is a shared cache with atomic incr
    "agentplatform",
    "agents",
    "coin",
    "chat",
    "groundtruth",
    "brandassets",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "agentplatform.plumbing.errors.ProblemDetailsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "agentplatform.urls"
WSGI_APPLICATION = "agentplatform.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# The admin's change pages write moments as its change lists do ("2026-11-22 19:43", not
# "Nov. 22, 2026, 7:43 p.m."): agentplatform/plumbing/formats/en/formats.py.
FORMAT_MODULE_PATH = ["agentplatform.plumbing.formats"]

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"  # filled by `manage.py collectstatic` (make run)

DATA_UPLOAD_MAX_MEMORY_SIZE = env_positive_int("MAX_REQUEST_BODY_BYTES", 64 * 1024)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
