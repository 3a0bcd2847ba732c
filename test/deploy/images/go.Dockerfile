# Stand-in for golang:1.26-alpine (deploy/Dockerfile's build stage, ARG GO_IMAGE): the Go
# toolchain the tests run, copied from the host, on the stand-in Alpine; modules come from the
# Go module proxy inside the build, as they do in the upstream image. The CA bundle is the
# machine's, which trusts the TLS-intercepting egress the module proxy is reached through.
ARG ALPINE_IMAGE
FROM ${ALPINE_IMAGE}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY go /usr/local/go
# GOGC=400: the compiler collects garbage less often, for less CPU per build, as CI's own
# builds do (decision 0371); the binaries it writes are the same.
ENV GOLANG_VERSION=host GOTOOLCHAIN=local GOPATH=/go GOGC=400 PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /go/src /go/bin && go version
WORKDIR /go
