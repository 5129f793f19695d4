# syntax=docker/dockerfile:1
#
# The seckill image: one binary, `seckill`, that runs every service
# (`seckill serve ingress|processor|projector`) and the operator commands
# (`seckill reconcile`, `seckill dead-letters ...`). Configuration comes from
# `SECKILL_<SECTION>__<KEY>` environment variables or `--config FILE`.
#
#   docker build -t seckill .
#   docker run --rm seckill serve ingress
#
# It needs BuildKit (the default builder since Docker 23, and always used by
# `docker compose`): the cargo registry and the target directory live in
# cache mounts, so a rebuild after a source change recompiles only the
# workspace crates that changed, not the ~200 dependencies.

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS builder
# A C toolchain for rdkafka's bundled librdkafka (and zstd); cmake is not needed.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends build-essential pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The target directory is a cache mount, so the binary is copied out of it
# in the same step.
RUN --mount=type=cache,id=seckill-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=seckill-cargo-git,target=/usr/local/cargo/git \
    --mount=type=cache,id=seckill-target,target=/src/target \
    cargo build --release --locked -p seckill --bin seckill \
    && install -D -m 0755 target/release/seckill /out/seckill

FROM ${RUNTIME_IMAGE} AS runtime
# ca-certificates: the trust store, for when TLS to the backends is enabled
# (today's build has no TLS client: plain TCP to Kafka, Redis and ScyllaDB).
# curl: the health probe (`curl -fsS http://127.0.0.1:PORT/healthz`) used by
# compose/docker-compose.yml. The binary itself links only libc6 (libc, libm),
# libgcc-s1 and zlib1g (librdkafka and zstd are built in), all already in the
# slim image.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 seckill \
    && useradd --system --uid 10001 --gid seckill --home-dir /var/lib/seckill --create-home \
        --shell /usr/sbin/nologin seckill
COPY --from=builder /out/seckill /usr/local/bin/seckill
# The working directory is writable, for the embedded store's default path
# (`.seckill/*.redb`) when the ScyllaDB backend is not configured.
WORKDIR /var/lib/seckill
USER 10001:10001
# ingress, processor, projector
EXPOSE 8080 8081 8082
ENTRYPOINT ["seckill"]
CMD ["--help"]
