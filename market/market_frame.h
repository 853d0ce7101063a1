/* market_frame.h - what every order kind's attempt shares (market_frame.c):
 * the batch's open orders and their idempotency keys; the frame of its read
 * (the claims, the WATCH of the leases and the records, the leases' fencing
 * records, the records) and its judgement; the decision loop in queue
 * order; our fences and the records in the commit; and the table of the
 * players whose funds and goods a batch moves. A kind adds its own keys to
 * the WATCH, its own reads behind the frame and its own decision. It calls
 * the combiner, the idempotency, transaction and store layers. */
#ifndef GM_MARKET_MARKET_FRAME_H
#define GM_MARKET_MARKET_FRAME_H

#include "market/market_combine.h"
#include "market/market_idem.h"
#include "market/market_trade.h"

#include <string.h>

/* The deals of one type (market__deal_type) a batch names by number, each once: the WATCH
 * of their hashes, their reads, and their codes as read; their values go to the kind's
 * array (t->size each, in the order of id[]). */
typedef struct market__deals {
    const market__deal_type *t;
    size_t n;
    int64_t id[MARKET__BATCH_MAX];
    int rc[MARKET__BATCH_MAX]; /* as read: MARKET_OK, t->missing, MARKET_ERR_STORE */
    size_t i_rep;              /* the read's replies */
} market__deals;

typedef struct market__frame {
    market__cbatch *cb;
    market_order *req[MARKET__BATCH_MAX]; /* cb's open orders, in order */
    size_t n;
    market__idem_set idem;
    size_t i_watch, i_fence, i_idem; /* the read's replies: WATCH, leases, records */
    size_t i_mark;                   /* the read's reply: the realm's seeding mark (its
                                        EXISTS, when no lease is held) */
    char k_mark[MARKET__KEY_MAX];    /* its key (market__key_building()) */
    int fence_same[MARKET__HELD_MAX]; /* the fencing record already holds our fence */
    int fees;                         /* set by the kind: its orders pay the realm's fees (its read
                                         watches and reads the realm's settings) */
    size_t i_settings;                /* the read's reply: the settings (fees) */
    int clock;                        /* set by the kind: its read reads the store's clock */
    int64_t now_ms;                   /* then the store's clock as read (Unix ms) */
    const char *lease_key; /* set by the kind: the sweep lease its orders' tokens name (NULL:
                              none): WATCHed and read, so that an order under a lease another
                              took over commits nothing (market__frame_lease_held()) */
    char lease[LOCK_TOKEN_LEN + 1];   /* then its holder's token as read ("": none) */
    size_t i_clock;                   /* the read's reply: the clock, then the lease */
    char k_settings[MARKET__KEY_MAX]; /* their key */
    market_settings settings;         /* the settings as read (fees) */
    unsigned char won[MARKET__BATCH_MAX]; /* decided MARKET_OK in this batch (not a replay) */
    market__deals *deals; /* set by the kind: the deals its orders name (NULL: none), WATCHed
                             and read into deals_out (market__deals_parse()) */
    void *deals_out;
    struct market__parties *parties; /* set by the kind: its players (NULL: none), WATCHed,
                                        their funds read and parsed with the frame */
    size_t i_parties;                /* the read's replies: their funds */
} market__frame;

int market__frame_begin(market__frame *f, market__cbatch *cb, int need_token);
void market__frame_read(market__frame *f, market__buf *r);
void market__frame_watched(market__frame *f, const market__held *held, int keys, market__buf *r);
int market__frame_judge(market__frame *f, market_conn *c, const market__held *held,
                        redisReply **rep);

/* A kind's decision of its open order i (not settled by its key, within its
 * budget): returns its code, with *a, *b and *c (0 unless set) what its
 * idempotency record keeps. replay fills order o's result from outcome v, a
 * replay. */
typedef int (*market__decide_one)(void *ks, size_t i, int64_t *a, int64_t *b, int64_t *c);
typedef void (*market__replay)(market_order *o, const market__outcome *v);
size_t market__frame_decide(market__frame *f, market__decide_one one, market__replay replay,
                            void *ks);
void market__frame_trade(const market__frame *f, size_t i, int first, market__trade_rec rec,
                         market__trade_rec *t, size_t *t_req, size_t *n);
/* Whether an order under token (NULL: none checked) still holds the frame's lease. */
static inline int market__frame_lease_held(const market__frame *f, const char *token) {
    return !token || strcmp(token, f->lease) == 0;
}

/* Order i succeeded in this batch (not a replay): it has writes. */
static inline int market__frame_won(const market__frame *f, size_t i) { return f->won[i]; }

void market__frame_fences(const market__frame *f, const market__held *held, market__buf *w);
void market__frame_records(market__frame *f, market__buf *w);

/* The players a batch names, each once: their keys, their funds as read,
 * then as the batch decides. */
#define MARKET__PARTIES_MAX (2 * MARKET__BATCH_MAX)
typedef struct market__parties {
    size_t n;
    char id[MARKET__PARTIES_MAX][MARKET_ID_MAX + 1];
    uint32_t hash[MARKET__PARTIES_MAX]; /* of id[]: most comparisons stop there */
    char k_user[MARKET__PARTIES_MAX][MARKET__KEY_MAX];
    char k_inv[MARKET__PARTIES_MAX][MARKET__KEY_MAX];
    char k_stacks[MARKET__PARTIES_MAX][MARKET__KEY_MAX];
    market__party party[MARKET__PARTIES_MAX];
    int64_t read_funds[MARKET__PARTIES_MAX]; /* party[].funds as read */
} market__parties;

uint32_t market__id_hash(const char *s);
size_t market__parties_of(market__parties *p, const char *realm, const char *id);
void market__parties_watch(const market__parties *p, market__buf *r);
void market__parties_read(const market__parties *p, const size_t *list, size_t n,
                          market__buf *r);
void market__parties_parse(market__parties *p, redisReply *const *rep, const size_t *list,
                           size_t n);
void market__parties_funds(const market__parties *p, market__buf *w);
size_t market__parties_find(const market__parties *p, const char *id);

size_t market__deals_of(market__deals *d, int64_t id);
void market__deals_watch(const market__deals *d, const char *realm, market__buf *r);
void market__deals_read(market__deals *d, const char *realm, market__buf *r);
void market__deals_parse(market__deals *d, redisReply *const *rep, void *out);

void market__frame_cut(const market__frame *f, market__parties *p, int64_t bps, market__cut *cut);

/* One order's working copy of the batch's cut (market__cut_begin()): the
 * order decides on copies of its parties, kept only when it succeeds, and
 * the house is one of them (self, when the order's party is the house) or
 * a copy of its own. cut.house points into the struct: it is not moved. */
typedef struct market__cut_copy {
    market__cut cut;
    market__party house;
    size_t h; /* the house's place in the batch's parties, or SIZE_MAX */
} market__cut_copy;

void market__cut_begin(market__cut_copy *c, const market__cut *cut, const market__parties *p,
                       size_t self, market__party *self_copy);
void market__cut_keep(const market__cut_copy *c, market__cut *cut, market__parties *p);
void market__frame_cut_pay(const market__frame *f, const market__cut *cut, market__buf *w);
void market__frame_commit(market__frame *f, const market__held *held, const market__parties *p,
                          const market__cut *cut, market__buf *w);

#endif /* GM_MARKET_MARKET_FRAME_H */
