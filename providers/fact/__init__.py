"""The FACT provider; the private client `fact_client` is imported only when the registry constructs it."""

from providers.fact.provider import SETTINGS, FactProvider

__all__ = ["SETTINGS", "FactProvider"]
