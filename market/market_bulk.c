/* market_bulk.c - reading and writing a whole realm, for the files that serve tools.
 *
 * Seeding (market_world.c), the audit (market_audit.c), rebuilding the indexes
 * (market_reindex.c) and the reads for tools (market_info.c) work on many keys at once,
 * with no lock: this file holds what they share. A bulk write appends commands to one
 * growing pipeline and checks the replies at the end; a market__pipe holds the arrays of
 * a pipeline built a round at a time; SCAN collects keys into a market__keylist; strings
 * kept end to end (market__strs) are sorted and compared; and the search indexes' keys
 * (market_index.c names them) are found and read whole. It calls the store layer
 * (market_store.c) and nothing above it.
 */
#include "market/market_bulk.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arrays and strings ---- */

/* Makes room in *arr (of *cap elements of elem bytes) for need elements: doubles *cap
 * (from 64) until need fits and reallocates. Returns 0, or -1 on out-of-memory (then *arr
 * and *cap are unchanged). */
int market__grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, ncap * elem);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Adds the string fmt makes to s. Returns MARKET_OK or MARKET_ERR_NOMEM. */
int market__strs_add(struct market__strs *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0 || market__grow((void **)&s->buf, &s->cap, s->len + (size_t)len + 1, 1) < 0 ||
        market__grow((void **)&s->at, &s->cap_at, s->n + 1, sizeof *s->at) < 0)
        return MARKET_ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(s->buf + s->len, (size_t)len + 1, fmt, ap);
    va_end(ap);
    s->at[s->n++] = s->len;
    s->len += (size_t)len + 1;
    return MARKET_OK;
}

/* Points s->p[0..s->n) at s's strings, valid until the next market__strs_add(). Returns
 * MARKET_OK or MARKET_ERR_NOMEM. */
int market__strs_index(struct market__strs *s) {
    if (market__grow((void **)&s->p, &s->cap_p, s->n ? s->n : 1, sizeof *s->p) < 0)
        return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++)
        s->p[i] = s->buf + s->at[i];
    return MARKET_OK;
}

