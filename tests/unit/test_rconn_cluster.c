/* test_rconn_cluster.c - rconn_cluster.c without Redis: key slots against values
 * Redis 7's CLUSTER KEYSLOT gave, MOVED/ASK redirects, and slot maps built from
 * hand-made CLUSTER SLOTS and CLUSTER SHARDS replies, well-formed and malformed;
 * rconn_cluster_new's checks (the redis-cluster:// URLs are in test_rconn_addr.c).
 * The replies are allocated as hiredis allocates its own and freed with
 * freeReplyObject(). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "rconn/rconn.h"
#include "rconn/rconn_impl.h"

#include <hiredis.h>

#include "tests/helpers/reply.h"

/* A Redis 7 CLUSTER SLOTS node: [host, port, id, {}] (no hostname metadata). */
static redisReply *slots_node(const char *host, long long port, const char *id) {
    return th_rep_arr(4, th_rep_str(host), th_rep_int(port), th_rep_str(id), th_rep_arr(0));
}

/* A CLUSTER SHARDS node, RESP2: flat field/value pairs. */
static redisReply *shards_node(const char *ip, long long port, const char *id, const char *role) {
    return th_rep_arr(14, th_rep_str("id"), th_rep_str(id), th_rep_str("port"), th_rep_int(port),
                      th_rep_str("ip"), th_rep_str(ip), th_rep_str("endpoint"), th_rep_str(ip),
                      th_rep_str("role"), th_rep_str(role), th_rep_str("replication-offset"),
                      th_rep_int(42), th_rep_str("health"), th_rep_str("online"));
}

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccccccccccc"
#define ID_R "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"

/* The CLUSTER SLOTS of a three-master cluster as redis-cli --cluster create splits it,
 * with A also serving 16000..16383 out of order, and one replica per range. */
static redisReply *three_masters_slots(void) {
    return th_rep_arr(
        4,
        th_rep_arr(4, th_rep_int(0), th_rep_int(5460), slots_node("10.0.0.1", 7000, ID_A),
                   slots_node("10.0.0.4", 7003, ID_R)),
        th_rep_arr(4, th_rep_int(5461), th_rep_int(10922), slots_node("10.0.0.2", 7001, ID_B),
                   slots_node("10.0.0.5", 7004, ID_R)),
        th_rep_arr(3, th_rep_int(10923), th_rep_int(15999), slots_node("::1", 7002, ID_C)),
        th_rep_arr(3, th_rep_int(16000), th_rep_int(16383), slots_node("10.0.0.1", 7000, ID_A)));
}

/* A map with nothing in it but garbage, to see that a failed parse leaves it alone. */
static rconn__slotmap *sentinel_map(void) {
    rconn__slotmap *m = malloc(sizeof *m);
    assert_non_null(m);
    memset(m, 0x5a, sizeof *m);
    return m;
}

static void assert_untouched(const rconn__slotmap *m) {
    const unsigned char *p = (const unsigned char *)m;
    for (size_t i = 0; i < sizeof *m; i++)
        if (p[i] != 0x5a) fail_msg("the slot map changed at byte %zu", i);
}

/* ---- key slots ---- */

static uint16_t slot_of(const char *key) {
    return rconn_key_slot(key, strlen(key));
}

static void test_crc16_check_value(void **state) {
    (void)state;
    assert_int_equal(rconn__crc16("123456789", 9), 0x31C3); /* CRC-16/XMODEM's check */
    assert_int_equal(rconn__crc16("", 0), 0);
    assert_int_equal(rconn__crc16(NULL, 0), 0);
}

static void test_key_slot_known_values(void **state) {
    (void)state;
    /* each from redis-server 7.0.15's CLUSTER KEYSLOT */
    assert_int_equal(slot_of("foo"), 12182);
    assert_int_equal(slot_of("bar"), 5061);
    assert_int_equal(slot_of("123456789"), 12739);
    assert_int_equal(slot_of("x"), 16287);
    assert_int_equal(slot_of(""), 0);
    assert_int_equal(rconn_key_slot(NULL, 0), 0);
    assert_int_equal(slot_of("{user1000}.following"), 3443);
    assert_int_equal(slot_of("{user1000}.followers"), 3443);
    assert_int_equal(slot_of("foo{}{bar}"), 8363);    /* empty tag: the whole key */
    assert_int_equal(slot_of("foo{{bar}}zap"), 4015); /* the tag is "{bar" */
    assert_int_equal(slot_of("{bar"), 4015);
    assert_int_equal(slot_of("foo{bar}{zap}"), 5061); /* the first tag only */
    assert_int_equal(slot_of("{}"), 15257);
    assert_int_equal(slot_of("{"), 4092);
    assert_int_equal(slot_of("}"), 12090);
    assert_int_equal(slot_of("a{b"), 13340); /* no '}': the whole key */
}

