/* test_rconn_addr.c - the URL forms of rconn_addr.c: redis://, redis-sentinel://,
 * redis-cluster:// with credentials and db, lists of URLs, and comparing addresses. Pure: no
 * Redis. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "rconn/rconn.h"

/* ---- rconn_addr_parse ---- */

static void expect_addr(const char *url, const char *host, int port, const char *user,
                        const char *pass, int db) {
    rconn_addr a;
    memset(&a, 0x5a, sizeof a);
    int rc = rconn_addr_parse(url, &a);
    if (rc != RCONN_OK) print_error("url: %s\n", url);
    assert_int_equal(rc, RCONN_OK);
    assert_string_equal(a.host, host);
    assert_int_equal(a.port, port);
    assert_string_equal(a.user, user);
    assert_string_equal(a.pass, pass);
    assert_int_equal(a.db, db);
}

/* Each of bad[0..n) is refused with RCONN_ERR_INVALID and leaves the address untouched. */
static void expect_invalid(const char *const *bad, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rconn_addr a;
        memset(&a, 0x5a, sizeof a);
        rconn_addr before = a;
        int rc = rconn_addr_parse(bad[i], &a);
        if (rc != RCONN_ERR_INVALID) print_error("url: %s\n", bad[i]);
        assert_int_equal(rc, RCONN_ERR_INVALID);
        assert_memory_equal(&a, &before, sizeof a); /* untouched on failure */
    }
}

/* a's seed i is host:port. */
static void expect_seed(const rconn_addr *a, int i, const char *host, int port) {
    assert_true(i < a->nseeds);
    assert_string_equal(a->seeds[i].host, host);
    assert_int_equal(a->seeds[i].port, port);
}

static void test_rconn_addr_parse_good_urls_parsed(void **state) {
    (void)state;
    expect_addr("redis://127.0.0.1:6379/0", "127.0.0.1", 6379, "", "", 0);
    expect_addr("redis://localhost", "localhost", 6379, "", "", 0);
    expect_addr("redis://", "127.0.0.1", 6379, "", "", 0);
    expect_addr("REDIS://cache.example-1.net:7000/15", "cache.example-1.net", 7000, "", "", 15);
    expect_addr("redis://h/", "h", 6379, "", "", 0);
    expect_addr("redis://h:1", "h", 1, "", "", 0);
    expect_addr("redis://h:65535/2", "h", 65535, "", "", 2);
    expect_addr("redis://:secret@127.0.0.1:6380/0", "127.0.0.1", 6380, "", "secret", 0);
    expect_addr("redis://user:pw@h:1/3", "h", 1, "user", "pw", 3);
    expect_addr("redis://user:@h", "h", 6379, "user", "", 0);
    expect_addr("redis://:6390", "127.0.0.1", 6390, "", "", 0);
    expect_addr("redis://[::1]:6380/1", "::1", 6380, "", "", 1);
    expect_addr("10.0.0.5:6400", "10.0.0.5", 6400, "", "", 0);
    expect_addr("localhost", "localhost", 6379, "", "", 0);
    expect_addr("db.local:6379/4", "db.local", 6379, "", "", 4);
    /* user and password are percent-decoded */
    expect_addr("redis://us%65r:p%40ss%3Aw%2Frd@h:7/3", "h", 7, "user", "p@ss:w/rd", 3);
    expect_addr("redis://:%41%62%7e@h", "h", 6379, "", "Ab~", 0);
    /* an unescaped '@' in the password: the last '@' ends the userinfo */
    expect_addr("redis://:a@b@h:9", "h", 9, "", "a@b", 0);
    /* ':' after the first one belongs to the password */
    expect_addr("redis://u:a:b@h", "h", 6379, "u", "a:b", 0);
}

