/* report.c - market-load's reports: the text one for people, the JSON one (jansson) for scripts.
 *
 * Pure but for the stream and the file it is handed. Both say the same
 * things; the JSON one adds the raw commandstats and the audits.
 */
#include "tools/load/load.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text ---- */

/* The trade audit's line: the records account for the run, do not, or cannot tell (the
 * server's history was trimmed past the run's start). */
static void print_trades(FILE *f, const load_report *r) {
    const load_ledger *l = r->ledger;
    const load_verdict *v = r->v;
    if (v->trades_trimmed)
        fprintf(f, "    --  cannot account for the trades: the server's trade history "
                   "(--trade-history) was trimmed past the run's start in %u realm%s; %lld "
                   "trades read for %lld items that left the market\n",
                l->trimmed, l->trimmed == 1 ? "" : "s", l->recorded, v->left);
    else if (v->trades)
        fprintf(f,
                "    ok  %lld trades recorded, one for each %s; they account for the funds of "
                "all %zu players\n",
                l->recorded,
                r->flash                         ? "unit sold"
                : r->o->mix == LOAD_MIX_BOOK     ? "fill into a buy order or a listing"
                : r->o->mix == LOAD_MIX_AUCTIONS ? "auction sold"
                                                 : "item that left the market",
                l->n);
    else
        fprintf(f,
                "    BAD %lld trades recorded for %lld items that left the market; %lld of %zu "
                "players' funds moved otherwise%s%s; %lld trades or players unknown to the run\n",
                l->recorded, v->left, l->mismatched, l->n, l->first_bad ? ", the first: " : "",
                l->first_bad ? l->first_bad : "", l->unknown);
}

