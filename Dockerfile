# delaybench in a container, for a machine with Docker and nothing else:
#   docker compose --profile bench run --rm delaybench
# builds this image, starts PostgreSQL, Redis and the RabbitMQ of
# docker-compose.yml (healthy first) and runs the quick comparison of every
# strategy against them, writing ./results/<run-id>/ on the host.
#
# UNVERIFIED: no Docker engine runs on the project's machines, so this file
# has never been built; `docker-compose config` checks the compose file's
# syntax only (.ci/run). The images are pinned to tags, not digests: the
# digests cannot be read from here (no registry access). What needs the
# host's own tools stays out of reach in a container: the presets whose
# faults run rabbitmqctl or redis-server on the host (chaos, the cluster
# presets), backlog holdings that restart a local service, and the CPU of
# the services (they run in other containers; the report says it was not
# measured).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p delaybench && cp target/release/delaybench /usr/local/bin/delaybench

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/delaybench /usr/local/bin/delaybench
# The presets are built into the binary; results go to /work/results,
# which the compose service mounts from ./results.
WORKDIR /work
ENTRYPOINT ["delaybench"]
CMD ["run", "--strategies", "all"]
