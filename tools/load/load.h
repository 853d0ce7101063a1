/* load.h - market-load's parts: shared by the files of tools/load/ and their unit
 * tests (tests/unit/test_load_*.c), included by nothing else.
 *
 *   opts.c    the command line: flags, make run's defaults, --url        (pure)
 *   plan.c    the snapshot of the market, and who buys what in which order (pure)
 *   http.c    requests written, answers' heads read                      (pure)
 *   stats.c   latency histograms, counts, commandstats, the verdict     (pure)
 *   report.c  the text report and the JSON one (jansson)                  (pure)
 *   world.c   the world and the store's counters, read through market/
 *   loop.c    the target, the probe, the epoll loop over keep-alive connections
 *   main.c    wiring and the exit status
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
 *
 * Errors are values: a function that can fail returns a negative code (a
 * market_err where market/ is involved) and, where it says so, a sentence in
 * why; only main.c prints.
 */
#ifndef GM_TOOLS_LOAD_LOAD_H
#define GM_TOOLS_LOAD_LOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include <jansson.h>

#include "market/market.h"

/* ---- limits and constants ---- */

#define LOAD_BUYERS_MAX 100000
#define LOAD_REQUESTS_MAX 1000000000ULL
#define LOAD_DURATION_MAX_S 86400.0
#define LOAD_TIMEOUT_MAX_MS 3600000
#define LOAD_HOST_MAX 300         /* HOST[:PORT] of --url */
#define LOAD_LISTING_CHUNK 50000  /* listings per market_listings() call */
#define LOAD_OUT_MAX 1024         /* one request, headers included */
#define LOAD_IN_MAX (1024 * 1024) /* the largest answer we accept */
#define LOAD_DRAIN_MS 10000       /* wait this long for in-flight answers at the end */
#define LOAD_DEAD_MS 5000         /* no answer for this long while failing: give up */
#define LOAD_SETTLE_MS 300        /* audits this far apart must agree after unanswered requests */
#define LOAD_PROBE_MS 2000        /* connect timeout of the up-front server probe */
#define LOAD_CMDS_MAX 256         /* distinct Redis commands tracked in commandstats */
#define LOAD_BUYER_TRIES 32       /* random draws before a linear scan for a buyer */
#define LOAD_NONE SIZE_MAX

enum load_mix {
    LOAD_MIX_DISTINCT,
    LOAD_MIX_CONTENDED,
    LOAD_MIX_MIXED,
    LOAD_MIX_FLASH,
    LOAD_MIX_BOOK,
    LOAD_MIX_DIRECT,
    LOAD_MIX_AUCTIONS
};
enum load_kind {
    LOAD_KIND_DISTINCT,
    LOAD_KIND_CONTENDED,
    LOAD_KIND_HEALTH,
    LOAD_KIND_FLASH,
    /* --mix book */
    LOAD_KIND_ORDER,  /* POST /orders: a buy order */
    LOAD_KIND_CANCEL, /* DELETE /orders/{id}: one of the run's resting orders */
    LOAD_KIND_SELL,   /* POST /sell, partly: into the book */
    LOAD_KIND_LIST,   /* POST /list of units at the seller's price: into the book, or listed */
    /* --mix direct */
    LOAD_KIND_PROPOSE, /* POST /trades/direct: funds for funds, to another player */
    LOAD_KIND_ACCEPT,  /* POST /trades/direct/{id}/accept: one of the run's open proposals */
    LOAD_KIND_DECLINE, /* POST /trades/direct/{id}/cancel: the same, by the player offered it */
    /* --mix auctions */
    LOAD_KIND_BID, /* POST /auctions/{id}/bid: the least it takes, or its buyout */
};
#define LOAD_AUCTIONS_MAX 100000  /* --auctions */
#define LOAD_AUCTION_S 5          /* --auction-seconds' default */
#define LOAD_BUYOUT 1000          /* --buyout's default */
#define LOAD_SETTLE_WAIT_MS 30000 /* auctions past their end must be settled within this */
#define LOAD_OPEN_MAX                                                                              \
    65536 /* --mix book, direct: resting orders (open proposals) the run                           \
             remembers, to cancel (to accept) */