static void test_key_slot_realm_tags_share_a_slot(void **state) {
    (void)state;
    assert_int_equal(slot_of("eu-1"), 167);
    assert_int_equal(slot_of("users:{eu-1}:B"), 167);
    assert_int_equal(slot_of("market:{eu-1}"), 167);
    assert_int_equal(slot_of("lock:market:{eu-1}"), 167);
    assert_int_equal(slot_of("inventory:{eu-1}:B:fenced"), 167);
    assert_int_not_equal(slot_of("market:{eu-2}"), 167);
}

static void test_key_slot_binary_and_length_bounded(void **state) {
    (void)state;
    /* a NUL byte is part of the key; only len bytes count, terminator or not */
    assert_int_equal(rconn_key_slot("a\0{bar}", 7), 5061);
    assert_int_equal(rconn_key_slot("{bar}", 4), 4015); /* "{bar" */
    assert_int_equal(rconn_key_slot("foo{bar}", 3), 12182);
    assert_int_equal(rconn_key_slot("\xff{\xfe}", 4), rconn__crc16("\xfe", 1) & 16383);
    /* a tag right at the end, and a '}' before the '{' */
    assert_int_equal(slot_of("zap{bar}"), 5061);
    assert_int_equal(slot_of("}{bar}"), 5061);
}

/* ---- redirects ---- */

static int parse(const char *s, rconn_cluster_redirect *out) {
    return rconn_cluster_redirect_parse(s, strlen(s), out);
}

static void test_redirect_moved_and_ask(void **state) {
    (void)state;
    rconn_cluster_redirect r;
    assert_int_equal(parse("MOVED 3999 127.0.0.1:6381", &r), 0);
    assert_int_equal(r.ask, 0);
    assert_int_equal(r.slot, 3999);
    assert_string_equal(r.host, "127.0.0.1");
    assert_int_equal(r.port, 6381);

    assert_int_equal(parse("ASK 16383 redis-3.example.net:65535", &r), 0);
    assert_int_equal(r.ask, 1);
    assert_int_equal(r.slot, 16383);
    assert_string_equal(r.host, "redis-3.example.net");
    assert_int_equal(r.port, 65535);

    assert_int_equal(parse("MOVED 0 10.1.2.3:1", &r), 0);
    assert_int_equal(r.slot, 0);
    assert_int_equal(r.port, 1);
}

static void test_redirect_ipv6_and_empty_host(void **state) {
    (void)state;
    rconn_cluster_redirect r;
    assert_int_equal(parse("MOVED 3999 :6380", &r), 0); /* the host asked */
    assert_string_equal(r.host, "");
    assert_int_equal(r.port, 6380);
    assert_int_equal(parse("ASK 12 ::1:7000", &r), 0); /* Redis does not bracket IPv6 */
    assert_string_equal(r.host, "::1");
    assert_int_equal(r.port, 7000);
    assert_int_equal(parse("MOVED 12 2001:db8::7:6379", &r), 0);
    assert_string_equal(r.host, "2001:db8::7");
    assert_int_equal(r.port, 6379);
    assert_int_equal(parse("MOVED 12 [fe80::1]:6379", &r), 0);
    assert_string_equal(r.host, "fe80::1");
    assert_int_equal(parse("MOVED 12 []:6379", &r), 0);
    assert_string_equal(r.host, "");
}

static void test_redirect_length_bounded(void **state) {
    (void)state;
    rconn_cluster_redirect r;
    const char *s = "MOVED 1 h:6379 and more";
    assert_int_equal(rconn_cluster_redirect_parse(s, 14, &r), 0);
    assert_string_equal(r.host, "h");
    assert_int_equal(r.port, 6379);
    assert_int_equal(rconn_cluster_redirect_parse(s, 13, &r), 0);
    assert_int_equal(r.port, 637);
    assert_int_equal(rconn_cluster_redirect_parse(s, 10, &r), -1); /* "MOVED 1 h:" */
}

