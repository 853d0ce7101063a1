/* stats.c - what a market-load run measured, and what it means.
 *
 * Pure: latency histograms and their percentiles, the answers by status,
 * Redis INFO commandstats read from its text, and the verdict on the audits
 * before and after the run (which decides the exit status).
 */
#include "tools/load/load.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- latency histogram: log-linear, in nanoseconds ---- */

static size_t hist_index(uint64_t v) {
    if (v < LOAD_HIST_LINEAR) return (size_t)v;
    int shift = 63 - __builtin_clzll(v) - 7; /* >= 1 */
    if (shift > LOAD_HIST_SHIFTS) return LOAD_HIST_BUCKETS - 1;
    return LOAD_HIST_LINEAR + (size_t)(shift - 1) * LOAD_HIST_SUB +
           (size_t)((v >> shift) - LOAD_HIST_SUB);
}

/* The middle of bucket i. */
static uint64_t hist_value(size_t i) {
    if (i < LOAD_HIST_LINEAR) return i;
    unsigned shift = (unsigned)((i - LOAD_HIST_LINEAR) / LOAD_HIST_SUB) + 1;
    uint64_t lo = (uint64_t)((i - LOAD_HIST_LINEAR) % LOAD_HIST_SUB + LOAD_HIST_SUB) << shift;
    return lo + ((UINT64_C(1) << shift) - 1) / 2;
}

void load_hist_add(load_hist *h, uint64_t v) {
    h->n[hist_index(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v > h->max) h->max = v;
}

uint64_t load_hist_pct(const load_hist *h, double p) {
    if (h->count == 0) return 0;
    uint64_t want = (uint64_t)((p / 100.0) * (double)h->count + 0.999999);
    if (want < 1) want = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < LOAD_HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen >= want) {
            uint64_t v = hist_value(i);
            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}

double load_ms(uint64_t ns) {
    return (double)ns / 1e6;
}

/* ---- answers by status ---- */

/* The statuses the report names; every other one counts as "other". */
static int status_named(int s) {
    return s == 200 || s == 201 || s == 401 || s == 402 || s == 403 || s == 404 || s == 409 ||
           s == 503;
}

unsigned long long load_counts_other(const load_counts *k) {
    unsigned long long n = k->other;
    for (int s = 100; s < 600; s++)
        if (!status_named(s)) n += k->by_code[s];
    return n;
}

/* ---- Redis commandstats ---- */

/* The decimal digits at p (before end), saturating at LLONG_MAX. */
static long long digits(const char *p, const char *end) {
    long long v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++)
        v = v > (LLONG_MAX - (*p - '0')) / 10 ? LLONG_MAX : v * 10 + (*p - '0');
    return v;
}

void load_cmdstats_parse(load_cmdstats *s, const char *text, size_t len) {
    memset(s, 0, sizeof *s);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        if ((size_t)(nl - p) > 8 && strncmp(p, "cmdstat_", 8) == 0 && s->n < LOAD_CMDS_MAX) {
            const char *colon = memchr(p, ':', (size_t)(nl - p));
            const char *calls = NULL;
            for (const char *q = colon; q && q + 6 < nl; q++)
                if (strncmp(q, "calls=", 6) == 0) {
                    calls = q + 6;
                    break;
                }
            if (colon && calls && (size_t)(colon - p - 8) < sizeof s->c[0].name) {
                load_cmdstat *c = &s->c[s->n++];
                memcpy(c->name, p + 8, (size_t)(colon - p - 8));
                c->name[colon - p - 8] = '\0';
                c->calls = digits(calls, nl);
                if (strcmp(c->name, "info") != 0) s->total += c->calls;
            }
        }
        p = nl + 1;
    }
}

double load_cpu_parse(const char *text, size_t len) {
    static const char *const fields[] = {"used_cpu_user:", "used_cpu_sys:"};
    double s = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            size_t fl = strlen(fields[f]);
            char num[32];
            size_t nlen = (size_t)(nl - p) - fl;
            if ((size_t)(nl - p) <= fl || strncmp(p, fields[f], fl) != 0 || nlen >= sizeof num)
                continue;
            memcpy(num, p + fl, nlen);
            num[nlen] = '\0';
            char *e;
            double v = strtod(num, &e);
            if (e != num && v >= 0) s += v;
        }
        p = nl + 1;
    }
    return s;
}

