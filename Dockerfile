# The Sluice broker image. Multi-stage: the builder compiles the broker binary only
# (`-p sluice`: pure Rust, no librdkafka, no cmake); the runtime image holds that one binary,
# runs it as an unprivileged user, keeps the data in the /var/lib/sluice volume and listens
# on 9092. The benchmark lab (`sluice-bench`) is not in it. See docs/deploy.md.
#
#   docker build -t sluice --build-arg SLUICE_GIT_SHA="$(git rev-parse --short=12 HEAD)" .
#   docker run -p 9092:9092 -v sluice-data:/var/lib/sluice sluice
#
# `.git` is not copied in (.dockerignore): `sluice --version` shows the revision given as
# SLUICE_GIT_SHA, or "unknown".

ARG RUST_VERSION=1.89
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS builder
WORKDIR /src
COPY . .
ARG SLUICE_GIT_SHA=
ENV SLUICE_GIT_SHA=${SLUICE_GIT_SHA}
# The image carries symbols (readable backtraces) but no debug info (the workspace's release
# profile keeps it for profiling, which an image does not need).
RUN CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=debuginfo \
        cargo build --release --locked -p sluice \
    && install -D -m 0755 target/release/sluice /out/sluice \
    && /out/sluice --version

FROM debian:${DEBIAN_RELEASE}-slim
# One system user with a fixed uid, so a host directory mounted as the volume can be chown'ed
# to it (`chown 10001:10001 DIR`).
RUN groupadd --system --gid 10001 sluice \
    && useradd --system --uid 10001 --gid sluice --home-dir /var/lib/sluice --no-create-home \
        --shell /usr/sbin/nologin sluice \
    && install -d -o sluice -g sluice -m 0750 /var/lib/sluice
COPY --from=builder /out/sluice /usr/local/bin/sluice
USER sluice:sluice
VOLUME ["/var/lib/sluice"]
EXPOSE 9092
# SIGTERM (docker stop) is a clean shutdown: in-flight requests are answered, the log is
# checkpointed. Allow it the broker's drain time (`docker stop -t 30`).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sluice"]
# Listens on every interface of the container and tells clients to come back to
# localhost:9092 (the published port on the Docker host). Clients elsewhere need the host's
# name: `docker run ... sluice serve --listen 0.0.0.0:9092 --data-dir /var/lib/sluice
# --advertised-listener HOST:9092`, or a server.properties mounted and given with --config.
CMD ["serve", "--listen", "0.0.0.0:9092", "--data-dir", "/var/lib/sluice", \
     "--advertised-listener", "localhost:9092"]
