/* market_reindex.c - rebuilding a realm's search indexes from its market.
 *
 * market_reindex() rebuilds a realm's indexes (market_index.c names them) from its
 * market, also while the service runs: for stores seeded before the indexes existed or in
 * their former layout, or found off by the audit (market_audit.c), or from before the
 * names index (idx:{r}:names) existed. It works in rounds,
 * each under a WATCH and written in one MULTI/EXEC, and runs a round again when the
 * market changed meanwhile.
 */
#include "market/market.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_bulk.h"

#define REINDEX_CHUNK 1000 /* listings read and indexed per round trip by market_reindex() */
#define REINDEX_TRIES 10   /* the most times a round of market_reindex() is run */

/* The scratch of market_reindex(). */
struct reindex {
    char lo[32];          /* step 2: the lowest price left ("-inf", "<p>", "(<p>"); "": none */
    char names_lo[MARKET__NAMES_BOUND_MAX]; /* step 4: the names left ("-", "(<m>"); "": none */
    market__idx_entry *e; /* step 2: the entries of the listings a round read */
    size_t cap_e;
    market__buf read;           /* step 2: a round's reads */
    market__buf look;           /* steps 3, 4: a round's reads of prices in market:{r} */
    market__buf write;          /* a round's MULTI ... EXEC */
    struct market__idx_read rd; /* step 3: a round's WATCH and reads of index keys */
    struct market__strs mm;     /* step 3: the market member of each index member read */
};

/* Judges round tries (1, 2, ...) of market_reindex(), which returned *rc: 1 when it is to
 * run again (its EXEC was aborted, or its slot moved, and it ran fewer than REINDEX_TRIES
 * times), else 0 with *rc the round's result: ERR_CONFLICT after the last abort, ERR_STORE
 * after the last move. */
static int reindex_again(market_conn *c, int *rc, int tries) {
    if (*rc != MARKET__TXN_ABORTED && *rc != MARKET__REDIRECTED) return 0;
    if (tries < REINDEX_TRIES) {
        if (*rc == MARKET__REDIRECTED) market__redirect_pause(c, tries);
        return 1;
    }
    *rc = *rc == MARKET__TXN_ABORTED ? MARKET_ERR_CONFLICT : MARKET_ERR_STORE;
    return 0;
}

/* Sends x->write's commands (MULTI ... EXEC) and judges the EXEC. Returns MARKET_OK,
 * MARKET__TXN_ABORTED (a watched key changed: nothing written), MARKET__REDIRECTED, or
 * ERR_STORE (Redis failed or refused a write; c's errstr says which), ERR_NOMEM. */
static int reindex_commit(market_conn *c, struct reindex *x) {
    size_t n = x->write.n;
    int rc = market__pipeline_buf(c, &x->write);
    if (rc < 0) return rc;
    redisReply **rep = x->write.rep;
    const redisReply *exec = rep[n - 1], *err = market__reply_error(rep, n);
    if (!err) err = market__reply_error_in(exec);
    if (market__reply_nil(exec))
        rc = MARKET__TXN_ABORTED;
    else if (err || !market__reply_array(exec, SIZE_MAX, 0))
        rc = market__fail_reply(c, "rebuilding the search indexes", err ? err : exec);
    market__replies_free(rep, n);
    return rc;
}

/* Reads the listings of z, a ZRANGE WITHSCORES of market:{r}, into x->e[0..*n): their
 * entries in the indexes. Returns MARKET_OK, or ERR_STORE (z is no such reply, or holds an
 * entry that is not a listing; c's errstr says which), ERR_NOMEM. */
