# Stand-in for temporalio/ui:2.42.1: ui-server built from its v2.42.1 module (the UI assets
# are embedded in it; scripts/install-temporal-server.sh builds it with the Temporal CLI that
# embeds the same release), with the module's docker/start-ui-server.sh and its templated
# config/docker.yaml, which ui-server renders itself, laid out as the module's Dockerfile lays
# them out.
ARG ALPINE_IMAGE
FROM ${ALPINE_IMAGE}
WORKDIR /home/ui-server
RUN groupadd -g 1000 temporal && useradd -u 1000 -g temporal -M -d /home/ui-server temporal && mkdir ./config
COPY ui-server start-ui-server.sh ./
COPY docker.yaml ./config/docker.yaml
# The Go module cache keeps files read-only; upstream's script is executable in git.
RUN chmod 755 ./start-ui-server.sh && chown temporal:temporal /home/ui-server -R
USER temporal
EXPOSE 8080
ENTRYPOINT ["./start-ui-server.sh"]
ENV TEMPORAL_CLOUD_UI=false