#define LOAD_SALE_STOCK 10000 /* --sale-stock's default */

/* "distinct", "contended", "mixed", "flash", "book", "direct" or "auctions". Can't fail. */
const char *load_mix_name(enum load_mix mix);

/* ---- opts.c: the command line ---- */

/* The environment market-load reads its defaults from (make run's variables). */
typedef struct load_env {
    const char *listen;      /* MARKET_LISTEN: the service on http://<listen> */
    const char *redis;       /* MARKET_REDIS: the store's URL */
    const char *redis_port;  /* MARKET_REDIS_PORT: else the store on 127.0.0.1:<port> */
    const char *auth_secret; /* MARKET_AUTH_SECRET */
} load_env;

/* The flags. The strings point into argv, the environment, or the buffers
 * below: a load_opts is not copied once parsed. */
typedef struct load_opts {
    const char *url, *redis, *json;
    const char *players;     /* NULL: every player; else an fnmatch pattern */
    const char *auth_secret; /* NULL: send no tokens */
    size_t buyers, hold;
    unsigned realms;             /* 1: the default realm; else r0..r<realms-1> */
    double duration_s;           /* 0: none */
    unsigned long long requests; /* 0: none */
    enum load_mix mix;
    uint64_t seed;
    unsigned timeout_ms;
    int quiet;
    /* --mix flash: the sale market-load creates (through market/) and buys from */
    int64_t sale_stock, sale_limit, sale_price; /* limit 0: 2 * stock / buyers, rounded up */
    const char *sale_house;                     /* "game" unless given */
    /* --mix auctions: the auctions market-load opens (through market/) and bids on */
    size_t auctions;  /* how many (default 1: one hot auction) */
    double auction_s; /* they end this long after they open, all in the same second */
    int64_t buyout;   /* a bid of this buys one at once (0: none) */
    char url_buf[LOAD_HOST_MAX + 8], redis_buf[64]; /* defaults made from the environment */
} load_opts;

#define LOAD_OPTS_HELP 1 /* load_opts_parse(): --help was given */

/* Fills o from env and argv. Returns 0 (run), LOAD_OPTS_HELP, or -1 with the
 * sentence to print in why (a usage error: exit 2). */
int load_opts_parse(load_opts *o, const load_env *env, int argc, char **argv, char *why,
                    size_t whylen);

/* Prints the usage text. Can't fail (the caller checks the stream). */
void load_usage(FILE *to);

/* --url split: http://HOST[:PORT][/]. */
typedef struct load_url {
    char host[LOAD_HOST_MAX]; /* HOST[:PORT] as written: the Host header */
    char name[LOAD_HOST_MAX]; /* HOST, brackets removed: what to resolve */
    uint16_t port;            /* 80 when none is given */
} load_url;

/* Splits url into *out. Returns 0, or -1 with a sentence in why. */
int load_url_parse(const char *url, load_url *out, char *why, size_t whylen);

/* ---- plan.c: the snapshot and who buys what ---- */

typedef struct load_item {
    size_t name;   /* offset of the item id in the plan's strings */
    size_t seller; /* offset of the seller id */
    int64_t price;
    unsigned realm;        /* index of its realm */
    unsigned char claimed; /* handed to a request already */
} load_item;

typedef struct load_player {
    size_t id;          /* offset in the plan's strings */
    unsigned realm;     /* index of its realm */
    int64_t funds;      /* as read before the run */
    int64_t budget;     /* funds not yet promised to distinct purchases */
    unsigned char pool; /* one of the contended buyers */
} load_player;

