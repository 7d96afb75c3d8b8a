"""The compiled part of the service: the job-log reader's gap pass (providers/telemetry/joblog/_gaps.c).

Everything else is in pyproject.toml. `make venv` builds it in place for a checkout (`setup.py build_ext --inplace`);
`pip install .` and the image build it as well.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "providers.telemetry.joblog._gaps",
            ["providers/telemetry/joblog/_gaps.c"],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        )
    ]
)
