/* market_load.c - market-load: concurrent buyers against POST /purchase, with invariant checks.
 *
 *   market-load --buyers N (--duration S | --requests K) [--url URL] [--redis URL]
 *               [--mix distinct|contended|mixed] [--players GLOB] [--seed X]
 *               [--timeout-ms T] [--auth-secret S] [--json FILE] [--quiet]
 *   market-load --hold-connections N [--duration S] [--url URL]
 *
 * Reads what is listed and who can pay from Redis, audits the store, drives N
 * keep-alive HTTP/1.1 connections (one request in flight on each) from one
 * epoll loop, then audits the store again and checks that the purchases kept
 * the market's invariants. Its defaults are those of `make run`: the service
 * on http://$MARKET_LISTEN (127.0.0.1:8080), the store in $MARKET_REDIS or
 * on 127.0.0.1:$MARKET_REDIS_PORT (6380). Exit status: 0 all well, 1 setup
 * failure (server or Redis unreachable, nothing to buy), 2 usage, 3 an
 * invariant broke, 4 the run failed: no purchase succeeded, or most answers
 * were errors (anything but 200, 402 and 404: a 401 for a missing secret, ...).
 *
 * DESIGN
 *   One thread, one epoll set, level-triggered. A connection is CONNECTING,
 *   READY (idle, keep-alive), BUSY (one request written, answer not complete)
 *   or WAITING (closed, reconnect at retry_at). A request is assigned only
 *   when a connection is READY, so with --requests K exactly K requests are
 *   written; a request whose connection fails before the answer is a
 *   transport error and is not re-sent (it may or may not have bought).
 *   Requests are planned from a snapshot of the market taken before the run:
 *   "distinct" walks a seeded permutation of every listed item and hands each
 *   one to a player other than its seller whose (tool-side) budget covers the
 *   price, so every distinct purchase should answer 200; "contended" keeps a
 *   window of the ~N/4 cheapest items not yet targeted, sends random picks
 *   from it to the N poorest players, and refills a window slot when its item
 *   answers 200 or 404, so the fight goes on over few items until the market
 *   is empty. Latencies go into two log-linear histograms (nanoseconds, 128
 *   sub-buckets per power of two: every percentile is within 0.4%).
 *   Redis INFO commandstats is read right before the first request and right
 *   after the last answer; the tool issues nothing to Redis in between, so
 *   the delta (INFO itself excluded) is what the service spent.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "api/api.h"
#include "cli/cli.h"
#include "lock/lock.h"
#include "market/market.h"

/* ---- limits and constants ---- */

#define LOAD_BUYERS_MAX 100000
#define LOAD_LISTING_CHUNK 50000  /* listings per market_listings() call */
#define LOAD_SCAN_COUNT "1000"    /* SCAN COUNT hint for users:* */
#define LOAD_HGET_CHUNK 1000      /* pipelined HGET funds per round trip */
#define LOAD_OUT_MAX 1024         /* one request, headers included */
#define LOAD_IN_MAX (1024 * 1024) /* the largest answer we accept */
#define LOAD_DRAIN_MS 10000       /* wait this long for in-flight answers at the end */
#define LOAD_DEAD_MS 5000         /* no answer for this long while failing: give up */
#define LOAD_SETTLE_MS 300        /* audits this far apart must agree after unanswered requests */
#define LOAD_PROBE_MS 2000        /* connect timeout of the up-front server probe */
#define LOAD_CMDS_MAX 256         /* distinct Redis commands tracked in commandstats */
#define LOAD_BUYER_TRIES 32       /* random draws before a linear scan for a buyer */
#define NONE SIZE_MAX

enum mix { MIX_DISTINCT, MIX_CONTENDED, MIX_MIXED };
static const char *const mix_names[] = {"distinct", "contended", "mixed"};

enum cstate { C_WAITING, C_CONNECTING, C_READY, C_BUSY };
enum rkind { R_DISTINCT, R_CONTENDED, R_HEALTH };

/* ---- small helpers ---- */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* A uniform draw in [0, n), n > 0. */
static size_t rng_below(uint64_t *s, size_t n) {
    return (size_t)(splitmix64(s) % (uint64_t)n);
}

static volatile sig_atomic_t stop_signals;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_signals++;
}

/* ---- latency histogram: log-linear, in nanoseconds ---- */

#define HIST_LINEAR 256 /* values below are exact */
#define HIST_SUB 128    /* sub-buckets per power of two above */
#define HIST_SHIFTS 40
#define HIST_BUCKETS (HIST_LINEAR + HIST_SHIFTS * HIST_SUB)

struct hist {
    uint64_t n[HIST_BUCKETS];
    uint64_t count;
    uint64_t max;
    double sum;
};

static size_t hist_index(uint64_t v) {
    if (v < HIST_LINEAR) return (size_t)v;
    int shift = 63 - __builtin_clzll(v) - 7; /* >= 1 */
    if (shift > HIST_SHIFTS) return HIST_BUCKETS - 1;
    return HIST_LINEAR + (size_t)(shift - 1) * HIST_SUB + (size_t)((v >> shift) - HIST_SUB);
}

/* The middle of bucket i. */
static uint64_t hist_value(size_t i) {
    if (i < HIST_LINEAR) return i;
    unsigned shift = (unsigned)((i - HIST_LINEAR) / HIST_SUB) + 1;
    uint64_t lo = (uint64_t)((i - HIST_LINEAR) % HIST_SUB + HIST_SUB) << shift;
    return lo + ((UINT64_C(1) << shift) - 1) / 2;
}

