"""Issue 23, "the annotator under attack and at scale": each probe of the adversarial pass, against a live uvicorn
on 127.0.0.1 with real HTTP clients (httpx, raw sockets).  No test depends on timing: they count, and check status
codes and what is stored."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing

import httpx
import pytest

from thoughtsource.web.routes import blind_order

from .conftest import PASSWORD, add_user, first_multi_cot_sample, live_server, page_data

TOKEN_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def http_login(base: str, name: str, local_address: str = "127.0.0.1") -> tuple[httpx.Client, str]:
    """An httpx client logged in as ``name`` on the live server, and its CSRF token."""
    client = httpx.Client(base_url=base, timeout=120, transport=httpx.HTTPTransport(local_address=local_address))
    token = TOKEN_RE.search(client.get("/login").text).group(1)
    r = client.post("/login", data={"name": name, "password": PASSWORD, "csrf_token": token, "next": "/samples"})
    assert r.status_code == 303, r.text
    return client, TOKEN_RE.search(client.get("/samples").text).group(1)


@pytest.fixture
def annotator_server(make_app) -> Iterator[tuple[object, str]]:
    app = make_app(blind=True)
    add_user(app, "alice")
    add_user(app, "root", "admin")
    with live_server(app) as base:
        yield app, base


# --------------------------------------------------------------------------- 1. blind review and the similarity API
def test_the_similarity_api_numbers_cots_as_the_blind_page_does(annotator_server, served) -> None:
    """The page renumbered the similarity data, the API returned it in file order (file position → model)."""
    app, base = annotator_server
    it = first_multi_cot_sample(served)
    path = f"/sample/{it.dataset}/{it.split}/{it.sample.id}"
    client, _ = http_login(base, "alice")
    with closing(client):
        order = blind_order(app.state.db.user("alice"), it)
        assert order != sorted(order)  # the shuffle moves CoTs, so file order differs from the shown order
        on_page = page_data(client.get(path).text)["similarity"]
        api = client.get("/api/similarity" + path[len("/sample"):]).json()
        assert api == on_page
    # the admin (not blind) gets the file order from both; alice's is its shuffle
    root, _ = http_login(base, "root")
    with closing(root):
        in_file_order = root.get("/api/similarity" + path[len("/sample"):]).json()
        assert in_file_order == page_data(root.get(path).text)["similarity"]
    assert api["sentences"] == [in_file_order["sentences"][i] for i in order] != in_file_order["sentences"]


# --------------------------------------------------------------------------- 7. adjudicate: an empty value clears
def test_adjudicate_with_an_empty_value_clears_the_final_label(annotator_server, served) -> None:
    app, base = annotator_server
    it = first_multi_cot_sample(served)
    ref = {"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": it.sample.generated_cot[0].id,
           "key": "Too verbose"}
    root, csrf = http_login(base, "root")
    with closing(root):
        assert root.post("/adjudicate", data={**ref, "value": "true", "csrf_token": csrf}).status_code == 303
        assert [r.value for r in app.state.db.adjudications()] == [True]
        r = root.post("/adjudicate", data={**ref, "value": "", "csrf_token": csrf})
        assert r.status_code == 303, r.text  # was 422: FastAPI reads an empty form field as a missing one
        assert app.state.db.adjudications() == []
