# Stand-in for temporalio/ui:2.34.0: ui-server built from its v2.34.0 module (the UI assets
# are embedded in it), with the module's docker/start-ui-server.sh and
# docker/config-template.yaml, laid out as the module's Dockerfile lays them out.
ARG ALPINE_IMAGE
FROM ${ALPINE_IMAGE}
WORKDIR /home/ui-server
RUN groupadd -g 5000 temporal && useradd -u 5000 -g temporal -M -d /home/ui-server temporal && mkdir ./config
COPY dockerize /usr/local/bin/
COPY ui-server start-ui-server.sh config-template.yaml ./
# The Go module cache keeps files read-only; upstream's script is executable in git.
RUN chmod 755 ./start-ui-server.sh && chown temporal:temporal /home/ui-server -R
USER temporal
EXPOSE 8080
ENTRYPOINT ["./start-ui-server.sh"]
ENV TEMPORAL_CLOUD_UI=false
