"""The open `kernel_log` provider: failure attribution from three signals of the scope's nodes.

It reads the nodes' kernel logs (NVIDIA Xid/SXid, NVLink, PCIe AER and GSP events, classified with NVIDIA's public
catalogue), their epilog DCGM diagnostic results, and the job's own logs (PyTorch, NCCL and launcher lines), from
text files or Loki. One folder per signal (`kernel/`, `dcgm/`, `joblog/`), Loki's client shared by two of them
(`loki/`); at this level only what joins them: the settings, the window, node identity, evidence, the one category
ranking, the merge of the signals' conclusions, kept answers, `check`, and the provider's wiring (`provider.py`).
The name `kernel_log` is the provider's public name (sessions, metrics, `service.provider`).
"""

from providers.kernel_log.provider import KernelLogProvider
from providers.kernel_log.settings import SETTINGS

__all__ = ["SETTINGS", "KernelLogProvider"]
