/* http_client.c - HTTP requests over libcurl (or raw bytes over a socket) and a dump of the
 * store, for tests. */
#include "tests/helpers/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

long th_http_timeout_ms = 20000;

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    th_http *r = ud;
    size_t add = size * n;
    char *b = realloc(r->body, r->len + add + 1);
    if (!b) return 0;
    memcpy(b + r->len, data, add);
    r->body = b;
    r->len += add;
    b[r->len] = '\0';
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
    th_http *r = ud;
    size_t add = size * n, have = strlen(r->headers);
    if (have + add < sizeof r->headers) {
        memcpy(r->headers + have, data, add);
        r->headers[have + add] = '\0';
    }
    return add;
}

/* Sends one request to 127.0.0.1:port. body may be NULL. Returns 0 with
 * *out filled (free with th_http_cleanup), or -1 on a transport error. */
int th_http_do(int port, const char *method, const char *path, const char *body, size_t len,
               th_http *out) {
    return th_http_do_header(port, method, path, NULL, body, len, out);
}

/* th_http_do() with one more request header ("Name: value"; NULL for none). */
int th_http_do_header(int port, const char *method, const char *path, const char *header,
                      const char *body, size_t len, th_http *out) {
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (!c) return -1;
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    if (header) h = curl_slist_append(h, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, th_http_timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!out->body) out->body = calloc(1, 1);
    return rc == CURLE_OK ? 0 : -1;
}

/* Sends req[0..len) as it is (any bytes: NULs, control bytes, repeated
 * headers, which libcurl would refuse or rewrite) to 127.0.0.1:port and
 * reads the answer until the server closes the connection, within
 * th_http_timeout_ms; so the request should say "Connection: close", unless
 * the test means to check that the server closes it. Returns 0 with *out
 * filled (free with th_http_cleanup), or -1 when the connection failed, or
 * timed out, or what came back is not an HTTP response. */
int th_http_raw(int port, const char *req, size_t len, th_http *out) {
    memset(out, 0, sizeof *out);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {th_http_timeout_ms / 1000, (th_http_timeout_ms % 1000) * 1000};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char *buf = NULL;
    size_t have = 0;
    int rc = -1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        goto done;
    for (size_t sent = 0; sent < len;) {
        ssize_t n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
        if (n <= 0) goto done;
        sent += (size_t)n;
    }
    for (;;) { /* until EOF; a timeout or a reset is a failure */
        char *b = realloc(buf, have + 4096 + 1);
        if (!b) goto done;
        buf = b;
        ssize_t n = recv(fd, buf + have, 4096, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) goto done;
        if (n == 0) break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) != 0 || !end || have < 12) goto done;
    out->status = strtol(buf + 9, NULL, 10);
    size_t hlen = (size_t)(end - buf) + 4;
    size_t keep = hlen < sizeof out->headers ? hlen : sizeof out->headers - 1;
    memcpy(out->headers, buf, keep);
    out->headers[keep] = '\0';
    out->len = have - hlen;
    out->body = malloc(out->len + 1);
    if (!out->body) goto done;
    memcpy(out->body, end + 4, out->len);
    out->body[out->len] = '\0';
    rc = 0;
done:
    free(buf);
    close(fd);
    if (!out->body) out->body = calloc(1, 1);
    return rc;
}

/* Frees r's body. Safe twice. */
void th_http_cleanup(th_http *r) {
    free(r->body);
    r->body = NULL;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void append(char **buf, size_t *len, const char *s, size_t n) {
    char *b = realloc(*buf, *len + n + 2);
    if (!b) abort();
    memcpy(b + *len, s, n);
    *len += n;
    b[(*len)++] = '\n';
    b[*len] = '\0';
    *buf = b;
}

/* Returns a malloc'd text holding every key of the store but lock:* with its
 * whole value, sorted, so two fingerprints are equal exactly when the market
 * data is. NULL when Redis cannot be read. */
char *th_store_fingerprint(int redis_port) {
    redisContext *c = redisConnect("127.0.0.1", redis_port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisReply *keys = redisCommand(c, "KEYS *");
    char *out = NULL;
    size_t len = 0;
    if (!keys || keys->type != REDIS_REPLY_ARRAY) goto done;
    char **names = calloc(keys->elements + 1, sizeof *names);
    size_t n = 0;
    for (size_t i = 0; i < keys->elements; i++)
        if (strncmp(keys->element[i]->str, "lock:", 5) != 0) names[n++] = keys->element[i]->str;
    qsort(names, n, sizeof *names, cmp_str);
    append(&out, &len, "", 0);
    for (size_t i = 0; i < n; i++) {
        append(&out, &len, names[i], strlen(names[i]));
        redisReply *t = redisCommand(c, "TYPE %s", names[i]);
        const char *cmd = "GET %s";
        if (t && strcmp(t->str, "hash") == 0) cmd = "HGETALL %s";
        if (t && strcmp(t->str, "set") == 0) cmd = "SMEMBERS %s";
        if (t && strcmp(t->str, "zset") == 0) cmd = "ZRANGE %s 0 -1 WITHSCORES";
        if (t) freeReplyObject(t);
        redisReply *v = redisCommand(c, cmd, names[i]);
        if (v && v->type == REDIS_REPLY_ARRAY) {
            int pairs = strcmp(cmd, "SMEMBERS %s") != 0; /* hash and zset: field, value */
            size_t m = pairs ? v->elements / 2 : v->elements;
            char **vals = calloc(m + 1, sizeof *vals);
            for (size_t j = 0; j < m; j++) {
                const char *a = v->element[pairs ? 2 * j : j]->str;
                const char *b = pairs ? v->element[2 * j + 1]->str : "";
                size_t sz = strlen(a) + strlen(b) + 2;
                vals[j] = malloc(sz);
                snprintf(vals[j], sz, "%s=%s", a, b);
            }
            qsort(vals, m, sizeof *vals, cmp_str); /* sets and hashes have no order */
            for (size_t j = 0; j < m; j++) {
                append(&out, &len, vals[j], strlen(vals[j]));
                free(vals[j]);
            }
            free(vals);
        } else if (v && v->type == REDIS_REPLY_STRING) {
            append(&out, &len, v->str, v->len);
        }
        if (v) freeReplyObject(v);
    }
    free(names);
done:
    if (keys) freeReplyObject(keys);
    redisFree(c);
    return out;
}

/* Asserts that answer r (to the request what names, for the message) has
 * status and is JSON; returns the parsed body (new reference; caller
 * decrefs) and cleans r up. */
json_t *th_http_json_of(th_http *r, long status, const char *what) {
    if (r->status != status) fprintf(stderr, "%s -> %ld %s\n", what, r->status, r->body);
    assert_int_equal(r->status, status);
    assert_non_null(strstr(r->headers, "application/json"));
    json_error_t e;
    json_t *j = json_loads(r->body, 0, &e);
    th_http_cleanup(r);
    assert_non_null(j);
    return j;
}

/* Sends a request (header: one "Name: value" line or several joined by
 * CRLF, or NULL; body NULL: none) and asserts its status and that it
 * answered JSON; returns the parsed body (new reference; caller decrefs). */
json_t *th_http_json(int port, const char *method, const char *path, const char *header,
                     const char *body, long status) {
    th_http r;
    assert_int_equal(th_http_do_header(port, method, path, header, body, body ? strlen(body) : 0,
                                       &r),
                     0);
    char what[512];
    snprintf(what, sizeof what, "%s %s %s", method, path, body ? body : "");
    return th_http_json_of(&r, status, what);
}
