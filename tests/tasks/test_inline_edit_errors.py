"""An inline edit with a mistake shows its errors in its row, in development (DEBUG, as `make run`) and in
production alike: no script on the page may swap the whole page for the row's 400 answer."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django import Settings

from tasks.services import task_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.mark.parametrize("debug", [True, False], ids=["development", "production"])
def test_inline_edit_mistake_answers_the_row_and_no_page_swapping_script(
    client: Client, settings: Settings, debug: bool
) -> None:
    settings.DEBUG = debug
    user = UserFactory()
    task = task_create(user=user, title="Call the plumber")
    client.force_login(user)

    page = client.get("/")
    assert page.status_code == 200
    # django-htmx's debug script replaces the whole document with any htmx 400/403/404/500 answer.
    assert "django-htmx.js" not in page.content.decode()
    assert "htmx-2.min.js" in page.content.decode()  # htmx itself is still there

    answer = client.post(f"/tasks/{task.pk}/edit", {"title": "", "due_date": "31/31/2026"}, headers=HTMX)
    assert answer.status_code == 400
    body = answer.content.decode()
    assert body.lstrip().startswith(f'<li class="task editing" id="task-{task.pk}"')  # the row, not a page
    assert "<html" not in body
    assert "This field is required" in body
    assert "Enter a valid date" in body
