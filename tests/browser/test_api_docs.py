"""Swagger UI at /api/docs/ in Chromium: a lock on exactly the operations that need a key, open
until a key is given and closed after."""

from __future__ import annotations

from django.conf import settings

SEGMENT = settings.COIN_SEGMENT


def operation_locks(browser) -> dict[str, str]:
    """'METHOD /path' -> the aria-label of its lock button, or '' for an operation without one."""
    return browser.driver.execute_script(
        """
        const locks = {};
        for (const block of document.querySelectorAll('.opblock')) {
          const method = block.querySelector('.opblock-summary-method').textContent.trim();
          const path = block.querySelector('.opblock-summary-path').getAttribute('data-path');
          const lock = block.querySelector('.authorization__btn');
          locks[method + ' ' + path] = lock ? lock.getAttribute('aria-label') : '';
        }
        return locks;
        """
    )


def test_swagger_shows_no_lock_on_public_operations_and_an_open_one_on_protected_ones(browser):
    browser.open("/api/docs/")
    browser.wait_for(".opblock")

    locks = operation_locks(browser)
    assert {name: locks[name] for name in ("GET /api/agents", "GET /api/chat", "GET /health")} == {
        "GET /api/agents": "",
        "GET /api/chat": "",
        "GET /health": "",
    }
    assert {name: locks[name] for name in ("POST /api/chat", f"GET /api/{SEGMENT}/balance", "GET /search")} == {
        "POST /api/chat": "authorization button unlocked",
        f"GET /api/{SEGMENT}/balance": "authorization button unlocked",
        "GET /search": "authorization button unlocked",
    }
    browser.screenshot("api-docs")
    assert browser.console_errors() == []

    # Given a bearer key, the locks of the operations that take one close; public ones stay bare.
    browser.find(".auth-wrapper .authorize").click()
    browser.wait_for(".modal-ux input[type=text]").send_keys("sk_example")
    browser.find(".modal-ux .auth-btn-wrapper .authorize").click()
    browser.find(".modal-ux .btn-done").click()

    locks = operation_locks(browser)
    assert (locks["GET /api/agents"], locks["POST /api/chat"], locks["GET /search"]) == (
        "",
        "authorization button locked",
        "authorization button locked",
    )
    browser.screenshot("api-docs-authorized")
