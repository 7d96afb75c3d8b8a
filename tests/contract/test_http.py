"""The HTTP envelope: body parsing (422), size limit (413), unknown paths and methods (404, 405), the
`X-Request-ID` header on every response, and `GET /healthz`."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.contract.conftest import (
    URL,
    check_200,
    check_422,
    check_detail,
    make_client,
    post,
    valid_request,
)
from tests.fakes import FakeProvider

VALID = json.dumps(valid_request())


# ---------------------------------------------------------------- not JSON, not an object


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"   ", id="blank"),
        pytest.param(b"not json", id="text"),
        pytest.param(b"{", id="truncated"),
        pytest.param(VALID[:-1].encode(), id="truncated-request"),
        pytest.param(VALID.encode() + b"x", id="trailing-garbage"),
        pytest.param(VALID.encode() + b"{}", id="two-documents"),
        pytest.param(b"{'schema_version': '0.1.0'}", id="single-quotes"),
        pytest.param(VALID.replace("}", ",}", 1).encode(), id="trailing-comma"),
        pytest.param(b"\xff\xfe{}", id="invalid-utf8-prefix"),
        pytest.param(VALID.replace("12345", "123\xe9").encode("latin-1"), id="latin1-byte-in-string"),
        pytest.param(VALID.encode().replace(b"12345", b"123\xc3"), id="truncated-utf8-sequence"),
        pytest.param(VALID.encode().replace(b"12345", b"\xed\xa0\x80"), id="utf8-encoded-surrogate"),
        pytest.param(VALID.replace("10000", "NaN").encode(), id="NaN"),
        pytest.param(VALID.replace("10000", "Infinity").encode(), id="Infinity"),
        pytest.param(VALID.replace("10000", "-Infinity").encode(), id="-Infinity"),
        pytest.param(VALID.replace('"ranks": [0', '"ranks": [NaN').encode(), id="NaN-in-array"),
        pytest.param(VALID.replace("10000", "1" * 5000).encode(), id="5000-digit-integer"),
    ],
)
def test_body_that_is_not_json_is_422(client, provider, data):
    (entry,) = check_422(post(client, data), provider, count=1)
    assert entry["loc"] == ["body"]


@pytest.mark.parametrize(
    "data",
    [b"[]", b"[" + VALID.encode() + b"]", b"1", b"0.5", b'"0.1.0"', b"true", b"false", b"null"],
    ids=["empty-array", "array-of-request", "int", "float", "string", "true", "false", "null"],
)
def test_json_that_is_not_an_object_is_422(client, provider, data):
    (entry,) = check_422(post(client, data), provider, count=1)
    assert entry["loc"] == ["body"]
    assert entry["type"] == "dict_type"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(VALID.replace('"phase": "fast"', '"phase": "fast", "phase": "fast"'), id="top-same-value"),
        pytest.param(VALID.replace('"phase": "fast"', '"phase": "slow", "phase": "fast"'), id="top-other-value"),
        pytest.param(VALID.replace('"ranks": [', '"ranks": [], "ranks": ['), id="in-scope"),
        pytest.param(
            VALID.replace('"attempt_index": 0', '"attempt_index": 0, "attempt_index": 1'), id="in-workload_context"
        ),
    ],
)
def test_duplicate_keys_are_422(client, provider, data):
    check_422(post(client, data), provider, count=1)


@pytest.mark.parametrize("depth", [100, 5000, 200000])
@pytest.mark.parametrize("where", ["top", "unknown-field", "nodes", "ranks"])
def test_deep_nesting_is_422_never_500(client, provider, depth, where):
    nested = "[" * depth + "]" * depth
    if where == "top":
        data = nested
    elif where == "unknown-field":
        data = VALID[:-1] + ', "deep": ' + nested + "}"
    else:
        data = VALID.replace(f'"{where}": [', f'"{where}": [{nested}, ', 1)
    check_422(post(client, data), provider)


def test_deeply_nested_objects_are_422(client, provider):
    depth = 50000
    data = VALID[:-1] + ', "deep": ' + '{"a":' * depth + "1" + "}" * depth + "}"
    check_422(post(client, data), provider)


# ---------------------------------------------------------------- content type


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/jsonx",
        "application/json; charset=latin-1",
        "application/json; charset=utf-16",
    ],
)
def test_wrong_or_missing_content_type_is_422(client, provider, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = client.post(URL, data=VALID.encode(), headers=headers)
    check_422(response, provider, count=1)


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"]
)
def test_json_content_type_is_accepted(client, provider, content_type):
    check_200(client.post(URL, data=VALID.encode(), headers={"Content-Type": content_type}))
    assert len(provider.calls) == 1


# ---------------------------------------------------------------- 413


LIMIT = 2048


@pytest.fixture
def small_client(provider):
    return make_client(provider, max_body_bytes=LIMIT)


def _padded(size: int) -> bytes:
    """A valid request of exactly `size` bytes (JSON white space pads it)."""
    data = VALID.encode()
    return data + b" " * (size - len(data))


def test_body_at_the_limit_is_served(small_client, provider):
    check_200(post(small_client, _padded(LIMIT)))
    assert len(provider.calls) == 1


@pytest.mark.parametrize("size", [LIMIT + 1, 4 * LIMIT, 64 * LIMIT])
def test_body_over_the_limit_is_413(small_client, provider, size):
    check_detail(post(small_client, _padded(size)), 413)
    assert provider.calls == []


def test_body_over_the_limit_is_413_whatever_it_holds(small_client, provider):
    check_detail(post(small_client, b"x" * (LIMIT + 100)), 413)
    assert provider.calls == []


def test_default_limit_is_4_mib(client, provider):
    check_detail(post(client, _padded(4 * 1024 * 1024 + 1)), 413)
    assert provider.calls == []


def test_service_serves_after_a_413(small_client, provider):
    check_detail(post(small_client, _padded(LIMIT + 1)), 413)
    check_200(post(small_client, VALID))


# ---------------------------------------------------------------- 404, 405


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("POST", "/"),
        ("POST", "/v1/attribution/"),
        ("POST", "/v1/attributions"),
        ("POST", "/v2/attribution"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/healthz/"),
        ("GET", "/docs"),
    ],
)
def test_unknown_path_is_404_json(client, provider, method, path):
    response = client.open(path, method=method, data=VALID, headers={"Content-Type": "application/json"})
    check_detail(response, 404)
    assert provider.calls == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", URL),
        ("PUT", URL),
        ("PATCH", URL),
        ("DELETE", URL),
        ("OPTIONS", URL),
        ("POST", "/healthz"),
        ("PUT", "/healthz"),
        ("DELETE", "/healthz"),
    ],
)
def test_wrong_method_is_405_json(client, provider, method, path):
    response = client.open(path, method=method, data=VALID, headers={"Content-Type": "application/json"})
    check_detail(response, 405)
    assert provider.calls == []


# ---------------------------------------------------------------- X-Request-ID


def _responses(client):
    """One response of every kind the service gives."""

    yield post(client, valid_request())  # 200
    yield post(client, b"not json")  # 422
    yield client.get("/nowhere")  # 404
    yield client.get(URL)  # 405
    yield client.get("/healthz")  # 200


def test_request_id_on_every_response_and_unique(client, provider):
    from providers.base import ProviderConstructionError
    from tests.contract.conftest import raising

    responses = list(_responses(client))
    responses.append(post(make_client(provider, max_body_bytes=1024), b" " * 2048))  # 413
    broken = FakeProvider(fast=raising(ProviderConstructionError("the FACT client is not installed")))
    responses.append(post(make_client(broken), valid_request()))  # 500
    assert [r.status_code for r in responses] == [200, 422, 404, 405, 200, 413, 500]
    ids = [r.headers.get("X-Request-ID") for r in responses]
    assert all(isinstance(i, str) and i for i in ids), ids
    assert len(set(ids)) == len(ids)
    # Each a random (version 4) UUID written as 32 hex digits.
    assert all(uuid.UUID(hex=i).hex == i and uuid.UUID(hex=i).version == 4 for i in ids), ids


def test_request_id_is_unique_per_request_and_equals_the_body(client):
    seen = set()
    for _ in range(20):
        body = check_200(post(client, valid_request()))  # also checks header == body["request_id"]
        seen.add(body["request_id"])
    assert len(seen) == 20


def test_caller_supplied_request_id_does_not_repeat(client):
    first = post(client, valid_request(), headers={"X-Request-ID": "caller-chosen"})
    second = post(client, valid_request(), headers={"X-Request-ID": "caller-chosen"})
    a, b = check_200(first), check_200(second)
    assert a["request_id"] != b["request_id"]


# ---------------------------------------------------------------- /healthz


def test_healthz_is_ok_and_never_touches_the_provider(client, provider):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json() == {"status": "ok"}
    assert response.headers.get("X-Request-ID")
    assert provider.calls == []


def test_healthz_is_ok_even_when_the_provider_is_broken():
    def boom(*_):
        raise AssertionError("the provider must not be called")

    provider = FakeProvider(fast=boom, slow=boom)
    response = make_client(provider).get("/healthz")
    assert response.status_code == 200 and response.get_json() == {"status": "ok"}
    assert provider.calls == []


def test_healthz_ignores_a_body_and_query(client, provider):
    response = client.get("/healthz?provider=1", data=b"garbage", headers={"Content-Type": "text/plain"})
    assert response.status_code == 200 and response.get_json() == {"status": "ok"}
    assert provider.calls == []


@pytest.mark.parametrize("path", ["/static/app.py", "/static/", "/static/../app/__init__.py"])
def test_no_static_route_is_public(client, path):
    response = client.get(path)
    check_detail(response, 404)
