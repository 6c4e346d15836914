"""The browser fixtures themselves: a staff member signs in through the admin's form in Chromium."""

from __future__ import annotations

from tests.chromium import STAFF_USERNAME


def test_staff_signs_in_through_the_login_form_and_sees_the_admin_index(staff_browser):
    assert staff_browser.path == "/admin/"
    # As rendered: the admin's CSS upper-cases these.
    assert staff_browser.text("#user-tools strong") == STAFF_USERNAME.upper()
    assert "AGENTS" in staff_browser.texts("#content-main caption a")
    assert staff_browser.driver.execute_script("return [window.innerWidth, window.innerHeight]") == [1400, 900]
    staff_browser.screenshot("admin-index")
    assert staff_browser.console_errors() == []  # none: no missing favicon, script or style sheet


def test_a_wrong_password_stays_on_the_login_page(browser, staff_user):
    browser.open("/admin/login/?next=/admin/")
    browser.fill("#id_username", STAFF_USERNAME)
    browser.fill("#id_password", "not the password")
    browser.submit("#login-form [type=submit]")
    assert browser.path == "/admin/login/?next=/admin/"
    assert "Please enter the correct username and password" in browser.text(".errornote")
    assert browser.find_all("#user-tools") == []
