/* market_audit.c - the audit: a whole realm read back and its invariants checked.
 *
 * market_audit() reads the whole store (SCAN, no lock) to check the invariants: funds
 * conserved, none negative, every item in one place, the search indexes holding exactly
 * the market's listings (market_reindex.c rebuilds them when they do not), and the units
 * of stackable goods and flash sales (stacks, listed units, stock, sold). Meant for tests,
 * load tests and operators on a quiet market.
 */
#include "market/market.h"

#include <stdlib.h>
#include <string.h>

#include "market/market_bulk.h"

#define AUDIT_PAGE 4096 /* listings of market:{r} one ZRANGE of the audit reads */

/* The listings of market:{r}, read a page at a time (market_pages_read()). */
struct zpages {
    redisReply **p; /* each a ZRANGE ... WITHSCORES reply: member, score, ... */
    size_t n, cap;
    size_t listings; /* members in all of them */
};

struct itemlist {
    char (*ids)[MARKET_ID_MAX + 1];
    size_t n, cap;
};

static int itemlist_add(struct itemlist *l, const char *s, size_t len) {
    if (len > MARKET_ID_MAX) len = MARKET_ID_MAX;
    if (market__grow((void **)&l->ids, &l->cap, l->n + 1, sizeof *l->ids) < 0)
        return MARKET_ERR_NOMEM;
    memcpy(l->ids[l->n], s, len);
    l->ids[l->n++][len] = '\0';
    return MARKET_OK;
}

/* Runs the read rd (a model read of one key) of every key in one pipeline
 * and hands each reply to fn. */
static int per_key(market_conn *c, const struct market__keylist *keys,
                   void (*rd)(market__buf *b, const char *key), int (*fn)(redisReply *r, void *ud),
                   void *ud) {
    int rc = market__connect(c);
    if (rc < 0) return rc;
    struct market__bulk b = {c, 0, 0};
    market__buf cmd = {0};
    for (size_t i = 0; i < keys->n; i++) {
        rd(&cmd, keys->keys[i]);
        market__bulk_add_buf(&b, &cmd);
    }
    market__buf_free(&cmd);
    if (b.failed) return market__bulk_finish(&b);
    for (size_t i = 0; i < b.sent; i++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) {
            market__drop(c);
            return MARKET_ERR_STORE;
        }
        int frc = rc == MARKET_OK ? fn(r, ud) : rc;
        freeReplyObject(r);
        if (frc < 0) rc = frc; /* keep reading: the replies must be drained */
    }
    return rc;
}

/* Reads realm rl's market into z, AUDIT_PAGE listings a ZRANGE by rank, so that no
 * command reads a large market whole (a long command holds every client of Redis). Meant
 * for a quiet market: a listing made or taken meanwhile moves the ranks of those after it.
 * Returns MARKET_OK, ERR_STORE (c's errstr says why) or ERR_NOMEM. */
static int market_pages_read(market_conn *c, const market__realm *rl, struct zpages *z) {
    market__buf cmd = {0};
    int rc = MARKET_OK;
    for (size_t at = 0;; at += AUDIT_PAGE) {
        char start[24], stop[24];
        snprintf(start, sizeof start, "%zu", at);
        snprintf(stop, sizeof stop, "%zu", at + AUDIT_PAGE - 1);
        market__buf_reset(&cmd);
        market__rd_market_range(&cmd, rl, start, stop);
        redisReply *r = market__command_buf(c, &cmd, &rc);
        if (!r) break;
        if (!market__reply_array(r, SIZE_MAX, 1)) {
            rc = market__fail_reply(c, "reading the market", r);
        } else if (market__grow((void **)&z->p, &z->cap, z->n + 1, sizeof *z->p) < 0) {
            rc = MARKET_ERR_NOMEM;
        } else {
            z->p[z->n++] = r;
            z->listings += market__reply_len(r) / 2;
            if (market__reply_len(r) / 2 < AUDIT_PAGE) break;
            continue;
        }
        freeReplyObject(r);
        break;
    }
    market__buf_free(&cmd);
    return rc;
}

/* Frees z's pages. This function can't fail. */
static void zpages_free(struct zpages *z) {
    for (size_t i = 0; i < z->n; i++)
        freeReplyObject(z->p[i]);
    free(z->p);
}