static void test_rconn_addr_parse_bad_urls_invalid(void **state) {
    (void)state;
    static const char *const bad[] = {
        "rediss://h:6379",       "http://h",        "unix:///tmp/redis.sock",
        "redis://h:0",           "redis://h:65536", "redis://h:-1",
        "redis://h:+1",          "redis://h:",      "redis://h:abc",
        "redis://h:99999999999", "redis://h/-1",    "redis://h/x",
        "redis://h/1/2",         "redis://h/1?x=1", "redis://h/99999999999",
        "redis://user@h",        "redis://:%zz@h",  "redis://:%4@h",
        "redis://:%00@h",        "redis://:a b@h",  "redis://h h",
        "redis://[::1",          "redis://[]:1",    "redis://[::g]",
        "redis://[::1]x",        "redis://h:1:2",   "redis://h\t",
    };
    expect_invalid(bad, sizeof bad / sizeof bad[0]);
    rconn_addr a;
    assert_int_equal(rconn_addr_parse(NULL, &a), RCONN_ERR_INVALID);
    assert_int_equal(rconn_addr_parse("redis://h", NULL), RCONN_ERR_INVALID);
}

/* redis-sentinel://: the Sentinels (26379 by default), the master name, the db; host and port
 * stay empty until a rconn_sentinel resolves them. */
static void test_rconn_addr_parse_sentinel_group(void **state) {
    (void)state;
    rconn_addr a;
    assert_int_equal(
        rconn_addr_parse("redis-sentinel://:pw@10.0.0.1:26380,s2,[::1]:7/mymaster/3", &a),
        RCONN_OK);
    assert_string_equal(a.master_name, "mymaster");
    assert_int_equal(a.nseeds, 3);
    expect_seed(&a, 0, "10.0.0.1", 26380);
    expect_seed(&a, 1, "s2", 26379);
    expect_seed(&a, 2, "::1", 7);
    assert_string_equal(a.pass, "pw");
    assert_int_equal(a.db, 3);
    assert_string_equal(a.host, "");
    assert_int_equal(rconn_addr_parse("REDIS-SENTINEL://h/m.a-1_b", &a), RCONN_OK);
    assert_string_equal(a.master_name, "m.a-1_b");
    assert_int_equal(a.db, 0);
    static const char *const bad[] = {
        "redis-sentinel://h",
        "redis-sentinel://h/",
        "redis-sentinel://h//1",
        "redis-sentinel:///m",
        "redis-sentinel://h,/m",
        "redis-sentinel://,h/m",
        "redis-sentinel://h:0/m",
        "redis-sentinel://h/m/x",
        "redis-sentinel://h/m!",
        "redis-sentinel://h/m/1/2",
        "redis-sentinel://a,b,c,d,e,f,g,h,i/m",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = rconn_addr_parse(bad[i], &a);
        if (rc != RCONN_ERR_INVALID) print_error("url: %s\n", bad[i]);
        assert_int_equal(rc, RCONN_ERR_INVALID);
    }
    char name[RCONN_MASTER_NAME_MAX + 40];
    memset(name, 'n', sizeof name);
    memcpy(name, "redis-sentinel://h/", 19);
    name[19 + RCONN_MASTER_NAME_MAX] = '\0';
    assert_int_equal(rconn_addr_parse(name, &a), RCONN_OK);
    name[19 + RCONN_MASTER_NAME_MAX] = 'n';
    name[20 + RCONN_MASTER_NAME_MAX] = '\0';
    assert_int_equal(rconn_addr_parse(name, &a), RCONN_ERR_INVALID);
}

