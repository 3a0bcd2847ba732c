# Stand-in for temporalio/admin-tools:1.29.1-tctl-1.18.4-cli-1.5.0: temporal-sql-tool of the
# server release CI runs, the Temporal CLI the tests run, and the server's SQL schemas, where
# the upstream image has them.
ARG ALPINE_IMAGE
FROM ${ALPINE_IMAGE}
COPY temporal-sql-tool temporal /usr/local/bin/
COPY schema /etc/temporal/schema
RUN groupadd -g 1000 temporal && useradd -u 1000 -g temporal -M -d /home/temporal temporal
USER temporal
WORKDIR /etc/temporal
ENTRYPOINT ["sleep", "infinity"]
