"""The compiled parts of the service: the job-log reader's candidate lines (providers/telemetry/joblog/_candidates.c),
gap pass (providers/telemetry/joblog/_gaps.c) and reading of PyTorch's watchdog and progress lines
(providers/telemetry/joblog/_kind_lines.c), the Loki source's buffer of a node's entries
(providers/telemetry/joblog/_loki_buffer.c), the Loki client's reading of an answer's entries
(providers/telemetry/loki/_entries.c), the kernel-log block's stamp facts
(providers/telemetry/kernel/sources/_stamps.c), and the literal search both readers scan with
(providers/telemetry/_literals.c), linked with Vectorscan's libhs (Debian: libvectorscan-dev to build it).

Everything else is in pyproject.toml. `make venv` builds them in place for a checkout (`setup.py build_ext
--inplace`); `pip install .` and the image build them as well.
"""

from setuptools import Extension, setup

#: each part's source; its module is the source's path as a dotted name
SOURCES = (
    "providers/telemetry/joblog/_gaps.c",
    "providers/telemetry/joblog/_candidates.c",
    "providers/telemetry/joblog/_kind_lines.c",
    "providers/telemetry/joblog/_loki_buffer.c",
    "providers/telemetry/loki/_entries.c",
    "providers/telemetry/kernel/sources/_stamps.c",
    "providers/telemetry/_literals.c",
)
#: the libraries a part links with: the literal search's Vectorscan (Debian: libvectorscan-dev to build)
LIBRARIES = {"providers/telemetry/_literals.c": ["hs"]}

setup(
    ext_modules=[
        Extension(
            source.removesuffix(".c").replace("/", "."),
            [source],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
            libraries=LIBRARIES.get(source, []),
        )
        for source in SOURCES
    ]
)