static int fill_read(market_conn *c, const market__realm *rl, struct reindex *x,
                     const redisReply *z, size_t *n) {
    if (!market__reply_array(z, SIZE_MAX, 1))
        return market__fail_reply(c, "rebuilding the search indexes", z);
    *n = market__reply_len(z) / 2;
    if (market__grow((void **)&x->e, &x->cap_e, *n ? *n : 1, sizeof *x->e) < 0)
        return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < *n; i++) {
        const redisReply *m = market__reply_at(z, 2 * i);
        market_listing l;
        if (market__listing_read(m, market__reply_at(z, 2 * i + 1), &l) < 0) {
            size_t len = 0; /* no text (nil, a number): "" */
            const char *s = market__reply_str(m, &len);
            return market__fail(c, "%s holds an entry that is not a listing: %.*s", rl->market,
                                (int)(len < 80 ? len : 80), s ? s : "");
        }
        market__idx_entry_init(&x->e[i], rl->id, l.item, l.seller, l.price);
    }
    return MARKET_OK;
}

/* A round of step 2 of market_reindex(): under a WATCH of market:{r}, reads its listings
 * priced x->lo and up, REINDEX_CHUNK of them but whole prices (all of the last price read,
 * or none of it), and writes their entries in both indexes in one MULTI/EXEC; then moves
 * x->lo past them ("" when none are left). Stores how many it indexed in *n. Returns
 * MARKET_OK, MARKET__TXN_ABORTED (x->lo unchanged), MARKET__REDIRECTED, or ERR_STORE (as
 * fill_read()), ERR_NOMEM. */
static int fill_round(market_conn *c, const market__realm *rl, struct reindex *x, size_t *n) {
    char count[24], next[sizeof x->lo] = "", price[24];
    snprintf(count, sizeof count, "%d", REINDEX_CHUNK);
    market__buf_reset(&x->read);
    market__rd_watch_begin(&x->read);
    market__buf_arg(&x->read, rl->market);
    market__buf_end(&x->read, 0);
    market__rd_market_from(&x->read, rl, x->lo, count);
    int rc = market__pipeline_buf(c, &x->read);
    if (rc < 0) return rc;
    redisReply **rep = x->read.rep;
    const redisReply *err = market__reply_error(rep, 2);
    rc = err ? market__fail_reply(c, "rebuilding the search indexes", err)
             : fill_read(c, rl, x, rep[1], n);
    market__replies_free(rep, 2);
    if (rc < 0) return rc;
    if (*n == 0) { /* nothing left */
        c->unwatch = 1;
        x->lo[0] = '\0';
        return MARKET_OK;
    }
    if (*n == REINDEX_CHUNK) { /* more may follow: end at a whole price */
        snprintf(price, sizeof price, "%s", x->e[*n - 1].score);
        size_t keep = *n - 1;
        while (keep > 0 && strcmp(x->e[keep - 1].score, price) == 0)
            keep--;
        if (keep) { /* the next round starts at the last price read */
            snprintf(next, sizeof next, "%s", price);
            *n = keep;
        } else { /* all were of one price: all of that price, and the next after it */
            snprintf(next, sizeof next, "(%s", price);
            market__buf_reset(&x->read);
            market__rd_market_at(&x->read, rl, price);
            if ((rc = market__pipeline_buf(c, &x->read)) < 0) return rc;
            rep = x->read.rep;
            rc = market__reply_err(rep[0])
                     ? market__fail_reply(c, "rebuilding the search indexes", rep[0])
                     : fill_read(c, rl, x, rep[0], n);
            market__replies_free(rep, 1);
            if (rc < 0) return rc;
        }
    }
    market__buf_reset(&x->write);
    market__fx_multi(&x->write);
    for (size_t i = 0; i < *n; i++)
        market__fx_idx_add(&x->write, &x->e[i]);
    market__fx_exec(&x->write);
    if ((rc = reindex_commit(c, x)) == MARKET_OK) snprintf(x->lo, sizeof x->lo, "%s", next);
    return rc;
}

/* A round of step 3 of market_reindex() over the index keys keys[0..n) (n <= MARKET__KEYS_CHUNK):
 * under a WATCH of market:{r} and of the keys, reads their members and scores, then the
 * price in market:{r} of each member's listing, and in one MULTI/EXEC removes the members
 * whose listing is gone (or is no listing) and gives the others their listing's price
 * where they have another. Returns MARKET_OK, MARKET__TXN_ABORTED, MARKET__REDIRECTED, or
 * ERR_STORE (Redis failed, or a key is no zset; c's errstr says which), ERR_NOMEM. */
