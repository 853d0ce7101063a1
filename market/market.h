/* market.h - the game market: players, inventories and listings in Redis.
 *
 * Realms: a game's world is divided into realms (shards, servers, worlds). A
 * player belongs to a realm and trades on that realm's market; every operation
 * names its realm (MARKET_REALM_DEFAULT when the caller has none). Every key
 * of a realm carries the realm as a Redis Cluster hash tag, so one realm's
 * keys live in one hash slot: a purchase's WATCH, MULTI/EXEC and lock scripts
 * touch one slot, on one server of a cluster. The same keys are used against
 * a single Redis, so nothing changes between the two but the address. Realm
 * ids are validated like player ids. Two realms may share a slot; a realm
 * never spans two.
 *
 * Data model (Redis), for realm r:
 *   users:{r}:<id>      hash  {name, funds}   funds: signed 64-bit integer
 *   inventory:{r}:<id>  set   of item ids the player holds
 *   market:{r}          zset  members "<item>.<seller>", score = price (of one unit)
 *   stacks:{r}:<id>     hash  item -> units: the stackable goods a player holds
 *   market:{r}:units    hash  "<item>.<seller>" -> units listed, for listings of
 *                       stackable goods (a listing without one is a unique item)
 *   lock:market:{r}     the realm's market lock (owned by the lock layer, whose fence
 *                       counter for it is lock:fences:{r}); the item strategy's
 *                       lock:item:{r}:<item>.<seller> and lock:player:{r}:<id>
 *   <lock key>:fenced   the fence of the last commit made under that lock
 *   idem:{r}:<player>:<key>  a request's outcome or claim (market_keys.c)
 *   trades:{r}          stream: one entry per purchase, its id the trade id, fields
 *                       buyer seller item quantity price total fence (0: no lock)
 *                       prev (the item's trade before, "" none); trimmed to
 *                       cfg.trade_history (up to an eighth, at most 100, more)
 *   trades:{r}:player:<id>  list: the ids of a player's trades, as buyer or seller,
 *                       newest first; keeps about cfg.trade_index
 *   trades:{r}:items    hash: item -> its latest trade id, where its chain starts;
 *                       an item goes when its latest trade is trimmed
 *   trades:{r}:order    list: the items of the trades of trades:{r}, oldest first,
 *                       trimmed with it (market_trade.c writes the stream, lists,
 *                       hash and this list in the purchase's MULTI/EXEC)
 *   market:{r}:changes  stream: one entry per committed list and unlist (action,
 *                       seller, item, price, quantity), trimmed to about 1,000
 *                       (market_changes.c); GET /events follows it with trades:{r}
 *   idx:{r}:item:<item> zset  the search indexes (market_index.c): who lists the item
 *   idx:{r}:seller:<s>  zset  (member the seller) and what the seller lists (member the
 *                       item), each scored by the listing's price; each listing of
 *                       market:{r} is in both, written in the same MULTI/EXEC as the
 *                       listing (list, unlist, every purchase; seeding in its steps), so a filtered
 *                       page in price order costs O(log N + page) (market_search())
 *   idx:{r}:names       zset  every listing's "<item>.<seller>", all scored 0 (so in byte
 *                       order), written with the two above: a search by item prefix is
 *                       one ZRANGE BYLEX of it, O(log N + page)
 *   stacks:{r}:<id>     hash  item -> count: the player's stackable goods, in units
 *   sale:{r}:<sale>     hash  {item, price, initial, stock, sold, limit, start_ms, end_ms,
 *                       house}: a flash sale (market_sale.c); stock is the units left,
 *                       stock + sold == initial, start_ms <= Redis time < end_ms is active
 *   sale:{r}:<sale>:bought  hash  player -> units bought (the per-player limit)
 *   market:{r}:ends     zset  "<item>.<seller>" -> the end of that listing (Unix ms, the
 *                       store's clock), for listings listed with a duration: the
 *                       sweeper (market_sweep.c) takes each back when its end comes;
 *                       an entry whose listing was bought meanwhile is dropped then
 *   market:{.ending}:realms  set  the realms whose listings may end (written before a
 *                       listing with a duration, or a realm default, is: never a realm
 *                       of its own, as no realm id holds a "."); every sweeper reads it
 *   lock:sweep:{r}      the realm's sweep lease (lock layer): the sweeper that holds it
 *                       settles the realm's endings; an ending commits only while the
 *                       lease still holds that sweeper's token
 *   market:{r}:building  string  set while market-seed writes the realm (a seed, a reset:
 *                       market_world.c), and left set by one that stopped half-way: every
 *                       operation of the realm answers MARKET_ERR_REALM_UNAVAILABLE meanwhile
 *   lock:sale:{r}:<sale>  the sale's lock (and its fencing record "<key>:fenced")
 *
 * A sale's units are created by the game: a buy of n units moves n * price
 * from the buyer to the sale's house (a player of the realm, so total funds
 * stay conserved) and n units from the sale's stock to the buyer's stack
 * (HINCRBY stacks:{r}:<buyer> <item> n), and records a trade (seller: the
 * house) in the same MULTI/EXEC. See market_sale.c.
 *
 * Every operation that moves funds or items takes the market lock through
 * lock/lock.h, reads what it needs in one pipeline under WATCH, and commits
 * in one MULTI/EXEC that Redis aborts if anything it read (or the lock key)
 * changed meanwhile. An item is always in exactly one place; funds are
 * conserved and never negative; a credit that would overflow is refused.
 *
 * Threads: a market is shared by all threads; a market_conn (one Redis
 * connection) is used by one thread at a time.
 *
 * High availability: cfg.redis may be a Sentinel group (redis-sentinel://):
 * every connection goes to the master the Sentinels name now, is used only
 * after ROLE says master, and is dropped when the group's generation moves
 * (a failover, a suspicion: lock.h's Sentinel section). With
 * cfg.min_replicas_ack N > 0, every write that commits (MULTI/EXEC) is
 * followed by WAIT N, and answered MARKET_ERR_NOT_REPLICATED when fewer than
 * N replicas confirmed it in time: the write may or may not survive a
 * failover, so its outcome is unknown (a retry with the same idempotency key
 * replays it if it survived, or performs it once if not).
 */
#ifndef GM_MARKET_MARKET_H
#define GM_MARKET_MARKET_H

#include <stddef.h>
#include <stdint.h>

#include "lock/lock.h"
#include "rconn/rconn.h"

/* ---- error codes: 0 is success, every error is negative ---- */

