/* config.c - server configuration from defaults, the environment and flags.
 *
 * Precedence: defaults, then MARKET_* environment variables, then flags.
 * Every flag has an environment twin: --lock-ttl-ms is MARKET_LOCK_TTL_MS.
 * A flag that takes no value (--no-auth) reads "1" or "0" from its twin.
 */
#include "server/server.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "market/market.h"
#include "server/server_impl.h"

/* Fills cfg with the defaults. This function can't fail. */
void server_config_defaults(server_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->listen, sizeof cfg->listen, "127.0.0.1:8080");
    snprintf(cfg->redis, sizeof cfg->redis, "redis://127.0.0.1:6379/0");
    snprintf(cfg->lock, sizeof cfg->lock, "redis");
    snprintf(cfg->strategy, sizeof cfg->strategy, "market");
    cfg->batch_max = 64;
    cfg->workers = 4;
    cfg->lock_ttl_ms = 5000;
    cfg->acquire_timeout_ms = 2000;
    cfg->trade_history = MARKET_TRADE_HISTORY;
    cfg->trade_index = MARKET_TRADE_INDEX;
    cfg->redis_timeout_ms = 500;
    cfg->threads = 2;
    cfg->max_connections = 1024;
    cfg->connection_timeout_s = 30;
    cfg->log_level = SERVER_LOG_INFO;
    cfg->per_ip_connections = 512;
    cfg->connection_memory = 32 * 1024;
    snprintf(cfg->web_dir, sizeof cfg->web_dir, "web");
    cfg->auth_leeway_s = 60;
}

/* Prints the flags on stdout. This function can't fail. */
void server_usage(const char *prog) {
    printf("usage: %s [flags]\n"
           "  --listen HOST:PORT        listen address (default 127.0.0.1:8080)     MARKET_LISTEN\n"
           "  --redis URL               redis://[user:pass@]host[:port][/db], or     MARKET_REDIS\n"
           "                            redis-sentinel://[user:pass@]host[:port][,host[:port]...]/name[/db],\n"
           "                            or redis-cluster://[user:pass@]host[:port][,host[:port]...]\n"
           "  --lock redis|redlock|local  lock backend (default redis)               MARKET_LOCK\n"
           "  --lock-redis URL          redlock: a master (repeat, or a comma list); MARKET_LOCK_REDIS\n"
           "                            redis: the lock's server if not --redis's\n"
           "  --min-replicas-ack N      answer a write only once at least N replicas MARKET_MIN_REPLICAS_ACK\n"
           "                            confirmed it (WAIT) and, on a Sentinel group, every replica\n"
           "                            the Sentinels could promote: a 200 survives their failovers\n"
           "                            (default 0: do not wait; for money: 1)\n"
           "  --replica-ack-timeout-ms N  WAIT's timeout (default: redis timeout/2) MARKET_REPLICA_ACK_TIMEOUT_MS\n"
           "  --strategy S              market|item|optimistic (default market)      MARKET_STRATEGY\n"
           "  --batch-max N             market strategy: purchases per lock hold (64) MARKET_BATCH_MAX\n"
           "  --workers N               market/item: threads serving purchases, each   MARKET_WORKERS\n"
           "                            realm on one; realms spread over them (4, 1..16)\n"
           "  --lock-ttl-ms N           market lock lease, ms > 0 (default 5000)     MARKET_LOCK_TTL_MS\n"
           "  --acquire-timeout-ms N    lock wait budget, ms (default 2000)          MARKET_ACQUIRE_TIMEOUT_MS\n"
           "  --redis-timeout-ms N      Redis connect/command timeout (default 500)  MARKET_REDIS_TIMEOUT_MS\n"
           "  --trade-history N         trades kept per realm, about (1000000)       MARKET_TRADE_HISTORY\n"
           "  --trade-index N           trades kept in each player's index (1000)    MARKET_TRADE_INDEX\n"
           "  --threads N               event-loop threads (2); 0: a thread per connection MARKET_THREADS\n"
           "  --max-connections N       open connections at once (default 1024)      MARKET_MAX_CONNECTIONS\n"
           "  --connection-timeout-s N  idle connection timeout (default 30)         MARKET_CONNECTION_TIMEOUT_S\n"
           "  --auth-secret S           HS256 key of player JWTs without a kid       MARKET_AUTH_SECRET\n"
           "  --auth-key KID:ALG:KEY    a key chosen by the tokens' kid (repeat):    MARKET_AUTH_KEYS\n"
           "                            KID:hs256:SECRET, KID:rs256:PUB.pem, KID:es256:PUB.pem\n"
           "                            (the variable: specs separated by spaces)\n"
           "  --auth-audience AUD       tokens must have this aud                    MARKET_AUTH_AUDIENCE\n"
           "  --auth-leeway-s N         clock skew allowed on exp/iat/nbf (60)       MARKET_AUTH_LEEWAY_S\n"
           "  --no-auth                 serve without authentication (tests, demos)  MARKET_NO_AUTH=1\n"
           "  --admin-secret S          HMAC key of the admin token (POST /sales);  MARKET_ADMIN_SECRET\n"
           "                            none: admin routes off (checked even with --no-auth)\n"
           "  --per-ip-connections N    connections per client IP, 0 = any (512)     MARKET_PER_IP_CONNECTIONS\n"
           "  --connection-memory N     buffer bytes per connection (32768)          MARKET_CONNECTION_MEMORY\n"
           "  --reuse-port              share --listen with other servers given it   MARKET_REUSE_PORT=1\n"
           "  --cors-origin ORIGIN      a browser origin allowed to call the API     MARKET_CORS_ORIGIN\n"
           "                            (https://game.example[:port], or *); repeat (a comma list); none: no CORS\n"
           "  --web-dir DIR             the market page's files, served at GET /     MARKET_WEB_DIR\n"
           "                            (default web; \"\": no page)\n"
           "  --log-level LEVEL         error|warn|info|debug (default info)         MARKET_LOG_LEVEL\n"
           "  --log-file PATH           log there, not on stderr; SIGHUP reopens it  MARKET_LOG_FILE\n"
           "  --test-stall-ms N         test hook: stall between read and commit     MARKET_TEST_STALL_MS\n"
           "  --help                    this text\n",
           prog);
}

