/* ledger.c - the trade audit of a market-load run: do the trade records
 * written during the run account for every player's change of funds?
 *
 * Pure: a row per player the run could use (from the plan, with the funds
 * read before the run), the funds read after it, and every trade recorded
 * meanwhile (its total moved from buyer to seller, less the realm's cut,
 * which went to the house the trade names); then each row must
 * satisfy after - before = sold - bought. world.c reads the store into it;
 * load_judge_trades() (stats.c) turns it into the verdict.
 */
#include "tools/load/load.h"

#include <stdlib.h>
#include <string.h>

static int row_cmp(const void *a, const void *b) {
    const load_ledger_row *x = a, *y = b;
    if (x->realm != y->realm) return x->realm < y->realm ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Fills l with a row per player of p (borrowed: p must outlive l). Returns
 * 0, or -1 out of memory. */
int load_ledger_init(load_ledger *l, const load_plan *p) {
    memset(l, 0, sizeof *l);
    if (p->n_players == 0) return 0;
    if (!(l->rows = calloc(p->n_players, sizeof *l->rows))) return -1;
    for (size_t i = 0; i < p->n_players; i++)
        l->rows[i] = (load_ledger_row){.id = load_plan_player(p, i),
                                       .realm = p->players[i].realm,
                                       .before = p->players[i].funds};
    l->n = p->n_players;
    qsort(l->rows, l->n, sizeof *l->rows, row_cmp);
    return 0;
}

void load_ledger_free(load_ledger *l) {
    free(l->rows);
    memset(l, 0, sizeof *l);
}

/* The row of player id of realm, or NULL. */
static load_ledger_row *find(load_ledger *l, unsigned realm, const char *id) {
    load_ledger_row key = {.id = id, .realm = realm};
    return l->n ? bsearch(&key, l->rows, l->n, sizeof *l->rows, row_cmp) : NULL;
}

/* Records the funds of player id of realm after the run. A player the plan
 * did not have is counted in l->unknown. Can't fail. */
void load_ledger_after(load_ledger *l, unsigned realm, const char *id, int64_t funds) {
    load_ledger_row *r = find(l, realm, id);
    if (!r) {
        l->unknown++;
        return;
    }
    r->after = funds;
    r->seen = 1;
}

/* Records trade t of realm: its total moved from buyer to seller, less its
 * fee, which went to its house. A party the plan did not have is counted
 * in l->unknown. Can't fail. */
void load_ledger_trade(load_ledger *l, unsigned realm, const market_trade *t) {
    load_ledger_row *b = find(l, realm, t->buyer), *s = find(l, realm, t->seller);
    load_ledger_row *h = t->fee ? find(l, realm, t->house) : NULL;
    l->recorded++;
    if (!b || !s || (t->fee && !h)) {
        l->unknown++;
        return;
    }
    b->traded -= t->total;
    s->traded += t->total - t->fee;
    if (h) h->traded += t->fee;
}

/* The parts of trade id s ("<ms>-<seq>") into ms and seq. Returns 0, or -1
 * when s is not one. */
static int id_parts(const char *s, unsigned long long *ms, unsigned long long *seq) {
    char *e;
    if (!market_trade_id_valid(s)) return -1;
    *ms = strtoull(s, &e, 10);
    if (*e != '-') return -1;
    *seq = strtoull(e + 1, &e, 10);
    return *e ? -1 : 0;
}

void load_ledger_mark(load_ledger *l, const char *mark, const char *oldest, uint64_t trimmed) {
    unsigned long long mm, ms, om, os;
    if (!mark[0]) { /* the run began before any trade: any trim took one of its trades */
        if (trimmed) l->trimmed++;
        return;
    }
    if (id_parts(mark, &mm, &ms) < 0) return;
    if (!oldest[0] || id_parts(oldest, &om, &os) < 0 || om > mm || (om == mm && os > ms))
        l->trimmed++;
}

/* Counts in l->mismatched the rows whose change of funds the trades do not
 * account for (or that were not read after the run), and names the first
 * in l->first_bad. Can't fail. */
void load_ledger_close(load_ledger *l) {
    l->mismatched = 0;
    l->first_bad = NULL;
    for (size_t i = 0; i < l->n; i++) {
        const load_ledger_row *r = &l->rows[i];
        if (r->seen && r->after - r->before == r->traded) continue;
        if (!l->mismatched++) l->first_bad = r->id;
    }
}
