/* config.c - server configuration from defaults, the environment and flags.
 *
 * Precedence: defaults, then MARKET_* environment variables, then flags.
 * Every flag has an environment twin: --lock-ttl-ms is MARKET_LOCK_TTL_MS.
 * A flag that takes no value (--no-auth) reads "1" or "0" from its twin.
 */
#include "server/server.h"

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
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
    cfg->connection_memory = 16 * 1024; /* libmicrohttpd zeroes it after every request */
    snprintf(cfg->web_dir, sizeof cfg->web_dir, "web");
    cfg->auth_leeway_s = 60;
    cfg->sweep_interval_ms = MARKET_SWEEP_INTERVAL_MS;
    cfg->sweep_lease_ms = MARKET_SWEEP_LEASE_MS;
}

/* Prints the flags on stdout: each with what it does and, at the right, its environment
 * twin (scripts/man.sh moves the twin to the end of the entry in the man page). This
 * function can't fail. */
void server_usage(const char *prog) {
    printf("usage: %s [flags]\n"
           "Each flag may instead be given by its MARKET_* variable, named with it; a flag\n"
           "on the command line wins over its variable.\n"
           "  --listen HOST:PORT        Listen on this address (default 127.0.0.1:8080).  "
           "MARKET_LISTEN\n"
           "  --redis URL               The store, one of                                 "
           "MARKET_REDIS\n"
           "                            redis://[user:pass@]host[:port][/db],\n"
           "                            redis-sentinel://[user:pass@]host[:port][,...]/name[/db]\n"
           "                            (a Sentinel group) and\n"
           "                            redis-cluster://[user:pass@]host[:port][,...] (a\n"
           "                            cluster); default redis://127.0.0.1:6379/0.\n"
           "  --lock redis|redlock|local  The lock backend (default redis).               "
           "MARKET_LOCK\n"
           "  --lock-redis URL          For redlock, a master (repeat, or give a comma    "
           "MARKET_LOCK_REDIS\n"
           "                            list); for redis, the lock's server when it is\n"
           "                            not --redis's.\n"
           "  --min-replicas-ack N      Answer a write only once at least N replicas      "
           "MARKET_MIN_REPLICAS_ACK\n"
           "                            confirmed it (WAIT) and, on a Sentinel group,\n"
           "                            every replica the Sentinels could promote: a 200\n"
           "                            survives their failovers (default 0: do not\n"
           "                            wait; for money: 1).\n"
           "  --replica-ack-timeout-ms N  WAIT's timeout (default: Redis's, halved).      "
           "MARKET_REPLICA_ACK_TIMEOUT_MS\n"
           "  --strategy S              How purchases run: market, item or optimistic     "
           "MARKET_STRATEGY\n"
           "                            (default market).\n"
           "  --batch-max N             The market strategy's purchases per lock hold     "
           "MARKET_BATCH_MAX\n"
           "                            (default 64).\n"
           "  --workers N               For market or item, the threads serving           "
           "MARKET_WORKERS\n"
           "                            purchases, each realm on one, the realms spread\n"
           "                            over them (default 4, 1..16).\n"
           "  --lock-ttl-ms N           The market lock's lease, ms > 0 (default 5000).   "
           "MARKET_LOCK_TTL_MS\n"
           "  --acquire-timeout-ms N    The lock wait budget, in ms (default 2000).       "
           "MARKET_ACQUIRE_TIMEOUT_MS\n"
           "  --redis-timeout-ms N      Redis's connect and command timeout, in ms        "
           "MARKET_REDIS_TIMEOUT_MS\n"
           "                            (default 500).\n"
           "  --trade-history N         Trades kept per realm, about (default 1000000).   "
           "MARKET_TRADE_HISTORY\n"
           "  --trade-index N           Trades kept in a player's index (default 1000).   "
           "MARKET_TRADE_INDEX\n"
           "  --threads N               Event-loop threads (default 2); 0: a thread for   "
           "MARKET_THREADS\n"
           "                            each connection.\n"
           "  --max-connections N       Connections open at once (default 1024).          "
           "MARKET_MAX_CONNECTIONS\n"
           "  --connection-timeout-s N  Close a connection idle this many seconds         "
           "MARKET_CONNECTION_TIMEOUT_S\n"
           "                            (default 30).\n"
           "  --auth-secret S           The HS256 key of player JWTs without a kid.       "
           "MARKET_AUTH_SECRET\n"
           "  --auth-key KID:ALG:KEY    A key chosen by the tokens' kid (repeat):         "
           "MARKET_AUTH_KEYS\n"
           "                            KID:hs256:SECRET, KID:rs256:PUB.pem or\n"
           "                            KID:es256:PUB.pem (in the variable, specs\n"
           "                            separated by spaces).\n"
           "  --auth-audience AUD       Tokens must have this aud.                        "
           "MARKET_AUTH_AUDIENCE\n"
           "  --auth-leeway-s N         The clock skew allowed on exp, iat and nbf, in    "
           "MARKET_AUTH_LEEWAY_S\n"
           "                            seconds (default 60).\n"
           "  --no-auth                 Serve without authentication (tests, demos).      "
           "MARKET_NO_AUTH=1\n"
           "  --admin-secret S          The HMAC key of the admin token (POST /sales);    "
           "MARKET_ADMIN_SECRET\n"
           "                            none: no admin routes, even with --no-auth.\n"
           "  --public-trade-parties    Show every reader a trade's buyer and seller      "
           "MARKET_PUBLIC_TRADE_PARTIES=1\n"
           "                            (default: only the two and the admin).\n"
           "  --no-price-history        Keep no price history of stackable goods          "
           "MARKET_NO_PRICE_HISTORY=1\n"
           "                            (GET /items/{item}/history answers none).\n"
           "  --sweep-interval-ms N     How often the sweeper looks for listings whose    "
           "MARKET_SWEEP_INTERVAL_MS\n"
           "                            end has come (default 1000; 0: this server runs\n"
           "                            no sweeper).\n"
           "  --sweep-lease-ms N        The sweeper's lease on a realm: another server's  "
           "MARKET_SWEEP_LEASE_MS\n"
           "                            sweeper takes over this long after it died\n"
           "                            (default 5000).\n"
           "  --per-ip-connections N    Connections per client IP, 0: any (default 512).  "
           "MARKET_PER_IP_CONNECTIONS\n"
           "  --connection-memory N     Buffer bytes per connection (default 16384).      "
           "MARKET_CONNECTION_MEMORY\n"
           "  --reuse-port              Share --listen's port with the other servers      "
           "MARKET_REUSE_PORT=1\n"
           "                            given this flag.\n"
           "  --cors-origin ORIGIN      A browser origin allowed to call the API          "
           "MARKET_CORS_ORIGIN\n"
           "                            (https://game.example[:port], or *); repeat, or\n"
           "                            give a comma list; none: no CORS.\n"
           "  --web-dir DIR             The market page's files, served at GET /          "
           "MARKET_WEB_DIR\n"
           "                            (default web; \"\": no page).\n"
           "  --log-level LEVEL         The log level: error, warn, info or debug         "
           "MARKET_LOG_LEVEL\n"
           "                            (default info).\n"
           "  --log-file PATH           Log there, not on stderr; SIGHUP reopens it.      "
           "MARKET_LOG_FILE\n"
           "  --test-stall-ms N         Test hook: a stall between read and commit, ms.   "
           "MARKET_TEST_STALL_MS\n"
           "  --help                    Print this text.\n",
           prog);
}

