/* main.c - market-load: concurrent buyers against POST /purchase, with invariant checks.
 *
 *   market-load --buyers N (--duration S | --requests K) [--url URL] [--redis URL]
 *               [--mix distinct|contended|mixed] [--realms R] [--players GLOB] [--seed X]
 *               [--timeout-ms T] [--auth-secret S] [--json FILE] [--quiet]
 *   market-load --mix flash --buyers N [--sale-stock N] [--sale-limit L] [--sale-price P]
 *               [--sale-house H] [flags]
 *   market-load --hold-connections N [--duration S] [--url URL]
 *
 * Reads what is listed and who can pay from Redis (through market/), audits
 * the store, drives N keep-alive HTTP/1.1 connections (one request in flight
 * on each) from one epoll loop, then audits the store again and checks that
 * the purchases kept the market's invariants. Its defaults are those of
 * `make run`: the service on http://$MARKET_LISTEN (127.0.0.1:8080), the
 * store in $MARKET_REDIS or on 127.0.0.1:$MARKET_REDIS_PORT (6380). Exit
 * status: 0 all well, 1 setup failure (server or Redis unreachable, nothing
 * to buy), 2 usage, 3 an invariant broke, 4 the run failed: no purchase
 * succeeded, or most answers were errors (anything but 200, 402 and 404: a
 * 401 for a missing secret, ...). The parts are in load.h; this file wires
 * them and is the only one that prints errors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "tools/load/load.h"

/* --hold-connections: open them, keep them idle, report. */
static int hold_main(const load_opts *o, const load_target *t, load_run *run) {
    char why[256];
    load_loop *l = NULL;
    if (load_probe(t, o->url, why, sizeof why) < 0 ||
        !(l = load_loop_new(o, t, NULL, run, why, sizeof why))) {
        fprintf(stderr, "market-load: %s\n", why);
        return 1;
    }
    int rc = load_loop_run(l);
    load_loop_free(l);
    if (run->held < o->hold) {
        fprintf(stderr, "market-load: only %zu of %zu connections answered (%s)\n", run->held,
                o->hold, run->last_error[0] ? run->last_error : "no error seen");
        return 1;
    }
    printf("released %zu connections after %.1f s\n", o->hold,
           (double)(run->t_end - run->t0) / 1e9);
    return rc < 0 ? 1 : 0;
}

