# Stand-in for alpine:3.22 (deploy/Dockerfile's runtime base, ARG BASE_IMAGE) and the base of
# the other stand-ins: the Debian rootfs scripts/compose-ci.sh builds with mmdebstrap, with
# busybox's applets first on PATH, so wget and sh behave as on Alpine, whose userland is busybox.
# nc is OpenBSD netcat: Debian builds busybox without `nc -z`, which Alpine's busybox has.
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
RUN apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends netcat-openbsd >/dev/null && \
    rm -rf /var/lib/apt/lists/* && \
    busybox --install -s /usr/local/bin && rm /usr/local/bin/nc && nc -h 2>&1 | grep -q 'Zero-I/O'
CMD ["/bin/sh"]