static void hist_add(struct hist *h, uint64_t v) {
    h->n[hist_index(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v > h->max) h->max = v;
}

/* The p-th percentile (0 < p <= 100) in nanoseconds; 0 when empty. */
static uint64_t hist_pct(const struct hist *h, double p) {
    if (h->count == 0) return 0;
    uint64_t want = (uint64_t)((p / 100.0) * (double)h->count + 0.999999);
    if (want < 1) want = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen >= want) {
            uint64_t v = hist_value(i);
            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}

static double ms(uint64_t ns) {
    return (double)ns / 1e6;
}

/* ---- the market snapshot ---- */

struct strtab { /* every id, NUL-terminated, back to back */
    char *buf;
    size_t len, cap;
};

struct titem {
    size_t name;   /* offset of the item id in the strtab */
    size_t seller; /* offset of the seller id */
    int64_t price;
    unsigned char claimed; /* handed to a request already */
};

struct tplayer {
    size_t id;          /* offset in the strtab */
    int64_t funds;      /* as read before the run */
    int64_t budget;     /* funds not yet promised to distinct purchases */
    unsigned char pool; /* one of the contended buyers */
};

static int strtab_add(struct strtab *t, const char *s, size_t len, size_t *off) {
    if (t->len + len + 1 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 65536;
        while (ncap < t->len + len + 1)
            ncap *= 2;
        char *b = realloc(t->buf, ncap);
        if (!b) return -1;
        t->buf = b;
        t->cap = ncap;
    }
    memcpy(t->buf + t->len, s, len);
    t->buf[t->len + len] = '\0';
    *off = t->len;
    t->len += len + 1;
    return 0;
}

/* ---- Redis commandstats ---- */

struct cmdstat {
    char name[48];
    long long calls;
};

struct cmdstats {
    struct cmdstat c[LOAD_CMDS_MAX];
    size_t n;
    long long total; /* calls over every command but INFO */
};

/* ---- one connection ---- */

struct conn {
    int fd;
    uint32_t gen; /* bumped on every connect: drops events for an old fd */
    enum cstate state;
    int want_out;          /* EPOLLOUT is in the interest set */
    unsigned fails;        /* connect failures since the last answer */
    unsigned long answers; /* answers since the connection was opened */
    int64_t retry_at;      /* C_WAITING: reconnect at (ns) */
    int64_t sent_at;       /* C_BUSY: when the request was written (ns) */
    enum rkind kind;       /* the request in flight */
    size_t item, slot;     /* its item and contended window slot */
    char out[LOAD_OUT_MAX];
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    size_t hdr_len;     /* 0 until the header block is complete */
    long long body_len; /* -1: until the server closes */
    int status;
    int close_after; /* Connection: close, or HTTP/1.0 without keep-alive */
};

/* ---- the whole run ---- */

struct opts {
    const char *url, *redis, *json;
    const char *players;     /* NULL: every player; else an fnmatch pattern */
    const char *auth_secret; /* NULL: send no tokens */
    size_t buyers, hold;
    double duration_s;           /* 0: none */
    unsigned long long requests; /* 0: none */
    enum mix mix;
    uint64_t seed;
    unsigned timeout_ms;
    int quiet;
};

struct counts {
    unsigned long long requests, by_code[600], other, transport, connect_errors, reconnects;
    unsigned long long unaffordable; /* distinct items no player could pay for */
};

struct load {
    struct opts o;
    /* the target */
    char host[300]; /* as written in the URL, for the Host header */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int family;
    /* the snapshot */
    struct strtab str;
    struct titem *items;
    size_t n_items;
    struct tplayer *players;
    size_t n_players;
    size_t *perm, perm_at;     /* distinct: seeded order of item indices */
    size_t *sorted, sorted_at; /* contended: item indices by price */
    size_t *window, n_window, window_live;
    size_t *pool, n_pool;
    uint64_t rng;
    unsigned long long seq;
    /* the loop */
    int ep;
    struct conn *conns;
    size_t inflight;
    int stopping;
    const char *stop_reason;
    int exhausted;
    int aborted;
    char last_error[160];
    int64_t t0, t_end, last_answer, progress_at;
    unsigned long long progress_ok;
    struct counts k;
    struct hist all, ok;
    int64_t settle_ms; /* waited for the store to settle before the last audit */
    size_t held;       /* hold mode: connections answered and idle */
};

/* ---- usage ---- */

static void usage(FILE *to) {
    fprintf(
        to,
        "usage: market-load --buyers N (--duration S | --requests K) [flags]\n"
        "       market-load --hold-connections N [--duration S] [--url URL]\n"
        "  --url URL               the service (default http://$MARKET_LISTEN, or\n"
        "                          http://127.0.0.1:8080: where `make run` serves)\n"
        "  --redis URL             its store, read before and after the run (default\n"
        "                          $MARKET_REDIS, or redis://127.0.0.1:$MARKET_REDIS_PORT/0\n"
        "                          with port 6380: `make run`'s Redis)\n"
        "  --buyers N              concurrent keep-alive connections, one request in flight each\n"
        "  --duration S            send for S seconds (decimals allowed), then wait for answers\n"
        "  --requests K            send K requests in total\n"
        "  --mix MIX               distinct (default): every item bought at most once;\n"
        "                          contended: the ~N/4 cheapest items, the N poorest buyers;\n"
        "                          mixed: half of each\n"
        "  --players GLOB          buy only as players whose id matches GLOB (fnmatch), and\n"
        "                          only what they list; every other player and listing is\n"
        "                          left alone (default: every player)\n"
        "  --seed X                seeds every pick (default 1)\n"
        "  --auth-secret S         send each buyer's token (default $MARKET_AUTH_SECRET;\n"
        "                          none without it, for a server run with --no-auth)\n"
        "  --timeout-ms T          a request unanswered this long is an error (default 10000)\n"
        "  --json FILE             write the whole report as JSON\n"
        "  --quiet                 no progress line\n"
        "  --hold-connections N    open N keep-alive connections (one GET /healthz each),\n"
        "                          print 'holding N connections', keep them idle for --duration\n"
        "                          (or until SIGINT/SIGTERM); for measuring server memory\n"
        "exit: 0 ok; 1 setup failure (server or Redis unreachable, nothing to buy);\n"
        "      2 usage; 3 an invariant broke; 4 the run failed: no purchase succeeded, or\n"
        "      most answers were errors (anything but 200, 402 and 404; a 401 means the\n"
        "      server wants tokens: give it --auth-secret)\n");
}

/* The defaults of `make run` (scripts/run.sh): the service on $MARKET_LISTEN
 * or 127.0.0.1:8080, the store in $MARKET_REDIS or on 127.0.0.1:$MARKET_REDIS_PORT
 * (6380). A value that does not fit is left for the URL parsers to refuse. */
static void default_targets(struct opts *o) {
    static char url[300], redis[64];
    const char *listen = getenv("MARKET_LISTEN"), *rport = getenv("MARKET_REDIS_PORT");
    o->url = "http://127.0.0.1:8080";
    if (listen && *listen) {
        int n = snprintf(url, sizeof url, "http://%s", listen);
        o->url = n > 0 && (size_t)n < sizeof url ? url : listen;
    }
    o->redis = getenv("MARKET_REDIS");
    if (o->redis && *o->redis) return;
    o->redis = "redis://127.0.0.1:6380/0";
    if (rport && *rport) {
        int n = snprintf(redis, sizeof redis, "redis://127.0.0.1:%s/0", rport);
        o->redis = n > 0 && (size_t)n < sizeof redis ? redis : rport;
    }
}

static int parse_opts(int argc, char **argv, struct opts *o) {
    *o = (struct opts){.seed = 1, .timeout_ms = 10000};
    default_targets(o);
    o->auth_secret = getenv("MARKET_AUTH_SECRET");
    static const struct option longopts[] = {{"url", required_argument, NULL, 'u'},
                                             {"redis", required_argument, NULL, 'r'},
                                             {"buyers", required_argument, NULL, 'b'},
                                             {"duration", required_argument, NULL, 'd'},
                                             {"requests", required_argument, NULL, 'n'},
                                             {"mix", required_argument, NULL, 'm'},
                                             {"players", required_argument, NULL, 'p'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"auth-secret", required_argument, NULL, 'a'},
                                             {"json", required_argument, NULL, 'j'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"timeout-ms", required_argument, NULL, 't'},
                                             {"hold-connections", required_argument, NULL, 'H'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    uint64_t v;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u': o->url = optarg; break;
        case 'r': o->redis = optarg; break;
        case 'j': o->json = optarg; break;
        case 'p': o->players = optarg; break;
        case 'a': o->auth_secret = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'b':
            if (cli_parse_u64(optarg, 1, LOAD_BUYERS_MAX, &v) < 0) goto bad;
            o->buyers = (size_t)v;
            break;
        case 'H':
            if (cli_parse_u64(optarg, 1, LOAD_BUYERS_MAX, &v) < 0) goto bad;
            o->hold = (size_t)v;
            break;
        case 'n':
            if (cli_parse_u64(optarg, 1, 1000000000ULL, &v) < 0) goto bad;
            o->requests = v;
            break;
        case 't':
            if (cli_parse_u64(optarg, 1, 3600000, &v) < 0) goto bad;
            o->timeout_ms = (unsigned)v;
            break;
        case 's':
            if (cli_parse_u64(optarg, 0, UINT64_MAX, &v) < 0) goto bad;
            o->seed = v;
            break;
        case 'd':
            if (cli_parse_seconds(optarg, 86400, &o->duration_s) < 0) goto bad;
            break;
        case 'm': {
            size_t i = 0;
            while (i < 3 && strcmp(optarg, mix_names[i]) != 0)
                i++;
            if (i == 3) goto bad;
            o->mix = (enum mix)i;
            break;
        }
        case 'h': usage(stdout); return 1;
        default:
            fprintf(stderr, "market-load: unknown flag or missing value: '%s'\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "market-load: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->auth_secret && !*o->auth_secret) o->auth_secret = NULL;
    if (o->hold) {
        if (o->buyers || o->requests) {
            fprintf(stderr, "market-load: --hold-connections takes no --buyers or --requests\n");
            return -1;
        }
        return 0;
    }
    if (!o->buyers || (o->duration_s > 0) == (o->requests > 0)) {
        fprintf(stderr, "market-load: need --buyers N and one of --duration S, --requests K\n");
        return -1;
    }
    return 0;
bad:
    for (const struct option *lo = longopts; lo->name; lo++)
        if (lo->val == ch)
            fprintf(stderr, "market-load: bad value for --%s: '%s'\n", lo->name, optarg);
    return -1;
}

/* Resolves http://HOST[:PORT][/] into L->addr. Returns 0, or -1 with a message. */
static int parse_url(struct load *L, const char *url) {
    if (strncmp(url, "http://", 7) != 0) {
        fprintf(stderr, "market-load: --url must start with http:// ('%s')\n", url);
        return -1;
    }
    const char *h = url + 7, *end = h + strcspn(h, "/");
    if (*end && strcmp(end, "/") != 0) {
        fprintf(stderr, "market-load: --url takes no path ('%s')\n", url);
        return -1;
    }
    size_t hl = (size_t)(end - h);
    if (hl == 0 || hl >= sizeof L->host) goto bad;
    memcpy(L->host, h, hl);
    L->host[hl] = '\0';
    char name[300], port[8];
    uint16_t pn;
    if (cli_split_hostport(L->host, 80, name, sizeof name, &pn) < 0) goto bad;
    snprintf(port, sizeof port, "%u", (unsigned)pn);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(name, port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "market-load: cannot resolve '%s': %s\n", name, gai_strerror(rc));
        return -1;
    }
    memcpy(&L->addr, ai->ai_addr, ai->ai_addrlen);
    L->addrlen = ai->ai_addrlen;
    L->family = ai->ai_family;
    freeaddrinfo(ai);
    return 0;
bad:
    fprintf(stderr, "market-load: bad --url '%s' (want http://HOST[:PORT])\n", url);
    return -1;
}

/* ---- Redis: players, funds, commandstats ---- */

static redisContext *redis_open(const lock_redis_addr *a, char *why, size_t whylen) {
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout(a->host, a->port, tv);
    if (!r || r->err) {
        snprintf(why, whylen, "cannot connect to Redis at %s:%d: %s", a->host, a->port,
                 r ? r->errstr : "out of memory");
        goto fail;
    }
    if (redisSetTimeout(r, tv) != REDIS_OK) {
        snprintf(why, whylen, "cannot set the Redis timeout: %s", r->errstr);
        goto fail;
    }
    const char *argv[3];
    int argc = 0;
    char db[16];
    for (int step = 0; step < 2; step++) {
        argc = 0;
        if (step == 0 && a->pass[0]) {
            argv[argc++] = "AUTH";
            if (a->user[0]) argv[argc++] = a->user;
            argv[argc++] = a->pass;
        } else if (step == 1 && a->db != 0) {
            snprintf(db, sizeof db, "%d", a->db);
            argv[argc++] = "SELECT";
            argv[argc++] = db;
        }
        if (!argc) continue;
        redisReply *rep = redisCommandArgv(r, argc, argv, NULL);
        int ok = rep && rep->type == REDIS_REPLY_STATUS;
        snprintf(why, whylen, "Redis refused %s: %s", argv[0],
                 rep && rep->type == REDIS_REPLY_ERROR ? rep->str : r->errstr);
        if (rep) freeReplyObject(rep);
        if (!ok) goto fail;
    }
    return r;
fail:
    if (r) redisFree(r);
    return NULL;
}

/* Whether the run may use player id (--players). */
static int player_chosen(const struct load *L, const char *id) {
    return !L->o.players || fnmatch(L->o.players, id, 0) == 0;
}

static int add_player(struct load *L, size_t *cap, const char *id, size_t len) {
    if (L->n_players == *cap) {
        size_t ncap = *cap ? *cap * 2 : 1024;
        struct tplayer *p = realloc(L->players, ncap * sizeof *p);
        if (!p) return -1;
        L->players = p;
        *cap = ncap;
    }
    struct tplayer *p = &L->players[L->n_players];
    memset(p, 0, sizeof *p);
    if (strtab_add(&L->str, id, len, &p->id) < 0) return -1;
    L->n_players++;
    return 0;
}

/* Reads every users:<id> (SCAN) and its funds (pipelined HGET) into L->players. */
static int load_players(struct load *L, redisContext *r, char *why, size_t whylen) {
    char cursor[32] = "0";
    size_t cap = 0;
    do {
        const char *argv[6] = {"SCAN", cursor, "MATCH", "users:*", "COUNT", LOAD_SCAN_COUNT};
        redisReply *rep = redisCommandArgv(r, 6, argv, NULL);
        if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[1]->type != REDIS_REPLY_ARRAY || rep->element[0]->len >= sizeof cursor) {
            snprintf(why, whylen, "SCAN users:* failed: %s", rep ? "unexpected reply" : r->errstr);
            if (rep) freeReplyObject(rep);
            return -1;
        }
        memcpy(cursor, rep->element[0]->str, rep->element[0]->len);
        cursor[rep->element[0]->len] = '\0';
        const redisReply *keys = rep->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            const redisReply *k = keys->element[i];
            if (k->type != REDIS_REPLY_STRING || k->len <= 6 || k->len - 6 > MARKET_ID_MAX)
                continue;
            char id[MARKET_ID_MAX + 1];
            memcpy(id, k->str + 6, k->len - 6);
            id[k->len - 6] = '\0';
            if (market_id_valid(id) && player_chosen(L, id) &&
                add_player(L, &cap, id, k->len - 6) < 0) {
                freeReplyObject(rep);
                snprintf(why, whylen, "out of memory");
                return -1;
            }
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);

    for (size_t at = 0; at < L->n_players; at += LOAD_HGET_CHUNK) {
        size_t n = L->n_players - at < LOAD_HGET_CHUNK ? L->n_players - at : LOAD_HGET_CHUNK;
        for (size_t i = 0; i < n; i++) {
            char key[MARKET_ID_MAX + 8];
            snprintf(key, sizeof key, "users:%s", L->str.buf + L->players[at + i].id);
            const char *argv[3] = {"HGET", key, "funds"};
            if (redisAppendCommandArgv(r, 3, argv, NULL) != REDIS_OK) {
                snprintf(why, whylen, "HGET funds failed: %s", r->errstr);
                return -1;
            }
        }
        for (size_t i = 0; i < n; i++) {
            void *v = NULL;
            if (redisGetReply(r, &v) != REDIS_OK) {
                snprintf(why, whylen, "HGET funds failed: %s", r->errstr);
                return -1;
            }
            redisReply *rep = v;
            struct tplayer *p = &L->players[at + i];
            p->funds = 0;
            if (rep->type == REDIS_REPLY_STRING) {
                char *end;
                errno = 0;
                long long f = strtoll(rep->str, &end, 10);
                if (!errno && end != rep->str && !*end) p->funds = f;
            }
            p->budget = p->funds;
            freeReplyObject(rep);
        }
    }
    return 0;
}

/* Reads INFO commandstats into s. */
static int cmdstats_read(redisContext *r, struct cmdstats *s, char *why, size_t whylen) {
    memset(s, 0, sizeof *s);
    const char *argv[2] = {"INFO", "commandstats"};
    redisReply *rep = redisCommandArgv(r, 2, argv, NULL);
    if (!rep || rep->type != REDIS_REPLY_STRING) {
        snprintf(why, whylen, "INFO commandstats failed: %s", rep ? "unexpected reply" : r->errstr);
        if (rep) freeReplyObject(rep);
        return -1;
    }
    const char *p = rep->str, *end = rep->str + rep->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        if ((size_t)(nl - p) > 8 && strncmp(p, "cmdstat_", 8) == 0 && s->n < LOAD_CMDS_MAX) {
            const char *colon = memchr(p, ':', (size_t)(nl - p));
            const char *calls = NULL;
            for (const char *q = colon; q && q + 6 < nl; q++)
                if (strncmp(q, "calls=", 6) == 0) {
                    calls = q + 6;
                    break;
                }
            if (colon && calls && (size_t)(colon - p - 8) < sizeof s->c[0].name) {
                struct cmdstat *c = &s->c[s->n++];
                memcpy(c->name, p + 8, (size_t)(colon - p - 8));
                c->name[colon - p - 8] = '\0';
                c->calls = strtoll(calls, NULL, 10);
                if (strcmp(c->name, "info") != 0) s->total += c->calls;
            }
        }
        p = nl + 1;
    }
    freeReplyObject(rep);
    return 0;
}