static void test_redirect_rejects_the_rest(void **state) {
    (void)state;
    static const char *const bad[] = {
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
        "CLUSTERDOWN Hash slot not served",
        "CROSSSLOT Keys in request don't hash to the same slot",
        "ERR unknown command",
        "",
        "MOVED",
        "MOVED ",
        "MOVED 3999",
        "MOVED 3999 ",
        "MOVED 3999 127.0.0.1",   /* no port */
        "MOVED 3999 127.0.0.1:",  /* empty port */
        "MOVED 3999 127.0.0.1:0", /* port 0 */
        "MOVED 3999 127.0.0.1:65536",
        "MOVED 3999 127.0.0.1:123456",
        "MOVED 3999 127.0.0.1:63x",
        "MOVED 3999 127.0.0.1:6379 ", /* trailing text */
        "MOVED 3999 127.0.0.1:6379\r\n",
        "MOVED 16384 127.0.0.1:6379", /* slot out of range */
        "MOVED 99999 127.0.0.1:6379",
        "MOVED 123456 127.0.0.1:6379",
        "MOVED -1 127.0.0.1:6379",
        "MOVED +1 127.0.0.1:6379",
        "MOVED  3999 127.0.0.1:6379", /* two spaces */
        "MOVED 3999  127.0.0.1:6379",
        "MOVED x 127.0.0.1:6379",
        "MOVED 3999 a b:6379", /* space in the host */
        "MOVED 3999 a\tb:6379",
        "MOVED 3999 [::1:6379", /* a lone bracket */
        "MOVED 3999 ::1]:6379",
        "moved 3999 127.0.0.1:6379", /* case matters, as Redis sends it */
        "ASKING",
        "ASK 1",
        "-MOVED 3999 127.0.0.1:6379", /* hiredis strips the '-' */
    };
    rconn_cluster_redirect r, before;
    memset(&r, 0x5a, sizeof r);
    memcpy(&before, &r, sizeof r);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (parse(bad[i], &r) != -1) fail_msg("accepted \"%s\"", bad[i]);
        assert_memory_equal(&r, &before, sizeof r);
    }
    assert_int_equal(rconn_cluster_redirect_parse(NULL, 0, &r), -1);
    assert_int_equal(rconn_cluster_redirect_parse("MOVED 1 a\0b:6379", 16, &r),
                     -1); /* NUL in host */

    char longhost[(RCONN_HOST_MAX + 1) + 32];
    int n = snprintf(longhost, sizeof longhost, "ASK 1 ");
    memset(longhost + n, 'h', (RCONN_HOST_MAX + 1));
    snprintf(longhost + n + (RCONN_HOST_MAX + 1),
             sizeof longhost - (size_t)n - (RCONN_HOST_MAX + 1), ":6379");
    assert_int_equal(parse(longhost, &r), -1); /* one byte too long */
    memmove(longhost + n + (RCONN_HOST_MAX + 1) - 1, longhost + n + (RCONN_HOST_MAX + 1), 6);
    assert_int_equal(parse(longhost, &r), 0); /* the longest that fits */
    assert_int_equal(strlen(r.host), (RCONN_HOST_MAX + 1) - 1);
}

/* ---- slot maps: CLUSTER SLOTS ---- */

static void test_slotmap_from_slots_three_masters(void **state) {
    (void)state;
    redisReply *r = three_masters_slots();
    rconn__slotmap *m = sentinel_map();
    assert_int_equal(rconn__slotmap_from_slots(r, m), 0);
    freeReplyObject(r);

    assert_int_equal(m->nnodes, 3); /* A's two ranges are one node; replicas are not kept */
    const rconn__cluster_node *a = rconn__slotmap_node(m, 0);
    assert_non_null(a);
    assert_string_equal(a->host, "10.0.0.1");
    assert_int_equal(a->port, 7000);
    assert_string_equal(a->id, ID_A);
    assert_ptr_equal(rconn__slotmap_node(m, 5460), a);
    assert_ptr_equal(rconn__slotmap_node(m, 16000), a);
    assert_ptr_equal(rconn__slotmap_node(m, 16383), a);
    const rconn__cluster_node *b = rconn__slotmap_node(m, 5461);
    assert_string_equal(b->host, "10.0.0.2");
    assert_int_equal(b->port, 7001);
    assert_ptr_equal(rconn__slotmap_node(m, 10922), b);
    const rconn__cluster_node *c = rconn__slotmap_node(m, 10923);
    assert_string_equal(c->host, "::1");
    assert_string_equal(c->id, ID_C);
    assert_ptr_equal(rconn__slotmap_node(m, 15999), c);
    assert_int_equal(rconn__slotmap_node(m, 12182)->port, 7002); /* "foo" */
    assert_null(rconn__slotmap_node(m, 16384));
    assert_null(rconn__slotmap_node(m, 65535));
    assert_int_equal(rconn__slotmap_find(m, "10.0.0.2", 7001), 1);
    assert_int_equal(rconn__slotmap_find(m, "10.0.0.2", 7000), -1);
    assert_int_equal(rconn__slotmap_find(m, "10.0.0.4", 7003), -1); /* a replica */
    free(m);
}

