"""The DCGM signal: epilog health-check results (`dcgmi diag` JSON) read per node and turned into findings.

`results.py` finds and parses each node's result files in the epilog window; `rules.py` turns failed tests into
findings; `check.py` says what the epilog directory holds.
"""
