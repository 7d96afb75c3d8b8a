"""The FACT provider; the private client `fact_client` is imported only when the registry constructs it."""

from providers.fact.provider import FactProvider

__all__ = ["FactProvider"]
