# The goai binary, statically linked, in an image holding nothing else but
# CA certificates (for the provider APIs), a non-root user and a data
# directory for the SQLite run store.
#
#   docker build -t goai .
#   docker run --rm -p 127.0.0.1:8080:8080 -v goai-data:/data -e OPENAI_API_KEY goai
#
# The SQLite driver (modernc.org/sqlite) is pure Go, so CGO_ENABLED=0 costs
# nothing. The image has no shell, git or bubblewrap, so the agent
# sandbox is off (GOAI_SANDBOX=none): run the binary on a host, or build
# FROM a distribution image with git, for an agent that works on files.

ARG GO_VERSION=1.26.10

FROM golang:${GO_VERSION}-bookworm AS build
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# -buildvcs=auto (the default) stamps the revision that `goai version`
# prints when the build context holds the repository's .git directory.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags='-s -w' -o /out/goai ./cmd/goai
# /tmp (for SQLite's temporary files) and /data are copied as entries of a
# directory so that their modes survive: COPY of a directory itself
# creates the destination 0755.
RUN mkdir -p /out/rootfs/data /out/rootfs/tmp && chmod 1777 /out/rootfs/tmp \
 && echo 'goai:x:65532:65532:goai:/data:/sbin/nologin' > /out/passwd \
 && echo 'goai:x:65532:' > /out/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build --chown=65532:65532 /out/rootfs/ /
COPY --from=build /out/goai /usr/local/bin/goai
USER 65532:65532
WORKDIR /data
# Inside a container the server must listen on every interface; publish
# the port on loopback (as above) or put it behind an authenticating proxy.
ENV GOAI_ADDR=0.0.0.0:8080 GOAI_STORE=sqlite:/data/goai.db GOAI_SANDBOX=none
EXPOSE 8080
VOLUME /data
ENTRYPOINT ["/usr/local/bin/goai"]
CMD ["serve"]