typedef struct load_plan {
    /* the snapshot: every id, NUL-terminated, back to back in str */
    char *str;
    size_t str_len, str_cap;
    /* the realms, in the order they were added; the players of realm r are
     * players[realm_first[r] .. realm_first[r + 1] or n_players) */
    size_t *realm_name, *realm_first;
    size_t n_realms, cap_realms;
    load_item *items;
    size_t n_items, cap_items;
    load_player *players;
    size_t n_players, cap_players;
    /* the order, made by load_plan_build() */
    enum load_mix mix;
    size_t *perm, perm_at;     /* distinct: seeded order of item indices */
    size_t *sorted, sorted_at; /* contended: item indices by price */
    size_t *window, n_window, window_live;
    size_t *pool, n_pool;
    uint64_t rng;
    unsigned long long seq;
    unsigned long long unaffordable; /* distinct items no player could pay for */
    /* flash: the sale, and the buyers taking turns (load_plan_flash) */
    char sale[MARKET_ID_MAX + 1];
    int64_t sale_price, sale_limit;
    size_t *flash, n_flash, flash_at;
    int64_t *flash_bought, *flash_inflight; /* per flash buyer: 200s, requests in flight */
    int flash_over;                         /* a 409 came: sold out (or the sale ended) */
    /* book: the listings of goods (who sells what at which price), and the run's resting
     * orders (its 201s) not yet cancelled */
    load_item *goods;
    size_t n_goods, cap_goods;
    /* auctions: the run's, the least bid each takes as the answers said, and which ended */
    struct load_auction {
        int64_t id, next;
        int closed;
    } * auc;
    size_t n_auc, auc_open;
    int64_t buyout;
    struct load_open {
        int64_t id;
        size_t buyer; /* a direct trade: its proposer */
        size_t other; /* a direct trade: the player it is offered to */
    } * open;
    size_t n_open;
} load_plan;

/* One purchase to send: the buyer (a player index) buys the item (an item
 * index); slot is its contended window slot (LOAD_NONE for distinct). A
 * book pick: item is a good (its listing), buyer the player who sends it
 * (the seller of a sell or a list), with its quantity, price and (cancel)
 * order id. A direct pick: buyer sends it, other is the other side;
 * quantity the funds given, price those asked (a proposal), order the
 * trade's id (an accept, a decline). */
typedef struct load_pick {
    enum load_kind kind;
    size_t item, buyer, slot;
    int64_t quantity, price, order;
    size_t other;
} load_pick;

/* Add to the snapshot (before load_plan_build): a realm, then its items and
 * players (they belong to the realm added last; a plan without a realm has
 * the default one). Return MARKET_OK, or MARKET_ERR_NOMEM. */
int load_plan_add_realm(load_plan *p, const char *realm);
int load_plan_add_item(load_plan *p, const char *item, const char *seller, int64_t price);
int load_plan_add_good(load_plan *p, const char *item, const char *seller, int64_t price);
int load_plan_add_player(load_plan *p, const char *id, int64_t funds);

/* Builds the distinct order, the price order, and for the contended and
 * mixed mixes the window (buyers / 4 slots, at least 1) and the pool (the
 * max(buyers, 2) poorest players). Returns MARKET_OK or MARKET_ERR_NOMEM. */
int load_plan_build(load_plan *p, enum load_mix mix, size_t buyers, uint64_t seed);

/* Flash mix (after load_plan_build): buyers of sale (price, limit each)
 * are the plan's players of its first realm but house whose funds cover
 * one unit, up to buyers of them (seeded order); each request buys one
 * unit, and a buyer is not picked while its 200s and requests in flight
 * reach the limit. Returns MARKET_OK or MARKET_ERR_NOMEM. */
int load_plan_flash(load_plan *p, const char *sale, int64_t price, int64_t limit,
                    const char *house, size_t buyers, uint64_t seed);

/* Auctions mix (after load_plan_build): the run's auctions ids[0..n), each taking 1 first,
 * and buyout (0: none). Each request is a bid by a player of the first realm on one still
 * open: the least it takes as the answers said (a 200's bid, a 409's min_bid), or, one in
 * twenty, the buyout. Returns MARKET_OK or MARKET_ERR_NOMEM. */