static long long cmdstats_get(const struct cmdstats *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->c[i].name, name) == 0) return s->c[i].calls;
    return 0;
}

/* ---- planning: who buys what ---- */

static const char *item_name(const struct load *L, size_t i) {
    return L->str.buf + L->items[i].name;
}
static const char *item_seller(const struct load *L, size_t i) {
    return L->str.buf + L->items[i].seller;
}
static const char *player_id(const struct load *L, size_t p) {
    return L->str.buf + L->players[p].id;
}

static int add_item(struct load *L, size_t *cap, const market_listing *l) {
    if (L->n_items == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4096;
        struct titem *t = realloc(L->items, ncap * sizeof *t);
        if (!t) return -1;
        L->items = t;
        *cap = ncap;
    }
    struct titem *t = &L->items[L->n_items];
    t->price = l->price;
    t->claimed = 0;
    if (strtab_add(&L->str, l->item, strlen(l->item), &t->name) < 0 ||
        strtab_add(&L->str, l->seller, strlen(l->seller), &t->seller) < 0)
        return -1;
    L->n_items++;
    return 0;
}

/* Reads every listing (market_listings, in chunks) into L->items; with
 * --players, only the listings of the players chosen. */
static int load_items(struct load *L, market_conn *mc, char *why, size_t whylen) {
    size_t cap = 0, offset = 0;
    for (;;) {
        market_listing *l = NULL;
        size_t n = 0, total = 0;
        int rc = market_listings(mc, offset, LOAD_LISTING_CHUNK, &l, &n, &total);
        if (rc < 0) {
            snprintf(why, whylen, "cannot read the market: %s", market_strerror(rc));
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (player_chosen(L, l[i].seller) && add_item(L, &cap, &l[i]) < 0) {
                free(l);
                snprintf(why, whylen, "out of memory");
                return -1;
            }
        free(l);
        offset += LOAD_LISTING_CHUNK;
        if (offset >= total) return 0;
    }
}

static const struct load *sort_ctx; /* qsort has no user pointer */

static int cmp_by_price(const void *a, const void *b) {
    const struct titem *x = &sort_ctx->items[*(const size_t *)a];
    const struct titem *y = &sort_ctx->items[*(const size_t *)b];
    if (x->price != y->price) return x->price < y->price ? -1 : 1;
    return strcmp(sort_ctx->str.buf + x->name, sort_ctx->str.buf + y->name);
}

struct poorest {
    int64_t funds;
    uint64_t tie;
    size_t idx;
};

static int cmp_poorest(const void *a, const void *b) {
    const struct poorest *x = a, *y = b;
    if (x->funds != y->funds) return x->funds < y->funds ? -1 : 1;
    return x->tie < y->tie ? -1 : x->tie > y->tie;
}

/* Builds the distinct order, the price order, the contended window and pool. */
static int plan(struct load *L, char *why, size_t whylen) {
    size_t n = L->n_items;
    L->rng = L->o.seed ^ UINT64_C(0x6d61726b65746c64);
    if (!(L->perm = malloc((n ? n : 1) * sizeof *L->perm)) ||
        !(L->sorted = malloc((n ? n : 1) * sizeof *L->sorted)))
        goto oom;
    for (size_t i = 0; i < n; i++)
        L->perm[i] = L->sorted[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(&L->rng, i), t = L->perm[i - 1];
        L->perm[i - 1] = L->perm[j];
        L->perm[j] = t;
    }
    sort_ctx = L;
    qsort(L->sorted, n, sizeof *L->sorted, cmp_by_price);
    sort_ctx = NULL;

    if (L->o.mix == MIX_DISTINCT) return 0;
    size_t np = L->n_players;
    L->n_pool = L->o.buyers < 2 ? 2 : L->o.buyers;
    if (L->n_pool > np) L->n_pool = np;
    struct poorest *pp = malloc((np ? np : 1) * sizeof *pp);
    if (!pp || !(L->pool = malloc((L->n_pool ? L->n_pool : 1) * sizeof *L->pool))) {
        free(pp);
        goto oom;
    }
    uint64_t s = L->o.seed;
    for (size_t i = 0; i < np; i++)
        pp[i] = (struct poorest){L->players[i].funds, splitmix64(&s), i};
    qsort(pp, np, sizeof *pp, cmp_poorest);
    for (size_t i = 0; i < L->n_pool; i++) {
        L->pool[i] = pp[i].idx;
        L->players[pp[i].idx].pool = 1;
    }
    free(pp);
    L->n_window = L->o.buyers / 4 ? L->o.buyers / 4 : 1;
    if (!(L->window = malloc(L->n_window * sizeof *L->window))) goto oom;
    for (size_t i = 0; i < L->n_window; i++)
        L->window[i] = NONE;
    return 0;
oom:
    snprintf(why, whylen, "out of memory");
    return -1;
}

static int buyer_fits(const struct load *L, size_t p, size_t item, int skip_pool) {
    const struct tplayer *pl = &L->players[p];
    return pl->budget >= L->items[item].price && !(skip_pool && pl->pool) &&
           strcmp(player_id(L, p), item_seller(L, item)) != 0;
}

/* A player other than the seller whose budget covers the price, or NONE. */
static size_t distinct_buyer(struct load *L, size_t item) {
    size_t np = L->n_players;
    if (!np) return NONE;
    int skip_pool = L->n_pool && np > L->n_pool + 1;
    size_t p = 0;
    for (int t = 0; t < LOAD_BUYER_TRIES; t++) {
        p = rng_below(&L->rng, np);
        if (buyer_fits(L, p, item, skip_pool)) return p;
    }
    for (size_t k = 0; k < np; k++)
        if (buyer_fits(L, (p + k) % np, item, skip_pool)) return (p + k) % np;
    return NONE;
}

static int next_distinct(struct load *L, size_t *item, size_t *buyer) {
    while (L->perm_at < L->n_items) {
        size_t i = L->perm[L->perm_at++];
        if (L->items[i].claimed) continue;
        L->items[i].claimed = 1;
        size_t p = distinct_buyer(L, i);
        if (p == NONE) {
            L->k.unaffordable++;
            continue;
        }
        L->players[p].budget -= L->items[i].price;
        *item = i;
        *buyer = p;
        return 1;
    }
    return 0;
}

static void window_refill(struct load *L, size_t s) {
    L->window[s] = NONE;
    while (L->sorted_at < L->n_items) {
        size_t i = L->sorted[L->sorted_at++];
        if (L->items[i].claimed) continue;
        L->items[i].claimed = 1;
        L->window[s] = i;
        L->window_live++;
        return;
    }
}

static int next_contended(struct load *L, size_t *item, size_t *buyer, size_t *slot) {
    if (L->n_pool == 0) return 0;
    size_t k = L->n_window, s = rng_below(&L->rng, k);
    for (size_t t = 0; t < k; t++) {
        size_t at = (s + t) % k;
        if (L->window[at] == NONE) window_refill(L, at);
        if (L->window[at] == NONE) continue;
        size_t i = L->window[at], b = rng_below(&L->rng, L->n_pool);
        for (size_t u = 0; u < L->n_pool; u++) {
            size_t p = L->pool[(b + u) % L->n_pool];
            if (strcmp(player_id(L, p), item_seller(L, i)) == 0) continue;
            *item = i;
            *buyer = p;
            *slot = at;
            return 1;
        }
    }
    return 0;
}

/* The item left the market (200) or was gone already (404): fight over the next one. */
static void window_done(struct load *L, size_t slot, size_t item) {
    if (slot < L->n_window && L->window[slot] == item) {
        L->window_live--;
        window_refill(L, slot);
    }
}

/* Fills c->out with the next request. Returns 0 when there is nothing left to buy. */
static int next_request(struct load *L, struct conn *c) {
    size_t item = NONE, buyer = NONE, slot = NONE;
    if (L->o.hold) {
        c->kind = R_HEALTH;
        int n =
            snprintf(c->out, sizeof c->out, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", L->host);
        c->out_len = (size_t)n;
        return n > 0 && (size_t)n < sizeof c->out;
    }
    enum rkind kind = L->o.mix == MIX_CONTENDED ? R_CONTENDED : R_DISTINCT;
    if (L->o.mix == MIX_MIXED) kind = (L->seq & 1) ? R_CONTENDED : R_DISTINCT;
    L->seq++;
    int got = kind == R_DISTINCT ? next_distinct(L, &item, &buyer)
                                 : next_contended(L, &item, &buyer, &slot);
    if (!got) {
        L->stop_reason = kind == R_DISTINCT ? "no more items to buy (distinct)"
                                            : "no more items to fight over (contended)";
        return 0;
    }
    c->kind = kind;
    c->item = item;
    c->slot = slot;
    char body[3 * MARKET_ID_MAX + 64], auth[API_TOKEN_MAX + 32] = "";
    int bl = snprintf(body, sizeof body, "{\"buyer\":\"%s\",\"seller\":\"%s\",\"item\":\"%s\"}",
                      player_id(L, buyer), item_seller(L, item), item_name(L, item));
    if (L->o.auth_secret) {
        char token[API_TOKEN_MAX + 1];
        if (api_token_make(L->o.auth_secret, player_id(L, buyer), token, sizeof token) !=
            MARKET_OK) {
            L->stop_reason = "cannot make a buyer's token";
            return 0;
        }
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    }
    int n = snprintf(c->out, sizeof c->out,
                     "POST /purchase HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "%sContent-Length: %d\r\n\r\n%s",
                     L->host, auth, bl, body);
    if (bl < 0 || (size_t)bl >= sizeof body || n < 0 || (size_t)n >= sizeof c->out) return 0;
    c->out_len = (size_t)n;
    return 1;
}

/* ---- the event loop ---- */

static void conn_close(struct load *L, struct conn *c, int64_t retry_at) {
    if (c->fd >= 0) close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    c->state = C_WAITING;
    c->want_out = 0;
    c->retry_at = retry_at;
    c->in_len = c->hdr_len = 0;
    (void)L;
}

static void fail_note(struct load *L, const char *what, int err) {
    snprintf(L->last_error, sizeof L->last_error, "%s: %s", what, err ? strerror(err) : "");
}

/* The connection broke: the request in flight (if any) is a transport error. */
static void conn_fail(struct load *L, struct conn *c, const char *what, int err) {
    fail_note(L, what, err);
    if (c->state == C_BUSY) {
        L->k.transport++;
        L->k.requests++;
        L->inflight--;
    } else if (c->state == C_CONNECTING) {
        L->k.connect_errors++;
    }
    int64_t now = now_ns(), backoff = 0;
    if (c->state == C_CONNECTING) {
        c->fails++;
        backoff = (int64_t)1000000 << (c->fails < 10 ? c->fails : 10); /* 2 ms .. ~1 s */
    }
    conn_close(L, c, now + backoff);
}

static int ep_set(struct load *L, struct conn *c, int op, int want_out) {
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0)};
    ev.data.u64 = (uint64_t)c->gen << 32 | (uint64_t)(c - L->conns);
    if (epoll_ctl(L->ep, op, c->fd, &ev) < 0) return -1;
    c->want_out = want_out;
    return 0;
}

