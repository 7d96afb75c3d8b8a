"""A stand-in for the private FACT client that really talks HTTP (JSON over `requests`) to a FACT-like server.

Put on sys.path only by tests/faults. It implements the `FactClient` protocol of providers/fact/client.py:
`Client(endpoint=...)`, `start_attribution(...)` and `continue_attribution(...)`, each bounded by the `timeout`
it is given: connect, the wait for the answer's head, and the whole body (checked between reads).
The wire format is this fake's own:

    POST {endpoint}/v1/attributions                   {"workload_id", "nodes", "ranks", "detected_at",
                                                        "detection_signal"}
    POST {endpoint}/v1/attributions/{id}/continue     {"start_time", "end_time"}
    -> 200 {"attributor_id": str, "faulty_nodes": [Verdict], "analysed_nodes": [str],
            "job_verdict": Verdict | null, "insufficient_telemetry": bool}
    Verdict = {"node": str | null, "symptoms": [{"category", "message", "observed_at"}], "probability": num | null}
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import requests
import urllib3

from tests.fact_results import Attribution, Symptom, Verdict  # noqa: F401 - the client's result types

__version__ = "0.0.1-faults-http"

CHUNK = 256 * 1024


class TimeoutError(Exception):  # noqa: A001 - the real client names its timeout like this
    """FACT did not answer within the call's timeout."""


class FactError(Exception):
    """FACT answered with an error status or an unreadable body, or could not be reached."""


def _verdict(data: Any) -> Verdict:
    if not isinstance(data, dict):
        raise FactError("verdict is not an object")
    symptoms = [
        Symptom(s["category"], s["message"], datetime.fromisoformat(s["observed_at"])) for s in data["symptoms"]
    ]
    return Verdict(data.get("node"), symptoms, data.get("probability"))


def _attribution(data: Any) -> Attribution:
    try:
        return Attribution(
            attributor_id=data["attributor_id"],
            faulty_nodes=[_verdict(v) for v in data["faulty_nodes"]],
            analysed_nodes=list(data["analysed_nodes"]),
            job_verdict=None if data.get("job_verdict") is None else _verdict(data["job_verdict"]),
            insufficient_telemetry=data.get("insufficient_telemetry", False),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FactError(f"unreadable FACT answer ({type(exc).__name__})") from None


class Client:
    """Thread-safe: every call opens its own connection and closes it before returning."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")

    def _post(self, path: str, payload: dict[str, Any], timeout: float, headers: Mapping[str, str]) -> Attribution:
        if timeout <= 0:
            raise TimeoutError("no time left")
        deadline = time.monotonic() + timeout
        try:
            response = requests.post(
                self.endpoint + path,
                json=payload,
                headers={**headers, "Accept": "application/json", "Connection": "close"},
                timeout=(timeout, timeout),
                stream=True,
            )
        except requests.Timeout:
            raise TimeoutError("FACT did not answer in time") from None
        except requests.RequestException as exc:
            raise FactError(f"FACT could not be reached ({type(exc).__name__})") from None
        with response:
            body = bytearray()
            # The whole body within the deadline: every read returns what has arrived (read1), and the deadline
            # is checked between reads, so a server that trickles bytes cannot hold the call open.
            while True:
                if time.monotonic() >= deadline:
                    raise TimeoutError("FACT did not finish its answer in time")
                try:
                    chunk = response.raw.read1(CHUNK)
                except urllib3.exceptions.ReadTimeoutError:
                    raise TimeoutError("FACT did not finish its answer in time") from None
                except (urllib3.exceptions.HTTPError, OSError) as exc:
                    raise FactError(f"FACT's answer broke off ({type(exc).__name__})") from None
                if not chunk:
                    break
                body += chunk
            if response.status_code != 200:
                raise FactError(f"FACT answered HTTP {response.status_code}")
            try:
                data = json.loads(body)
            except ValueError:
                raise FactError("FACT answered with malformed JSON") from None
        return _attribution(data)

    def start_attribution(
        self,
        *,
        workload_id: str,
        nodes: Sequence[str],
        ranks: Sequence[int],
        detected_at: datetime,
        detection_signal: str,
        timeout: float,
        headers: Mapping[str, str],
    ) -> Attribution:
        payload = {
            "workload_id": workload_id,
            "nodes": list(nodes),
            "ranks": list(ranks),
            "detected_at": detected_at.isoformat(),
            "detection_signal": detection_signal,
        }
        return self._post("/v1/attributions", payload, timeout, headers)

    def continue_attribution(
        self,
        *,
        attributor_id: str,
        start_time: datetime,
        end_time: datetime,
        timeout: float,
        headers: Mapping[str, str],
    ) -> Attribution:
        payload = {"start_time": start_time.isoformat(), "end_time": end_time.isoformat()}
        return self._post(f"/v1/attributions/{quote(attributor_id, safe='')}/continue", payload, timeout, headers)

    def close(self) -> None:
        pass