int load_plan_auctions(load_plan *p, const int64_t *ids, size_t n, int64_t buyout);

/* The next purchase into *out: 1, or 0 when out->kind has nothing left. */
int load_plan_next(load_plan *p, load_pick *out);

/* An answer to pick came: a contended item that left the market (200) or
 * was gone already (404) makes room in the window for the next one; a buy
 * order that rests (201, order: its order_id) can be cancelled later, and a
 * direct trade proposed (201, order: its id) accepted; a bid's answer says the
 * least its auction takes now (order > 0), or that it is sold or ended (order < 0). */
void load_plan_answered(load_plan *p, const load_pick *pick, int status, int64_t order);

/* Ids of item i, its seller, player i, and item i's realm. */
const char *load_plan_realm(const load_plan *p, size_t item);
const char *load_plan_item(const load_plan *p, size_t i);
const char *load_plan_good(const load_plan *p, size_t i);
const char *load_plan_pick_player(const load_plan *p, const load_pick *k);
const char *load_plan_pick_realm(const load_plan *p, const load_pick *k);
const char *load_plan_seller(const load_plan *p, size_t i);
const char *load_plan_player(const load_plan *p, size_t i);
const char *load_plan_player_realm(const load_plan *p, size_t i);

void load_plan_free(load_plan *p);

/* ---- http.c: requests and answers ---- */

#define LOAD_HTTP_ERR_FIT (-1)   /* the request does not fit the buffer */
#define LOAD_HTTP_ERR_TOKEN (-2) /* no token can be made for the buyer */

/* Writes POST /purchase (POST /realms/{realm}/purchase, unless realm is the
 * default one) for buyer, seller, item into out, with the buyer's token when
 * auth_secret is not NULL. Returns its length, or a LOAD_HTTP_ERR_* code. */
int load_http_purchase(char *out, size_t outlen, const char *host, const char *realm,
                       const char *buyer, const char *seller, const char *item,
                       const char *auth_secret);

/* Writes POST /sales/{sale}/buy (under /realms/{realm} unless the default
 * realm) of quantity units for buyer into out, with the buyer's token when
 * auth_secret is not NULL. Returns its length, or a LOAD_HTTP_ERR_* code. */
int load_http_sale_buy(char *out, size_t outlen, const char *host, const char *realm,
                       const char *sale, const char *buyer, int64_t quantity,
                       const char *auth_secret);

/* Writes the request of a book pick of kind (LOAD_KIND_ORDER, _CANCEL, _SELL, _LIST) by
 * player of realm into out: item, quantity and price (a cancel: order) as the pick says.
 * Returns its length, or a LOAD_HTTP_ERR_* code. */
int load_http_book(char *out, size_t outlen, const char *host, const char *realm,
                   enum load_kind kind, const char *player, const char *item, int64_t quantity,
                   int64_t price, int64_t order, const char *auth_secret);
/* Writes POST /auctions/{id}/bid by bidder of realm, for amount, into out. Returns its
 * length, or a LOAD_HTTP_ERR_* code. */
int load_http_bid(char *out, size_t outlen, const char *host, const char *realm, const char *bidder,
                  int64_t id, int64_t amount, const char *auth_secret);
/* Writes the request of a direct pick of kind (LOAD_KIND_PROPOSE, _ACCEPT, _DECLINE) by
 * player of realm into out: a proposal to other of give funds for get; an accept or a
 * decline of trade id. Returns its length, or a LOAD_HTTP_ERR_* code. */
int load_http_direct(char *out, size_t outlen, const char *host, const char *realm,
                     enum load_kind kind, const char *player, const char *other, int64_t give,
                     int64_t get, int64_t id, const char *auth_secret);

/* The whole number a JSON body (body[0..n)) holds under "key" at its top level as the
 * service writes it ("key":123), or -1 when it holds none. Can't fail. */
int64_t load_http_body_int(const char *body, size_t n, const char *key);