enum opt_id {
    OPT_LISTEN = 1,
    OPT_REDIS,
    OPT_LOCK,
    OPT_LOCK_REDIS,
    OPT_STRATEGY,
    OPT_BATCH,
    OPT_TTL,
    OPT_ACQUIRE,
    OPT_REDIS_TIMEOUT,
    OPT_THREADS,
    OPT_LOGFILE,
    OPT_MAXCONN,
    OPT_CONNTIMEOUT,
    OPT_LOGLEVEL,
    OPT_STALL,
    OPT_SECRET,
    OPT_NOAUTH,
    OPT_PERIP,
    OPT_CONNMEM,
    OPT_REUSEPORT,
    OPT_MINACK,
    OPT_ACKTIMEOUT,
    OPT_WORKERS,
    OPT_HISTORY,
    OPT_TINDEX,
    OPT_ADMIN,
    OPT_CORS,
    OPT_WEBDIR,
    OPT_AUTH_KEY,
    OPT_AUDIENCE,
    OPT_LEEWAY,
    OPT_PUBLIC_PARTIES,
    OPT_NO_PRICE_HISTORY,
    OPT_SWEEP,
    OPT_SWEEP_LEASE,
    OPT_HELP
};

/* How an option's value is read into its field. */
enum opt_kind {
    KIND_TEXT,    /* a string that fits the field, "" too */
    KIND_WORD,    /* a non-empty string that fits the field */
    KIND_NUMBER,  /* a whole number in lo..hi (cli_parse_u64), into an integer field */
    KIND_FLAG,    /* a flag without a value: its variable takes "1" or "0" (int field) */
    KIND_CHOICE,  /* one of the words of choices, copied into the field */
    KIND_SPECIAL, /* read by set_special() */
};

