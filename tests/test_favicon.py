"""The icon: every page links it, and /favicon.ico (asked by browsers whatever a page links) is not a 404."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_every_page_links_the_icon_and_favicon_ico_answers_it(client: Client) -> None:
    page = client.get("/login/").content.decode()
    assert 'rel="icon"' in page and "favicon" in page

    answer = client.get("/favicon.ico")

    assert answer.status_code == 301
    assert answer["Location"].endswith(".svg")