enum opt_id {
    OPT_LISTEN = 1, OPT_REDIS, OPT_LOCK, OPT_LOCK_REDIS, OPT_STRATEGY, OPT_BATCH, OPT_TTL, OPT_ACQUIRE, OPT_REDIS_TIMEOUT, OPT_THREADS,
    OPT_LOGFILE,
    OPT_MAXCONN, OPT_CONNTIMEOUT, OPT_LOGLEVEL, OPT_STALL, OPT_SECRET, OPT_NOAUTH, OPT_PERIP,
    OPT_CONNMEM, OPT_REUSEPORT, OPT_MINACK, OPT_ACKTIMEOUT, OPT_WORKERS, OPT_HISTORY, OPT_TINDEX, OPT_ADMIN, OPT_CORS, OPT_WEBDIR,
    OPT_AUTH_KEY, OPT_AUDIENCE, OPT_LEEWAY, OPT_HELP
};

static const struct {
    enum opt_id id;
    const char *flag;
    const char *env;
    int no_value; /* a flag without a value: the variable takes "1" or "0" */
} opt_names[] = {
    {OPT_LISTEN, "listen", "MARKET_LISTEN"},
    {OPT_REDIS, "redis", "MARKET_REDIS"},
    {OPT_LOCK, "lock", "MARKET_LOCK"},
    {OPT_LOCK_REDIS, "lock-redis", "MARKET_LOCK_REDIS"},
    {OPT_STRATEGY, "strategy", "MARKET_STRATEGY"},
    {OPT_BATCH, "batch-max", "MARKET_BATCH_MAX"},
    {OPT_TTL, "lock-ttl-ms", "MARKET_LOCK_TTL_MS"},
    {OPT_ACQUIRE, "acquire-timeout-ms", "MARKET_ACQUIRE_TIMEOUT_MS"},
    {OPT_REDIS_TIMEOUT, "redis-timeout-ms", "MARKET_REDIS_TIMEOUT_MS"},
    {OPT_THREADS, "threads", "MARKET_THREADS"},
    {OPT_LOGFILE, "log-file", "MARKET_LOG_FILE"},
    {OPT_MAXCONN, "max-connections", "MARKET_MAX_CONNECTIONS"},
    {OPT_CONNTIMEOUT, "connection-timeout-s", "MARKET_CONNECTION_TIMEOUT_S"},
    {OPT_LOGLEVEL, "log-level", "MARKET_LOG_LEVEL"},
    {OPT_STALL, "test-stall-ms", "MARKET_TEST_STALL_MS"},
    {OPT_SECRET, "auth-secret", "MARKET_AUTH_SECRET"},
    {OPT_NOAUTH, "no-auth", "MARKET_NO_AUTH", 1},
    {OPT_PERIP, "per-ip-connections", "MARKET_PER_IP_CONNECTIONS"},
    {OPT_CONNMEM, "connection-memory", "MARKET_CONNECTION_MEMORY"},
    {OPT_REUSEPORT, "reuse-port", "MARKET_REUSE_PORT", 1},
    {OPT_MINACK, "min-replicas-ack", "MARKET_MIN_REPLICAS_ACK"},
    {OPT_ACKTIMEOUT, "replica-ack-timeout-ms", "MARKET_REPLICA_ACK_TIMEOUT_MS"},
    {OPT_WORKERS, "workers", "MARKET_WORKERS"},
    {OPT_HISTORY, "trade-history", "MARKET_TRADE_HISTORY"},
    {OPT_TINDEX, "trade-index", "MARKET_TRADE_INDEX"},
    {OPT_ADMIN, "admin-secret", "MARKET_ADMIN_SECRET"},
    {OPT_CORS, "cors-origin", "MARKET_CORS_ORIGIN"},
    {OPT_WEBDIR, "web-dir", "MARKET_WEB_DIR"},
    {OPT_AUTH_KEY, "auth-key", "MARKET_AUTH_KEYS"},
    {OPT_AUDIENCE, "auth-audience", "MARKET_AUTH_AUDIENCE"},
    {OPT_LEEWAY, "auth-leeway-s", "MARKET_AUTH_LEEWAY_S"},
};