#define MARKET_ERRNO_MAP(X)                                                                        \
    X(OK, 0, "success")                                                                            \
    X(ERR_NOT_LISTED, -1, "item not listed")                                                       \
    X(ERR_INSUFFICIENT_FUNDS, -2, "insufficient funds")                                            \
    X(ERR_PRICE_CHANGED, -3, "price changed")                                                      \
    X(ERR_NO_PLAYER, -4, "unknown player")                                                         \
    X(ERR_NOT_HELD, -5, "the seller does not hold the item")                                       \
    X(ERR_OVERFLOW, -6, "funds would overflow")                                                    \
    X(ERR_BUSY, -7, "market busy: lock wait budget spent")                                         \
    X(ERR_STORE, -8, "store unavailable")                                                          \
    X(ERR_LEASE_LOST, -9, "lease lost before commit")                                              \
    X(ERR_CONFLICT, -10, "concurrent change, retries exhausted")                                   \
    X(ERR_INVALID, -11, "invalid argument")                                                        \
    X(ERR_DUPLICATE, -12, "duplicate")                                                             \
    X(ERR_NOMEM, -13, "out of memory")                                                             \
    X(ERR_IDEM_MISMATCH, -14, "idempotency key already used for another request")                  \
    X(ERR_IN_PROGRESS, -15, "a request with this idempotency key is in progress")                  \
    X(ERR_NOT_REPLICATED, -16, "committed on the master, not confirmed by enough replicas")        \
    X(ERR_NO_TRADE, -17, "no such trade")                                                          \
    X(ERR_NOT_ENOUGH, -18, "not enough units listed")                                              \
    X(ERR_NO_SALE, -19, "no such sale")                                                            \
    X(ERR_SALE_NOT_ACTIVE, -20, "the sale has not started or has ended")                           \
    X(ERR_SOLD_OUT, -21, "the sale has fewer units left than asked for")                           \
    X(ERR_LIMIT_EXCEEDED, -22, "the per-player limit of the sale would be exceeded")               \
    X(ERR_REALM_UNAVAILABLE, -23,                                                                  \
      "the realm is being seeded or reset: it is refused until that is done")                      \
    X(ERR_NO_ORDER, -24, "no such buy order")                                                      \
    X(ERR_NO_AUCTION, -25, "no such auction")                                                      \
    X(ERR_AUCTION_CLOSED, -26, "the auction has ended")                                            \
    X(ERR_BID_TOO_LOW, -27, "the bid is under the least the auction takes")                        \
    X(ERR_OWN_AUCTION, -28, "a seller cannot bid on its own auction")                              \
    X(ERR_NO_DIRECT, -29, "no such direct trade")                                                  \
    X(ERR_TRADE_CLOSED, -30, "the direct trade is no longer open")                                 \
    X(ERR_OWN_TRADE, -31, "only the player a direct trade is offered to may accept it")

/* 1 when rc is a failure whose reason the store left as text (market_conn_errstr(),
 * market_order.why): the store's own failures. */
#define MARKET_ERR_HAS_REASON(rc) ((rc) == MARKET_ERR_STORE || (rc) == MARKET_ERR_NOT_REPLICATED)

enum market_err {
#define MARKET_ERR_ENUM(name, val, msg) MARKET_##name = (val),
    MARKET_ERRNO_MAP(MARKET_ERR_ENUM)
#undef MARKET_ERR_ENUM
};

/* ---- limits ---- */

#define MARKET_ID_MAX 64                      /* ids: [A-Za-z0-9_-]{1,64} */
#define MARKET_NAME_MAX 128                   /* display names, bytes */
#define MARKET_PRICE_MAX INT64_C(1000000000000) /* prices: 1..10^12 */
#define MARKET_REALM_MAX MARKET_ID_MAX          /* realm ids: like player ids */
#define MARKET_REALM_DEFAULT "main"             /* the realm of callers that name none */
#define MARKET_WORKERS_MAX 16                   /* cfg.workers */
#define MARKET_REALMS_MAX 4096                  /* realms market_realm_nth() names */
#define MARKET_IDEM_KEY_MAX 128                 /* Idempotency-Key bytes */
#define MARKET_IDEM_FP_MAX 64                   /* request fingerprint bytes */
#define MARKET_IDEM_TTL_S 86400                 /* how long a stored outcome is kept */
#define MARKET_TRADE_ID_MAX 41                  /* "<ms>-<seq>": a Redis stream id */
#define MARKET_TRADE_HISTORY 1000000            /* cfg.trade_history's default */
#define MARKET_TRADE_INDEX 1000                 /* cfg.trade_index's default */
#define MARKET_SWEEP_INTERVAL_MS 1000           /* cfg.sweep_interval_ms's default */
#define MARKET_SWEEP_LEASE_MS 5000              /* cfg.sweep_lease_ms's default */
#define MARKET_AUCTION_KEPT_S 604800            /* an ended auction is read back this long */
#define MARKET_TRADES_PAGE_MAX 1000             /* most trades one read returns */
#define MARKET_WHY_MAX 128                      /* a failure's reason as text, bytes */
#define MARKET_QUANTITY_MAX 1000000000          /* units of a stackable good in one request */
#define MARKET_FILL_MAX 32                      /* listings one purchase without a seller
                                                   may buy from */
#define MARKET_SALE_STOCK_MAX INT64_C(1000000000) /* a sale's stock (and a buy's quantity): 1..10^9 */
#define MARKET_SALE_HOUSE "game"                /* the house a sale pays by default */
#define MARKET_FEE_BPS_MAX 10000                /* a realm's sale cut: 0..10000 basis points */
#define MARKET_DURATION_MAX_S 2592000           /* a listing's duration: 1 s .. 30 days */
#define MARKET_DIRECT_GOODS_MAX                                                                    \
    8 /* a direct trade's side: its unique items and                                               \
         its kinds of units, at most this many each */
#define MARKET_DIRECT_DURATION_S                                                                   \
    3600                            /* a direct trade stays open this long unless                  \
                                       its proposal says */
#define MARKET_DIRECT_KEPT_S 604800 /* a closed direct trade is read back this long */
#define MARKET_DIRECTS_PAGE_MAX 100 /* most open direct trades a player's read holds */

/* ---- types ---- */

typedef struct market market;           /* shared by all threads */
typedef struct market_conn market_conn; /* one Redis connection, one thread */
typedef struct market_world market_world; /* players and items to seed */

/* How purchases are serialised (every server sharing a Redis must use the same). */
enum market_strategy {
    MARKET_STRATEGY_MARKET,     /* one lock for the whole market; concurrent purchases of one
                                   process are checked and committed together under one hold */
    MARKET_STRATEGY_ITEM,       /* a lock per listing and per buyer; concurrent purchases of one
                                   process take all of theirs at once and commit together */
    MARKET_STRATEGY_OPTIMISTIC, /* no lock: WATCH, read, MULTI/EXEC, retry on abort */
};