static void conn_dispatch(struct load *L, struct conn *c);

static void conn_open(struct load *L, struct conn *c) {
    int fd = socket(L->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        c->state = C_CONNECTING;
        conn_fail(L, c, "socket", errno);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* best effort */
    c->fd = fd;
    c->gen++;
    c->answers = 0;
    c->in_len = c->hdr_len = 0;
    int rc = connect(fd, (struct sockaddr *)&L->addr, L->addrlen);
    if (rc < 0 && errno != EINPROGRESS) {
        c->state = C_CONNECTING;
        conn_fail(L, c, "connect", errno);
        return;
    }
    c->state = rc == 0 ? C_READY : C_CONNECTING;
    if (ep_set(L, c, EPOLL_CTL_ADD, c->state == C_CONNECTING) < 0) {
        int e = errno;
        c->state = C_CONNECTING;
        conn_fail(L, c, "epoll_ctl", e);
        return;
    }
    if (c->state == C_READY) conn_dispatch(L, c);
}

static void conn_flush(struct load *L, struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            conn_fail(L, c, "send", errno);
            return;
        }
        c->out_off += (size_t)w;
    }
    int want = c->out_off < c->out_len;
    if (want != c->want_out && ep_set(L, c, EPOLL_CTL_MOD, want) < 0)
        conn_fail(L, c, "epoll_ctl", errno);
}

