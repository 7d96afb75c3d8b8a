"""A local stand-in for the Dockerfile's pinned base, for building the image where no registry is reachable.

The Dockerfile builds on the official python slim image (Debian bookworm). Where that image cannot be pulled, the
image is built on a minimal bookworm made here by `debootstrap --variant=minbase` with Debian's Python 3.11 and
`podman import`ed, passed as `--build-arg PYTHON_IMAGE=...`: the Dockerfile itself is unchanged. What the Dockerfile
expects of its base and this one provides:

- `python` on the PATH (the official image has it in /usr/local/bin): Debian's `python-is-python3` gives
  /usr/bin/python;
- the `venv` module with pip (`python3-venv`), and `groupadd`/`useradd` (in every Debian base);
- the Python headers the compiled parts are built with (the official image has them in /usr/local/include):
  `libpython3.11-dev`; a C compiler (`gcc`, `libc6-dev`) and the literal search's library (`libvectorscan-dev`,
  which brings the runtime's `libvectorscan5`), which the Dockerfile's stages install with apt-get where their base
  has none (here the base has them, so the build needs no Debian mirror);
- the certificate authorities the building machine trusts, so that pip reaches PyPI from inside the build exactly
  as it does from the machine (behind a TLS-inspecting proxy too): the machine's CA bundle replaces the base's.

The root filesystem is kept as a tar file in a cache folder outside the clone (ATTRIBUTION_IMAGE_CACHE, by default
/var/cache/attribution-adapter) named by what went into it, and made again when older than MAX_AGE, so that later
runs on the same machine skip debootstrap; podman's own store keeps the imported image under a tag naming the same.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SUITE = "bookworm"
PACKAGES = (
    "python3", "python3-venv", "python-is-python3", "ca-certificates", "libpython3.11-dev", "gcc", "libc6-dev",
    "libvectorscan-dev",
)
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_CACHE = Path("/var/cache/attribution-adapter")
#: a cached root filesystem older than this is made again (it then carries the suite's current security updates)
MAX_AGE_S = 7 * 24 * 3600
REPOSITORY = "localhost/attribution-adapter-base"


def cache_dir() -> Path:
    return Path(os.environ.get("ATTRIBUTION_IMAGE_CACHE") or DEFAULT_CACHE)


def _key() -> str:
    """What the base is made of: the suite, the packages and the CA bundle that goes in."""
    digest = hashlib.sha256(f"{SUITE} {' '.join(PACKAGES)}".encode())
    if CA_BUNDLE.is_file():
        digest.update(CA_BUNDLE.read_bytes())
    return digest.hexdigest()[:12]


def _run(args: list[str], timeout: float) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        output = done.stdout[-4000:] + done.stderr[-4000:]
        raise RuntimeError(f"{' '.join(args[:3])} ... exited {done.returncode}:\n{output}")


def make_rootfs_tar(target: Path) -> None:
    """debootstrap a minimal bookworm with the packages into a temporary folder and write it as a tar file."""
    with tempfile.TemporaryDirectory(prefix="adapter-base-", dir=target.parent) as work:
        root = Path(work) / "rootfs"
        args = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root)]
        mirror = os.environ.get("ATTRIBUTION_IMAGE_MIRROR")
        if mirror:
            args.append(mirror)
        _run(args, timeout=1200)
        if CA_BUNDLE.is_file():
            shutil.copyfile(CA_BUNDLE, root / "etc" / "ssl" / "certs" / "ca-certificates.crt")
        # Nothing the image needs: downloaded packages and package lists.
        for folder in (root / "var" / "cache" / "apt" / "archives", root / "var" / "lib" / "apt" / "lists"):
            for item in folder.glob("*"):
                if item.is_file():
                    item.unlink()
        partial = target.with_suffix(".partial")
        _run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."], timeout=600)
        partial.replace(target)


def ensure() -> str:
    """The tag of the local base in podman's store, made (and cached) when missing; returns e.g.
    `localhost/attribution-adapter-base:bookworm-0123456789ab`."""
    key = _key()
    tag = f"{REPOSITORY}:{SUITE}-{key}"
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tar = folder / f"base-{SUITE}-{key}.tar"
    fresh = tar.is_file() and time.time() - tar.stat().st_mtime < MAX_AGE_S
    if not fresh:
        make_rootfs_tar(tar)
    elif subprocess.run(["podman", "image", "exists", tag]).returncode == 0:
        return tag
    _run(["podman", "import", "--change", 'CMD ["/bin/bash"]', str(tar), tag], timeout=600)
    return tag