/* A field of server_config: where it is and how big. */
#define FIELD(f) offsetof(server_config, f), sizeof ((server_config *)0)->f
#define TEXT(f) KIND_TEXT, FIELD(f), 0, 0, NULL
#define WORD(f) KIND_WORD, FIELD(f), 0, 0, NULL
#define NUMBER(f, lo, hi) KIND_NUMBER, FIELD(f), (lo), (hi), NULL
#define FLAG(f) KIND_FLAG, FIELD(f), 0, 1, NULL
#define CHOICE(f, words) KIND_CHOICE, FIELD(f), 0, 0, (words)
#define SPECIAL KIND_SPECIAL, 0, 0, 0, 0, NULL

static const char *const lock_names[] = {"redis", "redlock", "local", NULL};
static const char *const strategy_names[] = {"market", "item", "optimistic", NULL};

/* Every option, in enum opt_id's order (set_opt() finds one by its id). */
static const struct opt {
    enum opt_id id;
    const char *flag;
    const char *env;
    int secret; /* 1: its value is never repeated in an error */
    enum opt_kind kind;
    size_t off, size; /* the field (not KIND_SPECIAL) */
    uint64_t lo, hi;  /* KIND_NUMBER's range */
    const char *const *choices; /* KIND_CHOICE's words, NULL-terminated */
} opt_names[] = {
    {OPT_LISTEN, "listen", "MARKET_LISTEN", 0, TEXT(listen)},
    {OPT_REDIS, "redis", "MARKET_REDIS", 0, TEXT(redis)},
    {OPT_LOCK, "lock", "MARKET_LOCK", 0, CHOICE(lock, lock_names)},
    {OPT_LOCK_REDIS, "lock-redis", "MARKET_LOCK_REDIS", 0, SPECIAL},
    {OPT_STRATEGY, "strategy", "MARKET_STRATEGY", 0, CHOICE(strategy, strategy_names)},
    {OPT_BATCH, "batch-max", "MARKET_BATCH_MAX", 0, NUMBER(batch_max, 1, 256)},
    {OPT_TTL, "lock-ttl-ms", "MARKET_LOCK_TTL_MS", 0, NUMBER(lock_ttl_ms, 1, UINT32_MAX)},
    {OPT_ACQUIRE, "acquire-timeout-ms", "MARKET_ACQUIRE_TIMEOUT_MS", 0,
     NUMBER(acquire_timeout_ms, 0, UINT32_MAX)},
    {OPT_REDIS_TIMEOUT, "redis-timeout-ms", "MARKET_REDIS_TIMEOUT_MS", 0,
     NUMBER(redis_timeout_ms, 1, 3600000)},
    {OPT_THREADS, "threads", "MARKET_THREADS", 0, NUMBER(threads, 0, 1024)},
    {OPT_LOGFILE, "log-file", "MARKET_LOG_FILE", 0, WORD(log_file)},
    {OPT_MAXCONN, "max-connections", "MARKET_MAX_CONNECTIONS", 0,
     NUMBER(max_connections, 1, 1000000)},
    {OPT_CONNTIMEOUT, "connection-timeout-s", "MARKET_CONNECTION_TIMEOUT_S", 0,
     NUMBER(connection_timeout_s, 0, 86400)},
    {OPT_LOGLEVEL, "log-level", "MARKET_LOG_LEVEL", 0, SPECIAL},
    {OPT_STALL, "test-stall-ms", "MARKET_TEST_STALL_MS", 0, NUMBER(test_stall_ms, 0, 600000)},
    {OPT_SECRET, "auth-secret", "MARKET_AUTH_SECRET", 1, WORD(auth_secret)},
    {OPT_NOAUTH, "no-auth", "MARKET_NO_AUTH", 0, FLAG(no_auth)},
    {OPT_PERIP, "per-ip-connections", "MARKET_PER_IP_CONNECTIONS", 0,
     NUMBER(per_ip_connections, 0, 1000000)},
    {OPT_CONNMEM, "connection-memory", "MARKET_CONNECTION_MEMORY", 0,
     NUMBER(connection_memory, 4096, 16 * 1024 * 1024)},
    {OPT_REUSEPORT, "reuse-port", "MARKET_REUSE_PORT", 0, FLAG(reuse_port)},
    {OPT_MINACK, "min-replicas-ack", "MARKET_MIN_REPLICAS_ACK", 0, NUMBER(min_replicas_ack, 0, 64)},
    {OPT_ACKTIMEOUT, "replica-ack-timeout-ms", "MARKET_REPLICA_ACK_TIMEOUT_MS", 0,
     NUMBER(replica_ack_timeout_ms, 1, 3600000)},
    {OPT_WORKERS, "workers", "MARKET_WORKERS", 0, NUMBER(workers, 1, MARKET_WORKERS_MAX)},
    /* MAXLEN ~: Redis keeps at least this many, a node more at most */
    {OPT_HISTORY, "trade-history", "MARKET_TRADE_HISTORY", 0,
     NUMBER(trade_history, 1, UINT64_C(1000000000000))},
    {OPT_TINDEX, "trade-index", "MARKET_TRADE_INDEX", 0,
     NUMBER(trade_index, 1, UINT64_C(1000000000))},
    {OPT_ADMIN, "admin-secret", "MARKET_ADMIN_SECRET", 1, WORD(admin_secret)},
    {OPT_CORS, "cors-origin", "MARKET_CORS_ORIGIN", 0, SPECIAL},
    {OPT_WEBDIR, "web-dir", "MARKET_WEB_DIR", 0, TEXT(web_dir)},
    {OPT_AUTH_KEY, "auth-key", "MARKET_AUTH_KEYS", 1, SPECIAL},
    {OPT_AUDIENCE, "auth-audience", "MARKET_AUTH_AUDIENCE", 0, WORD(auth_audience)},
    {OPT_LEEWAY, "auth-leeway-s", "MARKET_AUTH_LEEWAY_S", 0, NUMBER(auth_leeway_s, 0, 3600)},
    {OPT_PUBLIC_PARTIES, "public-trade-parties", "MARKET_PUBLIC_TRADE_PARTIES", 0,
     FLAG(trade_parties_public)},
    {OPT_NO_PRICE_HISTORY, "no-price-history", "MARKET_NO_PRICE_HISTORY", 0,
     FLAG(no_price_history)},
    {OPT_SWEEP, "sweep-interval-ms", "MARKET_SWEEP_INTERVAL_MS", 0,
     NUMBER(sweep_interval_ms, 0, 3600000)},
    {OPT_SWEEP_LEASE, "sweep-lease-ms", "MARKET_SWEEP_LEASE_MS", 0,
     NUMBER(sweep_lease_ms, 100, 3600000)},
};