/* Writes the next request on a READY connection, or leaves it idle. */
static void conn_dispatch(struct load *L, struct conn *c) {
    if (L->stopping) return;
    if (L->o.requests && L->k.requests + L->inflight >= L->o.requests) {
        L->stopping = 1;
        L->stop_reason = "request count reached";
        return;
    }
    if (L->o.hold && c->sent_at) return; /* one request each */
    if (!next_request(L, c)) {
        L->stopping = 1;
        L->exhausted = 1;
        return;
    }
    c->out_off = 0;
    c->state = C_BUSY;
    c->status = 0;
    c->hdr_len = 0;
    c->body_len = -1;
    c->close_after = 0;
    c->sent_at = now_ns();
    L->inflight++;
    conn_flush(L, c);
}

static int name_is(const char *p, size_t len, const char *name) {
    size_t n = strlen(name);
    return len == n && strncasecmp(p, name, n) == 0;
}

/* Parses the status line and headers once the blank line has arrived.
 * Returns 1 when parsed, 0 when more bytes are needed, -1 on a bad answer. */
static int parse_head(struct conn *c) {
    const char *b = c->in;
    size_t end = 0;
    for (size_t i = 0; i + 3 < c->in_len; i++)
        if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n') {
            end = i + 4;
            break;
        }
    if (!end) return c->in_len > LOAD_IN_MAX / 2 ? -1 : 0;
    if (end < 12 || strncmp(b, "HTTP/1.", 7) != 0 || b[8] != ' ') return -1;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (b[i] < '0' || b[i] > '9') return -1;
        status = status * 10 + (b[i] - '0');
    }
    int http10 = b[7] == '0', keep_alive = 0, chunked = 0;
    long long clen = -1;
    const char *line = memchr(b, '\n', end) + 1;
    while (line < b + end - 2) {
        const char *eol = memchr(line, '\r', (size_t)(b + end - line));
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon) return -1;
        const char *v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        size_t nl = (size_t)(colon - line), vl = (size_t)(eol - v);
        if (name_is(line, nl, "content-length")) {
            clen = 0;
            for (const char *q = v; q < eol; q++) {
                if (*q < '0' || *q > '9' || clen > LOAD_IN_MAX) return -1;
                clen = clen * 10 + (*q - '0');
            }
        } else if (name_is(line, nl, "connection")) {
            if (vl >= 5 && strncasecmp(v, "close", 5) == 0) c->close_after = 1;
            if (vl >= 10 && strncasecmp(v, "keep-alive", 10) == 0) keep_alive = 1;
        } else if (name_is(line, nl, "transfer-encoding")) {
            chunked = 1;
        }
        line = eol + 2;
    }
    if (chunked) return -1; /* the service sends Content-Length */
    if (http10 && !keep_alive) c->close_after = 1;
    if (status == 204 || status == 304 || (status >= 100 && status < 200)) clen = 0;
    if (clen < 0) c->close_after = 1; /* body until the server closes */
    c->status = status;
    c->body_len = clen;
    c->hdr_len = end;
    return 1;
}

static void conn_answered(struct load *L, struct conn *c) {
    int64_t now = now_ns();
    uint64_t lat = (uint64_t)(now - c->sent_at);
    L->inflight--;
    L->k.requests++;
    L->last_answer = now;
    c->fails = 0;
    c->answers++;
    if (c->status >= 100 && c->status < 600)
        L->k.by_code[c->status]++;
    else
        L->k.other++;
    hist_add(&L->all, lat);
    if (c->status == 200) hist_add(&L->ok, lat);
    if (c->kind == R_CONTENDED && (c->status == 200 || c->status == 404))
        window_done(L, c->slot, c->item);
    if (c->kind == R_HEALTH) L->held++;
    size_t used = c->hdr_len + (size_t)(c->body_len > 0 ? c->body_len : 0);
    if (c->close_after || c->in_len != used) {
        L->k.reconnects++;
        conn_close(L, c, now);
        if (!L->stopping && !L->o.hold) conn_open(L, c);
        return;
    }
    c->in_len = c->hdr_len = 0;
    c->state = C_READY;
    conn_dispatch(L, c);
}

static void conn_readable(struct load *L, struct conn *c) {
    if (c->in_cap - c->in_len < 2048) {
        size_t ncap = c->in_cap ? c->in_cap * 2 : 4096;
        char *b = ncap <= LOAD_IN_MAX ? realloc(c->in, ncap) : NULL;
        if (!b) {
            conn_fail(L, c, "answer too large", 0);
            return;
        }
        c->in = b;
        c->in_cap = ncap;
    }
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            conn_fail(L, c, "recv", errno);
        return;
    }
    if (r == 0) {
        if (c->state == C_BUSY && c->hdr_len && c->body_len < 0) {
            c->body_len = (long long)(c->in_len - c->hdr_len);
            conn_answered(L, c); /* a body delimited by the close */
        } else if (c->state == C_BUSY) {
            conn_fail(L, c, "connection closed by the server mid-answer", 0);
        } else if (c->answers == 0 && !L->o.hold) {
            c->state = C_CONNECTING; /* closed at once (connection limit?): back off */
            conn_fail(L, c, "connection closed by the server before any answer", 0);
        } else {
            L->k.reconnects++; /* an idle keep-alive connection timed out */
            conn_close(L, c, now_ns());
            if (!L->stopping && !L->o.hold) conn_open(L, c);
        }
        return;
    }
    c->in_len += (size_t)r;
    if (c->state != C_BUSY) {
        conn_fail(L, c, "unexpected bytes on an idle connection", 0);
        return;
    }
    if (!c->hdr_len) {
        int rc = parse_head(c);
        if (rc < 0) {
            conn_fail(L, c, "malformed HTTP answer", 0);
            return;
        }
        if (rc == 0) return;
    }
    if (c->body_len >= 0 && c->in_len >= c->hdr_len + (size_t)c->body_len) conn_answered(L, c);
}