void load_report_print(FILE *f, const load_report *r) {
    const load_opts *o = r->o;
    const load_run *run = r->run;
    const load_counts *k = &run->k;
    const market_audit_report *b = r->before, *a = r->after;
    const load_verdict *v = r->v;
    double el = (double)(run->t_end - run->t0) / 1e9;
    unsigned long long ok = k->by_code[200] + k->by_code[201]; /* 201: a buy order resting */
    fprintf(f, "market-load: %s mix, %zu buyers against %s, seed %" PRIu64 "\n",
            load_mix_name(o->mix), o->buyers, o->url, o->seed);
    fprintf(f, "  run           %.2f s, %s: %s\n", el, run->exhausted ? "stopped early" : "stopped",
            run->stop_reason ? run->stop_reason : "-");
    fprintf(f, "  requests      %llu (%.1f/s), %llu reconnects, %llu connect errors\n", k->requests,
            el > 0 ? (double)k->requests / el : 0.0, k->reconnects, k->connect_errors);
    fprintf(f,
            "  outcomes      200: %llu  401: %llu  402: %llu  403: %llu  404: %llu  409: %llu  "
            "503: %llu  other: %llu  transport errors: %llu\n",
            k->by_code[200], k->by_code[401], k->by_code[402], k->by_code[403], k->by_code[404],
            k->by_code[409], k->by_code[503], load_counts_other(k), k->transport);
    if (k->by_code[401])
        fprintf(f, "  401           %llu unauthorized: %s\n", k->by_code[401],
                o->auth_secret ? "the server's secret is not the one given (--auth-secret or "
                                 "MARKET_AUTH_SECRET)"
                               : "the server wants each buyer's token: give --auth-secret S "
                                 "(or MARKET_AUTH_SECRET), the server's secret");
    if (k->by_code[403])
        fprintf(f, "  403           %llu forbidden: a token of another player than the buyer\n",
                k->by_code[403]);
    if (k->by_code[402] > ok)
        fprintf(f, "  402           more refusals for want of funds than purchases: the buyers "
                   "ran out, so the run measures their funds, not the service (seed more: "
                   "market-seed --generate ...,funds=F)\n");
    if (k->unknown)
        fprintf(f, "  503           %llu of unknown outcome (not_replicated, store_unavailable): "
                   "each may have bought\n",
                k->unknown);
    if (k->transport && run->last_error[0]) fprintf(f, "  last error    %s\n", run->last_error);
    if (run->settle_ms)
        fprintf(f,
                "  settle        waited %.1f s for the store to stop changing before the audit\n",
                (double)run->settle_ms / 1000);
    if (r->plan->unaffordable)
        fprintf(f, "  skipped       %llu items nobody could pay for\n", r->plan->unaffordable);
    fprintf(f, "  purchases/s   %.1f\n", el > 0 ? (double)ok / el : 0.0);
    fprintf(f,
            "  latency ms    all: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f   200s: p50 %.3f  p99 "
            "%.3f\n",
            load_ms(load_hist_pct(&run->all, 50)), load_ms(load_hist_pct(&run->all, 90)),
            load_ms(load_hist_pct(&run->all, 99)), load_ms(run->all.max),
            load_ms(load_hist_pct(&run->ok, 50)), load_ms(load_hist_pct(&run->ok, 99)));
    long long cmds = r->ca->total - r->cb->total;
    double cpu = r->ca->cpu_s - r->cb->cpu_s;
    if (cmds >= 0 && ok)
        fprintf(f, "  redis         %lld commands, %.2f per purchase; %.1f us of CPU per purchase\n",
                cmds, (double)cmds / (double)ok, cpu * 1e6 / (double)ok);
    else if (cmds >= 0)
        fprintf(f, "  redis         %lld commands\n", cmds);
    for (size_t i = 0; cmds > 0 && r->ca->nmasters > 1 && i < r->ca->nmasters; i++) {
        long long d = load_cmdstats_master_delta(r->cb, r->ca, i);
        fprintf(f, "    master %-21s %lld commands, %.1f%%\n", r->ca->master[i].where, d,
                100.0 * (double)d / (double)cmds);
    }
    fprintf(f, "  invariants    %s\n", v->ok ? "OK" : "BROKEN");
    if (b->total_escrow || a->total_escrow || a->orders)
        fprintf(f, "    %s funds and escrow %lld before, %lld after\n", v->funds ? "ok " : "BAD",
                (long long)(b->total_funds + b->total_escrow),
                (long long)(a->total_funds + a->total_escrow));
    else
        fprintf(f, "    %s funds %lld before, %lld after\n", v->funds ? "ok " : "BAD",
                (long long)b->total_funds, (long long)a->total_funds);
    if (!v->escrow || a->orders)
        fprintf(f,
                "    %s %zu buy orders hold %lld, their buyers' escrow %lld; %zu players with "
                "negative escrow; %zu orders not in their book or list\n",
                v->escrow ? "ok " : "BAD", a->orders, (long long)a->orders_escrow,
                (long long)a->total_escrow, a->negative_escrow, a->orders_misbooked);
    fprintf(f, "    %s %zu players with negative funds\n", v->negative ? "ok " : "BAD",
            a->negative_funds);
    fprintf(f, "    %s %zu items in more than one place\n", v->one_place ? "ok " : "BAD",
            a->items_misplaced);
    fprintf(f, "    %s %zu search index entries disagree with the market\n",
            v->indexed ? "ok " : "BAD", a->index_mismatch);
    fprintf(f, "    %s items held+listed %zu before, %zu after; units %lld before, %lld after\n",
            v->total ? "ok " : "BAD", b->items_held + b->items_listed - b->goods_listed,
            a->items_held + a->items_listed - a->goods_listed, (long long)load_units(b),
            (long long)load_units(a));
    if (o->mix == LOAD_MIX_BOOK)
        fprintf(f, "    ok  %llu answered 200 and %llu 201 (a buy order resting); %lld fills\n",
                k->by_code[200], k->by_code[201], v->left);
    else if (o->mix == LOAD_MIX_AUCTIONS)
        fprintf(f, "    ok  %llu bids taken (%.1f/s)\n", k->by_code[200],
                el > 0 ? (double)k->by_code[200] / el : 0.0);
    else if (o->mix == LOAD_MIX_DIRECT)
        fprintf(f, "    ok  %llu proposals answered 201, %llu accepts and declines 200\n",
                k->by_code[201], k->by_code[200]);
    else
        fprintf(f, "    %s %llu purchases answered 200, %lld %s%s\n", v->purchases ? "ok " : "BAD",
                ok, v->left, r->flash ? "units sold" : "items left the market",
                k->transport || k->unknown ? " (unanswered requests and 503s of unknown outcome "
                                             "may account for the difference)"
                                           : "");
    const load_flash *fl = r->flash;
    if (fl) {
        double sell = run->t_soldout ? (double)(run->t_soldout - run->t0) / 1e9 : el;
        fprintf(f, "  flash sale    %s: %lld units at %lld, limit %lld a buyer\n", fl->sale,
                (long long)fl->stock, (long long)fl->price, (long long)fl->limit);
        fprintf(f, "    %s sold out in %.3f s, %.1f purchases/s until then\n",
                run->t_soldout ? "   " : "NOT", sell, sell > 0 ? (double)ok / sell : 0.0);
        fprintf(f, "    %s %lld units sold, %lld left (of %lld); oversold %lld\n",
                fl->oversold == 0 && fl->sold + fl->left == fl->stock ? "ok " : "BAD",
                (long long)fl->sold, (long long)fl->left, (long long)fl->stock,
                (long long)fl->oversold);
        fprintf(f, "    %s %lld buyers above the limit (%lld bought, %lld units)\n",
                fl->violations == 0 && fl->bought_sum == fl->sold ? "ok " : "BAD",
                (long long)fl->violations, (long long)fl->buyers_seen,
                (long long)fl->bought_sum);
        fprintf(f, "    %s %lld units reached the buyers' stacks\n",
                fl->stacked == fl->sold ? "ok " : "BAD", (long long)fl->stacked);
    }
    const load_auctions *au = r->auctions;
    if (au) {
        fprintf(f, "  auctions      %zu of %s's %s, ending in the same second\n", au->n, au->seller,
                au->item);
        fprintf(f,
                "    %s %zu sold, %zu back to the seller, %zu still open; %zu past their end "
                "unsettled after %lld ms\n",
                au->late ? "BAD" : "ok ", au->sold, au->unsold, au->open, au->late,
                (long long)au->settle_ms);
    }
    if (r->ledger) print_trades(f, r);
    if (!v->ok)
        fprintf(f, "  result        FAILED: an invariant broke (exit 3)\n");
    else if (v->failed)
        fprintf(f, "  result        FAILED: %s, %llu of %llu requests were errors (exit 4)\n",
                v->failed, v->errors, k->requests);
    else
        fprintf(f, "  result        OK, %llu of %llu requests were errors\n", v->errors,
                k->requests);
}

