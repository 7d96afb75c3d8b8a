"""A FACT-like backend for bench/all.py: `POST /v1/attributions` answers one faulty node at once.

It speaks the wire format of the HTTP stand-in client in tests/faults/fact_http_pkg (the benchmark serves the
`fact` provider with that client), under gunicorn in its own process so it does not share the load generator's
or the Adapter's CPU time slices more than a real backend on the same machine would.
"""

import json

from flask import Flask, Response

app = Flask(__name__)
ANSWER = json.dumps(
    {
        "attributor_id": "bench-1",
        "faulty_nodes": [
            {
                "node": "worker-01",
                "symptoms": [
                    {
                        "category": "GPU Xid",
                        "message": "Xid 79 on worker-01",
                        "observed_at": "2026-09-09T11:59:00+00:00",
                    }
                ],
                "probability": 0.9,
            }
        ],
        "analysed_nodes": ["worker-01"],
        "job_verdict": None,
        "insufficient_telemetry": False,
    }
)


@app.post("/v1/attributions")
@app.post("/v1/attributions/<attributor>/continue")
def attributions(attributor: str | None = None) -> Response:
    return Response(ANSWER, mimetype="application/json")


@app.get("/healthz")
def healthz() -> Response:
    return Response('{"status":"ok"}', mimetype="application/json")
