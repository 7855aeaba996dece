# The one image of every function (functions/cmd/server); FUNCTION_TARGET
# picks the function on each Cloud Run service. Built by cloudbuild.yaml;
# the test in infra/ runs the build stage's go build command and checks
# that GO_VERSION is go.mod's.
#
#   docker build -t server .

# The go.mod version: raise both together (the test fails until they agree).
ARG GO_VERSION=1.26.0

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so that a change of the code alone reuses this layer.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
# A static binary (no libc in the final image) without the build machine's
# paths: -trimpath makes the logs' sourceLocation read
# github.com/better-compute/kubernetes/..., not /src/....
RUN CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w" -o /out/server ./functions/cmd/server

# No shell, no package manager, uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/server /server
USER nonroot:nonroot
# Cloud Run sets PORT (8080).
EXPOSE 8080
ENTRYPOINT ["/server"]