/* Writes GET /healthz into out. Returns its length, or LOAD_HTTP_ERR_FIT. */
int load_http_health(char *out, size_t outlen, const char *host);

/* An answer's status line and headers. */
typedef struct load_http_head {
    int status;
    long long body_len; /* -1: until the server closes */
    size_t hdr_len;     /* bytes up to and including the blank line */
    int close_after;    /* Connection: close, or HTTP/1.0 without keep-alive */
} load_http_head;

/* Parses the head of the answer in buf[0..len). Returns 1 (parsed), 0 (more
 * bytes are needed) or -1 (not an answer we take: malformed, chunked, or a
 * head past LOAD_IN_MAX / 2). */
int load_http_parse_head(const char *buf, size_t len, load_http_head *out);

/* ---- stats.c: what a run measured, and what it means ---- */

#define LOAD_HIST_LINEAR 256 /* values below are exact */
#define LOAD_HIST_SUB 128    /* sub-buckets per power of two above */
#define LOAD_HIST_SHIFTS 40
#define LOAD_HIST_BUCKETS (LOAD_HIST_LINEAR + LOAD_HIST_SHIFTS * LOAD_HIST_SUB)

/* A latency histogram: log-linear, in nanoseconds. Zeroed is empty. */
typedef struct load_hist {
    uint64_t n[LOAD_HIST_BUCKETS];
    uint64_t count;
    uint64_t max;
    double sum;
} load_hist;

void load_hist_add(load_hist *h, uint64_t ns);
/* The p-th percentile (0 < p <= 100) in nanoseconds; 0 when empty. */
uint64_t load_hist_pct(const load_hist *h, double p);
double load_ms(uint64_t ns);

typedef struct load_counts {
    unsigned long long requests, by_code[600], other, transport, connect_errors, reconnects;
    /* 503s whose outcome the service does not know (not_replicated, store_unavailable): the
     * purchase may have been committed, like a request left without an answer */
    unsigned long long unknown;
} load_counts;

/* Answers whose status the reports do not name (anything but 200, 401, 402,
 * 403, 404, 409, 503), and those outside 100..599. */
unsigned long long load_counts_other(const load_counts *k);

/* What a run did: load_loop_run() fills it, main.c adds settle_ms. */
typedef struct load_run {
    int64_t t0, t_end; /* ns, monotonic */
    const char *stop_reason;
    int exhausted; /* the plan ran out */
    int aborted;   /* the server stopped answering */
    char last_error[160];
    load_counts k;
    load_hist all, ok;
    int64_t settle_ms; /* waited for the store to settle before the last audit */
    int64_t t_soldout; /* flash: when the first 409 (sold out) came (ns, monotonic); 0 none */
    size_t held;       /* hold mode: connections answered */
} load_run;

typedef struct load_cmdstat {
    char name[48];
    long long calls;
} load_cmdstat;

#define LOAD_MASTERS_MAX 16 /* masters whose share of the commands is reported */

/* Redis INFO commandstats, summed over the store's masters (a cluster has several). */
typedef struct load_cmdstats {
    load_cmdstat c[LOAD_CMDS_MAX];
    size_t n;
    long long total; /* calls over every command but INFO */
    double cpu_s;    /* used_cpu_user + used_cpu_sys (INFO cpu), summed over the masters */
    struct {
        char where[RCONN_HOST_MAX + 8]; /* "host:port" */
        long long total;               /* its calls over every command but INFO */
    } master[LOAD_MASTERS_MAX];
    size_t nmasters;
} load_cmdstats;

/* Reads the text of INFO commandstats into *s. Lines it cannot read, and
 * commands past LOAD_CMDS_MAX, are left out. Can't fail. */
void load_cmdstats_parse(load_cmdstats *s, const char *text, size_t len);
/* The CPU seconds, used_cpu_user + used_cpu_sys, in the text of INFO cpu (0 when neither
 * is there). Can't fail. */
