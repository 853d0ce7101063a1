/* market_frame.c - what every order kind's attempt shares, written once.
 *
 * DESIGN
 * An attempt of any kind reads under WATCH, decides in queue order and
 * commits in one MULTI/EXEC. Its read is
 *   claims (SET NX PX, one a keyed order) | WATCH <the kind's keys> <the
 *   leases' lock keys and fencing records> <the records> <the settings>
 *   <a sweep lease> <the realm's seeding mark> | MGET of the fencing records
 *   (and the lock keys when they live in the store) and of the mark, or
 *   EXISTS of the mark when no lease is held | MGET of the records | the
 *   settings | TIME | GET of the sweep lease | <the kind's reads>
 * (the settings, the clock and the sweep lease when the kind asks for them)
 * and market__frame_judge() judges everything but the kind's part: a claim
 * refused or the WATCH refused fails the batch, as a lease lost does, and
 * a realm being seeded or reset (its mark set: market_world.c) fails it with
 * MARKET_ERR_REALM_UNAVAILABLE; a seed that starts after the read aborts the
 * commit (the mark is watched). The
 * decision settles each keyed order by its record first (a replay, or an
 * in_progress / idem_mismatch answer) and answers busy an order whose wait
 * budget ran out before the attempt began; the kind decides the rest. The
 * commit writes our fence where the record does not already hold it and
 * every final outcome's record under a key (a success's too, before the
 * trade script that completes it with its trade id: were the script to
 * fail, its error does not undo the rest of the EXEC, and the order is
 * still recorded as done, never done twice).
 */
#include "market/market_frame.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The idempotency key order q is served under: an order whose kind never
 * replays (an unlist) has none. */
static const market_idem *idem_of(const market_queued *q) {
    return q->replayed ? ((const market_order *)q->order)->idem : NULL;
}

/* Begins the frame of cb's open orders: names their records and claims,
 * after drawing the batch's token when an order has a key or need_token
 * (a getrandom() call: only then). Returns MARKET_OK, or MARKET_ERR_STORE
 * when no token can be drawn. */
int market__frame_begin(market__frame *f, market__cbatch *cb, int need_token) {
    f->cb = cb;
    f->n = cb->n_open;
    f->clock = 0;
    f->lease_key = NULL;
    f->deals = NULL;
    f->parties = NULL;
    for (size_t i = 0; i < f->n; i++) {
        f->req[i] = cb->req[i]->order;
        need_token |= idem_of(cb->req[i]) != NULL;
    }
    if (need_token && market__cbatch_token(cb) < 0) return MARKET_ERR_STORE;
    market__idem_set_begin(&f->idem, f->n);
    for (size_t i = 0; i < f->n; i++)
        cb->req[i]->k_idem = market__idem_set_key(&f->idem, i, cb->realm, f->req[i]->player,
                                                  idem_of(cb->req[i]), cb->token);
    return MARKET_OK;
}

/* Begins the read in r: the claims, then the WATCH, to which the kind
 * appends its keys before market__frame_watched(). */
void market__frame_read(market__frame *f, market__buf *r) {
    market__buf_reset(r);
    market__idem_set_claims(&f->idem, f->cb->req, r);
    f->i_watch = r->n;
    market__rd_watch_begin(r);
}

/* Ends the WATCH with the leases' fencing records (and their lock keys
 * when keys, or when they are read), the records and the kind's deals and
 * players, then appends the reads of them all. The kind's reads follow. */
void market__frame_watched(market__frame *f, const market__held *held, int keys,
                           market__buf *r) {
    for (size_t i = 0; i < held->n; i++) {
        if (keys || held->tokens) market__buf_arg(r, held->key[i]);
        market__buf_arg(r, held->fenced[i]);
    }
    market__idem_set_watch(&f->idem, r);
    if (f->fees) {
        market__realm rl;
        market__realm_init(&rl, f->cb->realm);
        memcpy(f->k_settings, rl.settings, sizeof f->k_settings);
        market__buf_arg(r, f->k_settings);
    }
    if (f->lease_key) market__buf_arg(r, f->lease_key);
    if (f->deals) market__deals_watch(f->deals, f->cb->realm, r);
    if (f->parties) market__parties_watch(f->parties, r);
    market__key_building(f->k_mark, f->cb->realm);
    market__buf_arg(r, f->k_mark);
    market__buf_end(r, 0);
    f->i_fence = r->n;
    if (held->n) { /* the mark rides in the leases' MGET */
        market__held_read_buf(held, f->k_mark, r);
    } else {
        f->i_mark = r->n;
        market__rd_building(r, f->k_mark);
    }
    f->i_idem = r->n;
    market__idem_set_read(&f->idem, r);
    f->i_settings = r->n;
    if (f->fees) market__rd_realm_settings(r, f->k_settings);
    f->i_clock = r->n;
    if (f->clock) market__rd_time(r);
    if (f->lease_key) market__rd_lease(r, f->lease_key);
    if (f->deals) market__deals_read(f->deals, f->cb->realm, r);
    f->i_parties = r->n;
    if (f->parties) market__parties_read(f->parties, NULL, f->parties->n, r);
}

