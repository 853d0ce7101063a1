/* opts.c - market-load's command line: the flags, make run's defaults, --url.
 *
 * Pure: the environment comes in as a load_env, messages go out in why.
 */
#include "tools/load/load.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *const mix_names[] = {"distinct", "contended", "mixed",   "flash",
                                        "book",     "direct",    "auctions"};
#define MIXES 7

const char *load_mix_name(enum load_mix mix) {
    return (unsigned)mix < MIXES ? mix_names[mix] : "?";
}

void load_usage(FILE *to) {
    fprintf(
        to,
        "usage: market-load --buyers N (--duration S | --requests K) [flags]\n"
        "       market-load --mix flash --buyers N [--sale-stock N] [--sale-limit L] [flags]\n"
        "       market-load --hold-connections N [--duration S] [--url URL]\n"
        "  --url URL               The service (default http://$MARKET_LISTEN, or\n"
        "                          http://127.0.0.1:8080: where `make run` serves).\n"
        "  --redis URL             Its store, read before and after the run: redis://...,\n"
        "                          redis-sentinel://[user:pass@]host[:port][,...]/name[/db] or\n"
        "                          redis-cluster://[user:pass@]host[:port][,...] (default\n"
        "                          $MARKET_REDIS, or redis://127.0.0.1:$MARKET_REDIS_PORT/0\n"
        "                          with port 6380: `make run`'s Redis).\n"
        "  --buyers N              Concurrent keep-alive connections, one request in flight\n"
        "                          each.\n"
        "  --duration S            Send for S seconds (decimals allowed), then wait for the\n"
        "                          answers.\n"
        "  --requests K            Send K requests in total.\n"
        "  --mix MIX               What the buyers buy. distinct (the default): every item at\n"
        "                          most once; contended: the ~N/4 cheapest items, by the N\n"
        "                          poorest buyers; mixed: half of each; flash: a flash sale\n"
        "                          market-load creates through the store (sale and item\n"
        "                          flash-<ms>, house --sale-house), its buyers buying one unit a\n"
        "                          request at once until it is sold out (--duration and\n"
        "                          --requests optional); it reports the time to sell out, the\n"
        "                          units sold, oversold and limit violations. book: buy\n"
        "                          orders and sales into them on the goods the store lists\n"
        "                          (market-seed --generate ...,goods=G): each request posts a\n"
        "                          buy order near a listing's price, cancels one of the run's\n"
        "                          resting orders, sells into the book, or lists at the\n"
        "                          seller's price; the audit checks escrow too. direct:\n"
        "                          direct trades between two players of a realm: each request\n"
        "                          proposes 1..5 funds for 1..5 (either way round), or accepts\n"
        "                          or declines one of the run's open proposals as the player\n"
        "                          offered it; the audit checks that funds are conserved.\n"
        "                          auctions: market-load opens --auctions N auctions (one\n"
        "                          unit each of a new good, from a new seller) that all end\n"
        "                          --auction-seconds S after, in the same second; each request\n"
        "                          bids the least an auction takes (or, one in twenty, its\n"
        "                          --buyout); after the run it waits for the sweepers to\n"
        "                          settle them and checks every sale's trade and the escrow.\n"
        "  --auctions N            For auctions, how many (default 1: one hot auction).\n"
        "  --auction-seconds S     For auctions, how long they run (default 5).\n"
        "  --buyout P              For auctions, the buyout (default 1000; 0: none).\n"
        "  --sale-stock N          For flash, the units on sale (default 10000).\n"
        "  --sale-limit L          For flash, the most units a buyer may buy (default\n"
        "                          2 * stock / buyers, rounded up).\n"
        "  --sale-price P          For flash, the price of a unit (default 1).\n"
        "  --sale-house H          For flash, the player paid, made with no funds when missing\n"
        "                          (default game).\n"
        "  --realms R              Spread the buyers over realms r0..r<R-1> (market-seed\n"
        "                          --generate realms=R), each buying in its own realm, and\n"
        "                          audit every one (default 1: the default realm).\n"
        "  --players GLOB          Buy only as players whose id matches GLOB (fnmatch), and\n"
        "                          only what they list; every other player and listing is\n"
        "                          left alone (default: every player).\n"
        "  --seed X                The seed of every pick (default 1).\n"
        "  --auth-secret S         Send each buyer's token, signed with S (default\n"
        "                          $MARKET_AUTH_SECRET; no token without it, for a server\n"
        "                          run with --no-auth).\n"
        "  --timeout-ms T          A request unanswered this long is an error (default\n"
        "                          10000).\n"
        "  --json FILE             Write the whole report as JSON.\n"
        "  --quiet                 Print no progress line.\n"
        "  --hold-connections N    Open N keep-alive connections (one GET /healthz each),\n"
        "                          print 'holding N connections', and keep them idle for\n"
        "                          --duration (or until SIGINT or SIGTERM): for measuring\n"
        "                          the server's memory.\n"
        "Exit status:\n"
        "  0    The run went well.\n"
        "  1    A setup failure: the server or Redis unreachable, or nothing to buy.\n"
        "  2    A usage error.\n"
        "  3    An invariant broke.\n"
        "  4    The run failed: no purchase succeeded, or most answers were errors\n"
        "       (anything but 200, 402 and 404; a 401 means the server wants tokens:\n"
        "       give it --auth-secret).\n");
}

