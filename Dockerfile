# Dockerfile - market-server, market-seed and market-load on Debian 12, in two stages.
#
#   docker build -t gamemarket .
#   docker run --rm -p 127.0.0.1:8080:8080 -e MARKET_REDIS=redis://market:PASS@HOST:6379/0 \
#       -e MARKET_AUTH_SECRET=... gamemarket
#   (player tokens: docker run --rm -e MARKET_AUTH_SECRET=... --entrypoint market-seed
#    gamemarket --print-token B)
#   (a load test against a deployment: docker run --rm --network HOST_OR_NET --entrypoint
#    market-load gamemarket --url http://market:8080 --redis redis://:ADMIN@redis:6379/0 ...)
#
# Any MARKET_* variable (see `market-server --help`) configures the server. The
# listen address is fixed by the entrypoint to 0.0.0.0:8080. Both stages start from
# the same Debian 12 image, pinned by tag and digest (bump both together).

# ---- build: compilers and -dev packages; only the three programs are built ----
FROM debian:bookworm-20241223-slim@sha256:d365f4920711a9074c4bcd178e8f457ee59250426441ab2a5f8106ed8fe948eb AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        build-essential pkg-config libhiredis-dev libmicrohttpd-dev libjansson-dev libssl-dev \
        libjemalloc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Not `make build`: that also links the tests (cmocka, libcurl).
RUN make bin/market-server bin/market-seed bin/market-load

# ---- runtime: the shared libraries the binaries load; curl for the health check and
# redis-cli for the seed step's "is the store empty?" (deploy/docker/seed-if-empty.sh) ----
FROM debian:bookworm-20241223-slim@sha256:d365f4920711a9074c4bcd178e8f457ee59250426441ab2a5f8106ed8fe948eb
RUN apt-get update \
 && apt-get install -y --no-install-recommends libhiredis0.14 libmicrohttpd12 libjansson4 libssl3 libjemalloc2 \
        curl redis-tools \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin market
COPY --from=build /src/bin/market-server /src/bin/market-seed /src/bin/market-load /usr/local/bin/
COPY --from=build /src/deploy/docker/seed-if-empty.sh /usr/local/bin/market-seed-if-empty
COPY --from=build /src/fixtures/ /app/fixtures/
COPY --from=build /src/web/ /app/web/
WORKDIR /app
USER market
ENV MARKET_REDIS=redis://redis:6379/0
EXPOSE 8080
# 200 only when the store answers, is a master and takes writes (docs/OPERATIONS.md, Health
# checks); docker marks the container unhealthy after 3 failures in a row.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS -o /dev/null --max-time 2 http://127.0.0.1:8080/healthz || exit 1
# market-server runs as PID 1 and stops gracefully on SIGTERM (`docker stop`).
ENTRYPOINT ["market-server", "--listen", "0.0.0.0:8080"]
