/* market_seed.c - market-seed: load a fixture file, or generate a large world, into Redis.
 *
 *   market-seed [--redis URL] [--realm R] [--reset] FILE.json
 *   market-seed [--redis URL] [--reset] --generate
 *               [realms=R,]players=N,items=M[,goods=G][,funds=F][,prices=LO-HI][,seed=S]
 *   market-seed [--redis URL] [--realm R] --reindex
 *   market-seed [--auth-secret S] [--realm R] [--ttl 1h] [--kid K] [--audience A]
 *               --print-token PLAYER
 *   market-seed [--admin-secret S] --print-admin-token
 *   market-seed [--redis URL] [--realm R] --sale id=ID,item=ITEM,stock=N,price=P[,limit=L]
 *   market-seed [--redis URL] [--realm R] --auction seller=S,item=I,start=P,minutes=M[,...]
 *               [,hours=H][,house=PLAYER]
 *
 * A realm's world is checked as a whole before anything is written (no item
 * twice, every owner a player) and written in short steps, the realm refused by the
 * service until the last one (market_world.c); a generated world of R realms is R such
 * worlds, one per realm (market_realm_nth()).
 * --reindex rebuilds a realm's search indexes from its market (market_reindex()), for a
 * store seeded before they existed or in their former layout (idx:{R}:all, :item and
 * :seller), and may run while the service does.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "cli/cli.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"

#define FIXTURE_MAX (256u * 1024 * 1024)

/* Prints the usage forms, then each flag with what it does, on to. This function can't fail. */
static void usage(FILE *to) {
    fprintf(to,
            "usage: market-seed [--redis URL] [--realm R] [--reset] FILE.json\n"
            "       market-seed [--redis URL] [--reset] --generate SPEC\n"
            "       market-seed [--redis URL] [--realm R] --reindex\n"
            "       market-seed [--redis URL] [--realm R] --sale SPEC\n"
            "       market-seed [--redis URL] [--realm R] --auction SPEC\n"
            "       market-seed [--auth-secret S] [--realm R] [--ttl T] [--kid K] [--audience A]\n"
            "                   --print-token PLAYER\n"
            "       market-seed [--admin-secret S] --print-admin-token\n"
            "Writes the players, items and listings of FILE.json, or generated ones, into the\n"
            "store; rebuilds a realm's search indexes; creates a flash sale; prints tokens.\n"
            "  --redis URL            The store, one of redis://[user:pass@]host[:port][/db],\n"
            "                         redis-sentinel://[user:pass@]host[:port][,...]/name[/db]\n"
            "                         (a Sentinel group) and\n"
            "                         redis-cluster://[user:pass@]host[:port][,...] (a cluster);\n"
            "                         default $MARKET_REDIS, or redis://127.0.0.1:6379/0.\n"
            "  --realm R              The realm to write (default " MARKET_REALM_DEFAULT ").\n"
            "  --reset                Delete the realm's keys first (users:{R}:*,\n"
            "                         inventory:{R}:*, stacks:{R}:*, idem:{R}:*, idx:{R}:*,\n"
            "                         trades:{R}*, sale:{R}:*, hist:{R}:*, book:{R}:*,\n"
            "                         order:{R}:*, bids:{R}:*, market:{R}*); other realms are\n"
            "                         left alone.\n"
            "  --generate SPEC        Write players p0.. and items i0.., each listed by some\n"
            "                         player. SPEC is players=N,items=M and, after a comma each,\n"
            "                         any of realms=R, goods=G, orders=K, funds=F (default\n"
            "                         100000),\n"
            "                         prices=LO-HI (default 1-1000) and seed=S (default 1). With\n"
            "                         realms=R (R > 1) the players and items are spread over\n"
            "                         realms r0..r<R-1>, each its own world with its own p0..\n"
            "                         and i0..; realms=1 is the --realm. goods=G adds stackable\n"
            "                         goods g0..: player k holds 100 units of g<k mod G> and\n"
            "                         lists 50 more. orders=K (with goods) adds K buy orders\n"
            "                         of 1..10 units of the goods at 50..99%% of their cheapest\n"
            "                         listing, each escrowed out of its buyer's funds.\n"
            "                         auctions=A opens A auctions of one unit of \"lot\" each\n"
            "                         (held by p0.. round robin, a start bid within prices),\n"
            "                         ending with the listings (ends=S), or in an hour.\n"
            "                         ends=S makes every listing end S seconds after the\n"
            "                         seed (the sweepers then take them back at once).\n"
            "  --reindex              Rebuild the realm's search indexes (idx:{R}:item:<item>\n"
            "                         and idx:{R}:seller:<seller>) from its market: every\n"
            "                         listing put in both, stale entries removed, the former\n"
            "                         idx:{R}:all, :item and :seller deleted; safe while the\n"
            "                         service runs. It exits 1 when the realm keeps changing\n"
            "                         under it (what it wrote is right: run it again).\n"
            "  --sale SPEC            Create a flash sale of the realm straight in the store, as\n"
            "                         POST /sales would (no admin token: whoever reaches the\n"
            "                         store may). SPEC is id=ID,item=ITEM,stock=N,price=P and,\n"
            "                         after a comma each, any of limit=L, hours=H and\n"
            "                         house=PLAYER: N units of ITEM at P each, at most L a\n"
            "                         player (default N), from now for H hours (default 24),\n"
            "                         paid to PLAYER (default " MARKET_SALE_HOUSE ").\n"
            "  --auction SPEC         Put a player's item up for auction, as POST /auctions\n"
            "                         would (no token: whoever reaches the store may). SPEC is\n"
            "                         seller=ID,item=ITEM,start=P,minutes=M and, after a comma\n"
            "                         each, any of quantity=Q (a lot of units), buyout=B and\n"
            "                         step=S (default 1): bids from P, topping by S, for M\n"
            "                         minutes.\n"
            "  --print-token PLAYER   Print PLAYER's bearer token of the realm, an HS256 JWT\n"
            "                         signed with the secret (--auth-secret, default\n"
            "                         $MARKET_AUTH_SECRET), and write nothing.\n"
            "  --auth-secret S        The secret of --print-token.\n"
            "  --ttl T                The token's lifetime: N[s|m|h|d], at most 366d (default\n"
            "                         1h).\n"
            "  --kid K                Put kid K in the token's header (a server's --auth-key\n"
            "                         K:hs256:S).\n"
            "  --audience A           Give the token aud A (a server's --auth-audience).\n"
            "  --print-admin-token    Print the admin token (POST /sales) for the admin secret\n"
            "                         (--admin-secret, default $MARKET_ADMIN_SECRET), and write\n"
            "                         nothing.\n"
            "  --admin-secret S       The secret of --print-admin-token.\n"
            "  --help                 Print this text.\n");
}

