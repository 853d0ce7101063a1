/* market_idem.c - a batch's idempotency keys: what every order kind of the
 * combiner does with them, written once.
 *
 * DESIGN
 * An order with an idempotency key claims it before its batch's WATCH
 * (market__idem_set_claims), and the batch reads every key's record under
 * the WATCH (market__idem_set_read, _judge): a stored outcome is replayed,
 * another attempt's claim answers in_progress, a different fingerprint
 * idem_mismatch. Deciding in queue order, the kind asks first whether an
 * order is settled (market__idem_set_settle): by the store, or by an
 * earlier order of the same batch under the same key, whose outcome the
 * kind told with market__idem_set_decided; else it decides it and tells.
 * The commit records every final outcome decided in the batch
 * (market__idem_set_record). The records' format is market_keys.c's.
 */
#include "market/market_idem.h"

#include <string.h>

/* Begins the set of a batch of n orders, none with a key yet. Can't fail. */
void market__idem_set_begin(market__idem_set *s, size_t n) {
    s->n = n;
    s->n_keyed = 0;
    for (size_t i = 0; i < n; i++) {
        s->idem[i] = NULL;
        s->key[i][0] = '\0';
        s->same_as[i] = SIZE_MAX;
    }
}

/* Names order i's record (the player's key idem in realm; idem NULL: none)
 * and its claim under token. Returns the record's key ("" without one),
 * which lives as long as s. */
const char *market__idem_set_key(market__idem_set *s, size_t i, const char *realm,
                                 const char *player, const market_idem *idem, const char *token) {
    s->idem[i] = idem;
    if (!idem) return s->key[i];
    market__idem_key(s->key[i], sizeof s->key[i], realm, player, idem);
    market__idem_claim(s->claim[i], sizeof s->claim[i], idem, token);
    s->n_keyed++;
    return s->key[i];
}

/* Appends the claims of the keyed orders, each for its order's wait budget
 * (req[i]->deadline_ms), to the read, before its WATCH. */
void market__idem_set_claims(market__idem_set *s, market_queued *const *req, market__buf *r) {
    for (size_t i = 0; i < s->n; i++) {
        if (!s->idem[i]) continue;
        market__idem_claim_ttl(s->claim_ttl[i], sizeof s->claim_ttl[i], req[i]->deadline_ms);
        market__rd_claim(r, s->key[i], s->claim[i], s->claim_ttl[i]);
    }
}

/* Appends the records' keys to the read's open WATCH. */
void market__idem_set_watch(const market__idem_set *s, market__buf *r) {
    for (size_t i = 0; i < s->n; i++)
        if (s->idem[i]) market__buf_arg(r, s->key[i]);
}

/* Appends the read of the records (one MGET), when any order has a key. */
void market__idem_set_read(const market__idem_set *s, market__buf *r) {
    if (!s->n_keyed) return;
    market__rd_records_begin(r);
    market__idem_set_watch(s, r);
    market__buf_end(r, 0);
}

/* Judges the records read (mget: the reply to market__idem_set_read's MGET;
 * NULL when no order has a key) for claims made with token. Returns 0, or
 * -1 when mget is not the records. */
int market__idem_set_judge(market__idem_set *s, const redisReply *mget, const char *token) {
    for (size_t i = 0; i < s->n; i++) {
        s->state[i] = MARKET__IDEM_FREE;
        s->done[i] = (market__outcome){.rc = MARKET_ERR_STORE, .trade = ""};
    }
    if (!s->n_keyed) return 0;
    if (!mget || !market__reply_array(mget, s->n_keyed, 0)) return -1;
    for (size_t i = 0, j = 0; i < s->n; i++) {
        if (!s->idem[i]) continue;
        market__outcome *o = &s->stored[i];
        s->state[i] = market__idem_judge(market__reply_at(mget, j++), s->idem[i], token, &o->rc,
                                         &o->a, &o->b, &o->c, s->stored_trade[i]);
        o->trade = s->stored_trade[i];
        o->replayed = 1;
    }
    return 0;
}

/* Whether order i, with a key, is settled without deciding it: by its
 * stored record, or by an earlier order of the batch under the same key
 * that was decided for good. Returns 0 when it is to be decided, else 1
 * with *out its outcome: a replay (out->replayed; out->trade "" when the
 * trade is this batch's: see same_as), or ERR_IN_PROGRESS,
 * ERR_IDEM_MISMATCH, ERR_STORE. Keeps the outcome for later repeats. */
int market__idem_set_settle(market__idem_set *s, size_t i, market__outcome *out) {
    if (!s->idem[i]) return 0;
    int st = s->state[i];
    *out = s->stored[i];
    if (st == MARKET__IDEM_FREE) {
        size_t j = 0;
        for (; j < i; j++)
            if (s->idem[j] && market__idem_final(s->done[j].rc) &&
                strcmp(s->key[j], s->key[i]) == 0)
                break;
        if (j == i) return 0;
        st = strcmp(s->idem[j]->fingerprint, s->idem[i]->fingerprint) == 0
                 ? MARKET__IDEM_DONE
                 : MARKET_ERR_IDEM_MISMATCH;
        *out = s->done[j];
        out->replayed = 1;
        if (st == MARKET__IDEM_DONE && !s->done[j].replayed) s->same_as[i] = j;
    }
    if (st != MARKET__IDEM_DONE) *out = (market__outcome){.rc = st, .trade = ""};
    s->done[i] = *out;
    return 1;
}

/* Tells the set order i's outcome as decided in this batch (a, b and c as
 * its kind records them). Can't fail. */
void market__idem_set_decided(market__idem_set *s, size_t i, int rc, int64_t a, int64_t b,
                              int64_t c) {
    s->done[i] = (market__outcome){.rc = rc, .a = a, .b = b, .c = c, .trade = ""};
}

/* Whether order i's outcome is recorded by the commit: decided for good in
 * this batch, under a key. */
int market__idem_set_recorded(const market__idem_set *s, size_t i) {
    return s->idem[i] && !s->done[i].replayed && market__idem_final(s->done[i].rc);
}

/* Writes order i's record (market__idem_set_recorded) into s->record[i],
 * and, with w, appends its SET to the commit. */
void market__idem_set_record(market__idem_set *s, size_t i, market__buf *w) {
    const market__outcome *o = &s->done[i];
    market__idem_record(s->record[i], sizeof s->record[i], s->idem[i], o->rc, o->a, o->b, o->c);
    if (w) market__fx_idem_record(w, s->key[i], s->record[i]);
}