typedef struct market_config {
    rconn_addr redis;       /* the store */
    enum market_strategy strategy;
    unsigned batch_max;          /* market strategy: most purchases per lock hold (0: 64) */
    unsigned workers;            /* lock strategies: threads serving purchases, each realm
                                    always on the same one (0: 4; at most MARKET_WORKERS_MAX) */
    int redis_timeout_ms;        /* connect and command timeout */
    unsigned min_replicas_ack;   /* > 0: a commit needs that many replicas' WAIT (see top) */
    int replica_ack_timeout_ms;  /* WAIT's timeout (0: redis_timeout_ms / 2), < redis_timeout_ms */
    uint32_t lock_ttl_ms;        /* lease of the market lock */
    uint32_t acquire_timeout_ms; /* wait budget for the market lock */
    uint64_t trade_history;      /* trades kept per realm, at least (up to an eighth, at most
                                    100, more; 0: the default) */
    uint64_t trade_index;        /* trade ids kept per player, at least (up to an eighth
                                    more; 0: the default) */
    int no_price_history;        /* 1: trades of stackable goods write no price history */
    uint32_t sweep_interval_ms;  /* market_sweeper_start(): how often it looks for endings
                                    (0: MARKET_SWEEP_INTERVAL_MS) */
    uint32_t sweep_lease_ms;     /* its lease on a realm's sweep (0: MARKET_SWEEP_LEASE_MS) */
    uint32_t test_stall_ms;      /* test hook: sleep between read and commit */
    void (*test_decided)(void *arg); /* test hook: called, with test_decided_arg, on the
                                    worker between a batch's decision and its commit */
    void *test_decided_arg;
    uint32_t test_stall_read_ms; /* test hook: sleep after taking the locks, before reading */
    uint32_t test_stall_lock_ms; /* test hook: sleep before taking the locks (before the
                                    first read without a lock) */
    uint32_t test_hold_ms;       /* test hook: a worker keeps a lock across batches and an
                                    empty queue this long (0: MARKET__HOLD_MAX_MS and
                                    MARKET__HOLD_IDLE_MS, market_impl.h) */
    uint32_t test_seed_steps;    /* test hook: market_world_store() stops, failing, after
                                    this many steps (0: never), as if it had crashed */
} market_config;

typedef struct market_purchase_result {
    int64_t price;       /* the price paid (of one unit), or the current price on PRICE_CHANGED */
    int64_t available;   /* on NOT_ENOUGH: the units there are (at that price) */
    int64_t buyer_funds; /* the buyer's funds after the purchase */
    int64_t fee;         /* the realm's cut of the total, taken from the seller's proceeds */
    int replayed;        /* 1: an earlier request with the same idempotency key did it */
    char trade_id[MARKET_TRADE_ID_MAX + 1]; /* a success: its trade record ("" when a replay
                                               of a record older than trade ids) */
} market_purchase_result;

/* Makes a write idempotent: the first attempt that decides it for good (a
 * success, or a refusal read from the store: see market_keys.c) stores its
 * outcome under idem:<player>:<key> in the same guarded MULTI/EXEC as its
 * effect, for MARKET_IDEM_TTL_S; a later call with the same player and key
 * returns that outcome (replayed) without doing anything, or
 * MARKET_ERR_IDEM_MISMATCH when its fingerprint differs. Each attempt claims
 * the key for its wait budget first: another attempt meanwhile gets
 * MARKET_ERR_IN_PROGRESS. Busy, store and lease failures store nothing final. */
typedef struct market_idem {
    const char *key;         /* the client's key: [A-Za-z0-9_.:-]{1,128} */
    const char *fingerprint; /* identifies the request (e.g. a hash of its body), no spaces */
} market_idem;

/* The market's own part of an order handed to it (market_order): its place
 * in the combiner's queue (market_combine.c) and where its outcome goes. The
 * caller leaves it alone. */
struct market__kind;
typedef struct market_queued market_queued;
struct market_queued {
    const struct market__kind *kind; /* what kind of order, and how it is served */
    void *order;                     /* the market_order it is part of */
    const char *realm, *group;       /* its batch: orders of one kind, realm and group */
    int *rc;                         /* its outcome's code, */
    char *why;                       /* reason (MARKET_WHY_MAX bytes) */
    int *replayed;                   /* replay flag (NULL: its kind never replays), */
    char *trade_id;                  /* and trade id (MARKET_TRADE_ID_MAX + 1 bytes; NULL:
                                        its kind makes no trade) */
    const char *k_idem;              /* while in a batch: its idempotency record ("" none) */
    int64_t deadline_ms;
    int state;
    unsigned lane;
    market_queued *next;
};

/* Units of one stackable good a player holds. */
typedef struct market_stack {
    char item[MARKET_ID_MAX + 1];
    int64_t count;
} market_stack;

typedef struct market_player {
    char id[MARKET_ID_MAX + 1];
    char name[MARKET_NAME_MAX + 1];
    int64_t funds;
    int64_t escrow; /* funds its buy orders hold (their units left times their price) */
    char (*inventory)[MARKET_ID_MAX + 1]; /* sorted item ids */
    size_t n_inventory;
    market_stack *stacks; /* stackable goods, sorted by item (NULL when none) */
    size_t n_stacks;
} market_player;

/* A player's id, funds and escrow, as market_players_scan() reads them. */
typedef struct market_player_funds {
    char id[MARKET_ID_MAX + 1];
    int64_t funds;
    int64_t escrow; /* what its buy orders hold */
} market_player_funds;

typedef struct market_listing {
    char item[MARKET_ID_MAX + 1];
    char seller[MARKET_ID_MAX + 1];
    int64_t price;    /* of one unit */
    int64_t quantity; /* units listed (a unique item: 1) */
    int stack;        /* 1: units of a stackable good; 0: a unique item */
    int64_t ends_ms;  /* when it ends (Unix ms, the store's clock); 0: it never does (read by
                         the searches and market_listings(), not by every read) */
} market_listing;

/* A trade record (market_trade_get() and the lists of trades). */
typedef struct market_trade {
    char id[MARKET_TRADE_ID_MAX + 1]; /* "<ms>-<seq>", in the order trades committed */
    char buyer[MARKET_ID_MAX + 1], seller[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1];
    int64_t quantity, price, total; /* units, price of one, quantity * price */
    int64_t fee;                    /* the realm's cut of total, paid by the seller to its
                                       house (market_settings) */
    char house[MARKET_ID_MAX + 1];  /* the player the cut paid ("" without a cut) */
    uint64_t fence;                 /* the lock fence the commit held (0: none, optimistic) */
    int64_t time_ms;                /* when it committed, by the store's clock (Unix ms) */
} market_trade;

/* A flash sale: the game sells stock units of a stackable item at price
 * each, at most limit to a player, while start_ms <= the store's clock <
 * end_ms (Unix ms). */
typedef struct market_sale {
    char id[MARKET_ID_MAX + 1];
    char item[MARKET_ID_MAX + 1];
    char house[MARKET_ID_MAX + 1]; /* the player paid ("": MARKET_SALE_HOUSE at creation) */
    int64_t price;                 /* of one unit: 1..MARKET_PRICE_MAX */
    int64_t initial;               /* units on sale at creation: 1..MARKET_SALE_STOCK_MAX */
    int64_t left, sold;            /* read: units left and sold (left + sold == initial) */
    int64_t limit;                 /* most units one player may buy: 1..initial */
    int64_t start_ms, end_ms;      /* start_ms < end_ms */
    int64_t now_ms;                /* read: the store's clock when it was read */
} market_sale;