static char *read_file(const char *path, size_t *len, char *why, size_t whylen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            char *b = cap <= FIXTURE_MAX ? realloc(buf, cap + 1) : NULL;
            if (!b) {
                snprintf(why, whylen, "%s: too large or out of memory", path);
                goto fail;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        snprintf(why, whylen, "%s: read error", path);
        goto fail;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
fail:
    free(buf);
    fclose(f);
    return NULL;
}

/* Reads --sale's spec "id=..,item=..,stock=N,price=P[,limit=L][,hours=H][,house=..]" into
 * *s, the sale running from now. Returns 0, or -1 with a sentence in why. */
static int parse_sale(char *spec, market_sale *s, char *why, size_t whylen) {
    uint64_t hours = 24, v;
    memset(s, 0, sizeof *s);
    char *save = NULL;
    for (char *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) goto bad;
        *eq = '\0';
        const char *k = kv, *val = eq + 1;
        char *id = strcmp(k, "id") == 0     ? s->id
                   : strcmp(k, "item") == 0  ? s->item
                   : strcmp(k, "house") == 0 ? s->house
                                             : NULL;
        if (id) {
            if (!market_id_valid(val)) goto bad;
            snprintf(id, MARKET_ID_MAX + 1, "%s", val);
        } else if (strcmp(k, "stock") == 0 && cli_parse_u64(val, 1, MARKET_SALE_STOCK_MAX, &v) == 0) {
            s->initial = (int64_t)v;
        } else if (strcmp(k, "price") == 0 && cli_parse_u64(val, 1, MARKET_PRICE_MAX, &v) == 0) {
            s->price = (int64_t)v;
        } else if (strcmp(k, "limit") == 0 && cli_parse_u64(val, 1, MARKET_SALE_STOCK_MAX, &v) == 0) {
            s->limit = (int64_t)v;
        } else if (strcmp(k, "hours") == 0 && cli_parse_u64(val, 1, 24 * 365, &hours) == 0) {
        } else {
            goto bad;
        }
    }
    if (!s->id[0] || !s->item[0] || !s->initial || !s->price) goto bad;
    if (!s->limit) s->limit = s->initial;
    if (s->limit > s->initial) goto bad;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->start_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    s->end_ms = s->start_ms + (int64_t)hours * 3600000;
    return 0;
bad:
    snprintf(why, whylen, "bad --sale spec (want id=ID,item=ITEM,stock=N,price=P[,limit=L<=N]"
                          "[,hours=H][,house=PLAYER])");
    return -1;
}