/* ---- JSON ---- */

/* jansson's integers are long long here (JSON_INTEGER_IS_LONG_LONG). */
#define JINT_MAX LLONG_MAX
_Static_assert(sizeof(json_int_t) == sizeof(long long), "json_int_t is long long");

/* x rounded to places decimals, as the report states it (the dump prints
 * 15 significant digits, so the rounded value reads back as written). */
static json_t *jreal(double x, int places) {
    double scale = pow(10, places);
    return json_real(round(x * scale) / scale);
}

static json_t *jcount(unsigned long long n) {
    return json_integer(n > (unsigned long long)JINT_MAX ? JINT_MAX : (json_int_t)n);
}

/* s as a JSON string; bytes that are not UTF-8 (a --players glob, say, is
 * any bytes) become '?', so the report is always valid JSON. */
static json_t *jstr(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    size_t n = strlen(s);
    char *t = malloc(n + 1);
    if (!t) return NULL;
    for (size_t i = 0; i <= n; i++)
        t[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    j = json_string(t);
    free(t);
    return j;
}

/* s, or null for NULL. */
static json_t *jstr_or_null(const char *s) {
    return s ? jstr(s) : json_null();
}

/* A seed up to INT64_MAX is a number; a larger one a decimal string, since
 * a JSON integer here is a signed 64-bit one. */
static json_t *jseed(uint64_t seed) {
    if (seed <= (uint64_t)JINT_MAX) return json_integer((json_int_t)seed);
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, seed);
    return json_string(buf);
}

static json_t *json_audit(const market_audit_report *a) {
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "players",
                     (json_int_t)a->players, "total_funds", (json_int_t)a->total_funds,
                     "negative_funds", (json_int_t)a->negative_funds, "items_held",
                     (json_int_t)a->items_held, "items_listed", (json_int_t)a->items_listed,
                     "items_misplaced", (json_int_t)a->items_misplaced, "index_mismatch",
                     (json_int_t)a->index_mismatch, "units_in_stacks",
                     (json_int_t)a->units_in_stacks, "units_listed", (json_int_t)a->units_listed,
                     "units_in_sales", (json_int_t)a->units_in_sales, "total_escrow",
                     (json_int_t)a->total_escrow, "orders", (json_int_t)a->orders, "orders_escrow",
                     (json_int_t)a->orders_escrow);
}

static json_t *json_hist(const load_hist *h) {
    double mean = h->count ? h->sum / (double)h->count / 1e6 : 0.0;
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "count", jcount(h->count), "p50",
                     jreal(load_ms(load_hist_pct(h, 50)), 4), "p90",
                     jreal(load_ms(load_hist_pct(h, 90)), 4), "p99",
                     jreal(load_ms(load_hist_pct(h, 99)), 4), "p999",
                     jreal(load_ms(load_hist_pct(h, 99.9)), 4), "max", jreal(load_ms(h->max), 4),
                     "mean", jreal(mean, 4));
}

/* Sets key to v (stolen) in obj. Returns 0, or -1 (v is freed). */
static int set(json_t *obj, const char *key, json_t *v) {
    return obj && v ? json_object_set_new(obj, key, v) : (json_decref(v), -1);
}

