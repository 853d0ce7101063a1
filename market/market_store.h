/* market_store.h - the store layer (market_store.c): a Redis connection per
 * market_conn (one per master on a Redis Cluster) that reconnects by itself,
 * and pipelines of the data model's buffers (market_model.h); and the reads
 * of deals by number outside a batch (market_deals.c). It calls nothing
 * above it. */
#ifndef GM_MARKET_MARKET_STORE_H
#define GM_MARKET_MARKET_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "market/market_impl.h"
#include "market/market_index.h"
#include "market/market_keys.h"
#include "market/market_model.h"
#include "market/market_rules.h"

/* A connection to a cluster master other than the one in use, kept for later. */
struct market__parked {
    redisContext *ctx;
    int unwatch;                   /* a WATCH lingers on it: UNWATCH before its next pipeline */
    char where[RCONN_HOST_MAX + 8]; /* "host:port" */
};

struct market_conn {
    market *m;
    redisContext *ctx; /* NULL while disconnected; reconnected on next use */
    int unwatch;       /* a WATCH is pending: send UNWATCH before the next pipeline */
    int unwatch_sent;  /* market__pipeline_send() sent one: its reply comes first */
    int closed;        /* the last pipeline failed because the server had closed c */
    uint64_t sgen;     /* Sentinel group: the generation ctx was made under */
    int wait_sent;     /* market__pipeline_send() put WAIT behind an EXEC: its reply comes last */
    size_t exec_at;    /* then: the index of the (last) EXEC among the pipeline's commands */
    unsigned wait_need;          /* then: the replicas that must confirm it (market__ack_plan) */
    rconn_sentinel_view wait_view; /* then: the Sentinels' view it was planned under */
    /* A lane's connection may leave a commit's WAIT to be read later (market__wait_recv),
     * while its next batch goes out on another connection: */
    int defer_wait;     /* set by the caller: the next commits' WAITs are deferred */
    int wait_pending;   /* a deferred WAIT's reply is still to come, before any other */
    int wait_committed; /* then: the EXEC it follows committed */
    int wait_judged;    /* its reply was read (or lost): wait_rc and wait_why hold the verdict */
    int wait_rc;        /* MARKET_OK or MARKET_ERR_NOT_REPLICATED */
    char wait_why[128]; /* the reason of a MARKET_ERR_NOT_REPLICATED */
    char where[RCONN_HOST_MAX + 8]; /* "host:port" of ctx's server (for messages) */
    char errstr[128];  /* why the store last failed (market_conn_errstr()); "" none yet */
    int watching;      /* a WATCH went out, no EXEC or UNWATCH since: the next pipeline
                        * relies on it, unless unwatch is set (then it is abandoned) */
    size_t exec_sent;  /* 1 + the index of the EXEC in the pipeline sent; 0: none */
    int script_asked;  /* the last pipeline sent ends with a SCRIPT EXISTS of script_sha */
    /* The script a batch's commit runs (its SHA-1, market__script_sha(); NULL none), and
     * the one this connection's server is known to have cached (NULL: not known): seen by
     * a SCRIPT EXISTS, or run by a commit, since the connection was made. Until it is
     * known, the batch's read asks (SCRIPT EXISTS), so that the commit names it (EVALSHA)
     * instead of sending its text (EVAL), which Redis would hash twice. A cache emptied
     * since (SCRIPT FLUSH) fails the script alone inside the EXEC: market__trades_commit()
     * then forgets it and records the trades at once. */
    const char *script_sha;
    const char *script_known;
    char *out;         /* the pipeline being sent, encoded (rconn_resp_append) */
    size_t out_cap, out_len;
    /* Called once by the next market__pipeline_send(), when its pipeline is on its way (or
     * before it could wait on a connection): a caller's work to do while Redis works. */
    void (*sent)(void *ud);
    void *sent_ud;
    /* Redis Cluster only (m->cluster): */
    int slot;                      /* the hash slot of the operation under way (market__route) */
    int redirect;                  /* the last MARKET__REDIRECTED: 1 MOVED, 2 ASK or TRYAGAIN */
    int set_aside; /* a lane's connection (market_lane.c): a slot split by a migration (-ASK,
                    * -TRYAGAIN) is handed back at once as MARKET__REDIRECTED, not waited for */
    char at_host[RCONN_HOST_MAX + 1]; /* the master that serves slot, ctx's server */
    int at_port;
    size_t nparked;
    struct market__parked parked[MARKET__NODES_MAX - 1]; /* the other masters' connections */
};

int market__connect(market_conn *c);
int market__route(market_conn *c, const char *realm);
int market__route_slot(market_conn *c, unsigned slot);
void market__redirect_pause(market_conn *c, int tries);
void market__close(market_conn *c);
int market__ack_plan(market_conn *c, unsigned *need, rconn_sentinel_view *v);
void market__drop(market_conn *c);
int market__pipeline_argv(market_conn *c, size_t n, const int *argc, const char **const *argv,
                          redisReply **replies);
int market__pipeline_send(market_conn *c, size_t n, const int *argc, const char **const *argv);
int market__pipeline_buf(market_conn *c, market__buf *b);
int market__pipeline_recv(market_conn *c, size_t n, redisReply **replies);
int market__wait_recv(market_conn *c, char *why, size_t len);
int market__replicated(market_conn *c, const char *const *keys, size_t n);
void market__replies_free(redisReply **replies, size_t n);
redisReply *market__command_buf(market_conn *c, market__buf *b, int *rc);
int market__fail(market_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int market__fail_reply(market_conn *c, const char *what, const redisReply *r);
int market__read_buf(market_conn *c, const char *realm, market__buf *b);
void market__ask_script(market_conn *c, const char *script_sha);
int market__building_judge(market_conn *c, const char *mark, const redisReply *rep);
int market__read_one(market_conn *c, const char *realm, market__buf *b, redisReply **rep);
int market__write_one(market_conn *c, const char *realm, market__buf *b, redisReply **rep);
int market__write_script(market_conn *c, const char *realm, const char *script, size_t nkeys,
                         const char *const *keys, size_t nargs, const char *const *args,
                         const char *what, int64_t *out);
int market__ending_add(market_conn *c, const char *realm);
/* deals by number, outside a batch (market_deals.c) */
int market__deals_get(market_conn *c, const market__deal_type *t, const char *realm,
                      const int64_t *ids, size_t n, void *out, int64_t *now_ms);
int market__ids_get(market_conn *c, const char *realm, market__buf *b, size_t at, int64_t *ids,
                    size_t max, size_t *n);
/* A realm's streams (market__streams_after). */
#define MARKET__STREAMS_MAX 3 /* streams one snapshot reads (enum market__stream) */
int market__streams_after(market_conn *c, const char *realm, size_t n, const enum market__stream *s,
                          const char *const *after, size_t limit, void **out, size_t *count);
int market__streams_last(market_conn *c, const char *realm, size_t n, const enum market__stream *s,
                         char (*id)[MARKET_TRADE_ID_MAX + 1]);

#endif /* GM_MARKET_MARKET_STORE_H */