/* The run: read the world, audit, load, audit, report. Returns the exit status. */
static int load_main(const load_opts *o, const load_target *t, load_run *run) {
    char why[512] = "";
    int status = 1, err = 0;
    lock_client *lock = NULL;
    market *m = NULL;
    market_conn *mc = NULL;
    load_loop *l = NULL;
    load_plan plan = {0};
    market_audit_report before, after;
    load_ledger ledger = {0};
    load_flash flash = {0};
    int is_flash = o->mix == LOAD_MIX_FLASH, is_book = o->mix == LOAD_MIX_BOOK,
        is_direct = o->mix == LOAD_MIX_DIRECT, is_auctions = o->mix == LOAD_MIX_AUCTIONS;
    load_auctions auc = {0};
    char(*marks)[MARKET_TRADE_ID_MAX + 1] = calloc(o->realms, sizeof *marks);
    load_cmdstats *cb = calloc(1, sizeof *cb), *ca = calloc(1, sizeof *ca);
    char(*realms)[MARKET_REALM_MAX + 1] = calloc(o->realms, sizeof *realms);
    market_config cfg = {
        .redis_timeout_ms = 10000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 2000};
    if (rconn_addr_parse(o->redis, &cfg.redis) < 0) {
        fprintf(stderr, "market-load: bad Redis URL '%s'\n", o->redis);
        status = 2;
        goto out;
    }
    if (!cb || !ca || !realms || !marks) goto oom;
    load_realms_name(o, realms);
    if (load_probe(t, o->url, why, sizeof why) < 0) goto fail;
    if (!(lock = lock_local_new(&err)) || !(m = market_new(&cfg, lock, &err)) ||
        !(mc = market_conn_new(m, &err)))
        goto oom;
    if (is_flash) { /* the sale (and its house) exist before the first audit */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(flash.sale, sizeof flash.sale, "flash-%lld",
                 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        flash.stock = o->sale_stock;
        flash.limit = o->sale_limit;
        flash.price = o->sale_price;
        if (load_flash_create(mc, o, realms[0], flash.sale, why, sizeof why) < 0) goto fail;
    }
    if (is_auctions && load_auctions_open(mc, o, realms[0], &auc, why, sizeof why) < 0) goto fail;
    if ((err = load_audit(mc, realms, o->realms, &before)) < 0) {
        snprintf(why, sizeof why, "cannot audit %s: %s", o->redis, market_strerror(err));
        goto fail;
    }
    if (load_world_read(&plan, mc, o->redis, realms, o->realms, o->players, why, sizeof why) < 0)
        goto fail;
    if (is_flash) { /* the house is paid: the trade audit needs its row, whatever --players */
        int have = 0;
        for (size_t i = 0; i < plan.n_players && !have; i++)
            have = strcmp(load_plan_player(&plan, i), o->sale_house) == 0;
        market_player *h = NULL;
        if (!have && (err = market_player_get(mc, realms[0], o->sale_house, &h)) < 0) {
            snprintf(why, sizeof why, "cannot read the house %s: %s", o->sale_house,
                     market_strerror(err));
            goto fail;
        }
        err = have ? MARKET_OK : load_plan_add_player(&plan, o->sale_house, h->funds);
        market_player_free(h);
        if (err < 0) goto oom;
    }
    if (load_trades_mark(mc, realms, o->realms, marks, why, sizeof why) < 0) goto fail;
    if (load_plan_build(&plan, o->mix, o->buyers, o->seed) < 0) goto oom;
    if (is_flash && load_plan_flash(&plan, flash.sale, o->sale_price, o->sale_limit,
                                    o->sale_house, o->buyers, o->seed) < 0)
        goto oom;
    if (is_auctions && load_plan_auctions(&plan, auc.ids, auc.n, o->buyout) < 0) goto oom;
    if (load_ledger_init(&ledger, &plan) < 0) goto oom;
    if (!(l = load_loop_new(o, t, &plan, run, why, sizeof why))) goto fail;
    if (is_flash && plan.n_flash == 0) {
        snprintf(why, sizeof why, "nobody to buy: no player of %s%s%s but the house can pay %lld",
                 o->redis, o->players ? " matching " : "", o->players ? o->players : "",
                 (long long)o->sale_price);
        goto fail;
    }
    if (is_book && (plan.n_goods == 0 || plan.n_players < 2)) {
        snprintf(why, sizeof why,
                 "nothing to trade: %zu listings of goods, %zu players in %s%s%s (seed goods: "
                 "market-seed --generate ...,goods=G)",
                 plan.n_goods, plan.n_players, o->redis, o->players ? " matching " : "",
                 o->players ? o->players : "");
        goto fail;
    }
    if (is_direct && plan.n_players < 2) {
        snprintf(why, sizeof why, "nobody to trade: %zu players in %s%s%s", plan.n_players,
                 o->redis, o->players ? " matching " : "", o->players ? o->players : "");
        goto fail;
    }
    if (!is_flash && !is_book && !is_direct && !is_auctions &&
        (plan.n_items == 0 || plan.n_players < 2)) {
        snprintf(why, sizeof why, "nothing to buy: %zu listed items, %zu players in %s%s%s",
                 plan.n_items, plan.n_players, o->redis, o->players ? " matching " : "",
                 o->players ? o->players : "");
        goto fail;
    }
    if (!o->quiet)
        fprintf(stderr,
                "market-load: %zu listed items, %zu listings of goods, %zu players%s%s in %u "
                "realm%s; %s mix, %zu buyers\n",
                plan.n_items, plan.n_goods, plan.n_players, o->players ? " matching " : "",
                o->players ? o->players : "", o->realms, o->realms == 1 ? "" : "s",
                load_mix_name(o->mix), o->buyers);
    if (load_cmdstats_read(mc, cb, why, sizeof why) < 0) goto fail;

    int ran = load_loop_run(l);

    if (load_cmdstats_read(mc, ca, why, sizeof why) < 0) goto fail;
    if (is_auctions && load_auctions_read(mc, realms[0], &auc, why, sizeof why) < 0) goto fail;
    if ((err = load_audit_settled(mc, realms, o->realms, run->k.transport != 0, &after,
                                  &run->settle_ms)) < 0) {
        snprintf(why, sizeof why, "cannot audit %s after the run: %s", o->redis,
                 market_strerror(err));
        goto fail;
    }
    if (load_trades_read(&ledger, mc, realms, o->realms, marks, o->players, why, sizeof why) < 0)
        goto fail;
    load_verdict v = load_judge(&run->k, &before, &after);
    if (is_flash) {
        if (load_flash_read(mc, realms[0], &flash, why, sizeof why) < 0) goto fail;
        flash.stacked = after.sale_units_in_stacks - before.sale_units_in_stacks;
        load_judge_flash(&v, &run->k, &flash);
    }
    if (is_book) load_judge_book(&v, &run->k, &ledger);
    if (is_auctions) load_judge_auctions(&v, &run->k, &auc);
    if (is_direct)
        load_judge_direct(&v, &run->k); /* direct trades write no trade records */
    else
        load_judge_trades(&v, &ledger);
    load_report rep = {o,
                       &plan,
                       run,
                       &before,
                       &after,
                       &v,
                       cb,
                       ca,
                       is_direct ? NULL : &ledger,
                       is_flash ? &flash : NULL,
                       is_auctions ? &auc : NULL};
    load_report_print(stdout, &rep);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        snprintf(why, sizeof why, "cannot write the report: %s", strerror(errno));
        goto fail;
    }
    if (o->json && load_report_write(&rep, o->json, why, sizeof why) < 0) {
        fprintf(stderr, "market-load: %s\n", why);
        goto out;
    }
    if (ran < 0) {
        snprintf(why, sizeof why, "the server stopped answering (%s)",
                 run->last_error[0] ? run->last_error : "no answer");
        goto fail;
    }
    status = load_verdict_exit(&v);
    goto out;
oom:
    snprintf(why, sizeof why, "out of memory");
fail:
    fprintf(stderr, "market-load: %s\n", why);
out:
    load_loop_free(l);
    market_conn_free(mc);
    market_free(m);
    lock_free(lock);
    load_ledger_free(&ledger);
    load_plan_free(&plan);
    free(auc.ids);
    free(marks);
    free(cb);
    free(ca);
    free(realms);
    return status;
}

int main(int argc, char **argv) {
    static load_opts o; /* holds the strings it points to: not copied */
    char why[512];
    load_env env = {getenv("MARKET_LISTEN"), getenv("MARKET_REDIS"), getenv("MARKET_REDIS_PORT"),
                    getenv("MARKET_AUTH_SECRET")};
    int rc = load_opts_parse(&o, &env, argc, argv, why, sizeof why);
    if (rc == LOAD_OPTS_HELP) {
        load_usage(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (rc < 0) {
        fprintf(stderr, "market-load: %s\nmarket-load: see --help\n", why);
        return 2;
    }
    load_url u;
    load_target t;
    if (load_url_parse(o.url, &u, why, sizeof why) < 0 ||
        load_target_resolve(&t, &u, why, sizeof why) < 0) {
        fprintf(stderr, "market-load: %s\n", why);
        return 2;
    }
    load_signals_install();
    load_run *run = calloc(1, sizeof *run); /* large: the histograms */
    if (!run) {
        fprintf(stderr, "market-load: out of memory\n");
        return 1;
    }
    int status = o.hold ? hold_main(&o, &t, run) : load_main(&o, &t, run);
    free(run);
    return status;
}