static void conn_event(struct load *L, struct conn *c, uint32_t ev) {
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err == 0 && !(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        if (err || (ev & EPOLLERR)) {
            conn_fail(L, c, "connect", err ? err : ECONNREFUSED);
            return;
        }
        c->state = C_READY;
        if (ep_set(L, c, EPOLL_CTL_MOD, 0) < 0) {
            c->state = C_CONNECTING;
            conn_fail(L, c, "epoll_ctl", errno);
            return;
        }
        conn_dispatch(L, c);
        return;
    }
    if ((ev & EPOLLOUT) && c->state == C_BUSY && c->out_off < c->out_len) {
        conn_flush(L, c);
        if (c->state != C_BUSY) return;
    }
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_readable(L, c);
}

static void progress(struct load *L, int64_t now, int final) {
    double el = (double)(now - L->t0) / 1e9;
    unsigned long long ok = L->k.by_code[200];
    double dt = (double)(now - L->progress_at) / 1e9;
    double rate = dt > 0 ? (double)(ok - L->progress_ok) / dt : 0;
    unsigned long long errs = L->k.transport + L->k.connect_errors + L->k.other;
    for (int s = 100; s < 600; s++)
        if (s != 200 && s != 402 && s != 404) errs += L->k.by_code[s];
    fprintf(stderr, "\r[%6.1fs] %8.0f purchases/s  %llu requests  p99 %.2f ms  errors %llu\033[K%s",
            el, rate, L->k.requests, ms(hist_pct(&L->all, 99)), errs, final ? "\n" : "");
    L->progress_at = now;
    L->progress_ok = ok;
}

/* Runs the load until the plan, the clock or a signal ends it. Returns 0, or -1
 * when the server stopped answering altogether. */
static int run(struct load *L) {
    const int64_t timeout = (int64_t)L->o.timeout_ms * 1000000;
    int tty = !L->o.quiet && isatty(STDERR_FILENO);
    int64_t deadline = L->o.duration_s > 0 ? (int64_t)(L->o.duration_s * 1e9) : 0;
    int64_t drain_until = 0, next_scan = 0;
    struct epoll_event evs[256];
    size_t nconn = L->o.hold ? L->o.hold : L->o.buyers;
    L->t0 = L->progress_at = L->last_answer = now_ns();
    for (size_t i = 0; i < nconn; i++)
        conn_open(L, &L->conns[i]);
    int announced = 0;
    for (;;) {
        int64_t now = now_ns();
        if (stop_signals && !L->stopping) {
            L->stopping = 1;
            L->stop_reason = "interrupted";
        }
        if (deadline && now - L->t0 >= deadline && !L->stopping) {
            L->stopping = 1;
            L->stop_reason = L->o.hold ? "held for the duration" : "duration reached";
        }
        if (L->stopping && !drain_until) drain_until = now + (int64_t)LOAD_DRAIN_MS * 1000000;
        if (L->stopping && (L->inflight == 0 || now >= drain_until || stop_signals > 1)) break;
        if (L->o.hold && L->held == nconn && !announced) {
            printf("holding %zu connections\n", nconn);
            if (fflush(stdout) != 0) return -1;
            announced = 1;
        }
        if (now >= next_scan) {
            next_scan = now + 10000000;
            for (size_t i = 0; i < nconn; i++) {
                struct conn *c = &L->conns[i];
                if (c->state == C_WAITING && now >= c->retry_at && !L->stopping &&
                    !(L->o.hold && c->sent_at))
                    conn_open(L, c);
                else if (c->state == C_BUSY && now - c->sent_at > timeout)
                    conn_fail(L, c, "timeout", ETIMEDOUT);
            }
            if ((L->k.transport || L->k.connect_errors) && !L->o.hold &&
                !(L->stopping && L->inflight == 0) &&
                now - L->last_answer > (int64_t)LOAD_DEAD_MS * 1000000) {
                L->aborted = 1;
                L->stop_reason = "the server stopped answering";
                break;
            }
        }
        if (tty && now - L->progress_at >= 1000000000) progress(L, now, 0);
        int n = epoll_wait(L->ep, evs, 256, 10);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail_note(L, "epoll_wait", errno);
            L->aborted = 1;
            L->stop_reason = "epoll_wait failed";
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t idx = evs[i].data.u64 & UINT32_MAX;
            struct conn *c = idx < nconn ? &L->conns[idx] : NULL;
            if (c && c->fd >= 0 && c->gen == (uint32_t)(evs[i].data.u64 >> 32))
                conn_event(L, c, evs[i].events);
        }
    }
    L->t_end = now_ns();
    for (size_t i = 0; i < nconn; i++) {
        struct conn *c = &L->conns[i];
        if (c->state == C_BUSY) conn_fail(L, c, "no answer before the drain deadline", 0);
        conn_close(L, c, 0);
    }
    if (tty) progress(L, L->t_end, 1);
    return L->aborted ? -1 : 0;
}

/* Connects once, with a deadline, so that a server that is down fails fast. */
static int probe(const struct load *L, char *why, size_t whylen) {
    int fd = socket(L->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    int err = 0;
    if (connect(fd, (const struct sockaddr *)&L->addr, L->addrlen) < 0) {
        err = errno;
        if (err == EINPROGRESS) {
            int ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event ev = {.events = EPOLLOUT}, out;
            int n = -1;
            if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0) do
                    n = epoll_wait(ep, &out, 1, LOAD_PROBE_MS);
                while (n < 0 && errno == EINTR);
            socklen_t len = sizeof err;
            if (ep < 0 || n < 0)
                err = errno;
            else if (n == 0)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
            if (ep >= 0) close(ep);
        }
    }
    close(fd);
    if (err) snprintf(why, whylen, "cannot connect to %s: %s", L->o.url, strerror(err));
    return err ? -1 : 0;
}

/* ---- the report ---- */

static int audit_same(const market_audit_report *a, const market_audit_report *b) {
    return a->players == b->players && a->total_funds == b->total_funds &&
           a->negative_funds == b->negative_funds && a->items_held == b->items_held &&
           a->items_listed == b->items_listed && a->items_misplaced == b->items_misplaced;
}

/* Audits the store after the run. When requests went unanswered the server may
 * still be working on them, and market_audit() is not atomic, so it audits
 * again until two audits LOAD_SETTLE_MS apart agree (at most LOAD_DRAIN_MS). */
static int audit_settled(struct load *L, market_conn *mc, market_audit_report *out) {
    int rc = market_audit(mc, out);
    if (rc < 0 || L->k.transport == 0) return rc;
    int64_t t0 = now_ns();
    for (int64_t waited = 0; waited < (int64_t)LOAD_DRAIN_MS * 1000000; waited = now_ns() - t0) {
        struct timespec ts = {0, LOAD_SETTLE_MS * 1000000L};
        nanosleep(&ts, NULL);
        market_audit_report again;
        if ((rc = market_audit(mc, &again)) < 0) return rc;
        int same = audit_same(out, &again);
        *out = again;
        if (same) break;
    }
    L->settle_ms = (now_ns() - t0) / 1000000;
    return MARKET_OK;
}

struct verdict {
    int funds, negative, one_place, total, purchases, ok;
    long long left;            /* items that left the market */
    unsigned long long errors; /* answers other than 200, 402, 404; transport errors */
    const char *failed;        /* why the run failed (exit 4), or NULL */
};

static struct verdict judge(const struct load *L, const market_audit_report *b,
                            const market_audit_report *a) {
    struct verdict v;
    v.funds = a->total_funds == b->total_funds;
    v.negative = a->negative_funds == 0;
    v.one_place = a->items_misplaced == 0;
    v.total = a->items_held + a->items_listed == b->items_held + b->items_listed;
    v.left = (long long)b->items_listed - (long long)a->items_listed;
    long long ok = (long long)L->k.by_code[200];
    /* A request without an answer may have bought: it widens the window. */
    v.purchases = v.left >= ok && v.left - ok <= (long long)L->k.transport;
    v.ok = v.funds && v.negative && v.one_place && v.total && v.purchases;
    /* 402 and 404 are the market saying no; anything else means the run did
     * not measure purchases: a missing secret (401), a server in trouble. */
    const struct counts *k = &L->k;
    v.errors = k->requests - k->by_code[200] - k->by_code[402] - k->by_code[404];
    v.failed = NULL;
    if (ok == 0)
        v.failed = "no purchase succeeded";
    else if (v.errors > k->requests / 2)
        v.failed = "most answers were errors";
    return v;
}