/* Adds the origins of v, a comma-separated list, to cfg's CORS origins.
 * Returns 0, or -1 (cfg's list may then hold some of them) when one is not an
 * origin (server__cors_origin_ok) or there would be more than SERVER_CORS_MAX. */
static int add_cors(server_config *cfg, const char *v) {
    for (const char *p = v;; p++) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (cfg->n_cors == SERVER_CORS_MAX || n == 0 || n >= SERVER_CORS_ORIGIN_MAX) return -1;
        char *o = cfg->cors_origins[cfg->n_cors];
        memcpy(o, p, n);
        o[n] = '\0';
        if (!server__cors_origin_ok(o)) return -1;
        cfg->n_cors++;
        if (!end) return 0;
        p = end;
    }
}

/* Checks the form of one --auth-key spec, "KID:ALG:KEY" (its key is read at start). */
static int auth_key_spec_ok(const char *v, size_t n) {
    const char *c1 = memchr(v, ':', n);
    const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - v)) : NULL;
    if (!c2 || c1 == v || c2 == v + n - 1) return 0;
    size_t alen = (size_t)(c2 - c1 - 1);
    return (alen == 5 && (strncasecmp(c1 + 1, "hs256", 5) == 0 ||
                          strncasecmp(c1 + 1, "rs256", 5) == 0 ||
                          strncasecmp(c1 + 1, "es256", 5) == 0));
}

/* Adds the --auth-key specs of v (separated by blanks) to cfg->auth_keys, one a line. */
static int auth_keys_add(server_config *cfg, const char *v) {
    int any = 0;
    while (*v) {
        size_t skip = strspn(v, " \t\n\r"), n;
        v += skip;
        if (!*v) break;
        n = strcspn(v, " \t\n\r");
        size_t have = strlen(cfg->auth_keys);
        if (!auth_key_spec_ok(v, n) || have + n + 2 > sizeof cfg->auth_keys) return -1;
        snprintf(cfg->auth_keys + have, sizeof cfg->auth_keys - have, "%.*s\n", (int)n, v);
        v += n;
        any = 1;
    }
    return any ? 0 : -1;
}