static json_t *json_cmdstats(const load_cmdstats *s) {
    json_t *o = json_object();
    for (size_t i = 0; o && i < s->n; i++)
        if (set(o, s->c[i].name, json_integer(s->c[i].calls)) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* Each command's calls after minus before, INFO and the unchanged left out. */
static json_t *json_cmd_delta(const load_cmdstats *cb, const load_cmdstats *ca) {
    json_t *o = json_object();
    for (size_t i = 0; o && i < ca->n; i++) {
        long long d = ca->c[i].calls - load_cmdstats_get(cb, ca->c[i].name);
        if (d == 0 || strcmp(ca->c[i].name, "info") == 0) continue;
        if (set(o, ca->c[i].name, json_integer(d)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *json_status(const load_counts *k, const load_verdict *v) {
    json_t *by = json_object();
    for (int s = 100; by && s < 600; s++) {
        char code[12];
        snprintf(code, sizeof code, "%d", s);
        if (k->by_code[s] && set(by, code, jcount(k->by_code[s])) < 0) {
            json_decref(by);
            return NULL;
        }
    }
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "200",
        jcount(k->by_code[200]),
        "401", jcount(k->by_code[401]), "402", jcount(k->by_code[402]), "403",
        jcount(k->by_code[403]), "404", jcount(k->by_code[404]), "409", jcount(k->by_code[409]),
        "503", jcount(k->by_code[503]), "other", jcount(load_counts_other(k)), "transport_errors",
        jcount(k->transport), "unknown_outcome", jcount(k->unknown), "errors", jcount(v->errors),
        "by_code", by);
}

json_t *load_report_json(const load_report *r) {
    const load_opts *o = r->o;
    const load_run *run = r->run;
    const load_counts *k = &run->k;
    const load_verdict *v = r->v;
    double el = (double)(run->t_end - run->t0) / 1e9;
    unsigned long long ok = k->by_code[200] + k->by_code[201]; /* 201: a buy order resting */
    long long cmds = r->ca->total - r->cb->total;
    int per = cmds >= 0 && ok;
    double per_purchase = per ? (double)cmds / (double)ok : 0;

    json_t *j = json_object();
    set(j, "tool", json_string("market-load"));
    set(j, "config",
        json_pack("{s:o, s:o, s:I, s:o, s:o, s:s, s:o, s:I, s:b, s:o}", "url", jstr(o->url),
                  "redis", jstr(o->redis), "buyers", (json_int_t)o->buyers, "duration_s",
                  jreal(o->duration_s, 3), "requests", jcount(o->requests), "mix",
                  load_mix_name(o->mix), "seed", jseed(o->seed), "timeout_ms",
                  (json_int_t)o->timeout_ms, "tokens", o->auth_secret != NULL, "players",
                  jstr_or_null(o->players)));
    set(j, "setup",
        json_pack("{s:I, s:I, s:I, s:I}", "players", (json_int_t)r->plan->n_players, "listed",
                  (json_int_t)r->plan->n_items, "contended_window", (json_int_t)r->plan->n_window,
                  "contended_pool", (json_int_t)r->plan->n_pool));
    set(j, "run",
        json_pack("{s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o}", "elapsed_s",
                  jreal(el, 4), "stop_reason", jstr(run->stop_reason ? run->stop_reason : ""),
                  "stopped_early", run->exhausted, "requests", jcount(k->requests),
                  "requests_per_s", jreal(el > 0 ? (double)k->requests / el : 0.0, 2),
                  "purchases_per_s", jreal(el > 0 ? (double)ok / el : 0.0, 2), "reconnects",
                  jcount(k->reconnects), "connect_errors", jcount(k->connect_errors),
                  "unaffordable_skipped", jcount(r->plan->unaffordable), "settle_ms",
                  (json_int_t)run->settle_ms, "last_error", jstr(run->last_error)));
    set(j, "status", json_status(k, v));
    set(j, "latency_ms",
        json_pack("{s:o, s:o}", "all", json_hist(&run->all), "ok", json_hist(&run->ok)));
    set(j, "redis_commands", json_integer(cmds));
    json_t *masters = json_array();
    for (size_t i = 0; masters && i < r->ca->nmasters; i++) {
        long long d = load_cmdstats_master_delta(r->cb, r->ca, i);
        json_array_append_new(masters,
                              json_pack("{s:s, s:I, s:o}", "address", r->ca->master[i].where,
                                        "commands", (json_int_t)d, "share",
                                        cmds > 0 ? jreal((double)d / (double)cmds, 4)
                                                 : json_null()));
    }
    set(j, "redis_commands_per_purchase", per ? jreal(per_purchase, 3) : json_null());
    set(j, "redis",
        json_pack("{s:I, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:o}", "commands",
                  (json_int_t)cmds, "commands_per_purchase",
                  per ? jreal(per_purchase, 3) : json_null(), "cpu_seconds",
                  jreal(r->ca->cpu_s - r->cb->cpu_s, 3), "cpu_us_per_purchase",
                  per ? jreal((r->ca->cpu_s - r->cb->cpu_s) * 1e6 / (double)ok, 2) : json_null(),
                  "commands_delta", json_cmd_delta(r->cb, r->ca), "calls_before",
                  (json_int_t)r->cb->total, "calls_after", (json_int_t)r->ca->total,
                  "commandstats_before", json_cmdstats(r->cb), "commandstats_after",
                  json_cmdstats(r->ca), "masters", masters));
    const load_ledger *l = r->ledger;
    set(j, "invariants",
        json_pack("{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:I, s:o, s:b, s:o, s:o, s:o}", "ok",
                  v->ok, "funds_conserved", v->funds, "escrow_consistent", v->escrow,
                  "no_negative_funds", v->negative, "items_in_one_place", v->one_place,
                  "items_total_unchanged", v->total, "purchases_match", v->purchases,
                  "indexes_match", v->indexed, "items_left_market", (json_int_t)v->left,
                  "trades_match", v->trades_trimmed ? json_null() : json_boolean(v->trades),
                  "trades_trimmed", v->trades_trimmed, "trades",
                  l ? json_pack("{s:I, s:I, s:I, s:I, s:o}", "recorded", (json_int_t)l->recorded,
                                "players_checked", (json_int_t)l->n, "players_mismatched",
                                (json_int_t)l->mismatched, "unknown", (json_int_t)l->unknown,
                                "first_mismatch", jstr_or_null(l->first_bad))
                    : json_null(),
                  "before", json_audit(r->before), "after", json_audit(r->after)));
    const load_flash *fl = r->flash;
    if (fl) {
        double sell = run->t_soldout ? (double)(run->t_soldout - run->t0) / 1e9 : el;
        set(j, "flash",
            json_pack("{s:s, s:I, s:I, s:I, s:b, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
                      "sale", fl->sale, "stock", (json_int_t)fl->stock, "limit",
                      (json_int_t)fl->limit, "price", (json_int_t)fl->price, "sold_out",
                      run->t_soldout != 0, "time_to_sell_out_s", jreal(sell, 4),
                      "purchases_per_s", jreal(sell > 0 ? (double)ok / sell : 0.0, 2), "sold",
                      (json_int_t)fl->sold, "left", (json_int_t)fl->left, "oversold",
                      (json_int_t)fl->oversold, "limit_violations", (json_int_t)fl->violations,
                      "bought_sum", (json_int_t)fl->bought_sum, "stacked",
                      (json_int_t)fl->stacked, "ok", fl->ok));
    }
    const load_auctions *au = r->auctions;
    if (au)
        set(j, "auctions",
            json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "seller", au->seller, "item",
                      au->item, "opened", (json_int_t)au->n, "sold", (json_int_t)au->sold, "unsold",
                      (json_int_t)au->unsold, "open", (json_int_t)au->open, "unsettled_past_end",
                      (json_int_t)au->late, "settle_ms", (json_int_t)au->settle_ms, "bids_per_s",
                      jreal(el > 0 ? (double)k->by_code[200] / el : 0.0, 1)));
    set(j, "result",
        json_pack("{s:i, s:o}", "exit", load_verdict_exit(v), "failed", jstr_or_null(v->failed)));
    /* set() fails only out of memory; a report with a section missing is no report. */
    static const char *const sections[] = {
        "tool",   "config",     "setup",          "run",
        "status", "latency_ms", "redis_commands", "redis_commands_per_purchase",
        "redis",  "invariants", "result"};
    for (size_t i = 0; j && i < sizeof sections / sizeof *sections; i++)
        if (!json_object_get(j, sections[i])) {
            json_decref(j);
            j = NULL;
        }
    return j;
}

int load_report_write(const load_report *r, const char *path, char *why, size_t whylen) {
    json_t *j = load_report_json(r);
    if (!j) {
        snprintf(why, whylen, "cannot make the JSON report: out of memory");
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        json_decref(j);
        return -1;
    }
    int bad = json_dumpf(j, f, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) != 0;
    json_decref(j);
    if (fputc('\n', f) == EOF || ferror(f)) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        snprintf(why, whylen, "cannot write %s", path);
        return -1;
    }
    return 0;
}