/* The exit status the verdict calls for: 3 an invariant broke, 4 the run failed. */
static int verdict_exit(const struct verdict *v) {
    return !v->ok ? 3 : v->failed ? 4 : 0;
}

/* The statuses the report names; every other one counts as "other". */
static int status_named(int s) {
    return s == 200 || s == 401 || s == 402 || s == 403 || s == 404 || s == 409 || s == 503;
}

static unsigned long long other_codes(const struct counts *k) {
    unsigned long long n = k->other;
    for (int s = 100; s < 600; s++)
        if (!status_named(s)) n += k->by_code[s];
    return n;
}

static void print_report(const struct load *L, const market_audit_report *b,
                         const market_audit_report *a, const struct verdict *v,
                         const struct cmdstats *cb, const struct cmdstats *ca) {
    const struct counts *k = &L->k;
    double el = (double)(L->t_end - L->t0) / 1e9;
    unsigned long long ok = k->by_code[200];
    printf("market-load: %s mix, %zu buyers against %s, seed %" PRIu64 "\n", mix_names[L->o.mix],
           L->o.buyers, L->o.url, L->o.seed);
    printf("  run           %.2f s, %s: %s\n", el, L->exhausted ? "stopped early" : "stopped",
           L->stop_reason ? L->stop_reason : "-");
    printf("  requests      %llu (%.1f/s), %llu reconnects, %llu connect errors\n", k->requests,
           el > 0 ? (double)k->requests / el : 0.0, k->reconnects, k->connect_errors);
    printf("  outcomes      200: %llu  401: %llu  402: %llu  403: %llu  404: %llu  409: %llu  "
           "503: %llu  other: %llu  transport errors: %llu\n",
           ok, k->by_code[401], k->by_code[402], k->by_code[403], k->by_code[404], k->by_code[409],
           k->by_code[503], other_codes(k), k->transport);
    if (k->by_code[401])
        printf("  401           %llu unauthorized: %s\n", k->by_code[401],
               L->o.auth_secret ? "the server's secret is not the one given (--auth-secret or "
                                  "MARKET_AUTH_SECRET)"
                                : "the server wants each buyer's token: give --auth-secret S "
                                  "(or MARKET_AUTH_SECRET), the server's secret");
    if (k->by_code[403])
        printf("  403           %llu forbidden: a token of another player than the buyer\n",
               k->by_code[403]);
    if (k->by_code[402] > ok)
        printf("  402           more refusals for want of funds than purchases: the buyers ran "
               "out, so "
               "the run measures their funds, not the service (seed more: market-seed --generate "
               "...,funds=F)\n");
    if (k->transport && L->last_error[0]) printf("  last error    %s\n", L->last_error);
    if (L->settle_ms)
        printf("  settle        waited %.1f s for the store to stop changing before the audit\n",
               (double)L->settle_ms / 1000);
    if (k->unaffordable)
        printf("  skipped       %llu items nobody could pay for\n", k->unaffordable);
    printf("  purchases/s   %.1f\n", el > 0 ? (double)ok / el : 0.0);
    printf(
        "  latency ms    all: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f   200s: p50 %.3f  p99 %.3f\n",
        ms(hist_pct(&L->all, 50)), ms(hist_pct(&L->all, 90)), ms(hist_pct(&L->all, 99)),
        ms(L->all.max), ms(hist_pct(&L->ok, 50)), ms(hist_pct(&L->ok, 99)));
    long long cmds = ca->total - cb->total;
    if (cmds >= 0 && ok)
        printf("  redis         %lld commands, %.2f per purchase\n", cmds,
               (double)cmds / (double)ok);
    else if (cmds >= 0)
        printf("  redis         %lld commands\n", cmds);
    printf("  invariants    %s\n", v->ok ? "OK" : "BROKEN");
    printf("    %s funds %lld before, %lld after\n", v->funds ? "ok " : "BAD",
           (long long)b->total_funds, (long long)a->total_funds);
    printf("    %s %zu players with negative funds\n", v->negative ? "ok " : "BAD",
           a->negative_funds);
    printf("    %s %zu items in more than one place\n", v->one_place ? "ok " : "BAD",
           a->items_misplaced);
    printf("    %s items held+listed %zu before, %zu after\n", v->total ? "ok " : "BAD",
           b->items_held + b->items_listed, a->items_held + a->items_listed);
    printf("    %s %llu purchases answered 200, %lld items left the market%s\n",
           v->purchases ? "ok " : "BAD", ok, v->left,
           k->transport ? " (unanswered requests may account for the difference)" : "");
    if (!v->ok)
        printf("  result        FAILED: an invariant broke (exit 3)\n");
    else if (v->failed)
        printf("  result        FAILED: %s, %llu of %llu requests were errors (exit 4)\n",
               v->failed, v->errors, k->requests);
    else
        printf("  result        OK, %llu of %llu requests were errors\n", v->errors, k->requests);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_audit(FILE *f, const market_audit_report *r) {
    fprintf(f,
            "{\"players\": %zu, \"total_funds\": %lld, \"negative_funds\": %zu, "
            "\"items_held\": %zu, \"items_listed\": %zu, \"items_misplaced\": %zu}",
            r->players, (long long)r->total_funds, r->negative_funds, r->items_held,
            r->items_listed, r->items_misplaced);
}

static void json_hist(FILE *f, const struct hist *h) {
    fprintf(f,
            "{\"count\": %llu, \"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, \"p999\": %.4f, "
            "\"max\": %.4f, \"mean\": %.4f}",
            (unsigned long long)h->count, ms(hist_pct(h, 50)), ms(hist_pct(h, 90)),
            ms(hist_pct(h, 99)), ms(hist_pct(h, 99.9)), ms(h->max),
            h->count ? h->sum / (double)h->count / 1e6 : 0.0);
}

static void json_cmdstats(FILE *f, const struct cmdstats *s) {
    fputc('{', f);
    for (size_t i = 0; i < s->n; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, s->c[i].name);
        fprintf(f, ": %lld", s->c[i].calls);
    }
    fputc('}', f);
}