double load_cpu_parse(const char *text, size_t len);
/* Adds the counts of *one (one master's, called where) into *sum. Can't fail. */
void load_cmdstats_add(load_cmdstats *sum, const load_cmdstats *one, const char *where);
/* The calls master i of after served since before (matched by address; 0 if unknown). */
long long load_cmdstats_master_delta(const load_cmdstats *before, const load_cmdstats *after,
                                     size_t i);
long long load_cmdstats_get(const load_cmdstats *s, const char *name);

/* Whether the invariants held, and whether the run measured anything. */
typedef struct load_verdict {
    int funds, negative, one_place, total, purchases, indexed, ok;
    int escrow; /* the buy orders' escrow is their buyers', none negative, every order in its
                   book (funds counts funds and escrow together) */
    int trades;                /* load_judge_trades(): 1 until it says otherwise */
    int trades_trimmed;        /* load_judge_trades(): the history was trimmed past the mark */
    long long left;            /* items that left the market */
    unsigned long long errors; /* answers other than 200, 402, 404; transport errors */
    const char *failed;        /* why the run failed (exit 4), or NULL */
} load_verdict;

load_verdict load_judge(const load_counts *k, const market_audit_report *before,
                        const market_audit_report *after);
/* The exit status the verdict calls for: 0, 3 an invariant broke, 4 the run failed. */
int load_verdict_exit(const load_verdict *v);
int load_audit_same(const market_audit_report *a, const market_audit_report *b);
int64_t load_units(const market_audit_report *a);

/* ---- ledger.c: do the trade records account for the funds that moved? ---- */

typedef struct load_ledger_row {
    const char *id; /* borrowed from the plan */
    unsigned realm;
    int64_t before, after; /* funds before and after the run */
    int64_t traded;        /* what the trades say moved: sold - bought */
    int seen;              /* after was read */
} load_ledger_row;

typedef struct load_ledger {
    load_ledger_row *rows; /* sorted by realm, then id */
    size_t n;
    long long recorded;   /* trades recorded during the run */
    long long unknown;    /* trades or players after the run that the plan did not have */
    long long mismatched; /* rows whose change the trades do not account for */
    const char *first_bad; /* the first of them, or NULL */
    unsigned trimmed;      /* realms whose history no longer holds the trade of the mark */
} load_ledger;

int load_ledger_init(load_ledger *l, const load_plan *p);
void load_ledger_free(load_ledger *l);
void load_ledger_after(load_ledger *l, unsigned realm, const char *id, int64_t funds);
void load_ledger_trade(load_ledger *l, unsigned realm, const market_trade *t);
void load_ledger_close(load_ledger *l);
/* Counts in l->trimmed a realm whose run started at trade mark ("": before any trade) when
 * its history (market_trade_history_start) keeps oldest first ("": none) and has trimmed
 * trimmed trades: the history was trimmed past the mark when the mark is no longer kept
 * (oldest is after it, or none is), or, with no mark, when it trimmed any. Can't fail. */
void load_ledger_mark(load_ledger *l, const char *mark, const char *oldest, uint64_t trimmed);
/* Sets v->trades (and clears v->ok when it fails): every item that left the
 * market has its trade record, and the records account for every player's
 * change of funds. When the server's history was trimmed past a realm's mark
 * (l->trimmed), the records cannot tell: v->trades_trimmed is set instead,
 * and neither v->trades nor v->ok is cleared. Can't fail. */
void load_judge_trades(load_verdict *v, const load_ledger *l);

/* ---- flash sales: what the store says after the run ---- */

typedef struct load_flash {
    char sale[MARKET_ID_MAX + 1];
    int64_t stock, limit, price; /* as created */
    int64_t sold, left;          /* read after the run */
    int64_t oversold;            /* units sold beyond the stock (sold - stock, or left < 0) */
    int64_t violations;          /* buyers whose bought count is above the limit */
    int64_t bought_sum;          /* the bought hash's total: must equal sold */
    int64_t buyers_seen;         /* entries of the bought hash */
    int64_t stacked;             /* units of the sale's item that reached stacks in the run */
    int ok;                      /* every check above held */
} load_flash;

