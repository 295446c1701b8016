"""The cluster pages' one read each (clusters/selectors.py): what the list and a cluster's
page show, in a number of queries that does not grow with clusters or nodes."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters import selectors
from clusters.forms import NodeForm
from clusters.models import NodeCheck
from clusters.services import cluster_create, node_create
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db


def _add_nodes(cluster, count: int, *, first: int = 10) -> None:
    for index in range(first, first + count):
        node_create(
            cluster=cluster, name=f"gpu-{index}", address=f"127.0.9.{index}", port=22,
            username="root", key_path="", host_key=HOST_KEY,
        )  # fmt: skip


def _queries(read) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def test_the_list_shows_every_cluster_with_its_node_count(cluster):
    cluster_create(name="aaa-empty", description="", expected_world_size=None, log_globs=[])
    page = selectors.cluster_list_page()
    assert [(c.name, c.node_count) for c in page.clusters] == [("aaa-empty", 0), ("gpt-train", 2)]
    assert set(page.context()) == {"clusters"}


def test_the_list_is_one_query_whatever_the_clusters(cluster):
    assert _queries(selectors.cluster_list_page) == 1
    for index in range(5):
        other = cluster_create(name=f"c{index}", description="", expected_world_size=None,
                               log_globs=[])  # fmt: skip
        _add_nodes(other, 3, first=10 + 3 * index)
    assert _queries(selectors.cluster_list_page) == 1
    assert len(selectors.cluster_list_page().clusters) == 6


def test_a_clusters_page_lists_its_nodes_by_name_and_says_when_a_check_runs(cluster):
    cluster.nodes.update(check_state=NodeCheck.OK)  # added nodes are being checked
    page = selectors.cluster_page(cluster)
    assert [n.name for n in page.nodes] == ["gpu-0", "gpu-1"]
    assert page.checking is False and page.node_form is None
    cluster.nodes.filter(name="gpu-1").update(check_state=NodeCheck.CHECKING)
    form = NodeForm(cluster=cluster)
    page = selectors.cluster_page(cluster, node_form=form)
    assert page.checking is True and page.node_form is form
    assert set(page.context()) == {"cluster", "nodes", "checking", "node_form"}


def test_a_clusters_page_is_one_query_whatever_its_nodes(cluster):
    assert _queries(lambda: selectors.cluster_page(cluster)) == 1
    _add_nodes(cluster, 20)
    assert _queries(lambda: selectors.cluster_page(cluster)) == 1


def test_the_rendered_pages_do_not_query_per_node(as_user, alice, cluster):
    client = as_user(alice)
    urls = [cluster.get_absolute_url(), f"/clusters/{cluster.name}/node-states/", "/clusters/"]
    client.get(urls[0])  # the session's and the caches' first reads
    before = [_queries(lambda u=u: client.get(u)) for u in urls]
    _add_nodes(cluster, 20)
    after = [_queries(lambda u=u: client.get(u)) for u in urls]
    assert after == before
    assert client.get(cluster.get_absolute_url()).content.decode().count("<td>gpu-") == 22


def test_a_refused_node_shows_the_same_page_with_its_errors(as_user, alice, cluster):
    cluster.nodes.filter(name="gpu-0").update(check_state=NodeCheck.CHECKING)
    answer = as_user(alice).post(
        f"/clusters/{cluster.name}/nodes/add/", {"name": "gpu-0", "address": "", "port": "22"}
    )
    page = answer.content.decode()
    assert answer.status_code == 400
    assert "Nodes (2)" in page and 'hx-trigger="every 2s"' in page  # the list as the page has it
    assert 'class="error' in page or "errorlist" in page
