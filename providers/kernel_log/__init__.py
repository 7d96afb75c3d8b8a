"""The open `kernel_log` provider: failure attribution from nodes' kernel logs (NVIDIA Xid catalogue)."""

from providers.kernel_log.provider import SETTINGS, KernelLogProvider

__all__ = ["SETTINGS", "KernelLogProvider"]