#define GEN_UNSET UINT64_MAX /* players= or items= not given */

struct gen {
    uint64_t players, items, funds, lo, hi, seed, realms, goods, orders, ends, auctions;
};

#define GEN_LOT "lot"      /* the good --generate's auctions sell, a unit each */
#define GEN_AUCTION_S 3600 /* their duration without ends=S */

static int parse_generate(char *spec, struct gen *g, char *why, size_t whylen) {
    *g = (struct gen){GEN_UNSET, GEN_UNSET, 100000, 1, 1000, 1, 1, 0, 0};
    char *save = NULL;
    for (char *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) goto bad;
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        int rc;
        if (strcmp(k, "players") == 0)
            rc = cli_parse_u64(v, 1, 100000000, &g->players);
        else if (strcmp(k, "items") == 0)
            rc = cli_parse_u64(v, 0, 100000000, &g->items);
        else if (strcmp(k, "funds") == 0)
            rc = cli_parse_u64(v, 0, INT64_MAX, &g->funds);
        else if (strcmp(k, "seed") == 0)
            rc = cli_parse_u64(v, 0, INT64_MAX, &g->seed);
        else if (strcmp(k, "realms") == 0)
            rc = cli_parse_u64(v, 1, MARKET_REALMS_MAX, &g->realms);
        else if (strcmp(k, "goods") == 0)
            rc = cli_parse_u64(v, 0, 100000000, &g->goods);
        else if (strcmp(k, "orders") == 0)
            rc = cli_parse_u64(v, 0, 100000000, &g->orders);
        else if (strcmp(k, "ends") == 0)
            rc = cli_parse_u64(v, 1, MARKET_DURATION_MAX_S, &g->ends);
        else if (strcmp(k, "auctions") == 0)
            rc = cli_parse_u64(v, 0, 10000000, &g->auctions);
        else if (strcmp(k, "prices") == 0) {
            char *dash = strchr(v, '-');
            if (!dash) goto bad;
            *dash = '\0';
            rc = cli_parse_u64(v, 1, MARKET_PRICE_MAX, &g->lo) < 0 ||
                         cli_parse_u64(dash + 1, 1, MARKET_PRICE_MAX, &g->hi) < 0 || g->hi < g->lo
                     ? -1
                     : 0;
        } else
            goto bad;
        if (rc < 0) goto bad;
    }
    if (g->players == GEN_UNSET || g->items == GEN_UNSET) {
        snprintf(why, whylen, "--generate needs players=N and items=M");
        return -1;
    }
    if (g->orders && !g->goods) {
        snprintf(why, whylen, "--generate orders=K needs goods=G: buy orders are for goods");
        return -1;
    }
    if (g->players < g->realms) {
        snprintf(why, whylen, "--generate needs at least one player per realm");
        return -1;
    }
    return 0;
bad:
    snprintf(why, whylen,
             "bad --generate spec (want [realms=R,]players=N,items=M[,goods=G]"
             "[,orders=K][,ends=S][,auctions=A][,funds=F][,prices=LO-HI][,seed=S])");
    return -1;
}

/* Whether a failed seed's code comes with the store's reason: a store error, or another run
 * seeding the realm (market_conn_errstr). */
static int seed_said(int err) {
    return err == MARKET_ERR_STORE || err == MARKET_ERR_REALM_UNAVAILABLE;
}

/* Writes realm k of g's n realms: players and items divided as evenly as
 * they go, each realm generated from its own seed. Returns a market code
 * with why filled on failure. */
