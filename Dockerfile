# Multi-stage build: a static binary (CGO_ENABLED=0) on a small non-root runtime image.
# The image expects REDIS_URL and DATABASE_URL (the zero-config local stand-ins are for
# `go run ./server` on a developer machine, not for containers), WR_SECRET and WR_ADMIN_TOKEN.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t waitroom .
#
# VERSION is stamped into the binary (-X main.version). The build context leaves .git out
# (.dockerignore), so Go's own VCS stamping has nothing to read here (-buildvcs=false says
# so): the build argument is the version's one source, "dev" when not given.
# deploy/dockerfile_test.go reads this file and checks what the comments promise.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Declared after the module download, so a new version does not download the modules again.
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X main.version=${VERSION}" -o /out/waitroom ./server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/waitroom /waitroom
# The licence and the notices of the third-party code in the binary go with it (Apache-2.0, 4).
COPY LICENSE NOTICE /usr/share/doc/waitroom/
USER nonroot:nonroot
EXPOSE 8080
# No demo queue or product unless asked for (WR_DEMO=true, as docker-compose.yml does): an
# image runs real sales, where a queue named demo with 100 sneakers would be a surprise.
ENV WR_ADDR=:8080 WR_DEMO=false
# `waitroom healthcheck` asks this instance's /readyz (a distroless image has no shell and no
# curl): exit 0 when it is ready or full (a full instance is alive; it only takes no new
# streams), 1 otherwise. The start period covers the migrations and the key load at start.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 CMD ["/waitroom", "healthcheck"]
ENTRYPOINT ["/waitroom"]