/* Orders two string replies by their bytes. */
static int cmp_reply_str(const void *a, const void *b) {
    size_t xl = 0, yl = 0;
    const char *x = market__reply_str(*(const redisReply *const *)a, &xl);
    const char *y = market__reply_str(*(const redisReply *const *)b, &yl);
    int c = memcmp(x, y, xl < yl ? xl : yl);
    return c ? c : (xl > yl) - (xl < yl);
}

static int audit_funds(redisReply *r, void *ud) {
    market_audit_report *a = ud;
    market__party p = market__reply_party(r);
    if (p.known == MARKET__ABSENT) return MARKET_OK; /* a users: hash without funds */
    if (p.known != MARKET__PRESENT) return MARKET_ERR_STORE;
    int64_t f = p.funds;
    a->players++;
    if (f < 0) a->negative_funds++;
    if (__builtin_add_overflow(a->total_funds, f, &a->total_funds)) return MARKET_ERR_OVERFLOW;
    return MARKET_OK;
}

static int audit_inventory(redisReply *r, void *ud) {
    struct itemlist *l = ud;
    if (!market__reply_array(r, SIZE_MAX, 0)) return MARKET_ERR_STORE;
    for (size_t i = 0; i < market__reply_len(r); i++) {
        size_t len = 0;
        const char *s = market__reply_str(market__reply_at(r, i), &len);
        if (!s) return MARKET_ERR_STORE;
        int rc = itemlist_add(l, s, len);
        if (rc < 0) return rc;
    }
    return MARKET_OK;
}

static int cmp_id(const void *a, const void *b) {
    return strcmp(a, b);
}