/* A list keeps each Sentinel group's own commas with its URL, and a cluster's. */
static void test_rconn_addr_parse_list_groups_clusters_servers(void **state) {
    (void)state;
    rconn_addr a[5];
    size_t n = 0;
    assert_int_equal(rconn_addr_parse_list("redis-sentinel://s1:1,s2:2/m1,redis://h:3,"
                                           "redis-sentinel://s3/m2/4,h4:5",
                                           a, 5, &n),
                     RCONN_OK);
    assert_int_equal(n, 4);
    assert_string_equal(a[0].master_name, "m1");
    assert_int_equal(a[0].nseeds, 2);
    assert_string_equal(a[1].host, "h");
    assert_int_equal(a[1].port, 3);
    assert_string_equal(a[2].master_name, "m2");
    assert_int_equal(a[2].db, 4);
    assert_string_equal(a[3].host, "h4");
    assert_int_equal(rconn_addr_parse_list("h1,h2,h3", a, 2, &n), RCONN_ERR_INVALID);
    assert_int_equal(rconn_addr_parse_list("h1,,h3", a, 5, &n), RCONN_ERR_INVALID);
    assert_int_equal(rconn_addr_parse_list("", a, 5, &n), RCONN_ERR_INVALID);
    assert_int_equal(rconn_addr_parse_list("h1,", a, 5, &n), RCONN_ERR_INVALID);
    assert_int_equal(rconn_addr_parse_list(NULL, a, 5, &n), RCONN_ERR_INVALID);
    /* a cluster's commas stay with its URL until an item names a scheme */
    assert_int_equal(rconn_addr_parse_list("redis-cluster://a:1,b:2,redis://c:3,"
                                           "redis-cluster://d,e/0,f:4",
                                           a, 5, &n),
                     RCONN_OK);
    assert_int_equal(n, 4);
    assert_int_equal(a[0].cluster, 1);
    assert_int_equal(a[0].nseeds, 2);
    assert_string_equal(a[0].seeds[1].host, "b");
    assert_string_equal(a[1].host, "c");
    assert_int_equal(a[2].cluster, 1);
    assert_int_equal(a[2].nseeds, 2);
    assert_string_equal(a[3].host, "f");
    assert_int_equal(a[3].port, 4);
}

/* Same data: same server and db, same group (name, db, Sentinels), same cluster (the same
 * seeds in the same order); credentials aside; a cluster is never one server. */
static void test_rconn_addr_same_compares_where_not_who(void **state) {
    (void)state;
    static const struct {
        const char *x, *y;
        int same;
    } cases[] = {
        {"redis://:a@h:1/2", "redis://:b@h:1/2", 1},
        {"redis://h:1/2", "redis://h:1/3", 0},
        {"redis-sentinel://s:1,t:2/m", "redis-sentinel://u:p@s:1,t:2/m/0", 1},
        {"redis-sentinel://s:1,t:2/m", "redis-sentinel://s:1,t:2/n", 0},
        {"redis-sentinel://s:1,t:2/m", "redis-sentinel://s:1/m", 0},
        {"redis-cluster://a:1,b:2", "redis-cluster://u:p@a:1,b:2/0", 1},
        {"redis-cluster://a:1,b:2", "redis-cluster://b:2,a:1", 0},
        {"redis-cluster://a:1,b:2", "redis-cluster://a:1", 0},
        {"redis-cluster://a:1,b:2", "redis://a:1", 0},
        {"redis://a:1", "redis-cluster://a:1,b:2", 0},
        {"redis-cluster://a:1,b:2", "redis-sentinel://a:1,b:2/m", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rconn_addr x, y;
        assert_int_equal(rconn_addr_parse(cases[i].x, &x), RCONN_OK);
        assert_int_equal(rconn_addr_parse(cases[i].y, &y), RCONN_OK);
        if (rconn_addr_same(&x, &y) != cases[i].same)
            print_error("%s ~ %s\n", cases[i].x, cases[i].y);
        assert_int_equal(rconn_addr_same(&x, &y), cases[i].same);
        assert_false(rconn_addr_same(&x, NULL));
    }
}

static void test_rconn_addr_parse_overlong_fields_invalid(void **state) {
    (void)state;
    char url[1200];
    rconn_addr a;

    /* host of exactly RCONN_HOST_MAX bytes is fine, one more is not */
    strcpy(url, "redis://");
    memset(url + 8, 'h', RCONN_HOST_MAX);
    url[8 + RCONN_HOST_MAX] = '\0';
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_OK);
    assert_int_equal(strlen(a.host), RCONN_HOST_MAX);
    strcat(url, "h");
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_ERR_INVALID);

    /* password of RCONN_CRED_MAX decoded bytes is fine (even spelled as escapes), more is not */
    strcpy(url, "redis://:");
    for (int i = 0; i < RCONN_CRED_MAX; i++)
        strcat(url, "%41");
    strcat(url, "@h");
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_OK);
    assert_int_equal(strlen(a.pass), RCONN_CRED_MAX);
    strcpy(url, "redis://:");
    memset(url + 9, 'p', RCONN_CRED_MAX + 1);
    strcpy(url + 9 + RCONN_CRED_MAX + 1, "@h");
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_ERR_INVALID);

    /* user likewise */
    strcpy(url, "redis://");
    memset(url + 8, 'u', RCONN_CRED_MAX + 1);
    strcpy(url + 8 + RCONN_CRED_MAX + 1, ":p@h");
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_ERR_INVALID);
}