/* Judges a flash run into v from f and the counts: the 200s are units sold
 * (within the unanswered), 409 sold_out is an answer, not an error. Can't
 * fail. */
void load_judge_flash(load_verdict *v, const load_counts *k, load_flash *f);

/* Judges a book run into v: its successes are 200s and 201s (a buy order that rests),
 * its trades the fills the trade records say (the ledger's), and 409 (nothing to sell
 * into, a price that is not the seller's) an answer, not an error. Can't fail. */
void load_judge_book(load_verdict *v, const load_counts *k, const load_ledger *l);
/* --mix auctions: what the run opened, and what the store says of it after the run. */
typedef struct load_auctions {
    char seller[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1]; /* made for the run */
    int64_t *ids;
    size_t n;
    int64_t ends_ms;     /* when they end (the store's clock) */
    size_t sold, unsold; /* read after the run */
    size_t open;         /* still open: their end had not come (or was not settled) */
    size_t late;         /* past their end and still open after LOAD_SETTLE_WAIT_MS */
    int64_t settle_ms;   /* waited for the sweepers after the run */
} load_auctions;

/* Judges an auctions run into v: its successes are 200s (bids taken); 402, 404 and 409
 * (too low, ended) are answers; every auction past its end is settled; v->left is the
 * auctions sold, each of which load_judge_trades() then wants a trade record of. Can't
 * fail. */
void load_judge_auctions(load_verdict *v, const load_counts *k, const load_auctions *a);
/* Judges a direct run into v: its successes are 201s (proposals) and 200s (accepts and
 * declines); 402, 404 and 409 are the market's refusals; there are no trade records, so the
 * audit (funds conserved, none negative, every item in one place) is the whole verdict. */
void load_judge_direct(load_verdict *v, const load_counts *k);

/* ---- report.c ---- */

typedef struct load_report {
    const load_opts *o;
    const load_plan *plan;
    const load_run *run;
    const market_audit_report *before, *after;
    const load_verdict *v;
    const load_cmdstats *cb, *ca; /* commandstats before and after the run */
    const load_ledger *ledger;    /* the trade audit */
    const load_flash *flash;      /* --mix flash: the sale's checks; else NULL */
    const load_auctions *auctions; /* --mix auctions: what became of them; else NULL */
} load_report;

/* Prints the text report to f. Can't fail (the caller checks the stream). */
void load_report_print(FILE *f, const load_report *r);

/* The whole report as JSON (new reference), or NULL when out of memory. */
json_t *load_report_json(const load_report *r);

/* Writes load_report_json() to path. Returns 0, or -1 with a sentence in why. */
int load_report_write(const load_report *r, const char *path, char *why, size_t whylen);

/* ---- world.c: the store, through market/ ---- */

/* The realms a run of o uses: realms[0..o->realms) of MARKET_REALM_MAX + 1
 * bytes each. Can't fail. */
void load_realms_name(const load_opts *o, char (*realms)[MARKET_REALM_MAX + 1]);

/* Reads every listing and every player of each of the n realms into p (with
 * players, only those whose id matches, and only their listings). Returns
 * 0, or -1 with a sentence in why. */
int load_world_read(load_plan *p, market_conn *mc, const char *redis,
                    char (*realms)[MARKET_REALM_MAX + 1], size_t n, const char *players,
                    char *why, size_t whylen);

/* market_audit() of each of the n realms, summed into *out. Returns a market code. */
int load_audit(market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1], size_t n,
               market_audit_report *out);

/* Reads INFO commandstats and INFO cpu of every master of the store into *s (summed, with
 * each master's total). Returns 0, or -1 with a sentence in why. */
int load_cmdstats_read(market_conn *mc, load_cmdstats *s, char *why, size_t whylen);