/* Judges the frame's replies (rep: the read's): returns MARKET_OK, or the
 * error of the whole batch: a claim refused (a read-only replica), the
 * WATCH refused, a lease lost (taken over, lapsed, or a newer holder
 * committed), the records unreadable. */
int market__frame_judge(market__frame *f, market_conn *c, const market__held *held,
                        redisReply **rep) {
    const redisReply *err = market__reply_error(rep, f->i_watch);
    const redisReply *fr = held->n ? rep[f->i_fence] : NULL;
    const redisReply *mg = f->idem.n_keyed ? rep[f->i_idem] : NULL;
    if (err) return market__fail_reply(c, "claim refused", err);
    if (!market__reply_ok(rep[f->i_watch]))
        return market__fail_reply(c, "read refused", rep[f->i_watch]);
    /* the realm's seeding mark: in the leases' MGET, else its own EXISTS */
    const redisReply *mark =
        held->n ? market__reply_at(fr, market__held_read_len(held)) : rep[f->i_mark];
    int rc = market__building_judge(c, f->k_mark, mark ? mark : fr); /* none: fr is broken */
    if (rc < 0) return rc;
    if (held->n && market__held_lost(held, fr, 1)) return MARKET_ERR_LEASE_LOST;
    if (held->n && market__held_wanted(held, fr, 1)) f->cb->lock_wanted = 1;
    if (market__idem_set_judge(&f->idem, mg, f->cb->token) < 0)
        return market__fail_reply(c, "reading idempotency records", mg);
    if (f->fees && market__reply_realm_settings(rep[f->i_settings], &f->settings) < 0)
        return market__fail(c, "the settings of realm %s are unreadable", f->cb->realm);
    if (f->clock && market__reply_time(rep[f->i_clock], &f->now_ms) < 0)
        return market__fail_reply(c, "reading the store's clock", rep[f->i_clock]);
    const redisReply *l = f->lease_key ? rep[f->i_clock + (f->clock != 0)] : NULL;
    if (!l || market__reply_text(l, f->lease, sizeof f->lease) < 0) f->lease[0] = '\0';
    for (size_t i = 0; i < held->n; i++) /* our own earlier commit of this lease */
        f->fence_same[i] = market__reply_is(market__reply_at(fr, i), held->fence[i]);
    if (f->deals) market__deals_parse(f->deals, rep, f->deals_out);
    if (f->parties) market__parties_parse(f->parties, rep + f->i_parties, NULL, f->parties->n);
    return MARKET_OK;
}

/* Decides every open order in queue order, as if they ran one at a time:
 * settled by its key (replay fills a replay's result), answered busy when
 * its wait budget had run out when the attempt began, else decided by the
 * kind (one). Returns how many have something to write: a success, or a
 * recorded refusal. */
size_t market__frame_decide(market__frame *f, market__decide_one one, market__replay replay,
                            void *ks) {
    size_t writes = 0;
    for (size_t i = 0; i < f->n; i++) {
        market_order *o = f->req[i];
        market__outcome v;
        int64_t a = 0, b = 0, c = 0;
        int settled = market__idem_set_settle(&f->idem, i, &v);
        int late = !settled && f->cb->now_ms >= o->q.deadline_ms;
        f->won[i] = 0;
        if (settled || late) {
            memset(&o->res, 0, sizeof o->res);
            o->rc = settled ? v.rc : MARKET_ERR_BUSY;
        }
        if (settled) {
            if (o->q.replayed) *o->q.replayed = v.replayed;
            if (o->q.trade_id) snprintf(o->q.trade_id, MARKET_TRADE_ID_MAX + 1, "%s", v.trade);
            if (v.replayed) replay(o, &v);
            continue;
        }
        if (!late) o->rc = one(ks, i, &a, &b, &c); /* clears its result first */
        f->won[i] = o->rc == MARKET_OK;
        market__idem_set_decided(&f->idem, i, o->rc, a, b, c);
        writes += market__frame_won(f, i) || market__idem_set_recorded(&f->idem, i);
    }
    return writes;
}

