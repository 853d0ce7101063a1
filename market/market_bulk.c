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

/* Appends a command (argv/len as redisAppendCommandArgv takes them) to b, unless an
 * earlier one failed; a failure is kept in b for market__bulk_finish(). This function
 * can't fail. */
void market__bulk_add(struct market__bulk *b, int argc, const char **argv, const size_t *len) {
    if (b->failed) return;
    if (redisAppendCommandArgv(b->c->ctx, argc, argv, len) != REDIS_OK)
        b->failed = 1;
    else
        b->sent++;
}

/* Reads every pending reply. Returns MARKET_OK, or MARKET_ERR_STORE when a
 * reply was an error or the connection failed (then dropped). */
int market__bulk_finish(struct market__bulk *b) {
    int rc = b->failed ? MARKET_ERR_STORE : MARKET_OK;
    for (size_t i = 0; i < b->sent && b->c->ctx; i++) {
        void *r = NULL;
        if (redisGetReply(b->c->ctx, &r) != REDIS_OK) {
            market__drop(b->c);
            return MARKET_ERR_STORE;
        }
        redisReply *rep = r;
        if (rep->type == REDIS_REPLY_ERROR) rc = market__fail_reply(b->c, "write refused", rep);
        freeReplyObject(rep);
    }
    if (b->failed) market__drop(b->c); /* the output buffer is in an unknown state */
    return rc;
}

/* Makes room in p for n commands. Returns MARKET_OK or MARKET_ERR_NOMEM (then p keeps
 * its former room). */
int market__pipe_reserve(struct market__pipe *p, size_t n) {
    if (n <= p->cap) return MARKET_OK;
    size_t ncap = p->cap ? p->cap * 2 : 64;
    while (ncap < n)
        ncap *= 2;
    int *argc = realloc(p->argc, ncap * sizeof *argc);
    if (argc) p->argc = argc;
    const char ***argv = realloc(p->argv, ncap * sizeof *argv);
    if (argv) p->argv = argv;
    struct market__argv6 *cmd = realloc(p->cmd, ncap * sizeof *cmd);
    if (cmd) p->cmd = cmd;
    redisReply **rep = realloc(p->rep, ncap * sizeof *rep);
    if (rep) p->rep = rep;
    if (!argc || !argv || !cmd || !rep) return MARKET_ERR_NOMEM;
    p->cap = ncap;
    return MARKET_OK;
}

/* Puts the command cmd (argc arguments) at place *nc of p, which has room, and counts it.
 * This function can't fail. */
void market__pipe_put(struct market__pipe *p, size_t *nc, int argc, struct market__argv6 cmd) {
    p->cmd[*nc] = cmd;
    p->argv[*nc] = p->cmd[*nc].v;
    p->argc[(*nc)++] = argc;
}

/* Frees p's arrays (not the replies in them). This function can't fail. */
void market__pipe_free(struct market__pipe *p) {
    free(p->argc);
    free(p->argv);
    free(p->cmd);
    free(p->rep);
}

/* ---- keys ---- */

/* Collects the keys matching pattern with SCAN into out (grown as needed; its keys are
 * new: free them with market__keylist_free()). Returns MARKET_OK, ERR_STORE or
 * ERR_NOMEM. */
int market__scan_keys(market_conn *c, const char *pattern, struct market__keylist *out) {
    char cursor[32] = "0";
    do {
        const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", MARKET__SCAN_COUNT};
        int rc = market__connect(c);
        if (rc < 0) return rc;
        redisReply *r = market__command(c, 6, argv, NULL);
        if (!r) return MARKET_ERR_STORE;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
            r->element[0]->len >= sizeof cursor) {
            freeReplyObject(r);
            return MARKET_ERR_STORE;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        redisReply *ks = r->element[1];
        if (market__grow((void **)&out->keys, &out->cap, out->n + ks->elements, sizeof *out->keys) <
            0) {
            freeReplyObject(r);
            return MARKET_ERR_NOMEM;
        }
        for (size_t i = 0; i < ks->elements; i++) {
            if (ks->element[i]->type != REDIS_REPLY_STRING) continue;
            char *k = strdup(ks->element[i]->str);
            if (!k) {
                freeReplyObject(r);
                return MARKET_ERR_NOMEM;
            }
            out->keys[out->n++] = k;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return MARKET_OK;
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
    size_t nc = 0;
    if (watch) {
        r->watch[0] = "WATCH";
        r->watch[1] = watch;
        for (size_t i = 0; i < n; i++)
            r->watch[2 + i] = keys[i];
        r->argv[nc] = r->watch;
        r->argc[nc++] = (int)(2 + n);
    }
    for (size_t i = 0; i < n; i++) {
        const char **z = r->zrange[i];
        z[0] = "ZRANGE", z[1] = keys[i], z[2] = "0", z[3] = "-1", z[4] = "WITHSCORES";
        r->argv[nc] = z;
        r->argc[nc++] = 5;
    }
    int rc = market__pipeline_argv(c, nc, r->argc, (const char **const *)r->argv, r->rep);
    r->n = rc == MARKET_OK ? nc : 0;
    return rc;
}