static void test_slotmap_from_slots_old_formats_nil_host_and_holes(void **state) {
    (void)state;
    /* Redis 3.0: [host, port]; Redis 4-6: [host, port, id]; a nil host (Redis 7's
     * cluster-preferred-endpoint-type unknown-endpoint): the host asked. */
    redisReply *r =
        th_rep_arr(3,
                   th_rep_arr(3, th_rep_int(0), th_rep_int(99),
                              th_rep_arr(2, th_rep_str("h1"), th_rep_int(1))),
                   th_rep_arr(3, th_rep_int(200), th_rep_int(200),
                              th_rep_arr(3, th_rep_str("h2"), th_rep_int(2), th_rep_str(ID_B))),
                   th_rep_arr(3, th_rep_int(300), th_rep_int(301),
                              th_rep_arr(3, th_rep_nil(), th_rep_int(3), th_rep_str(ID_C))));
    rconn__slotmap *m = sentinel_map();
    assert_int_equal(rconn__slotmap_from_slots(r, m), 0);
    freeReplyObject(r);
    assert_int_equal(m->nnodes, 3);
    assert_string_equal(rconn__slotmap_node(m, 99)->host, "h1");
    assert_string_equal(rconn__slotmap_node(m, 99)->id, "");
    assert_null(rconn__slotmap_node(m, 100)); /* a hole: unassigned */
    assert_null(rconn__slotmap_node(m, 199));
    assert_int_equal(rconn__slotmap_node(m, 200)->port, 2);
    assert_null(rconn__slotmap_node(m, 201));
    assert_string_equal(rconn__slotmap_node(m, 301)->host, "");
    assert_int_equal(rconn__slotmap_node(m, 301)->port, 3);
    assert_int_equal(m->slot_node[16383], RCONN__SLOT_NONE);

    /* a fresh node's CLUSTER SLOTS is empty: a valid map serving nothing */
    r = th_rep_arr(0);
    assert_int_equal(rconn__slotmap_from_slots(r, m), 0);
    freeReplyObject(r);
    assert_int_equal(m->nnodes, 0);
    for (int s = 0; s < RCONN_CLUSTER_SLOTS; s++)
        if (rconn__slotmap_node(m, (uint16_t)s)) fail_msg("slot %d assigned", s);
    free(m);
}

/* Checks that rconn__slotmap_from_slots refuses r (which it frees) and leaves the map. */
static void refuse_slots(redisReply *r, const char *what) {
    rconn__slotmap *m = sentinel_map();
    if (rconn__slotmap_from_slots(r, m) != -1) fail_msg("accepted %s", what);
    assert_untouched(m);
    free(m);
    freeReplyObject(r);
}

static redisReply *range(long long a, long long b, redisReply *master) {
    return th_rep_arr(3, th_rep_int(a), th_rep_int(b), master);
}