#define NOPTS (sizeof opt_names / sizeof *opt_names)
_Static_assert(NOPTS == OPT_HELP - 1, "a row for every option but --help");

/* Every numeric field is 4 bytes (int, unsigned, uint32_t) or 8 (uint64_t, size_t). */
_Static_assert(sizeof(int) == 4 && sizeof(unsigned) == 4 && sizeof(size_t) == 8,
               "store_number() writes 4- and 8-byte fields");

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

/* Writes n, in range for the field, into the size-byte integer at field. */
static void store_number(void *field, size_t size, uint64_t n) {
    if (size == sizeof(uint64_t)) {
        memcpy(field, &n, sizeof n);
    } else { /* a non-negative int is an unsigned of the same bits */
        uint32_t v = (uint32_t)n;
        memcpy(field, &v, sizeof v);
    }
}

/* Reads v into cfg for an option the table cannot say: the lists that
 * repeated flags add to, and the log level. Returns 0, or -1 when v is bad. */
static int set_special(server_config *cfg, enum opt_id id, const char *v) {
    switch (id) {
    case OPT_LOCK_REDIS: { /* repeated flags add to the list */
        size_t have = strlen(cfg->lock_redis);
        int w = snprintf(cfg->lock_redis + have, sizeof cfg->lock_redis - have, "%s%s",
                         have ? "," : "", v);
        return w > 0 && (size_t)w < sizeof cfg->lock_redis - have ? 0 : -1;
    }
    case OPT_LOGLEVEL: {
        static const char *const levels[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++)
            if (strcasecmp(v, levels[i]) == 0) {
                cfg->log_level = i;
                return 0;
            }
        return -1;
    }
    case OPT_CORS: /* repeated flags add to the list */
        return add_cors(cfg, v);
    case OPT_AUTH_KEY: /* repeated flags, and the variable's specs, add to the list */
        return auth_keys_add(cfg, v);
    default:
        return -1;
    }
}

