"""FACT's result shapes as the fake `fact_client` packages of the tests build them (see providers/fact/client.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Symptom:
    category: str
    message: str
    observed_at: datetime


@dataclass
class Verdict:
    node: str | None
    symptoms: list[Symptom] = field(default_factory=list)
    probability: float | None = None


@dataclass
class Attribution:
    attributor_id: str
    faulty_nodes: list[Verdict] = field(default_factory=list)
    analysed_nodes: list[str] = field(default_factory=list)
    job_verdict: Verdict | None = None
    insufficient_telemetry: bool = False