static void test_slotmap_from_slots_rejects_malformed(void **state) {
    (void)state;
    rconn__slotmap *m = sentinel_map();
    assert_int_equal(rconn__slotmap_from_slots(NULL, m), -1);
    assert_untouched(m);
    free(m);

    refuse_slots(th_rep_str("0 16383"), "a string");
    refuse_slots(th_rep_int(0), "an integer");
    refuse_slots(th_rep_nil(), "nil");
    refuse_slots(th_rep_arr(1, th_rep_int(0)), "an entry that is no array");
    refuse_slots(th_rep_arr(1, th_rep_arr(2, th_rep_int(0), th_rep_int(5))),
                 "an entry without a master");
    refuse_slots(
        th_rep_arr(1, th_rep_arr(3, th_rep_str("0"), th_rep_int(5), slots_node("h", 1, ID_A))),
        "a start that is a string");
    refuse_slots(
        th_rep_arr(1, th_rep_arr(3, th_rep_int(0), th_rep_nil(), slots_node("h", 1, ID_A))),
        "an end that is nil");
    refuse_slots(th_rep_arr(1, range(5, 4, slots_node("h", 1, ID_A))), "start > end");
    refuse_slots(th_rep_arr(1, range(-1, 4, slots_node("h", 1, ID_A))), "a negative slot");
    refuse_slots(th_rep_arr(1, range(0, 16384, slots_node("h", 1, ID_A))), "slot 16384");
    refuse_slots(th_rep_arr(1, range(1LL << 40, 1LL << 40, slots_node("h", 1, ID_A))),
                 "a huge slot");
    refuse_slots(th_rep_arr(2, range(0, 10, slots_node("h", 1, ID_A)),
                            range(10, 20, slots_node("h2", 2, ID_B))),
                 "overlapping ranges");
    refuse_slots(th_rep_arr(2, range(0, 10, slots_node("h", 1, ID_A)),
                            range(5, 5, slots_node("h", 1, ID_A))),
                 "a slot listed twice for the same master");
    refuse_slots(th_rep_arr(1, range(0, 1, th_rep_str("h:1"))), "a master that is a string");
    refuse_slots(th_rep_arr(1, range(0, 1, th_rep_arr(1, th_rep_str("h")))),
                 "a master without port");
    refuse_slots(th_rep_arr(1, range(0, 1, th_rep_arr(2, th_rep_str("h"), th_rep_str("1")))),
                 "a port that is a string");
    refuse_slots(th_rep_arr(1, range(0, 1, th_rep_arr(2, th_rep_int(1), th_rep_int(1)))),
                 "a host that is an integer");
    refuse_slots(th_rep_arr(1, range(0, 1, th_rep_arr(2, th_rep_str("h"), th_rep_int(0)))),
                 "port 0");
    refuse_slots(th_rep_arr(1, range(0, 1, th_rep_arr(2, th_rep_str("h"), th_rep_int(65536)))),
                 "port 65536");
    refuse_slots(
        th_rep_arr(1, range(0, 1, th_rep_arr(3, th_rep_str("h"), th_rep_int(1), th_rep_int(7)))),
        "an id that is an integer");
    refuse_slots(th_rep_arr(1, range(0, 1, slots_node("h", 1, ID_A "a"))), "a 41-byte id");
    refuse_slots(th_rep_arr(1, range(0, 1, slots_node("a host", 1, ID_A))), "a space in a host");
    refuse_slots(th_rep_arr(1, th_rep_arr(4, th_rep_int(0), th_rep_int(1), slots_node("h", 1, ID_A),
                                          th_rep_arr(2, th_rep_str("r"), th_rep_str("1")))),
                 "a replica with a string port");
    refuse_slots(th_rep_arr(1, th_rep_arr(4, th_rep_int(0), th_rep_int(1), slots_node("h", 1, ID_A),
                                          th_rep_int(3))),
                 "a replica that is an integer");

    char longhost[(RCONN_HOST_MAX + 1) + 1];
    memset(longhost, 'h', (RCONN_HOST_MAX + 1));
    longhost[(RCONN_HOST_MAX + 1)] = '\0';
    refuse_slots(th_rep_arr(1, range(0, 1, slots_node(longhost, 1, ID_A))), "a host too long");
    refuse_slots(
        th_rep_arr(1, range(0, 1, th_rep_arr(2, th_rep_str_len("h\0x", 3), th_rep_int(1)))),
        "a NUL in a host");

    /* a NULL element pointer (never from hiredis, but not a crash either) */
    redisReply *r = th_rep_arr(1, range(0, 1, slots_node("h", 1, ID_A)));
    redisReply *node = r->element[0]->element[2];
    r->element[0]->element[2] = NULL;
    refuse_slots(r, "a NULL master");
    freeReplyObject(node);
}

static void test_slotmap_from_slots_node_limit(void **state) {
    (void)state;
    /* RCONN__CLUSTER_NODES_MAX masters of a slot each fit; one more does not */
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = RCONN__CLUSTER_NODES_MAX + (size_t)extra;
        redisReply *r = th_rep_new(REDIS_REPLY_ARRAY);
        r->element = calloc(n, sizeof *r->element);
        assert_non_null(r->element);
        r->elements = n;
        for (size_t i = 0; i < n; i++) {
            char host[32];
            snprintf(host, sizeof host, "10.0.%zu.1", i);
            r->element[i] =
                range((long long)i * 10, (long long)i * 10 + 9, slots_node(host, 6379, ID_A));
        }
        rconn__slotmap *m = sentinel_map();
        if (extra) {
            assert_int_equal(rconn__slotmap_from_slots(r, m), -1);
            assert_untouched(m);
        } else {
            assert_int_equal(rconn__slotmap_from_slots(r, m), 0);
            assert_int_equal(m->nnodes, RCONN__CLUSTER_NODES_MAX);
            assert_string_equal(rconn__slotmap_node(m, 639)->host, "10.0.63.1");
        }
        free(m);
        freeReplyObject(r);
    }
}