void load_cmdstats_add(load_cmdstats *sum, const load_cmdstats *one, const char *where) {
    for (size_t i = 0; i < one->n; i++) {
        size_t k = 0;
        while (k < sum->n && strcmp(sum->c[k].name, one->c[i].name) != 0)
            k++;
        if (k == sum->n) {
            if (sum->n == LOAD_CMDS_MAX) continue;
            sum->c[sum->n++] = (load_cmdstat){.calls = 0};
            memcpy(sum->c[k].name, one->c[i].name, sizeof sum->c[k].name);
        }
        sum->c[k].calls += one->c[i].calls;
    }
    sum->total += one->total;
    if (sum->nmasters == LOAD_MASTERS_MAX) return;
    snprintf(sum->master[sum->nmasters].where, sizeof sum->master[0].where, "%s", where);
    sum->master[sum->nmasters++].total = one->total;
}

long long load_cmdstats_master_delta(const load_cmdstats *before, const load_cmdstats *after,
                                     size_t i) {
    if (i >= after->nmasters) return 0;
    for (size_t k = 0; k < before->nmasters; k++)
        if (strcmp(before->master[k].where, after->master[i].where) == 0)
            return after->master[i].total - before->master[k].total;
    return after->master[i].total;
}

long long load_cmdstats_get(const load_cmdstats *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->c[i].name, name) == 0) return s->c[i].calls;
    return 0;
}

/* ---- the verdict ---- */

/* The units of stackable goods a store holds: in stacks, listed, and left on sale
 * (a sale's buys move units from its stock to stacks). */
int64_t load_units(const market_audit_report *a) {
    return a->units_in_stacks + a->units_listed + a->units_in_sales + a->units_in_auctions;
}

int load_audit_same(const market_audit_report *a, const market_audit_report *b) {
    return a->players == b->players && a->total_funds == b->total_funds &&
           a->total_escrow == b->total_escrow && a->orders == b->orders &&
           a->negative_funds == b->negative_funds && a->items_held == b->items_held &&
           a->items_listed == b->items_listed && a->items_misplaced == b->items_misplaced &&
           a->index_mismatch == b->index_mismatch && a->units_in_stacks == b->units_in_stacks &&
           a->units_listed == b->units_listed && a->units_in_sales == b->units_in_sales &&
           a->units_sold_by_sales == b->units_sold_by_sales && a->auctions == b->auctions &&
           a->units_in_auctions == b->units_in_auctions && a->auctions_escrow == b->auctions_escrow;
}

load_verdict load_judge(const load_counts *k, const market_audit_report *b,
                        const market_audit_report *a) {
    load_verdict v;
    v.funds = a->total_funds + a->total_escrow == b->total_funds + b->total_escrow;
    /* the escrow is the buy orders' and the auctions' bids */
    v.escrow = a->orders_escrow + a->auctions_escrow == a->total_escrow &&
               a->negative_escrow == 0 && a->orders_misbooked == 0 && a->auctions_unreadable == 0;
    v.negative = a->negative_funds == 0;
    v.one_place = a->items_misplaced == 0;
    v.indexed = a->index_mismatch == 0; /* the search indexes hold exactly the listings */
    /* unique items held or listed (a listing of goods may sell out: its units count) */
    v.total = a->items_held + a->items_listed - a->goods_listed + a->items_in_auctions ==
                  b->items_held + b->items_listed - b->goods_listed + b->items_in_auctions &&
              load_units(a) == load_units(b);
    v.left = (long long)b->items_listed - (long long)a->items_listed;
    long long ok = (long long)k->by_code[200];
    /* A request without an answer, or answered with an unknown outcome, may have bought: it
     * widens the window. Every 200 must be there whatever happened. */
    v.purchases = v.left >= ok && v.left - ok <= (long long)(k->transport + k->unknown);
    v.ok = v.funds && v.negative && v.one_place && v.total && v.purchases && v.indexed && v.escrow;
    v.trades = 1;
    v.trades_trimmed = 0;
    /* 402 and 404 are the market saying no; anything else means the run did
     * not measure purchases: a missing secret (401), a server in trouble. */
    v.errors = k->requests - k->by_code[200] - k->by_code[402] - k->by_code[404];
    v.failed = NULL;
    if (ok == 0)
        v.failed = "no purchase succeeded";
    else if (v.errors > k->requests / 2)
        v.failed = "most answers were errors";
    return v;
}

