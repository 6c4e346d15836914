"""Shared fixtures. Tests run against the real embedded PostgreSQL (pgvector) and real Redis."""

from __future__ import annotations

import inspect
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType

# A key prefix of our own, so that runs sharing one Redis (several checkouts, CI) never see
# each other's rate-limit counters or cache entries.
os.environ.setdefault("CACHE_KEY_PREFIX", f"test-{uuid.uuid4().hex[:12]}")

import pytest
from django.conf import settings

# pytest-django has already read the settings (with the default prefix) before this module runs;
# the caches are built lazily, so setting the prefix here still reaches every cache key.
for _alias in settings.CACHES:
    settings.CACHES[_alias]["KEY_PREFIX"] = os.environ["CACHE_KEY_PREFIX"]
# The question audit is written by the request's thread here, inside the test's transaction, so a
# test reads its record back at once and leaves nothing behind; the writer thread of production
# is tested on its own (tests/groundtruth/test_question_audit_writer.py). Servers a test starts
# get the default.
settings.QUESTION_AUDIT_BACKGROUND = False
# On by default in the service; here an ingest would queue a fit to the broker after every test
# corpus. The adaptation's tests turn it on; the Celery workers tests start have it off too
# (tests/celeryworker.py).
settings.ENCODER_ADAPTATION_ENABLED = False

from django.core.cache import cache  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402
from selenium.webdriver.chrome.webdriver import WebDriver  # noqa: E402

from tests.chromium import STAFF_PASSWORD, STAFF_USERNAME, Browser, chromium_start  # noqa: E402
from tests.flush import transactional_teardown_retrying_deadlocks  # noqa: E402

# --- Markers by mechanism (`make check` deselects `slow` and `browser`) ------------------------

BROWSER_TESTS = Path(__file__).parent / "browser"

# Names whose use means a test starts another process (a server, a worker, a fresh interpreter
# reading the settings, an embedded PostgreSQL, the ONNX export of the embedding model): seconds
# each, so they are `slow`.
_PROCESS_STARTERS = frozenset(
    {
        "executable",
        "gunicorn_server",
        "procfile_server",
        "celery_worker",
        "stream_server",
        "get_server",
        "exported_model_ensure",
        "prepare_in_background",
        "LocalSentenceTransformer",
    }
)


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            yield from _code_objects(constant)


def _starts_processes(function: Callable, seen: set[CodeType]) -> bool:
    """Whether `function`, or a function of the tests it calls (transitively), names a process starter."""
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    namespace = function.__globals__
    for nested in _code_objects(code):
        for name in nested.co_names:
            if name in _PROCESS_STARTERS:
                return True
            referenced = namespace.get(name)
            if (
                inspect.isfunction(referenced)
                and referenced.__module__.startswith("tests.")
                and _starts_processes(referenced, seen)
            ):
                return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`browser` for everything under tests/browser/; `slow` for tests that start processes
    (by their body, their fixtures and the test helpers these call) or run schemathesis."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if BROWSER_TESTS in item.path.parents:
            item.add_marker(pytest.mark.browser)
        seen: set[CodeType] = set()
        fixture_functions = [
            definition.func for definitions in item._fixtureinfo.name2fixturedefs.values() for definition in definitions
        ]
        if "schemathesis" in vars(item.module) or any(
            _starts_processes(function, seen) for function in [item.obj, *fixture_functions]
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _flush_retried_on_deadlock() -> Iterator[None]:
    # Live stream servers and workers read the test database while a test's flush truncates it.
    with transactional_teardown_retrying_deadlocks():
        yield


def _clear_our_redis_keys() -> None:
    client = cache._cache.get_client()  # the redis-py client behind Django's RedisCache
    prefix = os.environ["CACHE_KEY_PREFIX"]
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture(autouse=True)
def _fresh_redis_state():
    from agentplatform.health import health_probe
    from agentplatform.plumbing.authentication import verified_credentials
    from agentplatform.plumbing.response_cache import rendered_responses

    # Nothing a test's requests remembered in this process outlives the test.
    verified_credentials.clear()
    rendered_responses.clear()
    health_probe.clear()
    _clear_our_redis_keys()
    yield
    _clear_our_redis_keys()
    verified_credentials.clear()
    rendered_responses.clear()
    # A health check a test left waiting on a peer it froze would make the next test's report
    # say "the previous check of it has not finished".
    health_probe.checks_finish(timeout=10)


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends


def redis_cache_at(url: str) -> dict:
    """CACHES with both caches (the default one; the counters: rate limits, cache generations) at `url`."""
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "down",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        },
        "counters": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "down",
            "OPTIONS": {
                "SOCKET_CONNECT_TIMEOUT": 0.5,
                "SOCKET_TIMEOUT": 0.5,
                "REDIS_CLIENT_KWARGS": {"single_connection_client": True},
            },
        },
    }


@pytest.fixture
def redis_unreachable(settings) -> None:
    """From here on the test's requests find no Redis (a closed port)."""
    settings.CACHES = redis_cache_at(f"redis://127.0.0.1:{closed_port()}/0")


@pytest.fixture(autouse=True)
def _git_sources_of_the_tests(settings, tmp_path_factory) -> None:
    """Test repositories live under pytest's temporary directories and the test git servers listen
    on 127.0.0.1; the production defaults refuse both (tests/groundtruth/test_git_source_rule.py
    pins the defaults and the refusals)."""
    settings.GIT_LOCAL_ROOTS = [tmp_path_factory.getbasetemp()]
    settings.GIT_ALLOW_PRIVATE_HOSTS = ["127.0.0.1"]


@pytest.fixture
def api_client() -> APIClient:
    return APIClient(raise_request_exception=False)


# --- Browser tests (tests/chromium.py) -------------------------------------------------------


@pytest.fixture(scope="session")
def live_server(django_db_setup, live_server):
    """pytest-django's live server, started after the test database exists so that it stops before
    the database is dropped, and only once the threads of its last requests have ended: each holds
    a database connection until its client closes the connection (Chromium keeps them alive)."""
    yield live_server
    for thread in threading.enumerate():
        if thread.name.endswith("(process_request_thread)"):
            thread.join(timeout=5)


@pytest.fixture(scope="session")
def chromium(live_server) -> Iterator[WebDriver]:
    """One headless Chromium for the whole session (starting one takes about a second). It quits
    before the live server stops (it depends on it), closing the connections it kept alive."""
    driver = chromium_start()
    yield driver
    driver.quit()


@pytest.fixture
def browser(live_server, chromium) -> Iterator[Browser]:
    """Chromium at the live server, signed out; forgets its cookies after the test."""
    browser = Browser(driver=chromium, base_url=live_server.url)
    yield browser
    browser.reset()


@pytest.fixture
def staff_user(django_user_model):
    """A staff superuser with the password the browser signs in with."""
    return django_user_model.objects.create_superuser(STAFF_USERNAME, "staff@example.com", STAFF_PASSWORD)


@pytest.fixture
def staff_browser(browser, staff_user) -> Browser:
    """Chromium signed in to the admin (through its login form) as `staff_user`."""
    browser.login(STAFF_USERNAME, STAFF_PASSWORD)
    return browser
