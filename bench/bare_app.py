"""A bare Flask app for bench/http_throughput.py: `POST /v1/attribution` parses the JSON, answers a fixed small one."""

from flask import Flask, jsonify, request

app = Flask(__name__)
ANSWER = {"schema_version": "0.1.0", "attributions": [], "unattributed_targets": [], "attribution_session_id": None}


@app.post("/v1/attribution")
def attribution():  # noqa: ANN201 - a Flask view
    request.get_json(force=True)
    return jsonify(ANSWER)


@app.get("/healthz")
def healthz():  # noqa: ANN201
    return jsonify(status="ok")
