"""The OpenAPI document, exported from the code: `python -m app.openapi` prints it.

It imports the blueprints' schemas only: no server, no settings, no provider, no private client.
The output is deterministic (sorted keys, fixed indentation), so the checked-in copy can be compared byte for byte.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from app import __version__
from schemas.request import AttributionRequestSchema
from schemas.response import (
    TARGET_TYPES,
    AttributionResponseSchema,
    ErrorDetailSchema,
    TargetSchema,
    ValidationErrorSchema,
)

OPENAPI_VERSION = "3.0.3"

SEED_EXAMPLE: dict[str, Any] = {
    "schema_version": "0.1.0",
    "workload_id": "12345",
    "scope": {"nodes": ["worker-01"], "ranks": []},
    "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
    "timeout_ms": 10000,
    "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
    "phase": "fast",
}

#: Real request/response pairs written by `python -m app.examples` (app/examples.py), which runs the service; read
#: here as data, so the export still builds no settings and calls no provider.
EXAMPLES_PATH = Path(__file__).with_name("openapi_examples.json")

#: What each `error.type` means and what a caller should do about it; the README and docs/contract.md give the same.
ERROR_TYPE_GUIDE: tuple[tuple[str, str, str], ...] = (
    (
        "timeout",
        "The provider, or its backend, did not answer within `timeout_ms`; backend work may go on after the answer. "
        "`attributions` is empty.",
        "Treat the failure as not attributed this time. Retry with a larger `timeout_ms` if your deadline allows, "
        "and keep your own HTTP timeout above it.",
    ),
    (
        "insufficient_telemetry",
        "Informational: the telemetry source answered but held too little (no lines for some nodes, a window read "
        "only in part, no epilog results). Findings for the targets that had telemetry stand.",
        "Use the findings given. A node without telemetry is neither blamed nor cleared: check that its logs reach "
        "the source.",
    ),
    (
        "service_error",
        "The provider or its backend failed: it could not be reached, answered an error or something unreadable, "
        "or broke the contract (its answer was discarded). `attributions` is empty.",
        "Treat the failure as not attributed; retry later. Tell the Adapter's operator: the backend needs attention.",
    ),
    (
        "no_attribution_available",
        "Nothing can be attributed for this request: a `slow` without `scope.start_time` and `scope.end_time`, or "
        "whose `continue_session` is malformed, edited, expired or was issued for another workload. `attributions` "
        "is empty.",
        "Without the window, send the `slow` again with both bounds. With a session that is not valid, start over "
        "with a `fast` request.",
    ),
)


def error_type_guide() -> str:
    """The `error.type` guide in Markdown: one item per type, what it means, then what the caller should do.

    A list rather than a three-column table: the reference page's text column is narrow, and a table there squeezed
    the explanations to a word or two per line."""
    items = [
        f"- **{kind}**: {meaning} *What the caller should do:* {action}" for kind, meaning, action in ERROR_TYPE_GUIDE
    ]
    return "\n".join(items) + "\n"


DESCRIPTION = (
    """\
The Attribution Adapter answers one question for ADI, the GPU-cluster recovery system: which node, or the job's
resources as a whole, a distributed training failure can be attributed to, with the evidence. It reports evidence;
it never decides recovery, which belongs to the caller.

**Errors are data.** `error.type` (`timeout`, `insufficient_telemetry`, `service_error`,
`no_attribution_available`) is part of a 200 answer, not an HTTP status: a provider that fails while processing
gives 200 with `service_error`, so callers must read the body. Invalid request shapes are 422; a body over the
configured limit is 413; a provider that cannot be constructed for the request is 500. A 422 lists at most 16
problems per array or object and 64 in all, and counts the rest. An exchange that breaks HTTP itself (bad framing,
headers or a body sent too slowly, an oversized request line or headers, no room to hold another body) is answered
before the API by the server with 400, 408, 414, 431 or 503, a `{"detail": str}` body and `X-Request-ID`, and the
connection is closed. An empty list, a missing `confidence` or an informational error says nothing about node
isolation.

"""
    + error_type_guide()
    + """
The examples of `POST /v1/attribution` were produced by running the service (`python -m app.examples`).

**Phases.** Each request runs one phase synchronously. `fast` starts the provider's fast signal pass and returns a
new `attribution_session_id`. `slow` continues it: send that id as `continue_session` and the epilog window as
`scope.start_time` and `scope.end_time`; without the window the provider is not called and the answer is
`no_attribution_available`. `timeout_ms` bounds how long the Adapter waits for the provider, not the backend work,
which may go on after the answer; set a caller timeout too.

