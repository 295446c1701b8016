"""The 512 MiB upload cap was enforced before reading only for token API calls: the page,
session API calls and anonymous POSTs carrying a CSRF cookie were spooled whole to disk
first (Django's CSRF check reads the form). Now Content-Length decides before anything reads
the body (core/bodycap.py). The test client's body is empty: a server reading the declared
length would fail on it (FakePayload), so a 413 here is one given before any read."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db
GIB = str(1 << 30)
FORM = "multipart/form-data; boundary=xyz"


def _post(client: Client, url: str, length: str, **extra):
    return client.generic("POST", url, b"", content_type=FORM, CONTENT_LENGTH=length, **extra)


@pytest.fixture
def browser(bob) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    client.get("/")  # the CSRF cookie, as a browser holds it
    return client


def test_the_page_upload_is_refused_from_its_length(browser, incident):
    answer = _post(browser, f"/incidents/{incident.pk}/bundles/", GIB)
    assert answer.status_code == 413 and b"over the 512 MiB bundle limit" in answer.content


def test_a_session_api_upload_is_refused_from_its_length(browser, incident):
    answer = _post(browser, f"/api/v1/incidents/{incident.pk}/bundles/", GIB)
    assert answer.status_code == 413 and "512 MiB bundle limit" in answer.json()["bundle"]


def test_an_anonymous_post_with_a_csrf_cookie_is_refused_from_its_length(incident):
    anonymous = Client(enforce_csrf_checks=True)
    anonymous.get("/login/")
    for url in (f"/incidents/{incident.pk}/bundles/", "/login/", "/s/" + "x" * 43 + "/"):
        assert _post(anonymous, url, str(10 << 20)).status_code == 413, url


def test_a_viewer_gets_no_bundle_sized_cap(carol, incident):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    answer = _post(client, f"/incidents/{incident.pk}/bundles/", str(100 << 20))
    assert answer.status_code == 413 and b"8 MiB request limit" in answer.content


def test_ordinary_posts_are_untouched(browser):
    assert browser.post("/login/", {}).status_code == 403  # no CSRF token: the usual refusal