static int set_opt(server_config *cfg, enum opt_id id, const char *v) {
    uint64_t n;
    switch (id) {
    case OPT_LISTEN:
        return snprintf(cfg->listen, sizeof cfg->listen, "%s", v) < (int)sizeof cfg->listen ? 0 : -1;
    case OPT_REDIS:
        return snprintf(cfg->redis, sizeof cfg->redis, "%s", v) < (int)sizeof cfg->redis ? 0 : -1;
    case OPT_LOCK:
        if (strcmp(v, "redis") != 0 && strcmp(v, "redlock") != 0 && strcmp(v, "local") != 0)
            return -1;
        snprintf(cfg->lock, sizeof cfg->lock, "%s", v);
        return 0;
    case OPT_LOCK_REDIS: { /* repeated flags add to the list */
        size_t have = strlen(cfg->lock_redis);
        int w = snprintf(cfg->lock_redis + have, sizeof cfg->lock_redis - have, "%s%s",
                         have ? "," : "", v);
        return w > 0 && (size_t)w < sizeof cfg->lock_redis - have ? 0 : -1;
    }
    case OPT_STRATEGY:
        if (strcmp(v, "market") != 0 && strcmp(v, "item") != 0 && strcmp(v, "optimistic") != 0)
            return -1;
        snprintf(cfg->strategy, sizeof cfg->strategy, "%s", v);
        return 0;
    case OPT_BATCH:
        if (cli_parse_u64(v, 1, 256, &n) < 0) return -1;
        cfg->batch_max = (unsigned)n;
        return 0;
    case OPT_WORKERS:
        if (cli_parse_u64(v, 1, MARKET_WORKERS_MAX, &n) < 0) return -1;
        cfg->workers = (unsigned)n;
        return 0;
    case OPT_TTL:
        if (cli_parse_u64(v, 1, UINT32_MAX, &n) < 0) return -1;
        cfg->lock_ttl_ms = (uint32_t)n;
        return 0;
    case OPT_ACQUIRE:
        if (cli_parse_u64(v, 0, UINT32_MAX, &n) < 0) return -1;
        cfg->acquire_timeout_ms = (uint32_t)n;
        return 0;
    case OPT_REDIS_TIMEOUT:
        if (cli_parse_u64(v, 1, 3600000, &n) < 0) return -1;
        cfg->redis_timeout_ms = (int)n;
        return 0;
    case OPT_THREADS:
        if (cli_parse_u64(v, 0, 1024, &n) < 0) return -1;
        cfg->threads = (unsigned)n;
        return 0;
    case OPT_MAXCONN:
        if (cli_parse_u64(v, 1, 1000000, &n) < 0) return -1;
        cfg->max_connections = (unsigned)n;
        return 0;
    case OPT_CONNTIMEOUT:
        if (cli_parse_u64(v, 0, 86400, &n) < 0) return -1;
        cfg->connection_timeout_s = (unsigned)n;
        return 0;
    case OPT_LOGLEVEL: {
        static const char *const levels[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++)
            if (strcasecmp(v, levels[i]) == 0) {
                cfg->log_level = i;
                return 0;
            }
        return -1;
    }
    case OPT_LOGFILE:
        if (!*v) return -1;
        return snprintf(cfg->log_file, sizeof cfg->log_file, "%s", v) < (int)sizeof cfg->log_file
                   ? 0
                   : -1;
    case OPT_STALL:
        if (cli_parse_u64(v, 0, 600000, &n) < 0) return -1;
        cfg->test_stall_ms = (uint32_t)n;
        return 0;
    case OPT_SECRET:
        if (!*v) return -1;
        return snprintf(cfg->auth_secret, sizeof cfg->auth_secret, "%s", v) <
                       (int)sizeof cfg->auth_secret
                   ? 0
                   : -1;
    case OPT_NOAUTH: /* a flag; from the environment, "1" or "0" */
        if (strcmp(v, "1") != 0 && strcmp(v, "0") != 0) return -1;
        cfg->no_auth = v[0] == '1';
        return 0;
    case OPT_PERIP:
        if (cli_parse_u64(v, 0, 1000000, &n) < 0) return -1;
        cfg->per_ip_connections = (unsigned)n;
        return 0;
    case OPT_CONNMEM:
        if (cli_parse_u64(v, 4096, 16 * 1024 * 1024, &n) < 0) return -1;
        cfg->connection_memory = (size_t)n;
        return 0;
    case OPT_REUSEPORT: /* a flag; from the environment, "1" or "0" */
        if (strcmp(v, "1") != 0 && strcmp(v, "0") != 0) return -1;
        cfg->reuse_port = v[0] == '1';
        return 0;
    case OPT_MINACK:
        if (cli_parse_u64(v, 0, 64, &n) < 0) return -1;
        cfg->min_replicas_ack = (unsigned)n;
        return 0;
    case OPT_ACKTIMEOUT:
        if (cli_parse_u64(v, 1, 3600000, &n) < 0) return -1;
        cfg->replica_ack_timeout_ms = (int)n;
        return 0;
    case OPT_HISTORY: /* MAXLEN ~: Redis keeps at least this many, a node more at most */
        if (cli_parse_u64(v, 1, UINT64_C(1000000000000), &n) < 0) return -1;
        cfg->trade_history = n;
        return 0;
    case OPT_TINDEX:
        if (cli_parse_u64(v, 1, UINT64_C(1000000000), &n) < 0) return -1;
        cfg->trade_index = n;
        return 0;
    case OPT_ADMIN:
        if (!*v) return -1;
        return snprintf(cfg->admin_secret, sizeof cfg->admin_secret, "%s", v) <
                       (int)sizeof cfg->admin_secret
                   ? 0
                   : -1;
    case OPT_WEBDIR:
        return snprintf(cfg->web_dir, sizeof cfg->web_dir, "%s", v) < (int)sizeof cfg->web_dir ? 0
                                                                                             : -1;
    case OPT_CORS: /* repeated flags add to the list */
        return add_cors(cfg, v);
    case OPT_AUTH_KEY: /* repeated flags, and the variable's specs, add to the list */
        return auth_keys_add(cfg, v);
    case OPT_AUDIENCE:
        if (!*v) return -1;
        return snprintf(cfg->auth_audience, sizeof cfg->auth_audience, "%s", v) <
                       (int)sizeof cfg->auth_audience
                   ? 0
                   : -1;
    case OPT_LEEWAY:
        if (cli_parse_u64(v, 0, 3600, &n) < 0) return -1;
        cfg->auth_leeway_s = (unsigned)n;
        return 0;
    case OPT_HELP:
        break;
    }
    return -1;
}

