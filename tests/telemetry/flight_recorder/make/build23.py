import os
import site
import sys

from torch.utils import cpp_extension

here = os.path.dirname(os.path.abspath(__file__))
sp = site.getsitepackages()[0]
inc = [
    os.path.join(sp, "nvidia", d, "include")
    for d in sorted(os.listdir(os.path.join(sp, "nvidia")))
    if os.path.isdir(os.path.join(sp, "nvidia", d, "include"))
] + [os.path.join(here, "crtonly")]
mod = cpp_extension.load(
    name="fr23",
    sources=[os.path.join(here, "fr23.cpp")],
    extra_include_paths=inc,
    extra_cflags=["-O0", "-DUSE_C10D_NCCL"],
    build_directory=sys.argv[1],
    verbose=False,
    extra_ldflags=["-ltorch_cuda", "-lc10_cuda"],
)
print(mod)
