/* market_trade.h - trade records (market_trade.c): the script a purchase's
 * commit runs to record its trades, and the reads of them. It calls the
 * store layer, nothing above; the transaction and batch layers put its
 * script into their commits. */
#ifndef GM_MARKET_MARKET_TRADE_H
#define GM_MARKET_MARKET_TRADE_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_store.h"

/* An item's price history (market_history.c reads it; the trade script writes it in the
 * commit of its trades): one hash hist:{r}:<item>, a ring of candles per interval. Field
 * "<p><slot>" (p: m, h or d; slot: the interval's start / its length, modulo the ring's
 * size) holds "<start ms> <open> <high> <low> <close> <volume>"; a slot holding another
 * start holds an older interval, overwritten when its slot's turn comes again. Only
 * stackable goods have one: a unique item trades once. */
#define MARKET__HIST_1M_MS 60000
#define MARKET__HIST_1M_KEPT 1440 /* a day of minutes */
#define MARKET__HIST_1H_MS 3600000
#define MARKET__HIST_1H_KEPT 720 /* 30 days of hours */
#define MARKET__HIST_1D_MS 86400000
#define MARKET__HIST_1D_KEPT 730    /* two years of days */
#define MARKET__HIST_PREFIXES "mhd" /* a field's letter, by enum market_interval */

#define MARKET__TRADE_KEYS 4  /* KEYS per trade: buyer's and seller's lists, record, history */
#define MARKET__TRADE_ARGS 10 /* ARGV per trade */
/* The arguments of a script recording n trades: EVAL, the script, numkeys, the realm's
 * stream, items' hash and items' order, three settings, and each trade's keys and
 * arguments. */
#define MARKET__TRADES_ARGC(n) (9 + (MARKET__TRADE_KEYS + MARKET__TRADE_ARGS) * (n))

/* One trade a commit records. The caller sets the inputs; market__trades_argv()
 * names its keys and writes its numbers; the script's reply gives its id. */
typedef struct market__trade_rec {
    /* in: borrowed, alive until the commit's replies are read */
    const char *buyer, *seller, *item;
    int64_t quantity, price;  /* units and the price of one */
    int64_t fee;              /* the realm's cut of the total, paid by the seller */
    const char *house;        /* the player the cut paid (with a fee) */
    int goods;                /* units of a stackable good: the item's price history gets it */
    const char *fence;        /* the fence of the lease the commit holds, decimal; "0": none */
    const char *idem_key;     /* NULL: no idempotency record */
    const char *idem_record;  /* the success record "<fp> <a> <b>"; the script appends " <id>" */
    /* the rest is market_trade.c's */
    char k_buyer[MARKET__KEY_MAX], k_seller[MARKET__KEY_MAX], k_history[MARKET__KEY_MAX];
    char quantity_s[24], price_s[24], total_s[24], fee_s[24];
    char id[MARKET_TRADE_ID_MAX + 1]; /* out: the trade id, from the script's reply */
} market__trade_rec;

/* What the script's arguments share: the realm's stream, items' hash and items'
 * order, and the settings, as text. */
typedef struct market__trades {
    char k_trades[MARKET__KEY_MAX], k_items[MARKET__KEY_MAX], k_order[MARKET__KEY_MAX];
    char history[24], index[24], nkeys[16];
} market__trades;

size_t market__trades_argv(const market *m, const char *realm, market__trades *tw,
                           market__trade_rec *t, size_t n, const char *sha, const char **argv);
const char *market__trades_sha(void);
int market__trades_ids(const redisReply *r, market__trade_rec *t, size_t n);
void market__trades_hand(market_queued *const *req, size_t n, const market__trade_rec *t,
                         const size_t *t_req, size_t n_t, const size_t *same_as);
int market__trades_commit(market_conn *c, market__buf *w, size_t pre, const char *realm,
                          market__trades *tw, market__trade_rec *t, size_t n, const char **args);

#endif /* GM_MARKET_MARKET_TRADE_H */