/* Applies the MARKET_* environment, then argv, to cfg (which should hold the
 * defaults). Returns SERVER_OK (with cfg->help set when --help was given),
 * or SERVER_ERR_INVALID with a sentence in why. */
int server_config_parse(server_config *cfg, int argc, char **argv, char *why, size_t whylen) {
    size_t nopts = sizeof opt_names / sizeof *opt_names;
    for (size_t i = 0; i < nopts; i++) {
        const char *v = getenv(opt_names[i].env);
        if (v && *v && set_opt(cfg, opt_names[i].id, v) < 0) {
            snprintf(why, whylen, "bad value for %s: '%s'", opt_names[i].env,
                     opt_names[i].id == OPT_SECRET || opt_names[i].id == OPT_ADMIN ||
                             opt_names[i].id == OPT_AUTH_KEY
                         ? "***"
                         : v);
            return SERVER_ERR_INVALID;
        }
    }
    struct option longopts[sizeof opt_names / sizeof *opt_names + 2];
    for (size_t i = 0; i < nopts; i++)
        longopts[i] = (struct option){opt_names[i].flag,
                                      opt_names[i].no_value ? no_argument : required_argument,
                                      NULL, opt_names[i].id};
    longopts[nopts] = (struct option){"help", no_argument, NULL, OPT_HELP};
    longopts[nopts + 1] = (struct option){0};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (ch == OPT_HELP || ch == 'h') {
            cfg->help = 1;
            return SERVER_OK;
        }
        if (ch == '?' || ch == ':') {
            snprintf(why, whylen, "unknown flag or missing value: '%s' (see --help)",
                     argv[optind - 1]);
            return SERVER_ERR_INVALID;
        }
        if (set_opt(cfg, (enum opt_id)ch, opt_names[ch - 1].no_value ? "1" : optarg) < 0) {
            snprintf(why, whylen, "bad value for --%s: '%s'", longopts[ch - 1].name,
                     ch == OPT_SECRET || ch == OPT_ADMIN || ch == OPT_AUTH_KEY ? "***" : optarg);
            return SERVER_ERR_INVALID;
        }
    }
    if (optind < argc) {
        snprintf(why, whylen, "unexpected argument '%s' (see --help)", argv[optind]);
        return SERVER_ERR_INVALID;
    }
    return SERVER_OK;
}