static int seed_generated(market_conn *c, const struct gen *g, const char *realm, uint64_t k,
                          int reset, char *why, size_t whylen) {
    uint64_t n = g->realms;
    uint64_t players = g->players / n + (k < g->players % n);
    uint64_t items = g->items / n + (k < g->items % n);
    market_world *w = market_world_new();
    if (!w) return MARKET_ERR_NOMEM;
    int err = market_world_generate(w, (size_t)players, (size_t)items, (int64_t)g->funds,
                                    (int64_t)g->lo, (int64_t)g->hi, g->seed + k);
    if (err == MARKET_OK)
        err = market_world_generate_goods(w, (size_t)players, (size_t)g->goods, (int64_t)g->lo,
                                          (int64_t)g->hi, g->seed + k);
    if (err == MARKET_OK)
        err = market_world_generate_orders(w, (size_t)players, (size_t)g->goods,
                                           (size_t)(g->orders / n + (k < g->orders % n)),
                                           g->seed + k);
    if (err == MARKET_OK && g->ends) err = market_world_generate_ends(w, (int64_t)g->ends);
    /* auctions: a unit of GEN_LOT each, held by p0.. round robin, from a price in lo..hi */
    uint64_t auctions = g->auctions / n + (k < g->auctions % n),
             s = (g->seed + k) * 2654435761u + 1;
    for (uint64_t p = 0; err == MARKET_OK && p < players && p < auctions; p++) {
        char id[32];
        snprintf(id, sizeof id, "p%llu", (unsigned long long)p);
        err = market_world_add_stack(w, id, GEN_LOT,
                                     (int64_t)(auctions / players + (p < auctions % players)));
    }
    for (uint64_t a = 0; err == MARKET_OK && a < auctions; a++) {
        char id[32];
        snprintf(id, sizeof id, "p%llu", (unsigned long long)(a % players));
        s = s * 6364136223846793005u + 1442695040888963407u;
        err = market_world_add_auction(w, id, GEN_LOT, 1,
                                       (int64_t)(g->lo + (s >> 33) % (g->hi - g->lo + 1)), 0, 1,
                                       g->ends ? (int64_t)g->ends : GEN_AUCTION_S);
    }
    if (err < 0)
        snprintf(why, whylen, "cannot generate realm %s: %s", realm, market_strerror(err));
    else if ((err = market_world_store(c, realm, w, reset)) < 0)
        snprintf(why, whylen, "cannot write realm %s: %s%s%s", realm, market_strerror(err),
                 seed_said(err) ? ": " : " (nothing written to it)",
                 seed_said(err) ? market_conn_errstr(c) : "");
    market_world_free(w);
    return err;
}

/* Prints what realm holds now. */
static void print_audit(market_conn *c, const char *url, const char *realm) {
    market_audit_report a;
    if (market_audit(c, realm, &a) == MARKET_OK)
        printf("seeded %s realm %s: it now holds %zu players, %lld funds, %zu items held, "
               "%zu listings, %lld units of goods held, %lld listed, %zu buy orders holding "
               "%lld in escrow\n",
               url, realm, a.players, (long long)a.total_funds, a.items_held, a.items_listed,
               (long long)a.units_in_stacks, (long long)a.units_listed, a.orders,
               (long long)a.total_escrow);
}

/* Reads --auction's spec "seller=..,item=..,start=P,minutes=M[,quantity=Q][,buyout=B]
 * [,step=S]" into *o, an auction order (its strings point into spec). Returns 0, or -1 with
 * a sentence in why. */
static int parse_auction(char *spec, market_order *o, char *why, size_t whylen) {
    uint64_t v, minutes = 0;
    *o = (market_order){.type = MARKET_ORDER_AUCTION, .step = 1};
    char *save = NULL;
    for (char *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) goto bad;
        *eq = '\0';
        const char *k = kv, *val = eq + 1;
        if (strcmp(k, "seller") == 0 && market_id_valid(val))
            o->player = val;
        else if (strcmp(k, "item") == 0 && market_id_valid(val))
            o->item = val;
        else if (strcmp(k, "start") == 0 && cli_parse_u64(val, 1, MARKET_PRICE_MAX, &v) == 0)
            o->price = (int64_t)v;
        else if (strcmp(k, "buyout") == 0 && cli_parse_u64(val, 1, MARKET_PRICE_MAX, &v) == 0)
            o->buyout = (int64_t)v;
        else if (strcmp(k, "step") == 0 && cli_parse_u64(val, 1, MARKET_PRICE_MAX, &v) == 0)
            o->step = (int64_t)v;
        else if (strcmp(k, "quantity") == 0 && cli_parse_u64(val, 1, MARKET_QUANTITY_MAX, &v) == 0)
            o->quantity = (int64_t)v;
        else if (strcmp(k, "minutes") == 0 &&
                 cli_parse_u64(val, 1, MARKET_DURATION_MAX_S / 60, &minutes) == 0)
            o->duration_s = (int64_t)minutes * 60;
        else
            goto bad;
    }
    if (o->player && o->item && o->price && o->duration_s) return 0;