/* What a buy from a sale got (market_sale_buy()). */
typedef struct market_sale_result {
    int64_t quantity, price, total; /* a success: units, the price of one, quantity * price */
    int64_t buyer_funds;            /* a success: the buyer's funds after it */
    int64_t left;     /* a success: units left after it (0 for a replay); ERR_SOLD_OUT: the
                         units left */
    int64_t may_buy;  /* ERR_LIMIT_EXCEEDED: how many more the buyer may buy */
    int replayed;     /* 1: an earlier request with the same idempotency key did it */
    char trade_id[MARKET_TRADE_ID_MAX + 1]; /* a success: its trade record */
} market_sale_result;

/* One part of a purchase without a seller (market_buy_units()), or of a
 * sale into the book (MARKET_ORDER_SELL: seller is the seller, buyer the
 * buy order's). */
typedef struct market_fill {
    char seller[MARKET_ID_MAX + 1];
    char buyer[MARKET_ID_MAX + 1]; /* a sale into the book: whose buy order it filled */
    int64_t order_id;              /* a sale into the book: the buy order it filled */
    int64_t quantity, price; /* units bought from this seller, and the price of one */
    int64_t fee;             /* the realm's cut of this part, from the seller's proceeds */
    char trade_id[MARKET_TRADE_ID_MAX + 1];
} market_fill;

typedef struct market_buy_result {
    int replayed;        /* 1: an earlier request with the same idempotency key did it */
    int64_t quantity;    /* units bought */
    int64_t total;       /* what they cost together */
    int64_t fee;         /* the realm's cut of total, from the sellers' proceeds */
    int64_t buyer_funds; /* the buyer's funds after it */
    int64_t available;   /* on NOT_ENOUGH: the units there are at or under the price */
    int64_t order_id;    /* a buy order (MARKET_ORDER_BID): the id of what rests in the book
                            (0: it filled whole) */
    int64_t rested;      /* a buy order: the units it rests with, their price escrowed */
    size_t n_fills;      /* the parts (none in a replay) */
    market_fill fill[MARKET_FILL_MAX];
    char trade_id[MARKET_TRADE_ID_MAX + 1]; /* the first part's trade */
} market_buy_result;

/* What market_list_units() did, or why not. */
typedef struct market_list_result {
    int replayed;     /* 1: an earlier request with the same idempotency key did it */
    int64_t quantity; /* units the seller's listing of the item holds now (1: a unique item) */
    int64_t held;     /* on NOT_HELD: the units of it the seller holds */
    int64_t price;    /* on PRICE_CHANGED: the price of the seller's listing of it */
    int64_t fee;      /* a success: the listing fee paid to the house (market_settings) */
    int64_t ends_ms;  /* a success: when the listing ends (Unix ms, the store's clock; 0: it
                         never does, or all of it sold; none in a replay) */
    /* units at or under the best buy order's price sell into the book first (none in a
     * replay): */
    int64_t sold;   /* units sold into buy orders (the rest is listed) */
    int64_t total;  /* what they fetched */
    size_t n_fills; /* one per buy order filled, the best first */
    market_fill fill[MARKET_FILL_MAX];
    char trade_id[MARKET_TRADE_ID_MAX + 1]; /* the first fill's trade (also in a replay) */
} market_list_result;

/* What a sale into the book got (MARKET_ORDER_SELL). */
typedef struct market_sell_result {
    int replayed;         /* 1: an earlier request with the same idempotency key did it */
    int64_t quantity;     /* units sold */
    int64_t total;        /* what they fetched together (the buy orders' prices) */
    int64_t fee;          /* the realm's cut of total (none in a replay) */
    int64_t seller_funds; /* the seller's funds after it */
    int64_t available;    /* on NOT_ENOUGH: the units the book wants at or over the price */
    int64_t held;         /* on NOT_HELD: the units of the item the seller holds */
    size_t n_fills;       /* the parts, best bid first (none in a replay) */
    market_fill fill[MARKET_FILL_MAX];
    char trade_id[MARKET_TRADE_ID_MAX + 1]; /* the first part's trade */
} market_sell_result;

/* A buy order in an item's book (market_player_orders()). */
typedef struct market_bid {
    int64_t id; /* the realm's order ids grow: an older order's is lower */
    char buyer[MARKET_ID_MAX + 1];
    char item[MARKET_ID_MAX + 1];
    int64_t price;    /* the most one unit may cost: what a fill pays for one */
    int64_t quantity; /* the units it asked for */
    int64_t left;     /* the units it still wants; its escrow is left * price */
} market_bid;

/* An auction (market_auction.c): the seller's item, or units of a good, go to the highest
 * bidder when it ends, for its bid less the realm's cut; without a bid, back to the
 * seller. A bid is escrowed out of the bidder's funds, and given back when outbid. */
enum market_auction_state {
    MARKET_AUCTION_OPEN,   /* taking bids until ends_ms */
    MARKET_AUCTION_SOLD,   /* to bidder, for bid */
    MARKET_AUCTION_UNSOLD, /* ended without a bid: back to the seller */
};
typedef struct market_auction {
    int64_t id; /* the realm's auction ids grow: 1, 2, ... */
    char seller[MARKET_ID_MAX + 1];
    char item[MARKET_ID_MAX + 1];
    int64_t quantity;               /* units of a good; 0: a unique item */
    int64_t start_bid;              /* the least first bid */
    int64_t buyout;                 /* a bid of at least this ends it at once (0: none) */
    int64_t step;                   /* the least a bid must top the highest by (>= 1) */
    int64_t ends_ms;                /* when it ends (Unix ms, the store's clock) */
    char bidder[MARKET_ID_MAX + 1]; /* the highest bidder ("" none) */
    int64_t bid;                    /* the highest bid (0: none), escrowed out of its funds */
    int64_t bids;                   /* bids taken */
    int state;                      /* enum market_auction_state */
    int64_t fee;                    /* SOLD: the realm's cut of bid, paid by the seller */
} market_auction;

/* What an auction order did (MARKET_ORDER_AUCTION, _BID, _END). */
typedef struct market_auction_result {
    int replayed;                   /* 1: an earlier request with the same idempotency key did it */
    market_auction a;               /* the auction after it (id only, in a replay) */
    int64_t funds;                  /* the seller's (create) or bidder's (bid) funds after it */
    int64_t min_bid;                /* ERR_BID_TOO_LOW: the least bid it takes now */
    char outbid[MARKET_ID_MAX + 1]; /* a bid: the bidder it outbid ("" none) */
    int64_t refund;                 /* and what went back from its escrow to its funds */
    int64_t late_ms;                /* MARKET_ORDER_AUCTION_END: how late it was settled */
    char trade_id[MARKET_TRADE_ID_MAX + 1]; /* SOLD by this order: its trade */
} market_auction_result;