/* Appends rec, a trade of order i, to the commit's trades t[0..*n) (t_req:
 * their orders), with order i's idempotency record when it has a key and
 * this is its first trade: the trade script completes that record with the
 * trade's id. */
void market__frame_trade(const market__frame *f, size_t i, int first, market__trade_rec rec,
                         market__trade_rec *t, size_t *t_req, size_t *n) {
    int keyed = first && f->idem.idem[i] != NULL;
    rec.idem_key = keyed ? f->idem.key[i] : NULL;
    rec.idem_record = keyed ? f->idem.record[i] : NULL;
    t_req[*n] = i;
    t[(*n)++] = rec;
}

/* Appends our fence into the fencing record of every lease held, where
 * the record does not hold it already. */
void market__frame_fences(const market__frame *f, const market__held *held, market__buf *w) {
    for (size_t i = 0; i < held->n; i++)
        if (!f->fence_same[i]) market__fx_fence(w, held->fenced[i], held->fence[i]);
}

/* Opens the commit in w (emptied first): MULTI, our fences, the net funds of the players p
 * holds (NULL: none), the unread part of cut (NULL: none) and the records: what every
 * kind's commit begins with; the kind's writes follow. */
void market__frame_commit(market__frame *f, const market__held *held, const market__parties *p,
                          const market__cut *cut, market__buf *w) {
    market__buf_reset(w);
    market__fx_multi(w);
    market__frame_fences(f, held, w);
    if (p) market__parties_funds(p, w);
    if (cut) market__frame_cut_pay(f, cut, w);
    market__frame_records(f, w);
}

/* Appends the record of every final outcome decided under a key (see
 * DESIGN), and keeps each in f->idem.record[] for the trade script. */
void market__frame_records(market__frame *f, market__buf *w) {
    for (size_t i = 0; i < f->n; i++)
        if (market__idem_set_recorded(&f->idem, i)) market__idem_set_record(&f->idem, i, w);
}

/* ---- the players of a batch ---- */

/* FNV-1a of s: ids are compared by it first, so that naming a batch's
 * players and listings costs about one comparison each, not one per
 * earlier one. */
uint32_t market__id_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Returns player id's index in p, added with its keys in realm (funds
 * unread) when new; p->n = 0 empties it. The table holds every player a
 * batch can name. */
size_t market__parties_of(market__parties *p, const char *realm, const char *id) {
    uint32_t h = market__id_hash(id);
    for (size_t i = 0; i < p->n; i++)
        if (p->hash[i] == h && strcmp(p->id[i], id) == 0) return i;
    size_t i = p->n++;
    size_t len = strlen(id); /* an id: checked, at most MARKET_ID_MAX */
    if (len > MARKET_ID_MAX) len = MARKET_ID_MAX;
    memcpy(p->id[i], id, len);
    p->id[i][len] = '\0';
    p->hash[i] = h;
    market__key_user(p->k_user[i], realm, id);
    market__key_inventory(p->k_inv[i], realm, id);
    market__key_stacks(p->k_stacks[i], realm, id);
    p->party[i] = (market__party){.known = MARKET__UNREAD};
    p->read_funds[i] = 0;
    return i;
}

/* Appends every player's users key to the read's open WATCH. */
void market__parties_watch(const market__parties *p, market__buf *r) {
    for (size_t i = 0; i < p->n; i++) market__buf_arg(r, p->k_user[i]);
}

/* Appends the reads of the funds of players list[0..n) (list NULL: of
 * players 0..n). */
void market__parties_read(const market__parties *p, const size_t *list, size_t n,
                          market__buf *r) {
    for (size_t j = 0; j < n; j++) market__rd_funds(r, p->k_user[list ? list[j] : j]);
}

/* Takes in the funds replies rep[0..n) of players list[0..n) (list NULL:
 * of players 0..n). Funds that cannot be read fail only the orders of that
 * player (MARKET__UNREADABLE), not the batch. */
