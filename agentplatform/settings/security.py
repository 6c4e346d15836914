"""Who may come in and how: passwords, sessions, HTTPS, the proxies trusted to name the client,
bearer credentials and wallet (SIWE) sign-in."""

from __future__ import annotations

from agentplatform.settings.env import env, env_boolean, env_non_negative, env_positive_int

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
SESSION_ENGINE = "django.contrib.sessions.backends.db"

# HTTPS is off by default because `make run` serves plain HTTP on localhost; docs/configuration
# gives the values under which `manage.py check --deploy` reports nothing.
SECURE_SSL_REDIRECT = env_boolean("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_non_negative("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_boolean("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_boolean("SECURE_HSTS_PRELOAD", False)
# Cookies travel over HTTPS only once plain HTTP is redirected there, unless said otherwise.
SESSION_COOKIE_SECURE = env_boolean("SESSION_COOKIE_SECURE", SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = env_boolean("CSRF_COOKIE_SECURE", SECURE_SSL_REDIRECT)

TRUSTED_PROXY_COUNT = env_non_negative("TRUSTED_PROXY_COUNT", 0)
if TRUSTED_PROXY_COUNT:
    # The proxies terminate TLS and say so (they must overwrite, not pass on, the client's header).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# The plumbing (agentplatform/plumbing/authentication.py) checks a bearer token through this
# function of the identity app, which it does not import.
CREDENTIAL_VERIFIER = "agents.credentials.bearer_token_verify"
# Revocations take effect at once whatever this is: any key or session change bumps the
# credentials' cache generation.
CREDENTIAL_CACHE_SECONDS = env_non_negative("CREDENTIAL_CACHE_SECONDS", 60)

# By default the host and port `make run` serves on, so that the demo's signed messages verify.
SIWE_DOMAIN = env.str("SIWE_DOMAIN", default="") or f"localhost:{env.str('WEB_PORT', default='8000')}"
SIWE_NONCE_TTL_SECONDS = env_positive_int("SIWE_NONCE_TTL_SECONDS", 600)
WALLET_SESSION_TTL_SECONDS = env_positive_int("WALLET_SESSION_TTL_SECONDS", 24 * 3600)
