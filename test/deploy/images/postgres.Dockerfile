# Stand-in for postgres:15 (a Debian image upstream too): PostgreSQL 15 from Debian's packages (what CI runs natively,
# scripts/install-postgres.sh), started by postgres-entrypoint.sh, which keeps the official
# image's contract: POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB, a cluster initialised on
# first start in PGDATA, password authentication from the network, pg_isready on PATH.
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
RUN apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null && \
    rm -rf /var/lib/apt/lists/* /var/lib/postgresql/15 /etc/postgresql/15 && \
    mkdir -p /var/lib/postgresql/data /var/run/postgresql && \
    chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