/* Audits the store after the run. When requests went unanswered
 * (unanswered != 0) the server may still be working on them, and
 * market_audit() is not atomic, so it audits again until two audits
 * LOAD_SETTLE_MS apart agree (at most LOAD_DRAIN_MS), and says how long it
 * waited in *settle_ms. Returns a market code. */
int load_audit_settled(market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1], size_t n,
                       int unanswered, market_audit_report *out, int64_t *settle_ms);

/* The id of the latest trade of each of the n realms, into marks ("" when
 * none). Returns 0, or -1 with a sentence in why. */
int load_trades_mark(market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1], size_t n,
                     char (*marks)[MARKET_TRADE_ID_MAX + 1], char *why, size_t whylen);
/* Reads into l the funds of every player (matching players, when not NULL)
 * and every trade recorded after marks, of each of the n realms, and whether
 * each history still keeps its mark (load_ledger_mark), then closes it
 * (load_ledger_close). Returns 0, or -1 with a sentence in why. */
int load_trades_read(load_ledger *l, market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1],
                     size_t n, char (*marks)[MARKET_TRADE_ID_MAX + 1], const char *players,
                     char *why, size_t whylen);

/* Flash mix: creates sale id (item id, o's stock, limit, price; from Unix
 * ms 0 to a day from now) in realm through market/, and its house (funds
 * 0) when it is not a player yet, so that the audit before the run counts
 * both. Returns 0, or -1 with a sentence in why. */
int load_flash_create(market_conn *mc, const load_opts *o, const char *realm, const char *id,
                      char *why, size_t whylen);
/* Auctions mix: makes a seller for the run (a new player with no funds) holding a->n units
 * of a new good, and opens a->n auctions of one unit each, from 1, buyout o->buyout,
 * ending o->auction_s after (all in the same second), in realm through market/, before the
 * audit that counts them. Fills a (a->ids: free() it). Returns 0, or -1 with a sentence in
 * why. */
int load_auctions_open(market_conn *mc, const load_opts *o, const char *realm, load_auctions *a,
                       char *why, size_t whylen);
/* Auctions mix, after the run: waits (at most LOAD_SETTLE_WAIT_MS) until the sweepers
 * settled every auction whose end has come, and counts them into *a. Returns 0, or -1 with
 * a sentence in why. */
int load_auctions_read(market_conn *mc, const char *realm, load_auctions *a, char *why,
                       size_t whylen);
/* Flash mix, after the run: reads the sale and who bought what into *f.
 * Returns 0, or -1 with a sentence in why. */
int load_flash_read(market_conn *mc, const char *realm, load_flash *f, char *why, size_t whylen);

/* ---- loop.c: the service ---- */

/* Where the service is: --url resolved. */
typedef struct load_target {
    char host[LOAD_HOST_MAX]; /* the Host header */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int family;
} load_target;

/* Resolves u into *t. Returns 0, or -1 with a sentence in why. */
int load_target_resolve(load_target *t, const load_url *u, char *why, size_t whylen);

/* Connects once, with a deadline, so that a server that is down fails fast.
 * Returns 0, or -1 with a sentence in why. */
int load_probe(const load_target *t, const char *url, char *why, size_t whylen);

/* SIGINT and SIGTERM stop the run (twice: at once); SIGPIPE is ignored. */
void load_signals_install(void);

int64_t load_now_ns(void);

typedef struct load_loop load_loop;

/* A loop over max(buyers, hold) connections to t, asking plan for
 * purchases (NULL with hold: GET /healthz once on each), into run. The
 * arguments must outlive the loop. Returns NULL with a sentence in why. */
load_loop *load_loop_new(const load_opts *o, const load_target *t, load_plan *plan, load_run *run,
                         char *why, size_t whylen);

/* Runs until the plan, the clock or a signal ends it. Returns 0, or -1 when
 * the server stopped answering altogether (run->last_error says why). */
int load_loop_run(load_loop *l);

void load_loop_free(load_loop *l);

#endif /* GM_TOOLS_LOAD_LOAD_H */
