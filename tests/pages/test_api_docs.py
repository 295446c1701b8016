"""/api/docs/: a page to read the API, its scripts served from this console (no CDN)."""

import re

import pytest

pytestmark = pytest.mark.django_db


def test_the_api_docs_page_is_served_locally_behind_the_login(client, as_user, bob):
    assert client.get("/api/docs/").status_code == 302  # the site's login first
    page = as_user(bob).get("/api/docs/").content.decode()
    assert "swagger-ui" in page
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in s for s in sources)
    assert not [s for s in sources if s.startswith(("http://", "https://", "//"))]
    redoc = as_user(bob).get("/api/redoc/").content.decode()
    assert "drf_spectacular_sidecar/redoc" in redoc


def test_every_page_links_the_api_docs_from_its_footer(as_user, bob):
    page = as_user(bob).get("/").content.decode()
    assert '<a href="/api/docs/">API docs</a>' in page


def test_the_schema_names_each_class_in_plain_words(as_user, bob):
    schema = as_user(bob).get("/api/schema/", HTTP_ACCEPT="application/json").json()
    text = str(schema)
    assert "A · a rank left or stalled outside the collective" in text
    assert "classification_name" in text