static int sweep_round(market_conn *c, const market__realm *rl, struct reindex *x,
                       char *const *keys, size_t n) {
    size_t nl = 0;
    int rc = market__idx_read(c, &x->rd, rl->market, keys, n);
    if (rc < 0) return rc;
    redisReply **z = x->rd.rep + 1; /* z[i]: the members and scores of keys[i] */
    const redisReply *bad = market__reply_error(x->rd.rep, x->rd.n);
    x->mm.len = x->mm.n = 0;
    for (size_t i = 0; i < n && !bad && rc == MARKET_OK; i++) {
        int kind;
        const char *id = market__idx_key_id(rl->id, keys[i], &kind);
        if (!market__reply_array(z[i], SIZE_MAX, 1)) bad = z[i];
        for (size_t j = 0; !bad && j < market__reply_len(z[i]) && rc == MARKET_OK; j += 2) {
            const redisReply *m = market__reply_at(z[i], j);
            const char *ms = market__reply_str(m, NULL);
            if (!ms)
                bad = m;
            else if (kind == MARKET__IDX_ITEM)
                rc = market__strs_add(&x->mm, "%s.%s", id, ms);
            else
                rc = market__strs_add(&x->mm, "%s.%s", ms, id);
        }
    }
    if (bad) rc = market__fail_reply(c, "reading a search index", bad);
    if (rc == MARKET_OK) rc = market__strs_index(&x->mm);
    if (rc == MARKET_OK && x->mm.n) {
        market__buf_reset(&x->look);
        for (size_t g = 0; g < x->mm.n; g++)
            market__rd_price(&x->look, rl, x->mm.p[g]);
        if ((rc = market__pipeline_buf(c, &x->look)) == MARKET_OK) nl = x->look.n;
        if (rc == MARKET_OK && (bad = market__reply_error(x->look.rep, nl)))
            rc = market__fail_reply(c, "reading the market", bad);
    }
    if (rc == MARKET_OK) {
        market__buf_reset(&x->write);
        market__fx_multi(&x->write);
        for (size_t i = 0, g = 0; i < n; i++)
            for (size_t j = 0; j < market__reply_len(z[i]); j += 2, g++) {
                size_t len = 0;
                const char *m = market__reply_str(market__reply_at(z[i], j), NULL);
                const char *sc = market__reply_str(market__reply_at(z[i], j + 1), &len);
                const redisReply *now = x->look.rep[g];
                int64_t want = market__reply_price(now), have;
                if (want <= 0) /* no listing */
                    market__fx_idx_drop(&x->write, keys[i], m);
                else if (!sc || market__parse_price(sc, len, &have) < 0 || have != want)
                    market__fx_idx_put(&x->write, keys[i], market__reply_str(now, NULL), m);
            }
        market__fx_exec(&x->write);
        if (x->write.n > 2)
            rc = reindex_commit(c, x);
        else
            c->unwatch = 1; /* all were right */
    }
    market__replies_free(x->look.rep, nl);
    market__replies_free(x->rd.rep, x->rd.n);
    return rc;
}

/* Reads reply z of a round of step 4 (a ZRANGE BYLEX of the names index): its members
 * into x->look, as a read of their prices in market:{r}. Returns MARKET_OK, or ERR_STORE
 * (z is no such reply; c's errstr says so). */
static int names_look(market_conn *c, const market__realm *rl, struct reindex *x,
                      const redisReply *z) {
    const redisReply *bad = market__reply_array(z, SIZE_MAX, 0) ? NULL : z;
    for (size_t i = 0; !bad && i < market__reply_len(z); i++)
        if (!market__reply_str(market__reply_at(z, i), NULL)) bad = market__reply_at(z, i);
    if (bad) return market__fail_reply(c, "reading the names index", bad);
    market__buf_reset(&x->look);
    market__rd_prices_begin(&x->look, rl);
    for (size_t i = 0; i < market__reply_len(z); i++)
        market__buf_arg(&x->look, market__reply_str(market__reply_at(z, i), NULL));
    market__buf_end(&x->look, 1);
    return MARKET_OK;
}

