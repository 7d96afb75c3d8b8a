"""Tests of the FACT provider against a scripted stand-in for the private `fact_client` package."""