**Boundary.** `GET /healthz` answers `{"status": "ok"}` for a live process and says nothing about the provider: it
is not a provider readiness check. Importable models, this document and a 200 from `/healthz` establish the public
boundary only.

**Callers and network.** The Adapter has no inbound authentication or TLS: run it behind network policy and an
authenticated TLS or mTLS boundary, and never expose its port or its metrics port publicly. Requests and responses
carry user IDs, node names and log excerpts. `traceparent`/`tracestate` carry tracing context only; they are not
credentials. There is no schema version negotiation: deploy matching ADI and Adapter contract versions.
"""
)

SCHEMA_DESCRIPTIONS = {
    "AttributionRequest": "One attribution request for one phase. Unknown fields at any depth are rejected (422).",
    "AttributionResponse": "The answer to a processed request (HTTP 200), including every `error.type`.",
    "Scope": "The nodes and ranks in scope, and the window (for `slow`, the epilog window).",
    "FailureContext": "When and how the failure was detected.",
    "WorkloadContext": "The workflow and attempt the workload belongs to; sessions are bound to it.",
    "Finding": "A failure attributed to a target, with the evidence it rests on.",
    "Evidence": "One piece of evidence, e.g. a kernel log line.",
    "ErrorInfo": "Why the answer holds no (or only some) findings.",
    "Service": "Which Adapter and provider answered.",
    "ValidationError": "The 422 body: one entry per problem, the shape FastAPI callers already parse.",
    "ValidationProblem": "One problem: where (`loc`), what (`msg`) and its machine-readable `type`.",
    "ErrorDetail": "The body of 404, 405, 413 and 500 answers. It never carries a stack trace.",
}


def _contract_properties(self: Any, field: Any, ret: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Publish the bounds that a custom field enforces, from the field itself."""
    json_schema = getattr(field, "json_schema", None)
    if json_schema is None:
        return {}
    properties = dict(json_schema())
    if "$ref" in properties and "description" in ret:
        properties = {"allOf": [{"$ref": properties.pop("$ref")}], **properties}
    return properties


def _target_components(spec: APISpec, converter: Any) -> None:
    """The `Target` tagged union: one component per kind and a `oneOf` with a discriminator on `type`."""
    fields = TargetSchema().fields
    name_property = converter.field2property(fields["name"])
    refs = {}
    for kind in TARGET_TYPES:
        component = "NodeTarget" if kind == "Node" else "AllJobResourcesTarget"
        properties: dict[str, Any] = {"type": {"type": "string", "enum": [kind], "description": "The kind of target."}}
        required = ["type"]
        if kind == "Node":
            properties["name"] = {**name_property, "description": "A node of `scope.nodes`."}
            required.append("name")
        spec.components.schema(
            component,
            {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
                "description": "One node." if kind == "Node" else "The job's resources as a whole.",
            },
        )
        refs[kind] = f"#/components/schemas/{component}"
    spec.components.schema(
        "Target",
        {
            "oneOf": [{"$ref": ref} for ref in refs.values()],
            "discriminator": {"propertyName": "type", "mapping": refs},
            "description": "A tagged union on `type`: a `Node` with its `name`, or `AllJobResources`.",
        },
    )


def _recorded_examples() -> list[dict[str, Any]]:
    return json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))["examples"]


def _produced_by(example: dict[str, Any]) -> str:
    text = f"Produced by running the service with {example['produced_by']}."
    if "request_note" in example:
        return f"{text} The request: {example['request_note']}."
    return f"{text} The request:\n\n```json\n{json.dumps(example['request'], indent=2, sort_keys=True)}\n```"


def _response_examples(recorded: list[dict[str, Any]], status: int) -> dict[str, Any]:
    return {
        example["name"]: {
            "summary": example["summary"],
            "description": _produced_by(example),
            "value": example["response"],
        }
        for example in recorded
        if example["status"] == status
    }


# The request examples, by the recorded example that sent them: each a valid request of its own kind.
REQUEST_EXAMPLES = {
    "fast": ("fast", "A fast request"),
    "slow": ("slow", "A slow request continuing a session over the epilog window"),
    "several_nodes": ("insufficient_telemetry", "A fast request over three nodes, one of them without logs"),
    "slow_without_window": ("no_attribution_available", "A slow request without its window"),
}


