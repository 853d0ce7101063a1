/* http_client.c - HTTP requests over libcurl and a dump of the store, for tests. */
#include "tests/helpers/http_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <hiredis.h>

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