/* ---- slot maps: CLUSTER SHARDS ---- */

static redisReply *shard(redisReply *slots, redisReply *nodes) {
    return th_rep_arr(4, th_rep_str("slots"), slots, th_rep_str("nodes"), nodes);
}

static void test_slotmap_from_shards(void **state) {
    (void)state;
    redisReply *r = th_rep_arr(
        4,
        shard(th_rep_arr(4, th_rep_int(0), th_rep_int(5460), th_rep_int(16000), th_rep_int(16383)),
              th_rep_arr(2, shards_node("10.0.0.1", 7000, ID_A, "master"),
                         shards_node("10.0.0.4", 7003, ID_R, "replica"))),
        shard(th_rep_arr(2, th_rep_int(5461), th_rep_int(10922)),
              th_rep_arr(2, shards_node("10.0.0.5", 7004, ID_R, "replica"), /* replica first */
                         shards_node("10.0.0.2", 7001, ID_B, "master"))),
        shard(th_rep_arr(2, th_rep_int(10923), th_rep_int(15999)),
              th_rep_arr(1, shards_node("::1", 7002, ID_C, "master"))),
        /* a failed old master that lost its slots: a shard without slots */
        shard(th_rep_arr(0), th_rep_arr(1, shards_node("10.0.0.9", 7009, ID_R, "master"))));
    rconn__slotmap *m = sentinel_map();
    assert_int_equal(rconn__slotmap_from_shards(r, m), 0);
    freeReplyObject(r);
    assert_int_equal(m->nnodes, 3);
    assert_int_equal(rconn__slotmap_node(m, 0)->port, 7000);
    assert_string_equal(rconn__slotmap_node(m, 0)->id, ID_A);
    assert_int_equal(rconn__slotmap_node(m, 16383)->port, 7000);
    assert_int_equal(rconn__slotmap_node(m, 5461)->port, 7001);
    assert_string_equal(rconn__slotmap_node(m, 5461)->host, "10.0.0.2");
    assert_string_equal(rconn__slotmap_node(m, 15999)->host, "::1");
    assert_int_equal(rconn__slotmap_find(m, "10.0.0.9", 7009), -1);

    /* no "endpoint": the "ip"; a nil endpoint: the host asked; unknown fields ignored */
    r = th_rep_arr(
        2,
        shard(th_rep_arr(2, th_rep_int(0), th_rep_int(0)),
              th_rep_arr(1, th_rep_arr(8, th_rep_str("port"), th_rep_int(1), th_rep_str("ip"),
                                       th_rep_str("h1"), th_rep_str("role"), th_rep_str("master"),
                                       th_rep_str("tls-port"), th_rep_int(2)))),
        shard(th_rep_arr(2, th_rep_int(1), th_rep_int(1)),
              th_rep_arr(1, th_rep_arr(8, th_rep_str("port"), th_rep_int(3), th_rep_str("ip"),
                                       th_rep_str("h3"), th_rep_str("endpoint"), th_rep_nil(),
                                       th_rep_str("role"), th_rep_str("master")))));
    assert_int_equal(rconn__slotmap_from_shards(r, m), 0);
    freeReplyObject(r);
    assert_int_equal(m->nnodes, 2);
    assert_string_equal(rconn__slotmap_node(m, 0)->host, "h1");
    assert_string_equal(rconn__slotmap_node(m, 0)->id, "");
    assert_string_equal(rconn__slotmap_node(m, 1)->host, "");
    assert_null(rconn__slotmap_node(m, 2));
    free(m);
}

static void refuse_shards(redisReply *r, const char *what) {
    rconn__slotmap *m = sentinel_map();
    if (rconn__slotmap_from_shards(r, m) != -1) fail_msg("accepted %s", what);
    assert_untouched(m);
    free(m);
    freeReplyObject(r);
}