/* Reads v, the value of option id, into cfg as the table says. Returns 0, or
 * -1 when v is bad (a text field may then hold it cut short). */
static int set_opt(server_config *cfg, enum opt_id id, const char *v) {
    if (id < 1 || (size_t)id > NOPTS) return -1; /* OPT_HELP */
    const struct opt *o = &opt_names[id - 1];
    char *field = (char *)cfg + o->off;
    uint64_t n;
    switch (o->kind) {
    case KIND_WORD:
        if (!*v) return -1;
        /* fall through */
    case KIND_TEXT:
        return snprintf(field, o->size, "%s", v) < (int)o->size ? 0 : -1;
    case KIND_NUMBER:
        if (cli_parse_u64(v, o->lo, o->hi, &n) < 0) return -1;
        store_number(field, o->size, n);
        return 0;
    case KIND_FLAG:
        if (strcmp(v, "1") != 0 && strcmp(v, "0") != 0) return -1;
        store_number(field, o->size, v[0] == '1');
        return 0;
    case KIND_CHOICE:
        for (const char *const *c = o->choices; *c; c++)
            if (strcmp(v, *c) == 0) {
                snprintf(field, o->size, "%s", v);
                return 0;
            }
        return -1;
    case KIND_SPECIAL:
        break;
    }
    return set_special(cfg, id, v);
}

/* Applies the MARKET_* environment, then argv, to cfg (which should hold the
 * defaults). Returns SERVER_OK (with cfg->help set when --help was given),
 * or SERVER_ERR_INVALID with a sentence in why. */
int server_config_parse(server_config *cfg, int argc, char **argv, char *why, size_t whylen) {
    size_t nopts = NOPTS;
    for (size_t i = 0; i < nopts; i++) {
        const char *v = getenv(opt_names[i].env);
        if (v && *v && set_opt(cfg, opt_names[i].id, v) < 0) {
            snprintf(why, whylen, "bad value for %s: '%s'", opt_names[i].env,
                     opt_names[i].secret ? "***" : v);
            return SERVER_ERR_INVALID;
        }
    }
    struct option longopts[NOPTS + 2];
    for (size_t i = 0; i < nopts; i++)
        longopts[i] = (struct option){opt_names[i].flag,
                                      opt_names[i].kind == KIND_FLAG ? no_argument
                                                                     : required_argument,
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
        if (set_opt(cfg, (enum opt_id)ch, opt_names[ch - 1].kind == KIND_FLAG ? "1" : optarg) < 0) {
            snprintf(why, whylen, "bad value for --%s: '%s'", longopts[ch - 1].name,
                     opt_names[ch - 1].secret ? "***" : optarg);
            return SERVER_ERR_INVALID;
        }
    }
    if (optind < argc) {
        snprintf(why, whylen, "unexpected argument '%s' (see --help)", argv[optind]);
        return SERVER_ERR_INVALID;
    }
    return SERVER_OK;
}