/* The defaults of `make run` (scripts/run.sh): the service on $MARKET_LISTEN
 * or 127.0.0.1:8080, the store in $MARKET_REDIS or on 127.0.0.1:$MARKET_REDIS_PORT
 * (6380). A value that does not fit is left for the URL parsers to refuse. */
static void default_targets(load_opts *o, const load_env *env) {
    o->url = "http://127.0.0.1:8080";
    if (env->listen && *env->listen) {
        int n = snprintf(o->url_buf, sizeof o->url_buf, "http://%s", env->listen);
        o->url = n > 0 && (size_t)n < sizeof o->url_buf ? o->url_buf : env->listen;
    }
    o->redis = env->redis;
    if (o->redis && *o->redis) return;
    o->redis = "redis://127.0.0.1:6380/0";
    if (env->redis_port && *env->redis_port) {
        int n =
            snprintf(o->redis_buf, sizeof o->redis_buf, "redis://127.0.0.1:%s/0", env->redis_port);
        o->redis = n > 0 && (size_t)n < sizeof o->redis_buf ? o->redis_buf : env->redis_port;
    }
}

static const struct option longopts[] = {{"url", required_argument, NULL, 'u'},
                                         {"redis", required_argument, NULL, 'r'},
                                         {"buyers", required_argument, NULL, 'b'},
                                         {"duration", required_argument, NULL, 'd'},
                                         {"requests", required_argument, NULL, 'n'},
                                         {"mix", required_argument, NULL, 'm'},
                                         {"players", required_argument, NULL, 'p'},
                                         {"realms", required_argument, NULL, 'R'},
                                         {"seed", required_argument, NULL, 's'},
                                         {"auth-secret", required_argument, NULL, 'a'},
                                         {"json", required_argument, NULL, 'j'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"timeout-ms", required_argument, NULL, 't'},
                                         {"hold-connections", required_argument, NULL, 'H'},
                                         {"sale-stock", required_argument, NULL, 'S'},
                                         {"sale-limit", required_argument, NULL, 'L'},
                                         {"sale-price", required_argument, NULL, 'P'},
                                         {"sale-house", required_argument, NULL, 'o'},
                                         {"auctions", required_argument, NULL, 'A'},
                                         {"auction-seconds", required_argument, NULL, 'E'},
                                         {"buyout", required_argument, NULL, 'B'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};

/* Applies one flag's value. Returns 0, or -1 when the value is bad. */
static int set_flag(load_opts *o, int ch, const char *v) {
    uint64_t n;
    switch (ch) {
    case 'u': o->url = v; return 0;
    case 'r': o->redis = v; return 0;
    case 'j': o->json = v; return 0;
    case 'p': o->players = v; return 0;
    case 'a': o->auth_secret = v; return 0;
    case 'q': o->quiet = 1; return 0;
    case 'o':
        if (!market_id_valid(v)) return -1;
        o->sale_house = v;
        return 0;
    case 'S':
        if (cli_parse_u64(v, 1, (uint64_t)MARKET_SALE_STOCK_MAX, &n) < 0) return -1;
        o->sale_stock = (int64_t)n;
        return 0;
    case 'L':
        if (cli_parse_u64(v, 1, (uint64_t)MARKET_SALE_STOCK_MAX, &n) < 0) return -1;
        o->sale_limit = (int64_t)n;
        return 0;
    case 'P':
        if (cli_parse_u64(v, 1, (uint64_t)MARKET_PRICE_MAX, &n) < 0) return -1;
        o->sale_price = (int64_t)n;
        return 0;
    case 'A':
        if (cli_parse_u64(v, 1, LOAD_AUCTIONS_MAX, &n) < 0) return -1;
        o->auctions = (size_t)n;
        return 0;
    case 'E': return cli_parse_seconds(v, MARKET_DURATION_MAX_S, &o->auction_s) < 0 ? -1 : 0;
    case 'B':
        if (cli_parse_u64(v, 0, (uint64_t)MARKET_PRICE_MAX, &n) < 0) return -1;
        o->buyout = (int64_t)n;
        return 0;
    case 'b':
        if (cli_parse_u64(v, 1, LOAD_BUYERS_MAX, &n) < 0) return -1;
        o->buyers = (size_t)n;
        return 0;
    case 'R':
        if (cli_parse_u64(v, 1, MARKET_REALMS_MAX, &n) < 0) return -1;
        o->realms = (unsigned)n;
        return 0;
    case 'H':
        if (cli_parse_u64(v, 1, LOAD_BUYERS_MAX, &n) < 0) return -1;
        o->hold = (size_t)n;
        return 0;
    case 'n':
        if (cli_parse_u64(v, 1, LOAD_REQUESTS_MAX, &n) < 0) return -1;
        o->requests = n;
        return 0;
    case 't':
        if (cli_parse_u64(v, 1, LOAD_TIMEOUT_MAX_MS, &n) < 0) return -1;
        o->timeout_ms = (unsigned)n;
        return 0;
    case 's': return cli_parse_u64(v, 0, UINT64_MAX, &o->seed) < 0 ? -1 : 0;
    case 'd': return cli_parse_seconds(v, LOAD_DURATION_MAX_S, &o->duration_s) < 0 ? -1 : 0;
    case 'm':
        for (int i = 0; i < MIXES; i++)
            if (strcmp(v, mix_names[i]) == 0) {
                o->mix = (enum load_mix)i;
                return 0;
            }
        return -1;
    }
    return -1;
}

int load_opts_parse(load_opts *o, const load_env *env, int argc, char **argv, char *why,
                    size_t whylen) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->realms = 1;
    o->timeout_ms = 10000;
    o->sale_stock = LOAD_SALE_STOCK;
    o->sale_price = 1;
    o->sale_house = MARKET_SALE_HOUSE;
    o->auctions = 1;
    o->auction_s = LOAD_AUCTION_S;
    o->buyout = LOAD_BUYOUT;
    default_targets(o, env);
    o->auth_secret = env->auth_secret;
    optind = 0; /* glibc: start afresh, whatever an earlier parse left */
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (ch == 'h') return LOAD_OPTS_HELP;
        if (ch == '?' || ch == ':') {
            snprintf(why, whylen, "unknown flag or missing value: '%s'", argv[optind - 1]);
            return -1;
        }
        if (set_flag(o, ch, optarg) < 0) {
            const char *name = "?";
            for (const struct option *lo = longopts; lo->name; lo++)
                if (lo->val == ch) name = lo->name;
            snprintf(why, whylen, "bad value for --%s: '%s'", name, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(why, whylen, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (o->auth_secret && !*o->auth_secret) o->auth_secret = NULL;
    if (o->hold) {
        if (o->buyers || o->requests) {
            snprintf(why, whylen, "--hold-connections takes no --buyers or --requests");
            return -1;
        }
        return 0;
    }
    if (o->mix == LOAD_MIX_FLASH) {
        if (!o->buyers || (o->duration_s > 0 && o->requests > 0) || o->realms != 1) {
            snprintf(why, whylen, "--mix flash needs --buyers N, at most one of --duration S, "
                                  "--requests K, and one realm");
            return -1;
        }
        if (!o->sale_limit) { /* twice the fair share, so that the stock can sell out */
            uint64_t share = ((uint64_t)o->sale_stock * 2 + o->buyers - 1) / o->buyers;
            o->sale_limit = share < 1 ? 1 : (int64_t)share;
        }
        if (o->sale_limit > o->sale_stock) o->sale_limit = o->sale_stock;
        return 0;
    }
    if (o->mix == LOAD_MIX_AUCTIONS && (o->realms != 1 || o->auction_s < 1)) {
        snprintf(why, whylen, "--mix auctions runs in one realm, auctions of 1 s or more");
        return -1;
    }
    if (!o->buyers || (o->duration_s > 0) == (o->requests > 0)) {
        snprintf(why, whylen, "need --buyers N and one of --duration S, --requests K");
        return -1;
    }
    return 0;
}

int load_url_parse(const char *url, load_url *out, char *why, size_t whylen) {
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(why, whylen, "--url must start with http:// ('%s')", url);
        return -1;
    }
    const char *h = url + 7, *end = h + strcspn(h, "/");
    if (*end && strcmp(end, "/") != 0) {
        snprintf(why, whylen, "--url takes no path ('%s')", url);
        return -1;
    }
    size_t hl = (size_t)(end - h);
    if (hl == 0 || hl >= sizeof out->host) goto bad;
    memcpy(out->host, h, hl);
    out->host[hl] = '\0';
    if (cli_split_hostport(out->host, 80, out->name, sizeof out->name, &out->port) < 0) goto bad;
    return 0;
bad:
    snprintf(why, whylen, "bad --url '%s' (want http://HOST[:PORT])", url);
    return -1;
}
