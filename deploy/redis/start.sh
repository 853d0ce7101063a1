#!/bin/sh
# start.sh - the compose file's redis: a password on the default user, and the service's user
# `market` with the rules of market.acl (beside this file), then redis-server.
#
#   REDIS_PASSWORD=... MARKET_REDIS_PASSWORD=... start.sh [redis-server flags...]
#
# The default user (the administrator: market-seed, redis-cli) gets REDIS_PASSWORD
# (requirepass); `market`, the only user the service connects as, gets MARKET_REDIS_PASSWORD and
# nothing but market.acl's commands on its key patterns. The configuration goes to redis-server
# on its standard input (`redis-server ... -`), so neither password shows in the process list.
# The flags given go first (--appendonly yes ...). Runs in the redis image, whose entrypoint
# drops to the redis user; exits 2 when a password is missing or not [A-Za-z0-9_-]{16,128}
# (both go into URLs unescaped).
set -eu
here=$(dirname "$0")
acl=${MARKET_ACL_FILE:-$here/market.acl}

die() {
    echo "start.sh: $*" >&2
    exit 2
}

check_pass() { # $1: variable name, $2: value
    case $2 in
    '') die "$1 is not set" ;;
    *[!A-Za-z0-9_-]*) die "$1 must be [A-Za-z0-9_-] only (it goes into a redis:// URL): try openssl rand -hex 32" ;;
    esac
    if [ "${#2}" -lt 16 ] || [ "${#2}" -gt 128 ]; then die "$1 must be 16 to 128 characters long"; fi
}
check_pass REDIS_PASSWORD "${REDIS_PASSWORD:-}"
check_pass MARKET_REDIS_PASSWORD "${MARKET_REDIS_PASSWORD:-}"
[ -r "$acl" ] || die "cannot read $acl"
rules=$(sed 's/#.*//' "$acl" | tr '\t\n' '  ' | tr -s ' ')

# "-" last: redis-server reads stdin when "-" is its first or last argument, and the image's
# entrypoint inserts "--protected-mode no" before the others.
exec docker-entrypoint.sh redis-server "$@" - <<CONF
requirepass $REDIS_PASSWORD
user market reset on >$MARKET_REDIS_PASSWORD $rules
CONF
