/* http_client.h - a small libcurl client, a raw-socket one, and a store fingerprint for HTTP tests. */
#ifndef GM_TESTS_HTTP_CLIENT_H
#define GM_TESTS_HTTP_CLIENT_H

#include <stddef.h>

#include <jansson.h>

typedef struct th_http {
    long status;       /* 0 when the request failed at the transport */
    char *body;        /* malloc'd, NUL-terminated */
    size_t len;
    char headers[2048]; /* raw response headers, truncated */
} th_http;

int th_http_do(int port, const char *method, const char *path, const char *body, size_t len,
               th_http *out);
int th_http_do_header(int port, const char *method, const char *path, const char *header,
                      const char *body, size_t len, th_http *out);
int th_http_raw(int port, const char *req, size_t len, th_http *out);
json_t *th_http_json(int port, const char *method, const char *path, const char *header,
                     const char *body, long status);
json_t *th_http_json_of(th_http *r, long status, const char *what);
void th_http_cleanup(th_http *r);
char *th_store_fingerprint(int redis_port);
extern long th_http_timeout_ms; /* per request; 20000 unless a test changes it */

#endif /* GM_TESTS_HTTP_CLIENT_H */
