"""The environment, read here and only here: the django-environ reader (with `.env` at the
checkout's root, when present) and the typed readers every settings module uses. Each reader
raises ImproperlyConfigured naming the variable, so a bad value stops start-up saying which."""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from agentplatform.plumbing.rates import RATE_RULE, rate_parse

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")


def env_positive_int(name: str, default: int) -> int:
    try:
        value = env.int(name, default=default)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer") from exc
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be a positive integer, got {value}")
    return value


def env_non_negative(name: str, default: int | float) -> int | float:
    """An integer or a number (the default's type) of 0 or more."""
    integer = isinstance(default, int)
    try:
        value = env.int(name, default=default) if integer else env.float(name, default=default)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {'an integer' if integer else 'a number'}") from exc
    if value < 0:
        raise ImproperlyConfigured(f"{name} must not be negative, got {value}")
    return value


_HOST_NAME = re.compile(r"(?=.{1,253}\Z)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?\Z")


def env_hosts(name: str, *, networks: bool = False) -> list[str]:
    """Comma-separated host names or IP addresses (and, with `networks`, CIDR networks), lower-cased."""
    values = [value.strip().lower() for value in env.list(name, default=[]) if value.strip()]
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False) if networks else ipaddress.ip_address(value)
        except ValueError:
            if not _HOST_NAME.match(value):
                allowed = "host names or IP addresses" + (" or networks (10.0.0.0/8)" if networks else "")
                raise ImproperlyConfigured(
                    f"{name} must list {allowed}, comma separated, without scheme, port or path; got {value!r}"
                ) from None
    return values


def env_weights(name: str, default: dict[str, float]) -> dict[str, float]:
    """`key=number,key=number,...` (django-environ's dict syntax), every number finite."""
    text = env.str(name, default="").strip()
    if not text:
        return dict(default)
    example = ",".join(f"{key}={value}" for key, value in list(default.items())[:2])
    try:
        weights = {key.strip(): float(value) for key, value in env.parse_value(text, dict).items()}
    except ValueError:
        weights = {}
    if not weights or not all(math.isfinite(weight) for weight in weights.values()):
        raise ImproperlyConfigured(f"{name} must look like {example},... with a finite number each, got {text!r}")
    return weights


def env_boolean(name: str, default: bool) -> bool:
    value = env.str(name, default="").strip().lower()
    if not value:
        return default
    if value not in {"true", "false", "1", "0", "yes", "no", "on", "off"}:
        raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")
    return value in {"true", "1", "yes", "on"}


def env_rate(name: str, default: str) -> str:
    """A rate limit such as `100/m` (count per s, m, h or d, optionally `5/10s`)."""
    value = env.str(name, default=default).strip()
    try:
        rate_parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} {RATE_RULE}, got {value!r}") from None
    return value
