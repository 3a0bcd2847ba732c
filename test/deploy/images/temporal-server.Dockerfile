# Stand-in for temporalio/server:1.29.1: the server binary CI runs natively
# (scripts/install-temporal-server.sh), the release's docker/config_template.yaml and
# dynamicconfig/docker.yaml from its module, rendered from the environment at start by
# temporal-entrypoint.sh as upstream's entrypoint does.
ARG ALPINE_IMAGE
FROM ${ALPINE_IMAGE}
WORKDIR /etc/temporal
ENV TEMPORAL_HOME=/etc/temporal
EXPOSE 6933 6934 6935 6939 7233 7234 7235 7239
RUN groupadd -g 1000 temporal && useradd -u 1000 -g temporal -M -d /home/temporal temporal && \
    mkdir -p /etc/temporal/config/dynamicconfig && chown -R temporal:temporal /etc/temporal/config
COPY temporal-server dockerize /usr/local/bin/
COPY config_template.yaml /etc/temporal/config/config_template.yaml
COPY dynamicconfig-docker.yaml /etc/temporal/config/dynamicconfig/docker.yaml
COPY temporal-entrypoint.sh /etc/temporal/entrypoint.sh
USER temporal
ENTRYPOINT ["/etc/temporal/entrypoint.sh"]
