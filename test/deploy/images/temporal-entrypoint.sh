#!/bin/sh
# Entrypoint of the temporalio/server stand-in: what upstream's entrypoint.sh and
# start-temporal.sh do for the server image, in the same order: default BIND_ON_IP to the
# container's address (and the broadcast address when binding to all interfaces), default
# TEMPORAL_ADDRESS, render config/docker.yaml from config/config_template.yaml with the
# environment, then run the services named in SERVICES (all by default).
set -eu

own_ip() { getent hosts "$(hostname)" | awk '{print $1; exit}'; }

: "${BIND_ON_IP:=$(own_ip)}"
export BIND_ON_IP
if [ "$BIND_ON_IP" = "0.0.0.0" ] || [ "$BIND_ON_IP" = "::0" ]; then
  : "${TEMPORAL_BROADCAST_ADDRESS:=$(own_ip)}"
  export TEMPORAL_BROADCAST_ADDRESS
fi
if [ -z "${TEMPORAL_ADDRESS:-}" ]; then
  case "$BIND_ON_IP" in
    *:*) TEMPORAL_ADDRESS="[$BIND_ON_IP]:7233" ;;
    *) TEMPORAL_ADDRESS="$BIND_ON_IP:7233" ;;
  esac
  export TEMPORAL_ADDRESS
fi
: "${TEMPORAL_CLI_ADDRESS:=$TEMPORAL_ADDRESS}"
export TEMPORAL_CLI_ADDRESS

dockerize -template /etc/temporal/config/config_template.yaml:/etc/temporal/config/docker.yaml

set --
for s in $(echo "${SERVICES:-}" | tr ':,' '  '); do
  set -- "$@" "--service=$s"
done
exec temporal-server --env docker start "$@"
