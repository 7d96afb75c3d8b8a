"""The kernel signal: NVIDIA Xid/SXid, NVLink, PCIe AER and GSP events from the nodes' kernel logs.

`sources/` reads each node's lines in the window (text files, Loki) into the `collect.Collector`, which parses them
(`parse.py`) into records; `decode.py` decodes records with the catalogue (`catalogue.py` over `data/
xid_catalogue.csv`, NVIDIA's published meanings); `rules.py` turns events into evidence against a node or the job;
`check.py` says what a configured source holds. Sources never classify; rules never read files.
"""
