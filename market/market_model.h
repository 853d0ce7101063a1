/* market_model.h - the data model's writes (market_model.c): one command
 * buffer that a commit's effects are appended to, and the effects
 * themselves - move funds, hand over a unique item, move units, delist, set
 * a fence, record an idempotency outcome, take units from a sale. The
 * commands and fields of a write are spelled here alone. Pure: it builds
 * argv and does no I/O (market__pipeline_buf sends a buffer). */
#ifndef GM_MARKET_MARKET_MODEL_H
#define GM_MARKET_MARKET_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_index.h"
#include "market/market_keys.h"

#define MARKET_CHANGES_KEPT_S "1000" /* MAXLEN ~ of market:{r}:changes (market_changes.c) */

struct market__text; /* the buffer's text: chunks that never move */

/* Commands being built for one pipeline. Zeroed: empty. An append that
 * cannot get memory marks the buffer failed (market__buf_seal then says
 * so), so that a builder checks once, at the end. */
typedef struct market__buf {
    size_t n, cap;   /* commands */
    int *argc;       /* [cap] */
    size_t *at;      /* [cap]: where each command's arguments start in args */
    const char ***argv; /* [cap]: made by market__buf_seal */
    redisReply **rep;   /* [cap]: the replies, when the store layer sends it */
    const char **args;  /* every command's arguments, back to back */
    size_t n_args, cap_args;
    size_t open;        /* the command market__buf_begin() opened, n when none */
    int open_base;      /* its arguments when opened (name, and key if any) */
    struct market__text *text, *text_at; /* chunks, and the one being filled */
    int nomem;
} market__buf;

/* the buffer */
void market__buf_reset(market__buf *b);
void market__buf_free(market__buf *b);
void market__buf_cmd(market__buf *b, int argc, ...);
void market__buf_cmdv(market__buf *b, int argc, const char *const *argv);
void market__buf_begin(market__buf *b, const char *cmd, const char *key);
void market__buf_arg(market__buf *b, const char *arg);
size_t market__buf_end(market__buf *b, size_t least);
const char *market__buf_i64(market__buf *b, int64_t v);
const char *market__buf_join(market__buf *b, ...);
int market__buf_seal(market__buf *b);

/* effects */
void market__fx_multi(market__buf *b);
void market__fx_exec(market__buf *b);
void market__fx_fence(market__buf *b, const char *fenced, const char *fence);
void market__fx_guard(market__buf *b, const char *const *lock_keys, size_t n,
                      const char *guard_key, const char *token);
void market__fx_funds(market__buf *b, const char *user_key, int64_t delta);
void market__fx_units(market__buf *b, const char *stacks_key, const char *item, int64_t n);
void market__fx_listing_units(market__buf *b, const market__realm *r, const char *member,
                              int64_t delta);
void market__fx_idem_record(market__buf *b, const char *key, const char *record);
void market__fx_items_begin(market__buf *b, const char *inventory_key);
void market__fx_delist_begin(market__buf *b, const market__realm *r);
void market__fx_delist_units_begin(market__buf *b, const market__realm *r);
void market__fx_idx_remove(market__buf *b, const market__idx_entry *e);
void market__fx_sale_take(market__buf *b, const char *sale_key, int64_t units);
void market__fx_sale_bought(market__buf *b, const char *bought_key, const char *player,
                            int64_t units);

void market__fx_item_out(market__buf *b, const char *inventory_key, const char *item);
void market__fx_item_in(market__buf *b, const char *inventory_key, const char *item);
void market__fx_units_gone(market__buf *b, const char *stacks_key, const char *item);
void market__fx_list(market__buf *b, const market__realm *r, const char *member, int64_t price);
void market__fx_delist(market__buf *b, const market__realm *r, const char *member, int stack);
void market__fx_idx_add(market__buf *b, const market__idx_entry *e);
void market__fx_change(market__buf *b, const market__realm *r, int listed, const char *seller,
                       const char *item, int64_t price, int64_t quantity);


/* reads */
void market__rd_claim(market__buf *b, const char *k_idem, const char *claim, const char *ttl_ms);
void market__rd_watch_begin(market__buf *b);
void market__rd_records_begin(market__buf *b);
void market__rd_record(market__buf *b, const char *k_idem);
void market__rd_prices_begin(market__buf *b, const market__realm *r);
void market__rd_listing_units_begin(market__buf *b, const market__realm *r);
void market__rd_funds(market__buf *b, const char *user_key);
#define MARKET__SALE_FIELDS 9 /* item price initial stock sold limit start_ms end_ms house */
extern const char *const market__sale_fields[MARKET__SALE_FIELDS];
void market__rd_time(market__buf *b);
void market__rd_sale(market__buf *b, const char *sale_key);
void market__rd_bought_begin(market__buf *b, const char *bought_key);
void market__rd_holds(market__buf *b, const char *inventory_key, const char *item);
void market__rd_units(market__buf *b, const char *stacks_key, const char *item);
void market__rd_listing(market__buf *b, const market__realm *r, const char *member);
void market__rd_cheapest(market__buf *b, const char *index_key, const char *hi,
                         const char *scan);

#endif /* GM_MARKET_MARKET_MODEL_H */
