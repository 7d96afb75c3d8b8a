"""`GET /healthz`: liveness of the process only. It never touches the provider and says nothing of it."""

from flask import Blueprint, jsonify

bp = Blueprint("health", __name__)


@bp.get("/healthz", provide_automatic_options=False)
def healthz():  # noqa: ANN201 - a Flask view
    return jsonify({"status": "ok"})