static int write_json(const struct load *L, const char *path, const market_audit_report *b,
                      const market_audit_report *a, const struct verdict *v,
                      const struct cmdstats *cb, const struct cmdstats *ca) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "market-load: %s: %s\n", path, strerror(errno));
        return -1;
    }
    const struct counts *k = &L->k;
    double el = (double)(L->t_end - L->t0) / 1e9;
    unsigned long long ok = k->by_code[200];
    fprintf(f, "{\n  \"tool\": \"market-load\",\n  \"config\": {\"url\": ");
    json_str(f, L->o.url);
    fprintf(f, ", \"redis\": ");
    json_str(f, L->o.redis);
    fprintf(f,
            ", \"buyers\": %zu, \"duration_s\": %.3f, \"requests\": %llu, \"mix\": \"%s\", "
            "\"seed\": %" PRIu64 ", \"timeout_ms\": %u, \"tokens\": %s, \"players\": ",
            L->o.buyers, L->o.duration_s, L->o.requests, mix_names[L->o.mix], L->o.seed,
            L->o.timeout_ms, L->o.auth_secret ? "true" : "false");
    if (L->o.players)
        json_str(f, L->o.players);
    else
        fprintf(f, "null");
    fprintf(f, "},\n");
    fprintf(f,
            "  \"setup\": {\"players\": %zu, \"listed\": %zu, \"contended_window\": %zu, "
            "\"contended_pool\": %zu},\n",
            L->n_players, L->n_items, L->n_window, L->n_pool);
    fprintf(f, "  \"run\": {\"elapsed_s\": %.4f, \"stop_reason\": ", el);
    json_str(f, L->stop_reason ? L->stop_reason : "");
    fprintf(f,
            ", \"stopped_early\": %s, \"requests\": %llu, \"requests_per_s\": %.2f, "
            "\"purchases_per_s\": %.2f, \"reconnects\": %llu, \"connect_errors\": %llu, "
            "\"unaffordable_skipped\": %llu, \"settle_ms\": %lld, \"last_error\": ",
            L->exhausted ? "true" : "false", k->requests, el > 0 ? (double)k->requests / el : 0.0,
            el > 0 ? (double)ok / el : 0.0, k->reconnects, k->connect_errors, k->unaffordable,
            (long long)L->settle_ms);
    json_str(f, L->last_error);
    fprintf(f,
            "},\n  \"status\": {\"200\": %llu, \"401\": %llu, \"402\": %llu, \"403\": %llu, "
            "\"404\": %llu, \"409\": %llu, \"503\": %llu, \"other\": %llu, "
            "\"transport_errors\": %llu, \"errors\": %llu, \"by_code\": {",
            ok, k->by_code[401], k->by_code[402], k->by_code[403], k->by_code[404], k->by_code[409],
            k->by_code[503], other_codes(k), k->transport, v->errors);
    int first = 1;
    for (int s = 100; s < 600; s++)
        if (k->by_code[s]) {
            fprintf(f, "%s\"%d\": %llu", first ? "" : ", ", s, k->by_code[s]);
            first = 0;
        }
    fprintf(f, "}},\n  \"latency_ms\": {\"all\": ");
    json_hist(f, &L->all);
    fprintf(f, ", \"ok\": ");
    json_hist(f, &L->ok);
    long long cmds = ca->total - cb->total;
    char per[32] = "null";
    if (cmds >= 0 && ok) snprintf(per, sizeof per, "%.3f", (double)cmds / (double)ok);
    fprintf(f, "},\n  \"redis_commands\": %lld, \"redis_commands_per_purchase\": %s,\n", cmds, per);
    fprintf(f, "  \"redis\": {\"commands\": %lld, \"commands_per_purchase\": %s", cmds, per);
    fprintf(f, ", \"commands_delta\": {");
    first = 1;
    for (size_t i = 0; i < ca->n; i++) {
        long long d = ca->c[i].calls - cmdstats_get(cb, ca->c[i].name);
        if (d == 0 || strcmp(ca->c[i].name, "info") == 0) continue;
        fprintf(f, "%s", first ? "" : ", ");
        json_str(f, ca->c[i].name);
        fprintf(f, ": %lld", d);
        first = 0;
    }
    fprintf(f, "},\n    \"calls_before\": %lld, \"calls_after\": %lld, \"commandstats_before\": ",
            cb->total, ca->total);
    json_cmdstats(f, cb);
    fprintf(f, ",\n    \"commandstats_after\": ");
    json_cmdstats(f, ca);
    fprintf(f,
            "},\n  \"invariants\": {\"ok\": %s, \"funds_conserved\": %s, "
            "\"no_negative_funds\": %s, \"items_in_one_place\": %s, "
            "\"items_total_unchanged\": %s, \"purchases_match\": %s, "
            "\"items_left_market\": %lld,\n    \"before\": ",
            v->ok ? "true" : "false", v->funds ? "true" : "false", v->negative ? "true" : "false",
            v->one_place ? "true" : "false", v->total ? "true" : "false",
            v->purchases ? "true" : "false", v->left);
    json_audit(f, b);
    fprintf(f, ",\n    \"after\": ");
    json_audit(f, a);
    fprintf(f, "},\n  \"result\": {\"exit\": %d, \"failed\": ", verdict_exit(v));
    if (v->failed)
        json_str(f, v->failed);
    else
        fprintf(f, "null");
    fprintf(f, "}\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        fprintf(stderr, "market-load: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* ---- setup and teardown ---- */

static void raise_fd_limit(size_t need) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need + 64) {
        rl.rlim_cur =
            rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need + 64 ? need + 64 : rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl); /* best effort: socket() reports EMFILE */
    }
}

static void load_cleanup(struct load *L) {
    size_t nconn = L->o.hold ? L->o.hold : L->o.buyers;
    if (L->conns)
        for (size_t i = 0; i < nconn; i++) {
            if (L->conns[i].fd >= 0) close(L->conns[i].fd);
            free(L->conns[i].in);
        }
    free(L->conns);
    if (L->ep >= 0) close(L->ep);
    free(L->str.buf);
    free(L->items);
    free(L->players);
    free(L->perm);
    free(L->sorted);
    free(L->window);
    free(L->pool);
}

static int loop_init(struct load *L, char *why, size_t whylen) {
    size_t nconn = L->o.hold ? L->o.hold : L->o.buyers;
    raise_fd_limit(nconn);
    if ((L->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        snprintf(why, whylen, "epoll_create1: %s", strerror(errno));
        return -1;
    }
    if (!(L->conns = calloc(nconn, sizeof *L->conns))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < nconn; i++)
        L->conns[i].fd = -1;
    return 0;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

static int hold_main(struct load *L) {
    char why[256];
    if (probe(L, why, sizeof why) < 0 || loop_init(L, why, sizeof why) < 0) {
        fprintf(stderr, "market-load: %s\n", why);
        return 1;
    }
    L->o.duration_s = L->o.duration_s > 0 ? L->o.duration_s : 0;
    int rc = run(L);
    if (L->held < L->o.hold) {
        fprintf(stderr, "market-load: only %zu of %zu connections answered (%s)\n", L->held,
                L->o.hold, L->last_error[0] ? L->last_error : "no error seen");
        return 1;
    }
    printf("released %zu connections after %.1f s\n", L->o.hold, (double)(L->t_end - L->t0) / 1e9);
    return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv) {
    static struct load L; /* large: the histograms */
    L.ep = -1;
    int rc = parse_opts(argc, argv, &L.o);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "market-load: see --help\n");
        return rc < 0 ? 2 : 0;
    }
    if (parse_url(&L, L.o.url) < 0) return 2;
    install_signals();
    if (L.o.hold) {
        int st = hold_main(&L);
        load_cleanup(&L);
        return st;
    }

    char why[512] = "";
    int status = 1, err = 0;
    lock_client *lock = NULL;
    market *m = NULL;
    market_conn *mc = NULL;
    redisContext *r = NULL;
    market_audit_report before, after;
    struct cmdstats *cb = calloc(1, sizeof *cb), *ca = calloc(1, sizeof *ca);
    market_config cfg = {
        .redis_timeout_ms = 10000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 2000};
    if (lock_redis_addr_parse(L.o.redis, &cfg.redis) < 0) {
        fprintf(stderr, "market-load: bad Redis URL '%s'\n", L.o.redis);
        status = 2;
        goto out;
    }
    if (!cb || !ca) goto oom;
    if (probe(&L, why, sizeof why) < 0) goto fail;
    if (!(lock = lock_local_new(&err)) || !(m = market_new(&cfg, lock, &err)) ||
        !(mc = market_conn_new(m, &err)))
        goto oom;
    if (!(r = redis_open(&cfg.redis, why, sizeof why))) goto fail;
    if ((err = market_audit(mc, &before)) < 0) {
        snprintf(why, sizeof why, "cannot audit %s: %s", L.o.redis, market_strerror(err));
        goto fail;
    }
    if (load_items(&L, mc, why, sizeof why) < 0 || load_players(&L, r, why, sizeof why) < 0 ||
        plan(&L, why, sizeof why) < 0 || loop_init(&L, why, sizeof why) < 0)
        goto fail;
    if (L.n_items == 0 || L.n_players < 2) {
        snprintf(why, sizeof why, "nothing to buy: %zu listed items, %zu players in %s%s%s",
                 L.n_items, L.n_players, L.o.redis, L.o.players ? " matching " : "",
                 L.o.players ? L.o.players : "");
        goto fail;
    }
    if (!L.o.quiet)
        fprintf(stderr, "market-load: %zu listed items, %zu players%s%s; %s mix, %zu buyers\n",
                L.n_items, L.n_players, L.o.players ? " matching " : "",
                L.o.players ? L.o.players : "", mix_names[L.o.mix], L.o.buyers);
    if (cmdstats_read(r, cb, why, sizeof why) < 0) goto fail;

    int ran = run(&L);

    if (cmdstats_read(r, ca, why, sizeof why) < 0) goto fail;
    if ((err = audit_settled(&L, mc, &after)) < 0) {
        snprintf(why, sizeof why, "cannot audit %s after the run: %s", L.o.redis,
                 market_strerror(err));
        goto fail;
    }
    struct verdict v = judge(&L, &before, &after);
    print_report(&L, &before, &after, &v, cb, ca);
    if (fflush(stdout) != 0) {
        snprintf(why, sizeof why, "cannot write the report: %s", strerror(errno));
        goto fail;
    }
    if (L.o.json && write_json(&L, L.o.json, &before, &after, &v, cb, ca) < 0) goto out;
    if (ran < 0) {
        snprintf(why, sizeof why, "the server stopped answering (%s)",
                 L.last_error[0] ? L.last_error : "no answer");
        goto fail;
    }
    status = verdict_exit(&v);
    goto out;
oom:
    snprintf(why, sizeof why, "out of memory");
fail:
    fprintf(stderr, "market-load: %s\n", why);
out:
    if (r) redisFree(r);
    market_conn_free(mc);
    market_free(m);
    lock_free(lock);
    free(cb);
    free(ca);
    load_cleanup(&L);
    return status;
}
