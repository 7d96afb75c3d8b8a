"""The image suite builds and runs the container image; it is collected only by `make image-test`
(ATTRIBUTION_IMAGE_TEST=1), which CI runs after `make test`: it needs root, buildah, podman and debootstrap, and a
few minutes."""

import os

if os.environ.get("ATTRIBUTION_IMAGE_TEST") != "1":
    collect_ignore = ["test_image.py"]
