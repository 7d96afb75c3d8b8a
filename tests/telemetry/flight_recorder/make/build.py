"""Dev-only: build `fr23.cpp`, `fr24.cpp` or `fr25.cpp` against the PyTorch of the running interpreter (2.3.0,
2.4.0 or 2.5.0 from PyPI with its nvidia-* packages) and print its folder.

    python build.py fr23 BUILD_DIR

The release's headers come with its wheel, CUDA's runtime headers with its nvidia-* packages; their `crt/` and
`nv/` includes come from a CUDA toolkit (`CUDA_HOME`, default /usr/local/cuda), linked into a folder of their own so
that nothing else of the toolkit is seen. No GPU is needed to build or to run.
"""

from __future__ import annotations

import os
import site
import sys

from torch.utils import cpp_extension


def main() -> None:
    name, build = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    nvidia = os.path.join(site.getsitepackages()[0], "nvidia")
    include = [
        os.path.join(nvidia, d, "include")
        for d in sorted(os.listdir(nvidia))
        if os.path.isdir(os.path.join(nvidia, d, "include"))
    ]
    toolkit = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")
    own = os.path.join(build, "cuda-include")
    os.makedirs(own, exist_ok=True)
    for sub in ("crt", "nv"):
        link = os.path.join(own, sub)
        if not os.path.lexists(link):
            os.symlink(os.path.join(toolkit, sub), link)
    cpp_extension.load(
        name=name,
        sources=[os.path.join(here, f"{name}.cpp")],
        extra_include_paths=[*include, own],
        extra_cflags=["-O0", "-DUSE_C10D_NCCL"],
        extra_ldflags=["-ltorch_cuda", "-lc10_cuda"],
        build_directory=build,
    )
    print(build)


if __name__ == "__main__":
    main()