static void test_slotmap_from_shards_rejects_malformed(void **state) {
    (void)state;
    rconn__slotmap *m = sentinel_map();
    assert_int_equal(rconn__slotmap_from_shards(NULL, m), -1);
    assert_untouched(m);
    free(m);

    refuse_shards(th_rep_str("shards"), "a string");
    refuse_shards(th_rep_arr(1, th_rep_int(1)), "a shard that is an integer");
    refuse_shards(
        th_rep_arr(1, th_rep_arr(3, th_rep_str("slots"), th_rep_arr(0), th_rep_str("nodes"))),
        "an odd field/value array");
    refuse_shards(th_rep_arr(1, th_rep_arr(2, th_rep_str("slots"), th_rep_arr(0))), "no nodes");
    refuse_shards(th_rep_arr(1, th_rep_arr(2, th_rep_str("nodes"), th_rep_arr(0))), "no slots");
    refuse_shards(th_rep_arr(1, th_rep_arr(4, th_rep_int(1), th_rep_arr(0), th_rep_str("nodes"),
                                           th_rep_arr(0))),
                  "a field that is an integer");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(1, th_rep_int(0)),
                                      th_rep_arr(1, shards_node("h", 1, ID_A, "master")))),
                  "an odd slots array");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_str("9")),
                                      th_rep_arr(1, shards_node("h", 1, ID_A, "master")))),
                  "a slot that is a string");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(16384)),
                                      th_rep_arr(1, shards_node("h", 1, ID_A, "master")))),
                  "slot 16384");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(9), th_rep_int(0)),
                                      th_rep_arr(1, shards_node("h", 1, ID_A, "master")))),
                  "start > end");
    refuse_shards(th_rep_arr(2,
                             shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                   th_rep_arr(1, shards_node("h", 1, ID_A, "master"))),
                             shard(th_rep_arr(2, th_rep_int(9), th_rep_int(20)),
                                   th_rep_arr(1, shards_node("h2", 2, ID_B, "master")))),
                  "overlapping shards");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                      th_rep_arr(1, shards_node("h", 1, ID_A, "replica")))),
                  "slots and no master");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                      th_rep_arr(2, shards_node("h", 1, ID_A, "master"),
                                                 shards_node("h2", 2, ID_B, "master")))),
                  "two masters in a shard");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                      th_rep_arr(1, shards_node("h", 0, ID_A, "master")))),
                  "port 0");
    refuse_shards(
        th_rep_arr(1, shard(th_rep_arr(0), th_rep_arr(1, shards_node("h", 0, ID_A, "master")))),
        "port 0 in a shard without slots");
    refuse_shards(
        th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                            th_rep_arr(1, th_rep_arr(4, th_rep_str("port"), th_rep_str("1"),
                                                     th_rep_str("role"), th_rep_str("master"))))),
        "a port that is a string");
    refuse_shards(
        th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                            th_rep_arr(1, th_rep_arr(4, th_rep_str("port"), th_rep_int(1),
                                                     th_rep_str("role"), th_rep_str("master"))))),
        "a master with neither endpoint nor ip");
    refuse_shards(
        th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                            th_rep_arr(1, th_rep_arr(4, th_rep_str("port"), th_rep_int(1),
                                                     th_rep_str("ip"), th_rep_str("h"))))),
        "a node without role");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                      th_rep_arr(1, shards_node("a b", 1, ID_A, "master")))),
                  "a space in the endpoint");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                      th_rep_arr(1, shards_node("h", 1, ID_A "x", "master")))),
                  "a 41-byte id");
    refuse_shards(th_rep_arr(1, shard(th_rep_arr(2, th_rep_int(0), th_rep_int(9)),
                                      th_rep_arr(1, th_rep_nil()))),
                  "a node that is nil");
}

/* ---- MOVED patches ---- */

