# Stand-in for alpine:3.22 (deploy/Dockerfile's runtime base, ARG BASE_IMAGE) and the base of
# the other stand-ins: the Debian rootfs scripts/compose-ci.sh builds with mmdebstrap, with
# busybox's applets first on PATH, so wget, nc and sh behave as on Alpine, whose userland is busybox.
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
RUN busybox --install -s /usr/local/bin
CMD ["/bin/sh"]