/* One side of a direct trade (market_direct.c): what one player hands the other. */
typedef struct market_goods {
    size_t n_items; /* unique items */
    char items[MARKET_DIRECT_GOODS_MAX][MARKET_ID_MAX + 1];
    size_t n_units; /* units of stackable goods: unit_item[k] times units[k] */
    char unit_item[MARKET_DIRECT_GOODS_MAX][MARKET_ID_MAX + 1];
    int64_t units[MARKET_DIRECT_GOODS_MAX];
    int64_t funds; /* 0..MARKET_PRICE_MAX */
} market_goods;

/* A direct trade between two players: from offers give for get; it swaps when to accepts,
 * all of it or nothing. Nothing is held while it is open: both sides' goods are checked,
 * and moved, when it is accepted. */
enum market_direct_state {
    MARKET_DIRECT_OPEN,      /* to may accept it until expires_ms; either may cancel it */
    MARKET_DIRECT_DONE,      /* accepted: swapped */
    MARKET_DIRECT_CANCELLED, /* by closed_by */
    MARKET_DIRECT_EXPIRED,   /* read: open, and past expires_ms by the store's clock */
};
typedef struct market_direct {
    int64_t id; /* the realm's direct trade ids grow: 1, 2, ... */
    char from[MARKET_ID_MAX + 1], to[MARKET_ID_MAX + 1];
    market_goods give, get;            /* from gives, from gets */
    int64_t made_ms, expires_ms;       /* Unix ms, the store's clock */
    int state;                         /* enum market_direct_state */
    int64_t closed_ms;                 /* DONE, CANCELLED: when */
    char closed_by[MARKET_ID_MAX + 1]; /* CANCELLED: who */
} market_direct;

/* What a direct trade order did (MARKET_ORDER_DIRECT, _ACCEPT, _CANCEL). */
typedef struct market_direct_result {
    int replayed;    /* 1: an earlier request with the same idempotency key did it */
    market_direct t; /* the trade after it (id only, in a replay) */
    int64_t funds;   /* the player's funds after it (its proposer's, accepter's, canceller's) */
    char lacks[MARKET_ID_MAX + 1];   /* NOT_HELD, INSUFFICIENT_FUNDS: the player who lacks */
    char missing[MARKET_ID_MAX + 1]; /* NOT_HELD: the item it lacks */
} market_direct_result;

int market_goods_valid(const market_goods *g);

/* What a cancel of a buy order gave back (MARKET_ORDER_CANCEL). */
typedef struct market_cancel_result {
    market_bid bid;      /* the order as it was (left: the units it still wanted) */
    int64_t refund;      /* left * price, from the buyer's escrow back to its funds */
    int64_t buyer_funds; /* the buyer's funds after it */
} market_cancel_result;

/* One price of a book (market_book()): what rests there. */
typedef struct market_level {
    int64_t price;
    int64_t units;
    size_t orders; /* buy orders (bids) or listings (asks) */
} market_level;

#define MARKET_BOOK_DEPTH_MAX 100 /* most price levels a side of market_book() holds */
#define MARKET_BOOK_SCAN 1000     /* most orders (and listings) a side reads */

/* An item's book (market_book()): buy orders by price, best (highest) first;
 * listings by price, best (lowest) first. */
typedef struct market_book {
    market_level bids[MARKET_BOOK_DEPTH_MAX], asks[MARKET_BOOK_DEPTH_MAX];
    size_t n_bids, n_asks;
    int bids_cut, asks_cut; /* 1: that side has more than it holds: more levels than the
                               depth asked for, or more than MARKET_BOOK_SCAN entries */
} market_book;

/* What market_unlist_units() took back. */
typedef struct market_unlist_result {
    int64_t price; /* the price the listing had */
    int64_t units; /* the units it held (1: a unique item); MARKET_ORDER_EXPIRE: 0 when the
                      listing had gone (bought) and only its end was dropped */
    int64_t late_ms; /* MARKET_ORDER_EXPIRE: how long after its end it was settled (the
                        store's clock) */
} market_unlist_result;

/* What an order handed to the market without waiting asks for. */
enum market_order_type {
    MARKET_ORDER_PURCHASE,      /* a seller's listing: market_purchase_units() */
    MARKET_ORDER_BUY,           /* units across sellers: market_buy_units() */
    MARKET_ORDER_LIST,          /* market_list_units() */
    MARKET_ORDER_UNLIST,        /* market_unlist_units() */
    MARKET_ORDER_SALE_BUY,      /* market_sale_buy() */
    MARKET_ORDER_BID,           /* a buy order: a BUY that fills what it can and rests the rest
                                   in the item's book, its price escrowed (market_buy.c) */
    MARKET_ORDER_CANCEL,        /* a buy order taken back by its buyer (market_cancel.c) */
    MARKET_ORDER_SELL,          /* units sold into the book: the best buy orders at or over a
                                   price, all or nothing, or as many as they want
                                   (market_sell.c) */
    MARKET_ORDER_EXPIRE,        /* a listing whose end has come goes back to its seller, as an
                                   unlist (the sweeper's: market_sweep.c) */
    MARKET_ORDER_AUCTION,       /* a new auction of the seller's item or units (market_auction.c) */
    MARKET_ORDER_AUCTION_BID,   /* a bid on auction id */
    MARKET_ORDER_AUCTION_END,   /* auction id settled at its end (the sweeper's) */
    MARKET_ORDER_DIRECT,        /* a direct trade proposed by player to `to` (market_direct.c) */
    MARKET_ORDER_DIRECT_ACCEPT, /* direct trade id accepted by player, its `to`: it swaps */
    MARKET_ORDER_DIRECT_CANCEL, /* direct trade id cancelled by player, either side */
};

/* An order handed to the market without waiting for it: see
 * market_order_submit(). The caller fills the inputs, keeps the struct and
 * every string it points to alive until done is called, and reads the
 * outputs in done or after it. Each type's inputs and outcome are those of
 * its one-request function named above. */