static void test_slotmap_set(void **state) {
    (void)state;
    redisReply *r = three_masters_slots();
    rconn__slotmap *m = sentinel_map();
    assert_int_equal(rconn__slotmap_from_slots(r, m), 0);
    freeReplyObject(r);

    assert_int_equal(rconn__slotmap_set(m, 100, "10.0.0.2", 7001), 1); /* a known node */
    assert_int_equal(rconn__slotmap_node(m, 100)->port, 7001);
    assert_int_equal(rconn__slotmap_node(m, 99)->port, 7000); /* its neighbours stay */
    assert_int_equal(rconn__slotmap_node(m, 101)->port, 7000);
    assert_int_equal(rconn__slotmap_set(m, 101, "10.0.0.7", 7007), 3); /* a new one */
    assert_int_equal(m->nnodes, 4);
    assert_string_equal(rconn__slotmap_node(m, 101)->host, "10.0.0.7");
    assert_string_equal(rconn__slotmap_node(m, 101)->id, "");

    rconn__slotmap before;
    memcpy(&before, m, sizeof before);
    assert_int_equal(rconn__slotmap_set(m, 16384, "h", 1), -1);
    assert_int_equal(rconn__slotmap_set(m, 1, "h", 0), -1);
    assert_int_equal(rconn__slotmap_set(m, 1, "h", 65536), -1);
    assert_int_equal(rconn__slotmap_set(m, 1, "a b", 1), -1);
    assert_int_equal(rconn__slotmap_set(m, 1, NULL, 1), -1);
    for (int i = m->nnodes; i < RCONN__CLUSTER_NODES_MAX; i++) {
        char host[32];
        snprintf(host, sizeof host, "h%d", i);
        assert_int_equal(rconn__slotmap_set(m, (uint16_t)(200 + i), host, 1), i);
    }
    memcpy(&before, m, sizeof before);
    assert_int_equal(rconn__slotmap_set(m, 1, "one-too-many", 1), -1); /* full */
    assert_memory_equal(m, &before, sizeof before);
    assert_int_equal(rconn__slotmap_set(m, 1, "h5", 1), 5); /* known ones still go */

    rconn__slotmap_clear(m);
    assert_int_equal(m->nnodes, 0);
    assert_null(rconn__slotmap_node(m, 0));
    free(m);
}

/* rconn_cluster_new takes clusters only; nothing is contacted until asked. */
static void test_rconn_cluster_new_checks_args(void **state) {
    (void)state;
    rconn_addr a;
    int err = -100;
    assert_int_equal(rconn_addr_parse("redis://h:1", &a), RCONN_OK);
    assert_null(rconn_cluster_new(&a, 100, &err));
    assert_int_equal(err, RCONN_ERR_INVALID);
    assert_null(rconn_cluster_new(NULL, 100, &err));
    assert_int_equal(err, RCONN_ERR_INVALID);
    assert_int_equal(rconn_addr_parse("redis-cluster://h:1", &a), RCONN_OK);
    assert_null(rconn_cluster_new(&a, 0, &err));
    assert_int_equal(err, RCONN_ERR_INVALID);
    a.db = 1;
    assert_null(rconn_cluster_new(&a, 100, &err));
    assert_int_equal(err, RCONN_ERR_INVALID);
    a.db = 0;
    rconn_cluster *c = rconn_cluster_new(&a, 100, &err);
    assert_non_null(c);
    assert_int_equal(err, RCONN_OK);
    rconn_cluster_stats st;
    rconn_cluster_stats_get(c, &st);
    assert_int_equal(st.refreshes + st.moved + st.ask, 0);
    rconn_cluster_redirect r = {1, 5, "h", 2};
    rconn_cluster_redirected(c, &r);
    r.ask = 0;
    rconn_cluster_redirected(c, &r);
    rconn_cluster_stats_get(c, &st);
    assert_int_equal(st.ask, 1);
    assert_int_equal(st.moved, 1);
    assert_int_equal(st.refreshes, 0);
    rconn_cluster_free(c);
    rconn_cluster_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_check_value),
        cmocka_unit_test(test_key_slot_known_values),
        cmocka_unit_test(test_key_slot_realm_tags_share_a_slot),
        cmocka_unit_test(test_key_slot_binary_and_length_bounded),
        cmocka_unit_test(test_redirect_moved_and_ask),
        cmocka_unit_test(test_redirect_ipv6_and_empty_host),
        cmocka_unit_test(test_redirect_length_bounded),
        cmocka_unit_test(test_redirect_rejects_the_rest),
        cmocka_unit_test(test_slotmap_from_slots_three_masters),
        cmocka_unit_test(test_slotmap_from_slots_old_formats_nil_host_and_holes),
        cmocka_unit_test(test_slotmap_from_slots_rejects_malformed),
        cmocka_unit_test(test_slotmap_from_slots_node_limit),
        cmocka_unit_test(test_slotmap_from_shards),
        cmocka_unit_test(test_slotmap_from_shards_rejects_malformed),
        cmocka_unit_test(test_slotmap_set),
        cmocka_unit_test(test_rconn_cluster_new_checks_args),
    };
    return cmocka_run_group_tests_name("rconn cluster: slots, redirects, slot maps (unit)", tests,
                                       NULL, NULL);
}