/* A round of step 4 of market_reindex(): under a WATCH of market:{r}, reads the next
 * REINDEX_CHUNK members of the names index from x->names_lo on, and each one's price in
 * market:{r}, and in one MULTI/EXEC removes the members whose listing is gone (or that
 * are no listing); then moves x->names_lo past them ("" when none are left). Returns
 * MARKET_OK, MARKET__TXN_ABORTED (x->names_lo unchanged), MARKET__REDIRECTED, or ERR_STORE
 * (Redis failed, or the names index is no zset; c's errstr says which), ERR_NOMEM. */
static int names_round(market_conn *c, const market__realm *rl, struct reindex *x) {
    char count[24], key[MARKET__IDX_KEY_MAX];
    snprintf(count, sizeof count, "%d", REINDEX_CHUNK);
    market__idx_names_key(key, rl->id);
    market__buf_reset(&x->read);
    market__rd_watch_begin(&x->read);
    market__buf_arg(&x->read, rl->market);
    market__buf_end(&x->read, 0);
    market__rd_names_from(&x->read, key, x->names_lo, count);
    int rc = market__pipeline_buf(c, &x->read);
    if (rc < 0) return rc;
    redisReply **rep = x->read.rep;
    const redisReply *err = market__reply_error(rep, 2), *z = rep[1];
    size_t nl = 0;
    rc = err ? market__fail_reply(c, "rebuilding the names index", err) : names_look(c, rl, x, z);
    if (rc == MARKET_OK && market__reply_len(z) == 0) { /* nothing left */
        c->unwatch = 1;
        x->names_lo[0] = '\0';
        goto out;
    }
    if (rc == MARKET_OK && (rc = market__pipeline_buf(c, &x->look)) == MARKET_OK) nl = 1;
    if (rc == MARKET_OK && (err = market__reply_error(x->look.rep, 1)))
        rc = market__fail_reply(c, "reading the market", err);
    else if (rc == MARKET_OK && !market__reply_array(x->look.rep[0], market__reply_len(z), 0))
        rc = market__fail_reply(c, "reading the market", x->look.rep[0]);
    if (rc < 0) goto out;
    market__buf_reset(&x->write);
    market__fx_multi(&x->write);
    for (size_t i = 0; i < market__reply_len(z); i++)
        if (!market__reply_str(market__reply_at(x->look.rep[0], i), NULL)) /* no listing */
            market__fx_idx_drop(&x->write, key, market__reply_str(market__reply_at(z, i), NULL));
    market__fx_exec(&x->write);
    if (x->write.n > 2)
        rc = reindex_commit(c, x);
    else
        c->unwatch = 1; /* all were listings */
    if (rc == MARKET_OK && market__reply_len(z) < REINDEX_CHUNK)
        x->names_lo[0] = '\0';
    else if (rc == MARKET_OK)
        snprintf(x->names_lo, sizeof x->names_lo, "(%s",
                 market__reply_str(market__reply_at(z, market__reply_len(z) - 1), NULL));
out:
    market__replies_free(x->look.rep, nl);
    market__replies_free(rep, 2);
    return rc;
}

