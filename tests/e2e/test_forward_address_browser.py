"""The forward-to address on Settings (issue 37), in Chromium at 1280x800 and 390x844: the person sees their
private address and the addresses mail is taken from, copies it with the Copy button (read back from the
clipboard), gets a new one (the page names it, and it is what the database holds), and adds an address of theirs,
which waits for its confirmation link. The section fits the screen at both widths; a photograph of it is left in
/tmp/forward-<width>.png to be looked at."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Page, ViewportSize, expect

from accounts.models import User
from integrations.inbound.addresses import forward_address

pytestmark = pytest.mark.e2e

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
ADDED = "me@work.example"

# Where the section's input and buttons are, and whether the page scrolls sideways.
FITS_JS = """() => ({
  scrollWidth: document.documentElement.scrollWidth,
  innerWidth: window.innerWidth,
  controls: Array.from(document.querySelectorAll(
    '#forward-address-value, #forward-address button, #forward-address input[type=email]'
  )).map(el => { const box = el.getBoundingClientRect();
                 return {id: el.id || el.textContent.trim(), left: box.left, right: box.right}; }),
})"""


def expect_section_fits(page: Page) -> None:
    fits = page.evaluate(FITS_JS)
    assert fits["scrollWidth"] <= fits["innerWidth"], f"the page scrolls sideways: {fits}"
    outside = [c for c in fits["controls"] if c["left"] < 0 or c["right"] > fits["innerWidth"]]
    assert outside == [], f"controls of the section outside the screen: {outside}"
    # The whole address shows (it wraps on a phone): none of it is hidden past the field's edge.
    assert page.locator("#forward-address-value").evaluate("el => el.scrollWidth <= el.clientWidth")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_forward_address_shown_copied_rotated_and_a_sender_added(
    live_site: str, consenting_user: User, signed_in: Page, viewport: ViewportSize
) -> None:
    page = signed_in
    page.set_viewport_size(viewport)
    section = page.locator("#forward-address")
    value = page.locator("#forward-address-value")

    # 1. Settings: the private address, and the account's own email first among those mail is taken from.
    page.goto(f"{live_site}/settings/")
    section.scroll_into_view_if_needed()
    expect(section.locator("h2")).to_have_text("Forward emails to Tasklift")
    expect(value).to_be_in_viewport()
    expect(value).to_have_value(re.compile(r"^tasks\+[a-z2-7]+@" + re.escape(settings.INBOUND_DOMAIN) + "$"))
    first = value.input_value()
    assert first == forward_address(user=consenting_user).account_address
    expect(page.locator("#forward-senders > li").first.locator(".address")).to_have_text(consenting_user.email)
    expect_section_fits(page)

    # 2. Copy: the button shows once the script finds a clipboard, and the clipboard then holds the address.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_site)
    copy = page.locator("#copy-forward-address")
    expect(copy).to_be_visible()
    copy.click()
    expect(page.locator("#forward-copied")).to_have_text("Copied.")
    assert page.evaluate("() => navigator.clipboard.readText()") == first

    # 3. A new address: back on the section, named by the message, and the one the database holds.
    page.locator("#rotate-forward-address").click()
    expect(page).to_have_url(f"{live_site}/settings/#forward-address")
    expect(value).not_to_have_value(first)
    rotated = value.input_value()
    assert rotated == forward_address(user=consenting_user).account_address
    assert rotated.startswith("tasks+") and rotated.endswith(f"@{settings.INBOUND_DOMAIN}"), rotated
    expect(page.locator(".messages")).to_contain_text(f"Your new address is {rotated}.")
    expect(value).to_be_in_viewport()  # the redirect's #forward-address brings the section into view

    # 4. Another address of theirs: listed, waiting for the link sent to it.
    section.get_by_label("Another address of yours").fill(ADDED)
    page.locator("#add-forward-sender").click()
    expect(page).to_have_url(f"{live_site}/settings/#forward-address")
    expect(page.locator(".messages")).to_contain_text(f"We sent a link to {ADDED}.")
    waiting = page.locator("#forward-senders > li[data-forward-sender]").filter(has_text=ADDED)
    expect(waiting).to_have_count(1)
    expect(waiting.locator(".meta")).to_contain_text("waiting for you to open the link we sent to it")
    expect(page.locator("#forward-senders > li").first.locator(".address")).to_have_text(consenting_user.email)

    # 5. Nothing of the section past the screen's edge; its photograph, to be looked at.
    expect(copy).to_be_visible()
    expect_section_fits(page)
    section.screenshot(path=str(Path("/tmp") / f"forward-{viewport['width']}.png"))
