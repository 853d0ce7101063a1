# Dockerfile - market-server and market-seed on Debian 12, in two stages.
#
#   docker build -t gamemarket .
#   docker run --rm -p 127.0.0.1:8080:8080 -e MARKET_REDIS=redis://HOST:6379/0 \
#       -e MARKET_AUTH_SECRET=... gamemarket
#   (player tokens: docker run --rm -e MARKET_AUTH_SECRET=... --entrypoint market-seed
#    gamemarket --print-token B)
#
# Any MARKET_* variable (see `market-server --help`) configures the server. The
# listen address is fixed by the entrypoint to 0.0.0.0:8080.

# ---- build: compilers and -dev packages; only the two programs are built ----
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        build-essential pkg-config libhiredis-dev libmicrohttpd-dev libjansson-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Not `make build`: that also links the tests (cmocka, libcurl).
RUN make bin/market-server bin/market-seed

# ---- runtime: the shared libraries the binaries load, nothing else ----
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libhiredis0.14 libmicrohttpd12 libjansson4 libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin market
COPY --from=build /src/bin/market-server /src/bin/market-seed /usr/local/bin/
COPY --from=build /src/fixtures/ /app/fixtures/
WORKDIR /app
USER market
ENV MARKET_REDIS=redis://redis:6379/0
EXPOSE 8080
# market-server runs as PID 1 and stops gracefully on SIGTERM (`docker stop`).
ENTRYPOINT ["market-server", "--listen", "0.0.0.0:8080"]
