/* market_index.h - the search indexes of a realm's market (market_index.c): their key
 * names, the entry a listing has in each, a page's cursor, and the plan of a search.
 * Pure: no I/O. */
#ifndef GM_MARKET_MARKET_INDEX_H
#define GM_MARKET_MARKET_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_impl.h"

#define MARKET__PRICE_DIGITS 13 /* a price in a cursor: zero-padded, 10^12 fits */
/* "idx:{<realm>}:seller:<id>" */
#define MARKET__IDX_KEY_MAX (MARKET__TAG_MAX + MARKET_ID_MAX + 16)

/* The indexes: one small zset per item and one per seller, every member scored by its
 * listing's price. */
enum market__idx_kind {
    MARKET__IDX_ITEM,   /* idx:{r}:item:<item>      member <seller> */
    MARKET__IDX_SELLER, /* idx:{r}:seller:<seller>  member <item> */
    MARKET__IDX_KINDS
};

/* The names index, idx:{r}:names: every listing's member of market:{r}, "<item>.<seller>",
 * all scored MARKET__IDX_NAMES_SCORE, so that Redis orders them byte by byte and the
 * listings whose item starts with a prefix are one range of it (ZRANGE BYLEX). */
#define MARKET__IDX_NAMES_SCORE "0"
#define MARKET__NAMES_BOUND_MAX (MARKET__MEMBER_MAX + 2) /* "[<prefix>", "(<m>", "(<prefix>\xff" */

/* One listing's place in every index: the keys, its member in each, and its score; and
 * its member of the names index. */
typedef struct market__idx_entry {
    char key[MARKET__IDX_KINDS][MARKET__IDX_KEY_MAX];
    char member[MARKET__IDX_KINDS][MARKET_ID_MAX + 1];
    char score[24];
    char names_key[MARKET__IDX_KEY_MAX]; /* idx:{r}:names */
    char name[MARKET__MEMBER_MAX];       /* "<item>.<seller>", scored MARKET__IDX_NAMES_SCORE */
} market__idx_entry;

/* Where a search reads its page: the whole market or one index. */
enum market__search_source {
    MARKET__SEARCH_MARKET, /* market:{r}: member "<item>.<seller>" */
    MARKET__SEARCH_ITEM,   /* idx:{r}:item:<item> */
    MARKET__SEARCH_SELLER, /* idx:{r}:seller:<seller> */
    MARKET__SEARCH_NAMES   /* idx:{r}:names, by item prefix: ZRANGE BYLEX */
};

/* What market_search() sends for a query. */
typedef struct market__search_plan {
    int point;  /* 1: item and seller given: ZSCORE of market:{r} "<item>.<seller>" */
    int source; /* otherwise: the zset read (enum market__search_source) */
    int desc;   /* highest price first */
    int64_t lo, hi;          /* the price range, both ends included */
    char lo_s[24], hi_s[24]; /* ... as text */
    char count[24];          /* limit + 1 (one more: a next page) */
    int has_cursor;
    market_listing after; /* the cursor's listing */
    char after_price[24]; /* ... its price, and its member in the source ("" when none) */
    char after_member[MARKET__MEMBER_MAX];
    /* MARKET__SEARCH_NAMES: ranges of idx:{r}:names (ZRANGE BYLEX bounds) */
    char lex_all[MARKET__NAMES_BOUND_MAX]; /* where the prefix's range starts: "[<prefix>" */
    char lex_lo[MARKET__NAMES_BOUND_MAX];  /* where the page starts: lex_all, or "(<cursor's>" */
    char lex_hi[MARKET__NAMES_BOUND_MAX];  /* where both end: "(<prefix>\xff" */
} market__search_plan;

void market__idx_key(char out[MARKET__IDX_KEY_MAX], int kind, const char *realm, const char *id);
void market__idx_names_key(char out[MARKET__IDX_KEY_MAX], const char *realm);
void market__idx_entry_init(market__idx_entry *e, const char *realm, const char *item,
                            const char *seller, int64_t price);
int market__cursor_parse(const char *s, market_listing *out);
int market__search_plan_make(const market_search_query *q, market__search_plan *p);
int market__search_member(const market__search_plan *p, const market_search_query *q,
                          const char *m, size_t len, market_listing *out);
int market__search_point(const market__search_plan *p, int64_t price, size_t *total);

#endif /* GM_MARKET_MARKET_INDEX_H */
