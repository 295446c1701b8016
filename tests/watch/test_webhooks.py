"""Webhook URLs are user strings; the page is Slack-compatible JSON; one bounded POST."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.watch.receiver import Receiver
from watch.webhooks import page_body, post_json, validate_webhook_url

VERDICT = {
    "classification": "A",
    "summary": "rank 3 left the job",
    "suspect_ranks": [3],
    "suspect_nodes": ["lab-node-1"],
}


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/x",
        "file:///etc/passwd",
        "https://user:secret@hooks.example.com/x",
        "https:///nohost",
        "https://hooks.example.com/a b",
        "https://hooks.example.com/x\nHost: evil",
        "javascript:alert(1)",
        "https://hooks.example.com:99999/x",
        "https://" + "a" * 600 + ".com/",
    ],
)
def test_it_refuses_urls_that_are_not_plain_http(url):
    with pytest.raises(ValidationError):
        validate_webhook_url(url)


def test_it_accepts_https_and_http():
    validate_webhook_url("https://hooks.slack.com/services/T000/B000/XXXX")
    validate_webhook_url("http://127.0.0.1:8080/hook")
    validate_webhook_url("")  # no webhook


def test_an_allow_list_limits_the_hosts(settings):
    settings.WATCH_WEBHOOK_HOSTS = ["hooks.slack.com", ".corp.example"]
    validate_webhook_url("https://hooks.slack.com/services/x")
    validate_webhook_url("https://pager.corp.example/x")
    with pytest.raises(ValidationError):
        validate_webhook_url("http://127.0.0.1:8080/hook")
    with pytest.raises(ValidationError):
        validate_webhook_url("https://corp.example.evil.com/x")


def test_the_page_carries_the_verdict_the_suspects_and_the_link():
    body = page_body(
        cluster="gpt-train", reason="stalled: step 9 is 30 s old", verdict=VERDICT,
        incident_ref="INC-7", incident_url="https://hangdesk.example/incidents/7/",
    )  # fmt: skip
    assert "gpt-train" in body["text"] and "INC-7" in body["text"]
    assert "A: rank 3 left the job" in body["text"] and "ranks 3 on lab-node-1" in body["text"]
    assert "https://hangdesk.example/incidents/7/" in body["text"]
    assert all(block["type"] == "section" for block in body["blocks"])
    assert "<https://hangdesk.example/incidents/7/|INC-7>" in body["blocks"][0]["text"]["text"]
    assert body["hangdesk"]["suspect_ranks"] == [3]


def test_a_page_without_verdict_says_so():
    body = page_body(cluster="c", reason="r", verdict=None, incident_ref="INC-1", incident_url="u")
    assert "no verdict yet" in body["text"] and body["hangdesk"]["classification"] is None


def test_it_posts_json_to_a_loopback_receiver():
    with Receiver() as receiver:
        delivery = post_json(receiver.url, {"text": "hello"}, timeout_s=5)
    assert delivery.ok and delivery.detail == "HTTP 200"
    assert receiver.posts == [
        {"status": 200, "body": {"text": "hello"}, "content_type": "application/json"}
    ]


def test_a_failing_receiver_is_a_failed_delivery_not_an_exception():
    with Receiver(statuses=[500]) as receiver:
        delivery = post_json(receiver.url, {"text": "x"}, timeout_s=5)
    assert not delivery.ok and delivery.detail == "HTTP 500"


def test_a_closed_port_is_a_failed_delivery():
    with Receiver() as receiver:
        url = receiver.url
    delivery = post_json(url, {"text": "x"}, timeout_s=2)
    assert not delivery.ok and delivery.detail == "unreachable"  # a class, not the socket error


def test_redirects_are_not_followed():
    with Receiver(statuses=[302]) as receiver:
        delivery = post_json(receiver.url, {"text": "x"}, timeout_s=5)
    assert not delivery.ok and delivery.detail == "HTTP 302" and len(receiver.posts) == 1
