#!/bin/sh
# deps.sh - install the Debian 12 packages the build, tests and run need, when missing.
set -eu
PKGS="build-essential pkg-config libhiredis-dev libmicrohttpd-dev libjansson-dev \
libjemalloc-dev libcmocka-dev libcurl4-openssl-dev libssl-dev redis-server redis-tools redis-sentinel \
python3 python3-yaml python3-jsonschema chromium chromium-driver python3-selenium \
help2man curl"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
# The packaged redis-server starts a system-wide instance on 6379 (redis-sentinel
# one on 26379); our tests, `make run` and `make run-ha` use their own
# private servers, so leave the system ones alone.