void load_judge_trades(load_verdict *v, const load_ledger *l) {
    v->trades_trimmed = l->trimmed > 0;
    if (v->trades_trimmed) { /* the records of the run are not all there: no verdict */
        v->trades = 0;
        return;
    }
    v->trades = l->recorded == v->left && l->unknown == 0 && l->mismatched == 0;
    if (!v->trades) v->ok = 0;
}

void load_judge_flash(load_verdict *v, const load_counts *k, load_flash *f) {
    long long ok = (long long)k->by_code[200];
    /* each 200 bought one unit; an unanswered request may have too */
    v->left = f->sold;
    v->purchases = f->sold >= ok && f->sold - ok <= (long long)(k->transport + k->unknown);
    f->ok = f->oversold == 0 && f->violations == 0 && f->bought_sum == f->sold &&
            f->stacked == f->sold && f->sold + f->left == f->stock;
    v->ok =
        v->funds && v->negative && v->one_place && v->total && v->purchases && v->escrow && f->ok;
    /* sold out (409) is the sale's answer, not an error */
    v->errors = k->requests - k->by_code[200] - k->by_code[402] - k->by_code[409];
    v->failed = NULL;
    if (ok == 0)
        v->failed = "no purchase succeeded";
    else if (v->errors > k->requests / 2)
        v->failed = "most answers were errors";
}

void load_judge_book(load_verdict *v, const load_counts *k, const load_ledger *l) {
    long long ok = (long long)(k->by_code[200] + k->by_code[201]);
    /* a fill is a trade, and the ledger checks that the trades account for every player's
     * funds and escrow; how many fills a 200 or a 201 made its answer says, not its status */
    v->left = l->recorded;
    v->purchases = 1;
    v->ok = v->funds && v->negative && v->one_place && v->total && v->indexed && v->escrow;
    /* 404 (an order filled or taken back meanwhile, units a seller no longer holds) and
     * 409 (no bid to sell into, a list at another price than the seller's) are answers */
    v->errors = k->requests - k->by_code[200] - k->by_code[201] - k->by_code[402] -
                k->by_code[404] - k->by_code[409];
    v->failed = NULL;
    if (ok == 0)
        v->failed = "no order or sale succeeded";
    else if (v->errors > k->requests / 2)
        v->failed = "most answers were errors";
}

void load_judge_auctions(load_verdict *v, const load_counts *k, const load_auctions *a) {
    long long ok = (long long)k->by_code[200];
    v->left = (long long)a->sold; /* each sale is a trade (load_judge_trades() counts them) */
    v->purchases = 1;
    v->ok = v->funds && v->negative && v->one_place && v->total && v->indexed && v->escrow &&
            a->late == 0;
    /* 402 (funds short), 404 (an auction gone) and 409 (too low, its seller, ended) are
     * answers */
    v->errors = k->requests - k->by_code[200] - k->by_code[402] - k->by_code[404] - k->by_code[409];
    v->failed = NULL;
    if (ok == 0)
        v->failed = "no bid was taken";
    else if (v->errors > k->requests / 2)
        v->failed = "most answers were errors";
}

void load_judge_direct(load_verdict *v, const load_counts *k) {
    long long ok = (long long)(k->by_code[200] + k->by_code[201]);
    v->left = 0;
    v->purchases = 1;
    v->trades = 1; /* no trade records to account for: the audit says it all */
    v->ok = v->funds && v->negative && v->one_place && v->total && v->indexed && v->escrow;
    /* 402 (funds short), 404 (a trade taken back meanwhile) and 409 (closed, expired) are
     * answers */
    v->errors = k->requests - k->by_code[200] - k->by_code[201] - k->by_code[402] -
                k->by_code[404] - k->by_code[409];
    v->failed = NULL;
    if (ok == 0)
        v->failed = "no direct trade succeeded";
    else if (v->errors > k->requests / 2)
        v->failed = "most answers were errors";
}

int load_verdict_exit(const load_verdict *v) {
    return !v->ok ? 3 : v->failed ? 4 : 0;
}
