# syntax=docker/dockerfile:1
# One file, two images (the agent image also carries the instance manager, tusk-instance):
#   docker build --target operator     -t ghcr.io/tusk-operator/tusk:dev .
#   docker build --target backup-agent -t ghcr.io/tusk-operator/backup-agent:dev .

ARG RUST_VERSION=1.95
# The operator's Jobs run the agent inside the cluster's own postgres image (its pg_dump, pg_restore
# and pg_basebackup are the server's major); the client here serves the agent run by hand, and
# pg_dump must be at least as new as the server it dumps: ship the newest major.
ARG PG_MAJOR=18
# source: compile the three binaries here. prebuilt: take them from the context's prebuilt/
# directory instead, built on a Debian bookworm host (the end-to-end suite on real pods, whose CI
# has just compiled them: e2e/local/images.sh). The images are otherwise the same.
ARG BINARIES=source

# ring and zstd need only the image's C compiler (no cmake/clang: nothing builds aws-lc).
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build-source
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p tusk -p backup-agent -p tusk-instance \
 && mkdir -p /out \
 && cp target/release/tusk target/release/backup-agent target/release/tusk-instance /out/

FROM docker.io/library/debian:bookworm-slim AS build-prebuilt
COPY prebuilt/tusk prebuilt/backup-agent prebuilt/tusk-instance /out/

FROM build-${BINARIES} AS build

# The operator: one static-ish binary on distroless, as an unprivileged user.
FROM gcr.io/distroless/cc-debian12:nonroot AS operator
COPY --from=build /out/tusk /usr/local/bin/tusk
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tusk"]
CMD ["run"]

# The backup agent with the PostgreSQL client tools of the newest supported major, from the
# PostgreSQL project's Debian repository (enabled by Debian's own postgresql-common script).
# PG_APT=debian takes Debian's own packages instead (bookworm: PG_MAJOR=15), for builds on machines
# that reach only Debian's archive (e2e/local/images.sh); such an agent dumps servers up to 15.
FROM docker.io/library/debian:bookworm-slim AS backup-agent
ARG PG_MAJOR
ARG PG_APT=pgdg
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates postgresql-common \
 && if [ "$PG_APT" = pgdg ]; then /usr/share/postgresql-common/pgdg/apt.postgresql.org.sh -y; fi \
 && apt-get install -y --no-install-recommends "postgresql-client-${PG_MAJOR}" \
 && rm -rf /var/lib/apt/lists/*
ENV PATH="/usr/lib/postgresql/${PG_MAJOR}/bin:${PATH}" \
    HOME=/tmp
COPY --from=build /out/backup-agent /usr/local/bin/backup-agent
# The instance manager rides along: an init container of every database pod copies it into the
# stock postgres image (docs/src/design/replication.md). It links only glibc (bookworm's), which every
# official Debian-based postgres image has.
COPY --from=build /out/tusk-instance /usr/local/bin/tusk-instance
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/backup-agent"]