/* Rebuilds realm's search indexes from its market, correctly while the service runs:
 *   1. deletes the indexes of the former layout (idx:{r}:all, idx:{r}:item and
 *      idx:{r}:seller, one big zset each);
 *   2. puts every listing of market:{r} in both of its indexes (idx:{r}:item:<item> and
 *      idx:{r}:seller:<seller>, scored by its price), a round at a time: under a WATCH of
 *      market:{r}, the next REINDEX_CHUNK or so listings in price order (by price, not by
 *      rank: a listing that goes meanwhile would move the ranks of those after it, and one
 *      could be skipped), and their entries written in one MULTI/EXEC;
 *   3. sweeps the index keys (idx:{r}:item:* and idx:{r}:seller:*, by SCAN), MARKET__KEYS_CHUNK a
 * round: under a WATCH of market:{r} and the keys, their members and each one's listing read, and
 * in one MULTI/EXEC the members whose listing is gone removed, the ones at another price given
 * their listing's;
 *   4. sweeps the names index (idx:{r}:names) in byte order, REINDEX_CHUNK members a round: under
 * a WATCH of market:{r}, the members read with their listings' prices, and in one MULTI/EXEC the
 * members whose listing is gone removed. A round whose EXEC is aborted (the market changed
 * meanwhile) runs again,
 * REINDEX_TRIES times at most; a listing added or changed meanwhile gets its entries from the write
 * that changes it, so at the end the indexes hold exactly the market's listings. Meant for a store
 * seeded before the indexes existed or in the former layout, or one whose audit finds
 * index_mismatch. Stores how many listings step 2 indexed in *listings (may be NULL; 0
 * on failure). Returns MARKET_OK, or ERR_INVALID (a bad realm), ERR_CONFLICT (a round was
 * aborted every time: the realm is too busy; what was written is right, but the rebuild is
 * not finished: run it again), ERR_STORE (Redis failed, or the market holds an entry that is
 * not a listing, or a key of the indexes is no zset; c's errstr says which; what was written
 * before stays), ERR_NOMEM. */
int market_reindex(market_conn *c, const char *realm, size_t *listings) {
    if (listings) *listings = 0;
    if (!c || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    struct reindex *x = calloc(1, sizeof *x);
    if (!x) return MARKET_ERR_NOMEM;
    struct market__keylist keys = {0};
    size_t count = 0, n = 0;
    char legacy[3][MARKET__KEY_MAX];
    market__idx_legacy_keys(realm, legacy);
    const char *legacy_p[3] = {legacy[0], legacy[1], legacy[2]};
    market__fx_unlink(&x->write, legacy_p, 3); /* step 1 */
    int rc = market__route(c, realm);
    if (rc == MARKET_OK) rc = market__pipeline_buf(c, &x->write);
    if (rc < 0) goto out;
    redisReply **rep = x->write.rep;
    if (market__reply_err(rep[0]))
        rc = market__fail_reply(c, "deleting the former search indexes", rep[0]);
    market__replies_free(rep, 1);
    snprintf(x->lo, sizeof x->lo, "-inf");
    while (rc == MARKET_OK && x->lo[0]) { /* step 2 */
        int tries = 0;
        do
            rc = fill_round(c, &rl, x, &n);
        while (reindex_again(c, &rc, ++tries));
        count += rc == MARKET_OK ? n : 0;
    }
    if (rc == MARKET_OK) rc = market__idx_keys_scan(c, realm, &keys); /* step 3 */
    for (size_t at = 0; rc == MARKET_OK && at < keys.n; at += MARKET__KEYS_CHUNK) {
        int tries = 0;
        do
            rc = sweep_round(c, &rl, x, keys.keys + at,
                             keys.n - at < MARKET__KEYS_CHUNK ? keys.n - at : MARKET__KEYS_CHUNK);
        while (reindex_again(c, &rc, ++tries));
    }
    snprintf(x->names_lo, sizeof x->names_lo, "-");
    while (rc == MARKET_OK && x->names_lo[0]) { /* step 4 */
        int tries = 0;
        do
            rc = names_round(c, &rl, x);
        while (reindex_again(c, &rc, ++tries));
    }
out:
    if (c->watching) c->unwatch = 1; /* a round failed after its WATCH */
    if (rc == MARKET_OK && listings) *listings = count;
    market__keylist_free(&keys);
    market__buf_free(&x->read);
    market__buf_free(&x->look);
    market__buf_free(&x->write);
    market__idx_read_free(&x->rd);
    market__strs_free(&x->mm);
    free(x->e);
    free(x);
    return rc;
}
