"""The open `telemetry` provider: failure attribution from the fleet's own telemetry of the scope's nodes.

It reads the nodes' kernel logs (NVIDIA Xid/SXid, NVLink, PCIe AER and GSP events, classified with NVIDIA's public
catalogue), their epilog DCGM diagnostic results, and the job's own logs (PyTorch, NCCL and launcher lines), from
text files, journal files or Loki. One folder per signal (`kernel/`, `dcgm/`, `joblog/`), Loki's client shared by
two of them (`loki/`); at this level only what joins them: the settings, the window, node identity, evidence, the
one category ranking, the merge of the signals' conclusions, kept answers, `check`, and the provider's wiring
(`provider.py`). `telemetry` is the provider's public name (`ATTRIBUTION_PROVIDER`, metrics, `service.provider`);
`kernel_log`, its name before, is still accepted for `ATTRIBUTION_PROVIDER` and is the identity its session ids
carry (`TelemetryProvider.session_identity`).
"""

from providers.telemetry.provider import TelemetryProvider
from providers.telemetry.settings import SETTINGS

__all__ = ["SETTINGS", "TelemetryProvider"]