def _request_examples(recorded: list[dict[str, Any]]) -> dict[str, Any]:
    by_name = {example["name"]: example for example in recorded}
    return {
        key: {"summary": summary, "value": by_name[name]["request"]}
        for key, (name, summary) in REQUEST_EXAMPLES.items()
    }


def _json(schema: str, description: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}},
        "content": {"application/json": {"schema": schema, **extra}},
    }


def build_spec() -> APISpec:
    recorded = _recorded_examples()
    plugin = MarshmallowPlugin()
    spec = APISpec(
        title="Attribution Adapter",
        version=__version__,
        openapi_version=OPENAPI_VERSION,
        plugins=[plugin],
        info={"description": DESCRIPTION},
    )
    plugin.converter.add_attribute_function(_contract_properties)
    _target_components(spec, plugin.converter)
    for name, schema in (
        ("AttributionRequest", AttributionRequestSchema),
        ("AttributionResponse", AttributionResponseSchema),
        ("ValidationError", ValidationErrorSchema),
        ("ErrorDetail", ErrorDetailSchema),
    ):
        spec.components.schema(name, schema=schema)
    spec.components.header(
        "X-Request-ID",
        {"description": "Unique per request, on every response.", "schema": {"type": "string"}},
    )
    trace_parameters = [
        {
            "name": header,
            "in": "header",
            "required": False,
            "description": text,
            "schema": {"type": "string"},
        }
        for header, text in (
            ("traceparent", "W3C Trace Context: passed on to provider calls when valid, ignored when not."),
            ("tracestate", "W3C Trace Context vendor state; read only beside a valid traceparent."),
        )
    ]
    spec.path(
        path="/v1/attribution",
        operations={
            "post": {
                "operationId": "attribute",
                "summary": "Attribute a training failure to a node or to the job's resources",
                "parameters": trace_parameters,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": "AttributionRequest",
                            "examples": _request_examples(recorded),
                        }
                    },
                },
                "responses": {
                    "200": _json(
                        "AttributionResponse",
                        "Processed, including every `error.type`: read the body.",
                        examples=_response_examples(recorded, 200),
                    ),
                    "413": _json(
                        "ErrorDetail",
                        "The body is larger than the configured limit (default 4 MiB).",
                        examples=_response_examples(recorded, 413),
                    ),
                    "422": _json(
                        "ValidationError",
                        "The body is not JSON, not an object, has a wrong content type, or breaks a rule.",
                        examples=_response_examples(recorded, 422),
                    ),
                    "500": _json("ErrorDetail", "The provider could not be constructed for this request."),
                },
            }
        },
    )
    spec.path(
        path="/healthz",
        operations={
            "get": {
                "operationId": "healthz",
                "summary": "Process liveness; says nothing about the provider",
                "responses": {
                    "200": {
                        "description": "The process serves HTTP. Not a provider readiness check.",
                        "headers": {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}},
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "status": {"type": "string", "enum": ["ok"], "description": "Always `ok`."}
                                    },
                                    "description": "Liveness only.",
                                    "required": ["status"],
                                    "additionalProperties": False,
                                }
                            }
                        },
                    }
                },
            }
        },
    )
    return spec


# The phase rule the field bounds cannot say: `continue_session` belongs to `slow` and only to it.
PHASE_RULE = [
    {
        "title": "fast",
        "description": "A fast request starts a session: no `continue_session`.",
        "properties": {
            "phase": {"type": "string", "enum": ["fast"]},
            "continue_session": {"not": {}, "description": "Never sent with `fast`."},
        },
        "required": ["phase"],
    },
    {
        "title": "slow",
        "description": "A slow request continues a session: `continue_session` is required.",
        "properties": {"phase": {"type": "string", "enum": ["slow"]}},
        "required": ["phase", "continue_session"],
    },
]


def document() -> dict[str, Any]:
    spec = build_spec().to_dict()
    spec["components"]["schemas"]["AttributionRequest"]["oneOf"] = PHASE_RULE
    # Said outright: the Adapter authenticates no caller; the network boundary in front of it does.
    spec["security"] = []
    for name, text in SCHEMA_DESCRIPTIONS.items():
        spec["components"]["schemas"][name]["description"] = text
    return spec


def render() -> str:
    return json.dumps(document(), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
