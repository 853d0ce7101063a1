/* market_index.h - the search indexes of a realm's market (market_index.c): their key
 * names, the member a listing has in each, a page's cursor, and the plan of a search.
 * Pure: no I/O. */
#ifndef GM_MARKET_MARKET_INDEX_H
#define GM_MARKET_MARKET_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_impl.h"

#define MARKET__PRICE_DIGITS 13 /* a price in an index: zero-padded, 10^12 fits */
#define MARKET__IDX_MEMBER_MAX (MARKET_CURSOR_MAX + 1)     /* a member, with its NUL */
#define MARKET__IDX_KEY_MAX (MARKET__TAG_MAX + 24)         /* "idx:{<realm>}:seller:new" */
#define MARKET__IDX_BOUND_MAX (MARKET__IDX_MEMBER_MAX + 2) /* "(" <member> ";" */

/* The indexes; every listing of market:{r} has one member in each. */
enum market__idx_kind {
    MARKET__IDX_ALL,    /* idx:{r}:all     "<price>:<item>.<seller>" */
    MARKET__IDX_ITEM,   /* idx:{r}:item    "<item>:<price>:<seller>" */
    MARKET__IDX_SELLER, /* idx:{r}:seller  "<seller>:<price>:<item>" */
    MARKET__IDX_KINDS
};

/* A realm's index keys. */
typedef struct market__idx {
    char key[MARKET__IDX_KINDS][MARKET__IDX_KEY_MAX];
} market__idx;

/* One listing's place in every index: the keys and its members. */
typedef struct market__idx_entry {
    market__idx idx;
    char member[MARKET__IDX_KINDS][MARKET__IDX_MEMBER_MAX];
} market__idx_entry;

/* What market_search() sends for a query. */
typedef struct market__search_plan {
    int point;      /* 1: item and seller given: ZSCORE of market:{r} "<item>.<seller>" */
    int kind;       /* otherwise: the index read (enum market__idx_kind) */
    int desc;       /* ZRANGE ... REV */
    int64_t lo, hi; /* the price range, both ends included */
    char min[MARKET__IDX_BOUND_MAX]; /* ZLEXCOUNT min max: every listing that matches */
    char max[MARKET__IDX_BOUND_MAX];
    char start[MARKET__IDX_BOUND_MAX]; /* ZRANGE start stop BYLEX [REV]: the page; with */
    char stop[MARKET__IDX_BOUND_MAX];  /* REV start is the upper end */
    char count[24];                    /* LIMIT 0 <count>: limit + 1 (one more: a next page) */
    int has_cursor;
    market_listing after; /* the cursor's listing */
} market__search_plan;

void market__idx_init(market__idx *x, const char *realm);
void market__idx_member(char out[MARKET__IDX_MEMBER_MAX], int kind, const char *item,
                        const char *seller, int64_t price);
void market__idx_entry_init(market__idx_entry *e, const char *realm, const char *item,
                            const char *seller, int64_t price);
int market__idx_decode(int kind, const char *s, size_t len, market_listing *out);
int market__cursor_parse(const char *s, market_listing *out);
int market__search_plan_make(const market_search_query *q, market__search_plan *p);
int market__search_point(const market__search_plan *p, int64_t price, size_t *total);

#endif /* GM_MARKET_MARKET_INDEX_H */