/* ---- redis-cluster:// addresses ---- */

/* The seeds (6379 by default), the credentials, db 0; host and port stay empty. */
static void test_rconn_addr_parse_cluster_seeds(void **state) {
    (void)state;
    rconn_addr a;
    assert_int_equal(rconn_addr_parse("redis-cluster://u:p%40w@10.0.0.1:7000,n2,[::1]:7002/0", &a),
                     RCONN_OK);
    assert_int_equal(a.cluster, 1);
    assert_int_equal(a.nseeds, 3);
    expect_seed(&a, 0, "10.0.0.1", 7000);
    expect_seed(&a, 1, "n2", 6379);
    expect_seed(&a, 2, "::1", 7002);
    assert_string_equal(a.user, "u");
    assert_string_equal(a.pass, "p@w");
    assert_int_equal(a.db, 0);
    assert_string_equal(a.host, "");
    assert_int_equal(a.port, 0);
    assert_string_equal(a.master_name, "");
    assert_int_equal(rconn_addr_parse("REDIS-CLUSTER://h", &a), RCONN_OK);
    assert_int_equal(a.cluster, 1);
    assert_int_equal(a.nseeds, 1);
    assert_int_equal(a.seeds[0].port, 6379);
    assert_int_equal(rconn_addr_parse("redis-cluster://a,b,c,d,e,f,g,h/", &a), RCONN_OK);
    assert_int_equal(a.nseeds, RCONN_SEEDS_MAX);
    assert_int_equal(rconn_addr_parse("redis://h:1/3", &a), RCONN_OK);
    assert_int_equal(a.cluster, 0); /* the other forms are not clusters */
    assert_int_equal(a.nseeds, 0);
}

static void test_rconn_addr_parse_cluster_bad_invalid(void **state) {
    (void)state;
    static const char *const bad[] = {
        "redis-cluster://h/1",   "redis-cluster://h:1/2",   "redis-cluster://",
        "redis-cluster:///0",    "redis-cluster://h,/0",    "redis-cluster://,h",
        "redis-cluster://h:0",   "redis-cluster://h:65536", "redis-cluster://h:x",
        "redis-cluster://h/0/1", "redis-cluster://h/m",     "redis-cluster://a,b,c,d,e,f,g,h,i",
        "redis-cluster://u@h",   "redis-cluster://h:-1",
    };
    expect_invalid(bad, sizeof bad / sizeof bad[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rconn_addr_parse_good_urls_parsed),
        cmocka_unit_test(test_rconn_addr_parse_bad_urls_invalid),
        cmocka_unit_test(test_rconn_addr_parse_sentinel_group),
        cmocka_unit_test(test_rconn_addr_parse_list_groups_clusters_servers),
        cmocka_unit_test(test_rconn_addr_same_compares_where_not_who),
        cmocka_unit_test(test_rconn_addr_parse_cluster_seeds),
        cmocka_unit_test(test_rconn_addr_parse_cluster_bad_invalid),
        cmocka_unit_test(test_rconn_addr_parse_overlong_fields_invalid),
    };
    return cmocka_run_group_tests_name("rconn addresses (unit)", tests, NULL, NULL);
}