typedef struct market_order market_order;
struct market_order {
    /* in */
    enum market_order_type type;
    const char *realm;
    const char *player;      /* the buyer; a list's, unlist's or sell's seller */
    const char *seller;      /* MARKET_ORDER_PURCHASE: the listing's seller */
    const char *item;        /* all but MARKET_ORDER_SALE_BUY */
    const char *sale;        /* MARKET_ORDER_SALE_BUY: the sale's id */
    int64_t id;              /* MARKET_ORDER_CANCEL: the buy order's id; AUCTION_BID, _END:
                                the auction's */
    int partial;             /* MARKET_ORDER_SELL: 1 sells what the book wants of quantity,
                                0 all of it or nothing */
    int64_t quantity;        /* units (0: a unique item, or one unit, where allowed) */
    int64_t price;           /* PURCHASE: > 0 refuses any other price; BUY, BID: the most one
                                unit may cost; LIST: the asking price of one; SELL: the
                                least one unit may fetch; AUCTION: the least first bid;
                                AUCTION_BID: the bid */
    const market_idem *idem; /* may be NULL (UNLIST: not used) */
    int64_t duration_s;      /* LIST: the listing ends this long after (0: the realm's
                                list_duration_s; never when that is 0 too); AUCTION: it ends
                                this long after (1..MARKET_DURATION_MAX_S) */
    int64_t buyout;          /* AUCTION: a bid of at least this ends it at once (0: none) */
    int64_t step;            /* AUCTION: the least a bid must top the highest by (0: 1) */
    const char *token;       /* EXPIRE, AUCTION_END: the sweep lease's token it settles under
                                (NULL: none checked, for a lock that is not in the store) */
    const char *to;          /* DIRECT: the player it is offered to */
    const market_goods *give, *get; /* DIRECT: what player gives, and gets (valid goods, not
                                       both empty); duration_s: how long it stays open (0:
                                       MARKET_DIRECT_DURATION_S) */
    void (*done)(market_order *o); /* called once, on a market worker thread */
    void *ud;                      /* the caller's */
    /* out: set before done is called */
    int rc;
    union {
        market_purchase_result purchase;
        market_buy_result buy;
        market_list_result list;
        market_unlist_result unlist;
        market_sale_result sale_buy;
        market_cancel_result cancel;
        market_sell_result sell;
        market_auction_result auction;
        market_direct_result direct;
    } res;
    char why[MARKET_WHY_MAX]; /* with MARKET_ERR_STORE: the store's reason, as text */
    market_queued q;          /* the market's own */
};

/* Units a player bought from a sale (market_sale_buyers()). */
typedef struct market_sale_buyer {
    char player[MARKET_ID_MAX + 1];
    int64_t units;
} market_sale_buyer;

/* Upper bounds (microseconds) of the lock wait histogram's buckets; a last,
 * unbounded bucket follows. */
#define MARKET_WAIT_BUCKETS_US 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, \
                               250000, 500000, 1000000, 2500000
#define MARKET_WAIT_BUCKETS 15

/* Upper bounds (ms) of the settlement lateness histogram's buckets; a last, unbounded
 * bucket follows. */
#define MARKET_LATE_BUCKETS_MS 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000
#define MARKET_LATE_BUCKETS 12

/* Counters since market_new(), read with market_stats_get(). */
typedef struct market_stats {
    uint64_t lock_acquired;   /* lock acquisitions that succeeded */
    uint64_t lock_waits;      /* lock acquisitions tried (each counted in lock_wait_bucket) */
    uint64_t lock_wait_us;    /* time spent in them */
    uint64_t lock_wait_bucket[MARKET_WAIT_BUCKETS]; /* not cumulative */
    uint64_t purchases;       /* market_purchase calls */
    uint64_t purchased;       /* of which committed */
    uint64_t batches;         /* lock strategies: batches the worker served */
    uint64_t sale_buys;       /* buys from flash sales asked for */
    uint64_t sale_bought;     /* of which committed (replays not counted) */
    uint64_t sale_units;      /* units they sold */
    uint64_t sale_batches;    /* batches the sale workers served */
    uint64_t txn_aborts;      /* EXECs aborted by a changed watched key */
    uint64_t lock_busy;       /* lock wait budgets spent */
    uint64_t lease_lost;      /* commits refused because the lease had lapsed */
    uint64_t store_errors;    /* operations failed by Redis errors or outages */
    uint64_t not_replicated;  /* commits whose WAIT timed out (MARKET_ERR_NOT_REPLICATED) */
    uint64_t failovers;       /* Sentinel group: times the master changed */
    uint64_t expired;         /* listings taken back at their end by this server's sweeper */
    uint64_t sweeps;          /* realm sweeps it made (each under the realm's sweep lease) */
    uint64_t settled;         /* endings it settled (taken back, or a bought one's dropped) */
    uint64_t auctions_ended;  /* of which auctions' (sold, or back to the seller) */
    uint64_t late_ms;         /* how late they were together, by the store's clock */
    uint64_t late_bucket[MARKET_LATE_BUCKETS]; /* each one's lateness; not cumulative */
    /* Redis Cluster: what the store met (the lock keeps its own slot map) */
    uint64_t cluster_moved;     /* -MOVED answers: a slot had moved */
    uint64_t cluster_ask;       /* -ASK answers: a slot was being migrated */
    uint64_t cluster_tryagain;  /* -TRYAGAIN answers: the same, keys split between nodes */
    uint64_t cluster_down;      /* -CLUSTERDOWN answers */
    uint64_t cluster_refreshes; /* slot maps fetched */
} market_stats;

/* What the store holds, read without the lock (see market_audit()). */
typedef struct market_audit_report {
    size_t players;
    int64_t total_funds;    /* sum over every users:<id> funds */
    size_t negative_funds;  /* players whose funds are below zero */
    size_t items_held;      /* members of every inventory:<id> */
    size_t items_listed;    /* members of market: (listings of unique items and of goods) */
    size_t goods_listed;    /* of which listings of units of goods */
    size_t items_misplaced; /* items found in more than one place */
    size_t index_mismatch;  /* search index entries missing or extra against market: */
    /* stackable goods and flash sales (units, not items) */
    int64_t units_in_stacks;      /* every count of every stacks:<id> */
    int64_t units_listed;         /* units listed (market:{r}:units) */
    int64_t sale_units_in_stacks; /* of those in stacks, the units of items some sale sells */
    int64_t units_in_sales;       /* units left on sale: the stock of every sale */
    int64_t units_sold_by_sales;  /* the sold of every sale */
    size_t sales;                 /* sales found */
    size_t sales_oversold;        /* sales with sold above their initial stock, or stock
                                     below 0: must be 0 */
    size_t sales_unbalanced;      /* sales whose stock + sold is not their initial: must be 0 */
    /* buy orders: their escrow is funds too (conserved: total_funds + total_escrow) */
    int64_t total_escrow;    /* sum over every users:<id> escrow */
    size_t negative_escrow;  /* players whose escrow is below zero */
    size_t orders;           /* buy orders found */
    int64_t orders_escrow;   /* their units left times their price: must be total_escrow */
    size_t orders_misbooked; /* orders not in their item's book or their buyer's list, or
                                entries of a book without an order: must be 0 */
    /* auctions: an open one holds its item or units, and its highest bid in escrow */
    size_t auctions;            /* open auctions found */
    size_t items_in_auctions;   /* unique items they hold (counted in items_misplaced too) */
    int64_t units_in_auctions;  /* units of goods they hold */
    int64_t auctions_escrow;    /* their bids times their units: with orders_escrow, must be
                                   total_escrow */
    size_t auctions_unreadable; /* auction hashes that are no auction: must be 0 */
} market_audit_report;

