# Stand-in for docker/dockerfile:1 (deploy/Dockerfile's `# syntax=` line): the Dockerfile
# frontend built from the moby/buildkit module, laid out as upstream's release stage.
FROM scratch
LABEL moby.buildkit.frontend.network.none="true"
LABEL moby.buildkit.frontend.caps="moby.buildkit.frontend.inputs,moby.buildkit.frontend.subrequests,moby.buildkit.frontend.contexts,moby.buildkit.frontend.gitquerystring,moby.buildkit.frontend.contexts.zstd"
COPY dockerfile-frontend /bin/dockerfile-frontend
ENTRYPOINT ["/bin/dockerfile-frontend"]
