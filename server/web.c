/* web.c - the market page's static files (web/ of the repository), read once at start.
 *
 * GET / is index.html, GET /app.js and GET /style.css the rest; nothing else
 * of the folder is served, so no request path ever names a file. The files are
 * read from --web-dir when the server starts and kept in memory; a server
 * whose folder lacks them serves the API without the page (GET / is then the
 * usual 404).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

#define WEB_FILE_MAX (1024 * 1024) /* bytes of one file at most */

static const struct {
    const char *path, *name, *type;
} web_files[SERVER__WEB_FILES] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/app.js", "app.js", "text/javascript; charset=utf-8"},
    {"/style.css", "style.css", "text/css; charset=utf-8"},
};

/* Reads dir/name into *out (malloc'd, *len bytes). Returns 0, 1 when the
 * file does not exist, or -1 with a sentence in why. */
static int read_file(const char *dir, const char *name, char **out, size_t *len, char *why,
                     size_t whylen) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        snprintf(why, whylen, "--web-dir is too long");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 1;
        snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(WEB_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, WEB_FILE_MAX + 1, f) : 0;
    int bad = buf ? ferror(f) : 0;
    fclose(f);
    if (!buf || bad || n > WEB_FILE_MAX) {
        snprintf(why, whylen, "%s: %s", path,
                 !buf ? "out of memory" : bad ? "read error" : "larger than 1 MiB");
        free(buf);
        return -1;
    }
    char *fit = realloc(buf, n ? n : 1); /* keep what the file needs, not the 1 MiB read buffer */
    *out = fit ? fit : buf;
    *len = n;
    return 0;
}

/* Loads the page's files from dir into w (zeroed by the caller). Returns 0
 * when all of them were read, 1 when dir lacks one (w then serves none), or
 * -1 with a sentence in why (unreadable, too large, out of memory). */
int server__web_load(server__web *w, const char *dir, char *why, size_t whylen) {
    for (size_t i = 0; i < SERVER__WEB_FILES; i++) {
        server__web_file *f = &w->files[i];
        int rc = read_file(dir, web_files[i].name, &f->body, &f->len, why, whylen);
        if (rc != 0) {
            server__web_free(w);
            if (rc > 0) snprintf(why, whylen, "%s/%s does not exist", dir, web_files[i].name);
            return rc;
        }
        f->path = web_files[i].path;
        f->type = web_files[i].type;
    }
    w->loaded = 1;
    return 0;
}

/* Returns the file served at url (an exact path), or NULL. */
const server__web_file *server__web_find(const server__web *w, const char *url) {
    if (!w->loaded || !url) return NULL;
    for (size_t i = 0; i < SERVER__WEB_FILES; i++)
        if (strcmp(w->files[i].path, url) == 0) return &w->files[i];
    return NULL;
}

/* Frees w's files; w serves none afterwards. This function can't fail. */
void server__web_free(server__web *w) {
    for (size_t i = 0; i < SERVER__WEB_FILES; i++) {
        free(w->files[i].body);
        w->files[i] = (server__web_file){0};
    }
    w->loaded = 0;
}