void market__parties_parse(market__parties *p, redisReply *const *rep, const size_t *list,
                           size_t n) {
    for (size_t j = 0; j < n; j++) {
        size_t u = list ? list[j] : j;
        p->party[u] = market__reply_party(rep[j]);
        p->read_funds[u] = p->party[u].funds;
    }
}

/* Returns player id's index in p, or SIZE_MAX when p does not hold it. */
size_t market__parties_find(const market__parties *p, const char *id) {
    uint32_t h = market__id_hash(id);
    for (size_t i = 0; i < p->n; i++)
        if (p->hash[i] == h && strcmp(p->id[i], id) == 0) return i;
    return SIZE_MAX;
}

/* Begins the fees of the batch, at bps (one of the settings the read found:
 * none unless the kind pays fees): into the house's funds in p when p holds
 * the house, else paid unread (market__frame_cut_pay). */
void market__frame_cut(const market__frame *f, market__parties *p, int64_t bps, market__cut *cut) {
    *cut = (market__cut){0};
    if (!f->fees || bps == 0) return;
    cut->bps = bps;
    size_t h = market__parties_find(p, f->settings.house);
    /* funds left unread (split reads) are moved by no decision: the house's are paid unread */
    cut->house = h == SIZE_MAX || p->party[h].known == MARKET__UNREAD ? NULL : &p->party[h];
}

/* Begins order's copy c of the batch's cut (p: the batch's parties; self:
 * the order's party, whose copy is self_copy). This function can't fail. */
void market__cut_begin(market__cut_copy *c, const market__cut *cut, const market__parties *p,
                       size_t self, market__party *self_copy) {
    c->cut = *cut;
    c->cut.unread = 0;
    c->h = cut->house ? (size_t)(cut->house - p->party) : SIZE_MAX;
    c->house = cut->house ? *cut->house : (market__party){0};
    c->cut.house = c->h == SIZE_MAX ? NULL : c->h == self ? self_copy : &c->house;
}

/* Keeps what the order decided on c into the batch's cut and parties (the
 * order's own copies are the caller's to keep). This function can't fail. */
void market__cut_keep(const market__cut_copy *c, market__cut *cut, market__parties *p) {
    if (c->cut.house == &c->house) p->party[c->h] = c->house;
    cut->unread += c->cut.unread;
}

/* Appends the payment of the cuts the batch decided for a house it does
 * not hold: one HINCRBY. */
void market__frame_cut_pay(const market__frame *f, const market__cut *cut, market__buf *w) {
    if (cut->unread == 0) return;
    char k_house[MARKET__KEY_MAX];
    market__key_user(k_house, f->cb->realm, f->settings.house);
    market__fx_funds(w, market__buf_join(w, k_house, (const char *)NULL), cut->unread);
}

/* Appends each player's net change of funds as the batch decided. */
void market__parties_funds(const market__parties *p, market__buf *w) {
    for (size_t i = 0; i < p->n; i++)
        if (p->party[i].known == MARKET__PRESENT)
            market__fx_funds(w, p->k_user[i], p->party[i].funds - p->read_funds[i]);
}

/* ---- deals by number ---- */

/* The place of deal id among d's, added when new. */
size_t market__deals_of(market__deals *d, int64_t id) {
    for (size_t j = 0; j < d->n; j++)
        if (d->id[j] == id) return j;
    d->id[d->n] = id;
    return d->n++;
}

/* Appends the keys of d's deals to r's open WATCH (market__frame_read()). */
void market__deals_watch(const market__deals *d, const char *realm, market__buf *r) {
    char key[MARKET__KEY_MAX];
    for (size_t j = 0; j < d->n; j++) {
        d->t->key(key, realm, d->id[j]);
        market__buf_arg(r, market__buf_join(r, key, (const char *)NULL));
    }
}

/* Appends the reads of d's deals to r. */
void market__deals_read(market__deals *d, const char *realm, market__buf *r) {
    d->i_rep = r->n;
    for (size_t j = 0; j < d->n; j++)
        d->t->rd(r, realm, d->id[j]);
}

/* Reads the replies of market__deals_read() (rep: the read's) into out[0..d->n), and their
 * codes into d->rc. */
void market__deals_parse(market__deals *d, redisReply *const *rep, void *out) {
    for (size_t j = 0; j < d->n; j++)
        d->rc[j] = d->t->reply(rep[d->i_rep + j], d->id[j], (char *)out + j * d->t->size);
}