/* A search of a realm's market (market_search()): the listings that match every filter
 * given, in price order, a page at a time; or the listings whose item starts with a prefix,
 * in the order of their item, then their seller (byte by byte), a page at a time. */
#define MARKET_SEARCH_LIMIT_MAX 1000                   /* most listings a page holds */
#define MARKET_CURSOR_MAX (13 + 2 + 2 * MARKET_ID_MAX) /* "<13 digits>:<item>.<seller>" */

typedef struct market_search_query {
    const char *item;   /* NULL: any item */
    const char *seller; /* NULL: any seller */
    int64_t min_price;  /* 0: no lower bound; else 1..MARKET_PRICE_MAX */
    int64_t max_price;  /* 0: no upper bound; else 1..MARKET_PRICE_MAX, >= min_price */
    int desc;           /* 0: cheapest first; 1: dearest first (equal prices: reversed too) */
    size_t limit;       /* 1..MARKET_SEARCH_LIMIT_MAX */
    const char *cursor; /* NULL or "": the first page; else a next_cursor of this search */
    const char *item_prefix; /* NULL: none; else only items that start with it (an id's
                                characters, 1..64), by name: no other filter, no desc */
} market_search_query;

typedef struct market_search_result {
    market_listing *listings; /* new array of n (NULL when n is 0): see cleanup below */
    size_t n;
    size_t total;                            /* listings that match the filters, on every page */
    char next_cursor[MARKET_CURSOR_MAX + 1]; /* the next page's cursor; "" on the last page */
    int seller_exists; /* with query.seller: 1 when users:{r}:<seller> exists */
} market_search_result;

/* ---- lifecycle ---- */

market *market_new(const market_config *cfg, lock_client *lock, int *err);
void market_free(market *m);
void market_shutdown(market *m);
market_conn *market_conn_new(market *m, int *err);
void market_conn_free(market_conn *c);
int market_sweeper_start(market *m);
int market_ending_note(market_conn *c, const char *realm);
const char *market_conn_errstr(const market_conn *c);

/* ---- trading ---- */

int market_purchase(market_conn *c, const char *realm, const char *buyer, const char *seller,
                    const char *item, int64_t expect_price, market_purchase_result *res);
int market_purchase_idem(market_conn *c, const char *realm, const char *buyer, const char *seller,
                         const char *item, int64_t expect_price, const market_idem *idem,
                         market_purchase_result *res);
int market_purchase_units(market_conn *c, const char *realm, const char *buyer,
                          const char *seller, const char *item, int64_t quantity,
                          int64_t expect_price, const market_idem *idem,
                          market_purchase_result *res);

int market_buy_units(market_conn *c, const char *realm, const char *buyer, const char *item,
                     int64_t quantity, int64_t max_price, const market_idem *idem,
                     market_buy_result *res);
int market_order_submit(market *m, market_order *o);
int market_order_run(market_conn *c, market_order *o);
int market_can_submit(const market *m);
int market_list(market_conn *c, const char *realm, const char *seller, const char *item,
                int64_t price);
int market_list_idem(market_conn *c, const char *realm, const char *seller, const char *item,
                     int64_t price, const market_idem *idem, int *replayed);
int market_list_units(market_conn *c, const char *realm, const char *seller, const char *item,
                      int64_t quantity, int64_t price, const market_idem *idem,
                      market_list_result *res);
int market_unlist_units(market_conn *c, const char *realm, const char *seller, const char *item,
                        int64_t *price, int64_t *units);
int market_idem_key_valid(const char *key);
int market_unlist(market_conn *c, const char *realm, const char *seller, const char *item,
                  int64_t *price);

/* ---- flash sales (market_sale.c) ---- */

int market_sale_create(market_conn *c, const char *realm, const market_sale *s);
int market_sale_get(market_conn *c, const char *realm, const char *id, market_sale *out);

/* ---- a realm's settings (market_settings.c) ---- */

/* A realm's market settings, kept in the store so that every server applies
 * the same (market_settings.c): a sale's seller pays fee_bps / 10000 of its
 * total, rounded down, to the house, and a seller who lists pays
 * list_fee_bps / 10000 of what it lists (price times units). */
typedef struct market_settings {
    int64_t fee_bps;               /* 0..MARKET_FEE_BPS_MAX; 0: no cut */
    int64_t list_fee_bps;          /* a listing's fee: of its price times the units listed,
                                      paid by the seller when it lists, kept by the house
                                      (unlisting gives none back); 0..MARKET_FEE_BPS_MAX */
    int64_t list_duration_s;       /* a listing's duration when its list names none: 0 (it
                                      never ends) or 1..MARKET_DURATION_MAX_S */
    char house[MARKET_ID_MAX + 1]; /* the player fees pay (MARKET_SALE_HOUSE when unset) */
} market_settings;

int64_t market_fee(int64_t total, int64_t fee_bps);
int market_settings_get(market_conn *c, const char *realm, market_settings *out);
int market_settings_set(market_conn *c, const char *realm, const market_settings *cfg);
int market_sale_buy(market_conn *c, const char *realm, const char *sale, const char *buyer,
                    int64_t quantity, const market_idem *idem, market_sale_result *res);
int market_sale_buyers(market_conn *c, const char *realm, const char *id,
                       market_sale_buyer **out, size_t *n);

/* ---- reading ---- */

int market_player_get(market_conn *c, const char *realm, const char *id, market_player **out);
int market_player_orders(market_conn *c, const char *realm, const char *player, market_bid **out,
                         size_t *n);
int market_auction_get(market_conn *c, const char *realm, int64_t id, market_auction *out);

#define MARKET_AUCTIONS_PAGE_MAX 1000 /* most auctions one page returns */
#define MARKET_AUCTIONS_SCAN 1000     /* a seller's auctions one page of an item's reads */
/* Which open auctions market_auctions_find() reads: a seller's, an item's, both, or every
 * one (NULL each), ending before ending_before_ms (0: any), from offset (a page's
 * next_offset), limit (1..MARKET_AUCTIONS_PAGE_MAX) of them. */
typedef struct market_auction_query {
    const char *item, *seller;
    int64_t ending_before_ms;
    size_t offset, limit;
} market_auction_query;
typedef struct market_auction_page {
    market_auction *auctions; /* soonest to end first */
    size_t n;
    size_t total;       /* the open auctions that match (0 with both item and seller: unknown) */
    size_t next_offset; /* the next page's offset (0: none) */
} market_auction_page;
int market_auctions_find(market_conn *c, const char *realm, const market_auction_query *q,
                         market_auction_page *out);
void market_auction_page_free(market_auction_page *p);
/* The open auctions a player sells, and those whose highest bid is its. */
typedef struct market_player_auctions_result {
    int64_t selling[MARKET_AUCTIONS_PAGE_MAX];
    size_t n_selling;
    int64_t leading[MARKET_AUCTIONS_PAGE_MAX];
    size_t n_leading;
} market_player_auctions_result;
int market_player_auctions(market_conn *c, const char *realm, const char *player,
                           market_player_auctions_result *out);