bad:
    snprintf(why, whylen,
             "bad --auction spec (want seller=ID,item=ITEM,start=P,minutes=M"
             "[,quantity=Q][,buyout=B][,step=S])");
    return -1;
}

/* What the command line asks for. */
struct opts {
    const char *url, *realm, *secret, *token_for, *admin_secret, *kid, *audience;
    char *generate, *sale_spec, *auction_spec;
    const char *file; /* a fixture, or NULL */
    uint64_t ttl_s;
    int admin_token, reset, reindex;
};

/* Parses the command line into *o. Returns -1 to go on, else the exit
 * status: 0 after --help, 2 after a usage error (told). */
static int parse_args(int argc, char **argv, struct opts *o) {
    *o = (struct opts){.url = getenv("MARKET_REDIS"), .realm = MARKET_REALM_DEFAULT,
                       .secret = getenv("MARKET_AUTH_SECRET"),
                       .admin_secret = getenv("MARKET_ADMIN_SECRET"), .ttl_s = 3600};
    if (!o->url || !*o->url) o->url = "redis://127.0.0.1:6379/0";
    static const struct option longopts[] = {{"redis", required_argument, NULL, 'r'},
                                             {"realm", required_argument, NULL, 'R'},
                                             {"reset", no_argument, NULL, 'x'},
                                             {"generate", required_argument, NULL, 'g'},
                                             {"reindex", no_argument, NULL, 'i'},
                                             {"auth-secret", required_argument, NULL, 's'},
                                             {"print-token", required_argument, NULL, 't'},
                                             {"admin-secret", required_argument, NULL, 'A'},
                                             {"print-admin-token", no_argument, NULL, 'T'},
                                             {"sale", required_argument, NULL, 'S'},
                                             {"auction", required_argument, NULL, 'a'},
                                             {"ttl", required_argument, NULL, 'L'},
                                             {"kid", required_argument, NULL, 'K'},
                                             {"audience", required_argument, NULL, 'U'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'r': o->url = optarg; break;
        case 'R': o->realm = optarg; break;
        case 'x': o->reset = 1; break;
        case 'g': o->generate = optarg; break;
        case 'i': o->reindex = 1; break;
        case 's': o->secret = optarg; break;
        case 't': o->token_for = optarg; break;
        case 'A': o->admin_secret = optarg; break;
        case 'T': o->admin_token = 1; break;
        case 'S': o->sale_spec = optarg; break;
        case 'a': o->auction_spec = optarg; break;
        case 'K': o->kid = optarg; break;
        case 'U': o->audience = optarg; break;
        case 'L':
            if (cli_parse_duration(optarg, API_TOKEN_TTL_MAX, &o->ttl_s) < 0) {
                fprintf(stderr, "market-seed: bad --ttl '%s' (want N[s|m|h|d], 1s..366d)\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    o->file = optind < argc ? argv[optind] : NULL;
    if (o->admin_token || o->token_for) return -1;
    int jobs = (o->reindex != 0) + (o->sale_spec != NULL) + (o->auction_spec != NULL);
    if (jobs ? o->generate || o->reset || optind < argc || jobs > 1
             : (o->generate != NULL) == (optind < argc) || argc - optind > 1) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* --print-admin-token. Returns the exit status. */
static int print_admin_token(const struct opts *o) {
    char tok[API_ADMIN_TOKEN_MAX + 1];
    if (!o->admin_secret || !*o->admin_secret) {
        fprintf(stderr, "market-seed: --print-admin-token needs --admin-secret or "
                        "MARKET_ADMIN_SECRET\n");
        return 2;
    }
    if (api_admin_token_make(o->admin_secret, tok, sizeof tok) < 0) {
        fprintf(stderr, "market-seed: cannot make the admin token\n");
        return 1;
    }
    printf("%s\n", tok);
    return 0;
}

/* --print-token PLAYER. Returns the exit status. */
static int print_token(const struct opts *o) {
    char tok[API_TOKEN_MAX + 1];
    if (!o->secret || !*o->secret) {
        fprintf(stderr, "market-seed: --print-token needs --auth-secret or MARKET_AUTH_SECRET\n");
        return 2;
    }
    if (!market_id_valid(o->realm)) {
        fprintf(stderr, "market-seed: '%s' is not a realm id\n", o->realm);
        return 2;
    }
    if (!market_id_valid(o->token_for)) {
        fprintf(stderr, "market-seed: '%s' is not a player id\n", o->token_for);
        return 2;
    }
    api_token_spec spec = {o->secret, o->kid, o->audience, o->realm, o->token_for,
                           (int64_t)time(NULL), (int64_t)o->ttl_s};
    int rc = api_token_make(&spec, tok, sizeof tok);
    if (rc == MARKET_ERR_NOMEM) {
        fprintf(stderr, "market-seed: cannot sign the token\n");
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "market-seed: cannot make the token: the secret must be 1..255 "
                        "bytes, --kid match [A-Za-z0-9_.-]{1,64}, --audience 1..255 "
                        "printable bytes without '\"' or '\\'\n");
        return 2;
    }
    printf("%s\n", tok);
    return 0;
}

/* --sale: creates the sale. Returns 0, or -1 with why. */
static int create_sale(market_conn *c, const struct opts *o, market_sale *sale, char *why,
                       size_t whylen) {
    int err = market_sale_create(c, o->realm, sale);
    if (err < 0) {
        snprintf(why, whylen, "cannot create sale %s on %s: %s", sale->id, o->url,
                 err == MARKET_ERR_DUPLICATE   ? "a sale with this id exists"
                 : err == MARKET_ERR_NO_PLAYER ? "the house is not a player of the realm"
                                               : market_strerror(err));
        return -1;
    }
    printf("created sale %s of realm %s on %s: %lld units of %s at %lld, at most %lld a "
           "player, until Unix ms %lld\n",
           sale->id, o->realm, o->url, (long long)sale->initial, sale->item,
           (long long)sale->price, (long long)sale->limit, (long long)sale->end_ms);
    return 0;
}

/* --auction: puts the seller's item up for auction, through the market as POST /auctions
 * does. Returns 0, or -1 with why. */
static int create_auction(market_conn *c, const struct opts *o, market_order *a, char *why,
                          size_t whylen) {
    a->realm = o->realm;
    int err = market_ending_note(c, o->realm); /* the sweepers must find its end */
    if (err == MARKET_OK) err = market_order_run(c, a);
    if (err < 0) {
        snprintf(why, whylen, "cannot auction %s of %s on %s: %s", a->item, a->player, o->url,
                 err == MARKET_ERR_NOT_HELD ? "the seller does not hold it" : market_strerror(err));
        return -1;
    }
    const market_auction *x = &a->res.auction.a;
    printf("created auction %lld of realm %s on %s: %s of %s from %lld, until Unix ms %lld\n",
           (long long)x->id, o->realm, o->url, x->item, x->seller, (long long)x->start_bid,
           (long long)x->ends_ms);
    return 0;
}

/* --reindex. Returns 0, or -1 with why. */
static int reindex(market_conn *c, const struct opts *o, char *why, size_t whylen) {
    size_t n = 0;
    int err = market_reindex(c, o->realm, &n);
    if (err < 0) {
        const char *detail = MARKET_ERR_HAS_REASON(err) ? market_conn_errstr(c) : "";
        if (err == MARKET_ERR_CONFLICT) detail = "the market kept changing; run it again";
        snprintf(why, whylen, "cannot rebuild the search indexes of realm %s on %s: %s%s%s",
                 o->realm, o->url, market_strerror(err), detail[0] ? ": " : "", detail);
        return -1;
    }
    printf("reindexed %s realm %s: %zu listings in idx:{%s}:item:* and idx:{%s}:seller:*\n",
           o->url, o->realm, n, o->realm, o->realm);
    return 0;
}

/* --generate: every realm's generated world. Returns 0, or -1 with why. */
static int generate(market_conn *c, const struct opts *o, const struct gen *g, char *why,
                    size_t whylen) {
    for (uint64_t k = 0; k < g->realms; k++) {
        char name[MARKET_REALM_MAX + 1];
        if (g->realms > 1) market_realm_nth((unsigned)k, name, sizeof name);
        const char *rl = g->realms > 1 ? name : o->realm;
        if (seed_generated(c, g, rl, k, o->reset, why, whylen) < 0) return -1;
        print_audit(c, o->url, rl);
    }
    return 0;
}

/* FILE.json, parsed into w: writes it. Returns 0, or -1 with why. */
static int store_fixture(market_conn *c, const struct opts *o, const market_world *w, char *why,
                         size_t whylen) {
    int err = market_world_store(c, o->realm, w, o->reset);
    if (err < 0) {
        snprintf(why, whylen, "cannot write to %s: %s%s%s", o->url, market_strerror(err),
                 seed_said(err) ? ": " : " (nothing written)",
                 seed_said(err) ? market_conn_errstr(c) : "");
        return -1;
    }
    print_audit(c, o->url, o->realm);
    return 0;
}

/* Reads what the store job needs before connecting: the sale, the
 * generate spec, or the fixture (into *w). Returns 0, 1 when the fixture
 * is refused (already told), or -1 with why. */
static int prepare(const struct opts *o, market_sale *sale, market_order *auction, struct gen *g,
                   market_world **w, char *why, size_t whylen) {
    if (o->sale_spec) return parse_sale(o->sale_spec, sale, why, whylen);
    if (o->auction_spec) return parse_auction(o->auction_spec, auction, why, whylen);
    if (o->reindex) return 0; /* nothing to read first */
    if (o->generate) return parse_generate(o->generate, g, why, whylen);
    size_t len = 0;
    char *text = read_file(o->file, &len, why, whylen);
    if (!text) return -1;
    int err = api_fixture_parse(text, len, w, why, whylen);
    free(text);
    if (err < 0) {
        fprintf(stderr, "market-seed: %s: %s (nothing written)\n", o->file, why);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct opts o;
    int done = parse_args(argc, argv, &o);
    if (done >= 0) return done;
    if (o.admin_token) return print_admin_token(&o);
    if (o.token_for) return print_token(&o);
    if (!market_id_valid(o.realm)) {
        fprintf(stderr, "market-seed: '%s' is not a realm id (want [A-Za-z0-9_-]{1,64})\n",
                o.realm);
        return 2;
    }
    char why[512] = "";
    int status = 1, err = 0;
    market_world *w = NULL;
    lock_client *lock = NULL;
    market *m = NULL;
    market_conn *c = NULL;
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 2000};
    if (rconn_addr_parse(o.url, &cfg.redis) < 0) {
        fprintf(stderr, "market-seed: bad Redis URL (want redis://[user:pass@]host[:port][/db], "
                        "redis-sentinel://[user:pass@]host[:port][,host[:port]...]/name[/db] "
                        "or redis-cluster://[user:pass@]host[:port][,host[:port]...])\n");
        return 2;
    }
    struct gen g;
    market_sale sale;
    market_order auction;
    int ready = prepare(&o, &sale, &auction, &g, &w, why, sizeof why);
    if (ready > 0) goto out;
    if (ready < 0 && (o.sale_spec || o.auction_spec)) { /* a bad spec is a usage error */
        fprintf(stderr, "market-seed: %s\n", why);
        return 2;
    }
    if (ready < 0) goto fail;
    if (!(lock = lock_local_new(&err)) || !(m = market_new(&cfg, lock, &err)) ||
        !(c = market_conn_new(m, &err))) {
        snprintf(why, sizeof why, "out of memory");
        goto fail;
    }
    if ((o.sale_spec      ? create_sale(c, &o, &sale, why, sizeof why)
         : o.auction_spec ? create_auction(c, &o, &auction, why, sizeof why)
         : o.reindex      ? reindex(c, &o, why, sizeof why)
         : o.generate     ? generate(c, &o, &g, why, sizeof why)
                          : store_fixture(c, &o, w, why, sizeof why)) < 0)
        goto fail;
    status = 0;
    goto out;
fail:
    fprintf(stderr, "market-seed: %s\n", why);
out:
    market_conn_free(c);
    market_free(m);
    lock_free(lock);
    market_world_free(w);
    return status;
}