static int cmp_str_p(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds to act, as "N|<member>", every member of realm's names index (idx:{r}:names), read
 * AUDIT_PAGE members a ZRANGE BYLEX, and counts in *mismatch the members that are no
 * string. Returns MARKET_OK, ERR_STORE or ERR_NOMEM. */
static int names_read(market_conn *c, const char *realm, struct market__strs *act,
                      size_t *mismatch) {
    char key[MARKET__IDX_KEY_MAX], lo[MARKET__NAMES_BOUND_MAX] = "-", count[24];
    market__idx_names_key(key, realm);
    snprintf(count, sizeof count, "%d", AUDIT_PAGE);
    market__buf cmd = {0};
    int rc = MARKET_OK;
    for (size_t got = AUDIT_PAGE; rc == MARKET_OK && got == AUDIT_PAGE;) {
        market__buf_reset(&cmd);
        market__rd_names_from(&cmd, key, lo, count);
        redisReply *r = market__command_buf(c, &cmd, &rc);
        if (!r) break;
        got = market__reply_len(r);
        if (!market__reply_array(r, SIZE_MAX, 0))
            rc = market__fail_reply(c, "reading the names index", r);
        for (size_t i = 0; i < got && rc == MARKET_OK; i++) {
            size_t len = 0;
            const char *m = market__reply_str(market__reply_at(r, i), &len);
            if (!m || strlen(m) != len || len + 2 > sizeof lo) {
                (*mismatch)++;
                got = 0; /* no next page to start after it */
                continue;
            }
            rc = market__strs_add(act, "N|%s", m);
            if (i + 1 == got) snprintf(lo, sizeof lo, "(%s", m);
        }
        freeReplyObject(r);
    }
    market__buf_free(&cmd);
    return rc;
}

/* Adds to *mismatch how far realm's search indexes are from its market, z (its pages of
 * ZRANGE market:{r} ... WITHSCORES): the entries of listings that they lack or hold at another
 * price (a listing that cannot be read lacks both of its), entries no listing has (also
 * members and scores that are not a listing's, keys that are no zset), and each key of
 * the former layout still there (market__idx_legacy_keys()); and the names index's members
 * against the listings' (names_read(), "N|<member>"). Both sides, written
 * "<kind>|<id>|<member>|<price>", are sorted and walked once; the index keys are read
 * MARKET__KEYS_CHUNK a round trip. Returns MARKET_OK, ERR_STORE or ERR_NOMEM. */
static int audit_index(market_conn *c, const char *realm, const struct zpages *z,
                       size_t *mismatch) {
    struct market__strs exp = {0}, act = {0};
    struct market__keylist keys = {0};
    struct market__idx_read *r = calloc(1, sizeof *r);
    char legacy[3][MARKET__KEY_MAX];
    market__idx_legacy_keys(realm, legacy);
    const char *legacy_p[3] = {legacy[0], legacy[1], legacy[2]};
    int rc = MARKET_ERR_NOMEM;
    if (r) {
        market__rd_exists(&r->b, legacy_p, 3);
        rc = market__pipeline_buf(c, &r->b);
    }
    if (rc < 0) goto out;
    int64_t legacy_n = market__reply_count(r->b.rep[0]);
    if (legacy_n >= 0)
        *mismatch += (size_t)legacy_n;
    else
        rc = market__fail_reply(c, "looking for the former search indexes", r->b.rep[0]);
    market__replies_free(r->b.rep, 1);
    for (size_t pg = 0, i = 0; rc == MARKET_OK && pg < z->n; i = 0, pg++)
        for (; rc == MARKET_OK && i < market__reply_len(z->p[pg]) / 2; i++) {
            const redisReply *zp = z->p[pg];
            market_listing l;
            market__idx_entry e;
            if (market__listing_read(market__reply_at(zp, 2 * i), market__reply_at(zp, 2 * i + 1),
                                     &l) < 0) {
                *mismatch += MARKET__IDX_KINDS;
                continue;
            }
            const char *id[MARKET__IDX_KINDS] = {
                [MARKET__IDX_ITEM] = l.item, [MARKET__IDX_SELLER] = l.seller};
            market__idx_entry_init(&e, realm, l.item, l.seller, l.price);
            for (int k = 0; k < MARKET__IDX_KINDS && rc == MARKET_OK; k++)
                rc = market__strs_add(&exp, "%d|%s|%s|%s", k, id[k], e.member[k], e.score);
            if (rc == MARKET_OK) rc = market__strs_add(&exp, "N|%s", e.name);
        }
    if (rc == MARKET_OK) rc = names_read(c, realm, &act, mismatch);
    if (rc == MARKET_OK) rc = market__idx_keys_scan(c, realm, &keys);
    for (size_t at = 0; rc == MARKET_OK && at < keys.n; at += MARKET__KEYS_CHUNK) {
        size_t n = keys.n - at < MARKET__KEYS_CHUNK ? keys.n - at : MARKET__KEYS_CHUNK;
        if ((rc = market__idx_read(c, r, NULL, keys.keys + at, n)) < 0) break;
        for (size_t i = 0; i < n && rc == MARKET_OK; i++) {
            const redisReply *x = r->rep[i];
            int kind;
            const char *id = market__idx_key_id(realm, keys.keys[at + i], &kind);
            if (!market__reply_array(x, SIZE_MAX, 1)) { /* not a zset: no index */
                (*mismatch)++;
                continue;
            }
            for (size_t j = 0; j < market__reply_len(x) && rc == MARKET_OK; j += 2) {
                size_t mlen = 0, sclen = 0;
                const char *m = market__reply_str(market__reply_at(x, j), &mlen);
                const char *sc = market__reply_str(market__reply_at(x, j + 1), &sclen);
                int64_t price;
                if (!m || strlen(m) != mlen || !sc || market__parse_price(sc, sclen, &price) < 0)
                    (*mismatch)++;
                else
                    rc = market__strs_add(&act, "%d|%s|%s|%lld", kind, id, m, (long long)price);
            }
        }
        market__replies_free(r->rep, r->n);
    }
    if (rc == MARKET_OK && (rc = market__strs_index(&exp)) == MARKET_OK)
        rc = market__strs_index(&act);
    if (rc < 0) goto out;
    qsort(exp.p, exp.n, sizeof *exp.p, cmp_str_p);
    qsort(act.p, act.n, sizeof *act.p, cmp_str_p);
    size_t i = 0, j = 0;
    while (i < exp.n || j < act.n) {
        int d = i == exp.n ? 1 : j == act.n ? -1 : strcmp(exp.p[i], act.p[j]);
        if (d <= 0) i++;
        if (d >= 0) j++;
        if (d != 0) (*mismatch)++;
    }
out:
    market__strs_free(&exp);
    market__strs_free(&act);
    market__keylist_free(&keys);
    if (r) market__idx_read_free(r);
    free(r);
    return rc;
}

/* What audit_units() gathers: the items sales sell (sorted, for bsearch). */
struct units {
    market_audit_report *a;
    struct itemlist sale_items;
};

static int audit_sale(redisReply *r, void *ud) {
    struct units *u = ud;
    market_audit_report *a = u->a;
    int64_t v[3];
    char item[MARKET_ID_MAX + 1];
    int known = market__reply_sale_counts(r, item, v);
    if (known == MARKET__ABSENT) return MARKET_OK; /* went away meanwhile */
    if (known != MARKET__PRESENT) return MARKET_ERR_STORE;
    int64_t initial = v[0], stock = v[1], sold = v[2];
    a->sales++;
    if (sold > initial || stock < 0) a->sales_oversold++;
    if (stock + sold != initial) a->sales_unbalanced++;
    if (__builtin_add_overflow(a->units_in_sales, stock, &a->units_in_sales) ||
        __builtin_add_overflow(a->units_sold_by_sales, sold, &a->units_sold_by_sales))
        return MARKET_ERR_OVERFLOW;
    return itemlist_add(&u->sale_items, item, strlen(item));
}

static int audit_stacks(redisReply *r, void *ud) {
    struct units *u = ud;
    market_audit_report *a = u->a;
    market_stack *s;
    size_t n;
    int rc = market__reply_stacks(r, &s, &n);
    for (size_t i = 0; i < n && rc == MARKET_OK; i++) {
        if (__builtin_add_overflow(a->units_in_stacks, s[i].count, &a->units_in_stacks) ||
            (u->sale_items.n &&
             bsearch(s[i].item, u->sale_items.ids, u->sale_items.n, sizeof *u->sale_items.ids,
                     cmp_id) &&
             __builtin_add_overflow(a->sale_units_in_stacks, s[i].count, &a->sale_units_in_stacks)))
            rc = MARKET_ERR_OVERFLOW;
    }
    free(s);
    return rc;
}

/* Adds the units of realm's sales and stacks to *a (see market_audit_report).
 * Returns MARKET_OK, ERR_STORE, ERR_OVERFLOW or ERR_NOMEM. */
static int audit_units(market_conn *c, const char *realm, market_audit_report *a) {
    struct market__keylist sales = {0}, stacks = {0};
    struct units u = {a, {0}};
    char pattern[MARKET__KEY_MAX];
    market__key_sale(pattern, realm, "*");
    int rc = market__scan_keys(c, pattern, &sales);
    size_t kept = 0; /* the sales, not their bought hashes (ids hold no ':') */
    for (size_t i = 0; rc == MARKET_OK && i < sales.n; i++) {
        size_t len = strlen(sales.keys[i]);
        if (len > 7 && strcmp(sales.keys[i] + len - 7, ":bought") == 0)
            free(sales.keys[i]);
        else
            sales.keys[kept++] = sales.keys[i];
    }
    if (rc == MARKET_OK) sales.n = kept;
    if (rc == MARKET_OK && (rc = market__connect(c)) == MARKET_OK) {
        struct market__bulk b = {c, 0, 0};
        market__buf cmd = {0};
        for (size_t i = 0; i < sales.n; i++) {
            market__rd_sale_counts(&cmd, sales.keys[i]);
            market__bulk_add_buf(&b, &cmd);
        }
        market__buf_free(&cmd);
        if (b.failed) {
            rc = market__bulk_finish(&b);
        } else {
            for (size_t i = 0; i < b.sent; i++) {
                void *r = NULL;
                if (redisGetReply(c->ctx, &r) != REDIS_OK) {
                    market__drop(c);
                    rc = MARKET_ERR_STORE;
                    break;
                }
                int frc = rc == MARKET_OK ? audit_sale(r, &u) : rc;
                freeReplyObject(r);
                if (frc < 0) rc = frc; /* keep reading: the replies must be drained */
            }
        }
    }
    if (u.sale_items.n) qsort(u.sale_items.ids, u.sale_items.n, sizeof *u.sale_items.ids, cmp_id);
    market__key_stacks(pattern, realm, "*");
    if (rc == MARKET_OK) rc = market__scan_keys(c, pattern, &stacks);
    if (rc == MARKET_OK) rc = per_key(c, &stacks, market__rd_stacks_all, audit_stacks, &u);
    market__keylist_free(&sales);
    market__keylist_free(&stacks);
    free(u.sale_items.ids);
    return rc;
}

static int audit_escrow(redisReply *r, void *ud) {
    market_audit_report *a = ud;
    int64_t v = 0;
    if (!market__reply_nil(r) && market__reply_i64(r, &v) < 0) return MARKET_ERR_STORE;
    if (v < 0) a->negative_escrow++;
    if (__builtin_add_overflow(a->total_escrow, v, &a->total_escrow)) return MARKET_ERR_OVERFLOW;
    return MARKET_OK;
}

static int audit_order(redisReply *r, void *ud) {
    market_audit_report *a = ud;
    market_bid bid;
    int64_t escrow;
    if (market__reply_order(r, 1, &bid) != MARKET_OK) return MARKET_ERR_STORE;
    a->orders++;
    if (__builtin_mul_overflow(bid.left, bid.price, &escrow) ||
        __builtin_add_overflow(a->orders_escrow, escrow, &a->orders_escrow))
        return MARKET_ERR_OVERFLOW;
    return MARKET_OK;
}

static int audit_card(redisReply *r, void *ud) {
    size_t *n = ud;
    int64_t v = market__reply_count(r);
    if (v < 0) return MARKET_ERR_STORE;
    *n += (size_t)v;
    return MARKET_OK;
}

/* What audit_auction() adds to. */
struct auction_audit {
    market_audit_report *a;
    struct itemlist *items;
};

static int audit_auction(redisReply *r, void *ud) {
    struct auction_audit *x = ud;
    market_auction au;
    int64_t q, escrow;
    if (market__reply_auction(r, 1, &au) != MARKET_OK) {
        x->a->auctions_unreadable++;
        return MARKET_OK;
    }
    if (au.state != MARKET_AUCTION_OPEN) return MARKET_OK; /* its goods went on */
    x->a->auctions++;
    q = au.quantity ? au.quantity : 1;
    if (au.quantity == 0) {
        x->a->items_in_auctions++;
        if (itemlist_add(x->items, au.item, strlen(au.item)) < 0) return MARKET_ERR_NOMEM;
    } else if (__builtin_add_overflow(x->a->units_in_auctions, au.quantity,
                                      &x->a->units_in_auctions)) {
        return MARKET_ERR_OVERFLOW;
    }
    if (__builtin_mul_overflow(au.bid, q, &escrow) ||
        __builtin_add_overflow(x->a->auctions_escrow, escrow, &x->a->auctions_escrow))
        return MARKET_ERR_OVERFLOW;
    return MARKET_OK;
}

/* Adds realm's open auctions to *a, and their unique items to items. Returns MARKET_OK,
 * ERR_STORE, ERR_OVERFLOW or ERR_NOMEM. */
static int audit_auctions(market_conn *c, const char *realm, market_audit_report *a,
                          struct itemlist *items) {
    struct market__keylist keys = {0};
    char pattern[MARKET__KEY_MAX];
    market__key_auction(pattern, realm, -1);
    int rc = market__scan_keys(c, pattern, &keys);
    struct auction_audit x = {a, items};
    if (rc == MARKET_OK) rc = per_key(c, &keys, market__rd_auction_at, audit_auction, &x);
    market__keylist_free(&keys);
    return rc;
}

/* Adds the escrow of realm's players (users) and its buy orders to *a: the
 * escrow, the orders' units left times their price, and the orders that
 * their books and their buyers' lists do not hold once each. Returns
 * MARKET_OK, ERR_STORE, ERR_OVERFLOW or ERR_NOMEM. */
static int audit_orders(market_conn *c, const char *realm, const struct market__keylist *users,
                        market_audit_report *a) {
    struct market__keylist orders = {0}, books = {0}, bids = {0};
    char pattern[MARKET__KEY_MAX];
    size_t in_books = 0, in_bids = 0;
    int rc = per_key(c, users, market__rd_escrow, audit_escrow, a);
    market__key_order(pattern, realm, -1);
    if (rc == MARKET_OK) rc = market__scan_keys(c, pattern, &orders);
    market__key_book(pattern, realm, "*");
    if (rc == MARKET_OK) rc = market__scan_keys(c, pattern, &books);
    market__key_bids(pattern, realm, "*");
    if (rc == MARKET_OK) rc = market__scan_keys(c, pattern, &bids);
    if (rc == MARKET_OK) rc = per_key(c, &orders, market__rd_order_at, audit_order, a);
    if (rc == MARKET_OK) rc = per_key(c, &books, market__rd_zcard, audit_card, &in_books);
    if (rc == MARKET_OK) rc = per_key(c, &bids, market__rd_zcard, audit_card, &in_bids);
    a->orders_misbooked = (in_books > a->orders ? in_books - a->orders : a->orders - in_books) +
                          (in_bids > a->orders ? in_bids - a->orders : a->orders - in_bids);
    market__keylist_free(&orders);
    market__keylist_free(&books);
    market__keylist_free(&bids);
    return rc;
}

/* Reads the whole of realm (SCAN, no lock) and fills *out: players, total
 * and negative funds, items held, items listed, items found in more
 * than one place, search index entries that disagree with the market
 * (index_mismatch), the units of stackable goods and flash sales (stacks,
 * listed units, stock left, sold, and sales that sold more than they had),
 * and the escrow of buy orders (audit_orders()).
 * Meant for tests, load tests and operators on a quiet
 * market. Returns MARKET_OK, ERR_INVALID, ERR_STORE, ERR_OVERFLOW (funds
 * sum) or ERR_NOMEM. */
int market_audit(market_conn *c, const char *realm, market_audit_report *out) {
    if (!c || !out || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    struct market__keylist users = {0}, invs = {0};
    struct itemlist items = {0};
    struct zpages z = {0};
    redisReply *u = NULL;
    const redisReply **goods = NULL; /* the listings of units (members of units:), sorted */
    market__buf cmd = {0};
    char pattern[MARKET__KEY_MAX];
    market__realm rl;
    market__realm_init(&rl, realm);
    int rc = market__route(c, realm);
    if (rc < 0) goto out;
    market__key_user(pattern, realm, "*");
    if ((rc = market__scan_keys(c, pattern, &users)) < 0) goto out;
    market__key_inventory(pattern, realm, "*");
    if ((rc = market__scan_keys(c, pattern, &invs)) < 0) goto out;
    if ((rc = per_key(c, &users, market__rd_funds, audit_funds, out)) < 0) goto out;
    if ((rc = per_key(c, &invs, market__rd_items, audit_inventory, &items)) < 0) goto out;
    out->items_held = items.n;
    market__rd_listing_units_all(&cmd, &rl);
    if (!(u = market__command_buf(c, &cmd, &rc)) || !market__reply_array(u, SIZE_MAX, 1) ||
        !(goods = malloc((market__reply_len(u) / 2 + 1) * sizeof *goods))) {
        rc = u && market__reply_array(u, SIZE_MAX, 0) ? MARKET_ERR_NOMEM
             : u                                      ? MARKET_ERR_STORE
                                                      : rc;
        goto out;
    }
    size_t n_goods = 0, len;
    for (size_t i = 0; i + 1 < market__reply_len(u); i += 2) {
        int64_t v = market__reply_units(market__reply_at(u, i + 1));
        if (!market__reply_str(market__reply_at(u, i), &len) || v <= 0 ||
            out->units_listed > INT64_MAX - v) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
        out->units_listed += v;
        goods[n_goods++] = market__reply_at(u, i);
    }
    qsort(goods, n_goods, sizeof *goods, cmp_reply_str);
    if ((rc = market_pages_read(c, &rl, &z)) < 0) goto out;
    for (size_t pg = 0; pg < z.n; pg++)
        for (size_t i = 0; i < market__reply_len(z.p[pg]); i += 2) {
            const redisReply *e = market__reply_at(z.p[pg], i);
            const char *s = market__reply_str(e, &len);
            const char *dot = s ? memchr(s, '.', len) : NULL;
            if (!dot) {
                rc = MARKET_ERR_STORE;
                goto out;
            }
            if (bsearch(&e, goods, n_goods, sizeof *goods, cmp_reply_str)) continue; /* units */
            if ((rc = itemlist_add(&items, s, (size_t)(dot - s))) < 0) goto out;
        }
    out->items_listed = z.listings;
    out->goods_listed = n_goods;
    if ((rc = audit_auctions(c, realm, out, &items)) < 0) goto out;
    if (items.n) qsort(items.ids, items.n, sizeof *items.ids, cmp_id);
    for (size_t i = 1; i < items.n; i++)
        if (strcmp(items.ids[i - 1], items.ids[i]) == 0 &&
            (i < 2 || strcmp(items.ids[i - 2], items.ids[i]) != 0))
            out->items_misplaced++;
    if ((rc = audit_index(c, realm, &z, &out->index_mismatch)) == MARKET_OK)
        rc = audit_units(c, realm, out);
    if (rc == MARKET_OK) rc = audit_orders(c, realm, &users, out);
out:
    zpages_free(&z);
    if (u) freeReplyObject(u);
    free(goods);
    market__buf_free(&cmd);
    market__keylist_free(&users);
    market__keylist_free(&invs);
    free(items.ids);
    return rc;
}
