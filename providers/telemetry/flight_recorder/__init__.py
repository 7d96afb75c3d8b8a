"""The flight-recorder signal: which rank a hang waited for, from PyTorch's NCCL flight-recorder dumps.

`source.read_dumps` reads `<dir>/<workload_id>/<attempt_index>/<node>/<dumps>` (each a pickle read by
`unpickle.Reader`, which runs nothing, or JSON), `dumps.py` makes typed entries of them, `analysis.analyse` matches
them across ranks and says which ranks the others waited for, and `rules.conclude` places those ranks on scope nodes
as evidence (`source` `flight_recorder`). Nothing here imports another signal: the job logs' ranks per node come in
through the provider's wiring. See docs/flight-recorder.md.
"""

from providers.telemetry.flight_recorder.rules import SOURCE, FlightRecorderResult, conclude
from providers.telemetry.flight_recorder.source import DumpsRead, attempt_folder, read_dumps

__all__ = ["SOURCE", "DumpsRead", "FlightRecorderResult", "attempt_folder", "conclude", "read_dumps"]