/* Frees s's strings and empties s. This function can't fail. */
void market__strs_free(struct market__strs *s) {
    free(s->buf);
    free(s->at);
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* ---- pipelines of many commands ---- */

/* Appends the commands of cmds (market_model.h) to b, unless an earlier one failed, and
 * empties cmds for the next ones; a failure (cmds could not be built, or hiredis could not
 * take a command) is kept in b for market__bulk_finish(). This function can't fail. */
void market__bulk_add_buf(struct market__bulk *b, market__buf *cmds) {
    if (market__buf_seal(cmds) < 0) b->failed = 1;
    for (size_t i = 0; i < cmds->n && !b->failed; i++) {
        if (redisAppendCommandArgv(b->c->ctx, cmds->argc[i], cmds->argv[i], NULL) != REDIS_OK)
            b->failed = 1;
        else
            b->sent++;
    }
    market__buf_reset(cmds);
}

/* Reads every pending reply. Returns MARKET_OK, or MARKET_ERR_STORE when a
 * reply was an error or the connection failed (then dropped). */
int market__bulk_finish(struct market__bulk *b) {
    int rc = b->failed ? MARKET_ERR_STORE : MARKET_OK;
    b->last_nil = 0;
    for (size_t i = 0; i < b->sent && b->c->ctx; i++) {
        void *r = NULL;
        if (redisGetReply(b->c->ctx, &r) != REDIS_OK) {
            market__drop(b->c);
            return MARKET_ERR_STORE;
        }
        redisReply *rep = r;
        if (market__reply_err(rep)) rc = market__fail_reply(b->c, "write refused", rep);
        if (market__reply_error_in(rep)) /* inside an EXEC */
            rc = market__fail_reply(b->c, "write refused", market__reply_error_in(rep));
        b->last_nil = market__reply_nil(rep);
        freeReplyObject(rep);
    }
    if (b->failed) market__drop(b->c); /* the output buffer is in an unknown state */
    return rc;
}

/* ---- keys ---- */

/* Collects the keys matching pattern with SCAN into out (grown as needed; its keys are
 * new: free them with market__keylist_free()). Returns MARKET_OK, ERR_STORE or
 * ERR_NOMEM. */
int market__scan_keys(market_conn *c, const char *pattern, struct market__keylist *out) {
    char cursor[32] = "0";
    market__buf b = {0};
    int rc = MARKET_OK;
    do {
        market__buf_reset(&b);
        market__rd_scan(&b, cursor, pattern);
        if ((rc = market__connect(c)) < 0) break;
        redisReply *r = market__command_buf(c, &b, &rc);
        if (!r) break;
        const redisReply *ks = NULL;
        if (market__reply_scan(r, cursor, sizeof cursor, &ks) < 0)
            rc = MARKET_ERR_STORE;
        else if (market__grow((void **)&out->keys, &out->cap, out->n + market__reply_len(ks),
                              sizeof *out->keys) < 0)
            rc = MARKET_ERR_NOMEM;
        for (size_t i = 0, len; rc == MARKET_OK && i < market__reply_len(ks); i++) {
            const char *key = market__reply_key(ks, i, &len);
            if (!key) continue;
            if (!(out->keys[out->n] = strdup(key)))
                rc = MARKET_ERR_NOMEM;
            else
                out->n++;
        }
        freeReplyObject(r);
    } while (rc == MARKET_OK && strcmp(cursor, "0") != 0);
    market__buf_free(&b);
    return rc;
}

/* Frees k's keys and empties k. This function can't fail. */
void market__keylist_free(struct market__keylist *k) {
    for (size_t i = 0; i < k->n; i++)
        free(k->keys[i]);
    free(k->keys);
    k->keys = NULL;
    k->n = k->cap = 0;
}

/* ---- the market and its search indexes ---- */

/* Writes the keys of realm's search indexes in their former layout (one big zset each,
 * every score 0) into out: idx:{r}:all, idx:{r}:item and idx:{r}:seller. This function
 * can't fail. */
void market__idx_legacy_keys(const char *realm, char out[3][MARKET__KEY_MAX]) {
    static const char *const names[3] = {"all", "item", "seller"};
    for (size_t i = 0; i < 3; i++)
        market__key(out[i], MARKET__KEY_MAX, "idx", realm, names[i]);
}

/* Returns the id in key when it is a key of realm's indexes, "idx:{<realm>}:item:<id>" or
 * "idx:{<realm>}:seller:<id>" (borrowed from key), with its kind in *kind; else NULL.
 * This function can't fail. */
const char *market__idx_key_id(const char *realm, const char *key, int *kind) {
    for (*kind = 0; *kind < MARKET__IDX_KINDS; (*kind)++) {
        char prefix[MARKET__IDX_KEY_MAX];
        market__idx_key(prefix, *kind, realm, "");
        size_t len = strlen(prefix);
        if (strncmp(key, prefix, len) == 0) return key + len;
    }
    return NULL;
}

/* Collects the keys of realm's search indexes (idx:{r}:item:* and idx:{r}:seller:*, in one
 * SCAN of idx:{r}:*) into keys. Returns MARKET_OK, ERR_STORE or ERR_NOMEM. */
int market__idx_keys_scan(market_conn *c, const char *realm, struct market__keylist *keys) {
    char pattern[MARKET__KEY_MAX];
    int kind;
    market__key(pattern, sizeof pattern, "idx", realm, "*");
    int rc = market__scan_keys(c, pattern, keys);
    size_t kept = 0; /* not the former layout's keys (market__idx_legacy_keys()), nor others */
    for (size_t i = 0; rc == MARKET_OK && i < keys->n; i++) {
        if (market__idx_key_id(realm, keys->keys[i], &kind))
            keys->keys[kept++] = keys->keys[i];
        else
            free(keys->keys[i]);
    }
    if (rc == MARKET_OK) keys->n = kept;
    return rc;
}

/* Reads keys[0..n) (n <= MARKET__KEYS_CHUNK) into r->rep, in one pipeline: with watch (the name of
 * market:{r}; NULL: none) after a WATCH of it and of the keys, whose reply is rep[0].
 * Returns MARKET_OK, or ERR_STORE, ERR_NOMEM, MARKET__REDIRECTED (market__pipeline_argv())
 * with nothing in rep. */
int market__idx_read(market_conn *c, struct market__idx_read *r, const char *watch,
                     char *const *keys, size_t n) {
    market__buf_reset(&r->b);
    if (watch) {
        market__rd_watch_begin(&r->b);
        market__buf_arg(&r->b, watch);
        for (size_t i = 0; i < n; i++)
            market__buf_arg(&r->b, keys[i]);
        market__buf_end(&r->b, 0);
    }
    for (size_t i = 0; i < n; i++)
        market__rd_zset_all(&r->b, keys[i]);
    int rc = market__pipeline_buf(c, &r->b);
    r->rep = r->b.rep;
    r->n = rc == MARKET_OK ? r->b.n : 0;
    return rc;
}

/* Frees what r holds (not the replies of its last read). This function can't fail. */
void market__idx_read_free(struct market__idx_read *r) {
    market__buf_free(&r->b);
    r->rep = NULL;
    r->n = 0;
}
