# Stand-in for versity/versitygw:v1.8.0: the versitygw binary the storage matrix runs
# (scripts/install-versitygw.sh), at the path upstream's Dockerfile copies it to.
ARG ALPINE_IMAGE
FROM ${ALPINE_IMAGE}
RUN mkdir -p /tmp/vgw
COPY versitygw /usr/local/bin/versitygw
ENTRYPOINT ["/usr/local/bin/versitygw"]
