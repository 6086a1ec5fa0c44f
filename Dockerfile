# Multi-stage build: a static binary (CGO_ENABLED=0) on a small non-root runtime image.
# The image expects REDIS_URL and DATABASE_URL (the zero-config local stand-ins are for
# `go run ./server` on a developer machine, not for containers).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/waitroom ./server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/waitroom /waitroom
USER nonroot:nonroot
EXPOSE 8080
ENV WR_ADDR=:8080 WR_DEMO=true
ENTRYPOINT ["/waitroom"]