int market_direct_get(market_conn *c, const char *realm, int64_t id, market_direct *out);
int market_player_directs(market_conn *c, const char *realm, const char *player,
                          market_direct **out, size_t *n);
int market_book_get(market_conn *c, const char *realm, const char *item, size_t depth,
                    market_book *out);
void market_player_free(market_player *p);
int market_listings(market_conn *c, const char *realm, size_t offset, size_t limit,
                    market_listing **out, size_t *n, size_t *total);
int market_trade_id_valid(const char *id);
int market_trade_get(market_conn *c, const char *realm, const char *id, market_trade *out);
int market_trades_player(market_conn *c, const char *realm, const char *player,
                         const char *cursor, size_t limit, market_trade **out, size_t *n,
                         char next[MARKET_TRADE_ID_MAX + 1]);
int market_trades_item(market_conn *c, const char *realm, const char *item, size_t limit,
                       market_trade **out, size_t *n);
int market_trade_last(market_conn *c, const char *realm, char id[MARKET_TRADE_ID_MAX + 1]);
int market_trade_history_start(market_conn *c, const char *realm,
                               char oldest[MARKET_TRADE_ID_MAX + 1], uint64_t *trimmed);

/* An item's price history (market_history()): one candle an interval in which
 * units of it traded. */
enum market_interval { MARKET_INTERVAL_1M, MARKET_INTERVAL_1H, MARKET_INTERVAL_1D };
#define MARKET_INTERVALS 3

typedef struct market_candle {
    int64_t t_ms;                   /* the interval's start, Unix ms (the store's clock) */
    int64_t open, high, low, close; /* prices of one unit: the first, highest, lowest, last */
    int64_t volume;                 /* units traded */
} market_candle;

int64_t market_interval_ms(int interval);
size_t market_interval_kept(int interval);
int market_history(market_conn *c, const char *realm, const char *item, int interval,
                   int64_t from_ms, int64_t to_ms, market_candle **out, size_t *n);

/* A listing change (market_feed_after()): a listing made or taken back. */
typedef struct market_change {
    char id[MARKET_TRADE_ID_MAX + 1]; /* the feed entry's id, in commit order */
    int listed;                       /* 1: listed (POST /list), 0: unlisted */
    market_listing listing;           /* item, seller, price, quantity (stack unset) */
} market_change;

/* An auction's change on a realm's feed (GET /events): opened, a bid taken, sold, or ended
 * unsold, and the auction as it is after it. */
typedef struct market_auction_event {
    char id[MARKET_TRADE_ID_MAX + 1]; /* the feed entry's id, in commit order */
    char action[8];                   /* "opened", "bid", "sold" or "unsold" */
    market_auction a;
} market_auction_event;

/* A page of a realm's feed (market_feed_after()): trades, listing changes and auctions'
 * changes read as one snapshot, each oldest first. */
typedef struct market_feed {
    market_trade *trades;
    size_t ntrades;
    market_change *changes;
    size_t nchanges;
    market_auction_event *auctions;
    size_t nauctions;
} market_feed;

#define MARKET_FEEDS 3 /* a realm's feed's streams: trades, listing changes, auctions' */
int market_feed_after(market_conn *c, const char *realm, const char *const *after, size_t limit,
                      market_feed *out);
int market_feed_last(market_conn *c, const char *realm, char (*last)[MARKET_TRADE_ID_MAX + 1]);
void market_feed_cleanup(market_feed *f);
int market_trades_after(market_conn *c, const char *realm, const char *after, size_t limit,
                        market_trade **out, size_t *n);
int market_search(market_conn *c, const char *realm, const market_search_query *q,
                  market_search_result *out);
void market_search_result_cleanup(market_search_result *r);
int market_search_check(const market_search_query *q, const char **field, const char **why);
void market_cursor_make(const market_listing *l, char out[MARKET_CURSOR_MAX + 1]);
int market_ping(market_conn *c);
int market_health(market_conn *c, char *why, size_t whylen);
#define MARKET_FSYNC_MAX 15 /* the longest appendfsync market_durability() writes */
int market_durability(market_conn *c, char *fsync, size_t fsynclen, char *why, size_t whylen);
int market_audit(market_conn *c, const char *realm, market_audit_report *out);
int market_players_scan(market_conn *c, const char *realm, const char *match,
                        market_player_funds **out, size_t *n);
int market_store_info(market_conn *c, const char *section, char **out);
/* INFO of one master of the store (market_store_info_masters()). */
typedef struct market_master_info {
    char where[RCONN_HOST_MAX + 8]; /* "host:port" */
    char *text;                    /* INFO's text, NUL-terminated */
} market_master_info;
int market_store_info_masters(market_conn *c, const char *section, market_master_info **out,
                              size_t *n);
void market_master_info_free(market_master_info *v, size_t n);
int market_master(market *m, char *out, size_t outlen);

/* ---- seeding ---- */

market_world *market_world_new(void);
void market_world_free(market_world *w);
int market_world_add_player(market_world *w, const char *id, const char *name, int64_t funds);
int market_world_add_item(market_world *w, const char *owner, const char *item);
int market_world_end_listing(market_world *w, const char *seller, const char *item,
                             int64_t duration_s);
int market_world_add_listing(market_world *w, const char *seller, const char *item,
                             int64_t price);
int market_world_add_stack(market_world *w, const char *owner, const char *item, int64_t units);
int market_world_add_units_listing(market_world *w, const char *seller, const char *item,
                                   int64_t price, int64_t units);
int market_world_generate(market_world *w, size_t players, size_t items, int64_t funds,
                          int64_t price_lo, int64_t price_hi, uint64_t seed);
int market_world_generate_goods(market_world *w, size_t players, size_t goods, int64_t price_lo,
                                int64_t price_hi, uint64_t seed);
int market_world_add_order(market_world *w, const char *buyer, const char *item, int64_t quantity,
                           int64_t price);
int market_world_generate_orders(market_world *w, size_t players, size_t goods, size_t orders,
                                 uint64_t seed);
int market_world_generate_ends(market_world *w, int64_t duration_s);
int market_world_add_auction(market_world *w, const char *seller, const char *item,
                             int64_t quantity, int64_t start, int64_t buyout, int64_t step,
                             int64_t duration_s);
int market_world_check(const market_world *w, char *why, size_t whylen);
int market_world_store(market_conn *c, const char *realm, const market_world *w, int reset);
int market_reindex(market_conn *c, const char *realm, size_t *listings);

/* ---- helpers ---- */

void market_stats_get(const market *m, market_stats *out);
int market_strategy_parse(const char *name, enum market_strategy *out);
const char *market_strategy_name(enum market_strategy s);
int market_id_valid(const char *id);
int market_realm_nth(unsigned i, char *out, size_t outlen);
const char *market_strerror(int err);

#endif /* GM_MARKET_MARKET_H */
