/*
 * har.c — HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/): the log an engine records
 * (each exchange's entry, with every field the spec requires) and the reading of a HAR file's
 * entries for replay. stubs.c, above it, holds the switch and the lock these run under and makes
 * the replay's stubs; this file calls nothing of stubs.c.
 */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

/* ---- recording --------------------------------------------------------------------------------- */

void *cr_har_new_log(void) {
    json_t *root = json_pack("{s:{s:s, s:{s:s, s:s}, s:[]}}", "log", "version", "1.2", "creator", "name", "Courier",
                             "version", COURIER_VERSION_STRING, "entries");
    return root;
}

void cr_har_free_log(void *log) { json_decref(log); }

static const char *http_version(int v) {
    switch (v) {
    case 10: return "HTTP/1.0";
    case 20: return "HTTP/2";
    case 30: return "HTTP/3";
    default: return "HTTP/1.1"; /* 11, and a stub's answer (no wire) */
    }
}

static const char *reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
    }
}

static json_t *name_values(const cr_kvlist *l) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->count; i++)
        json_array_append_new(a, json_pack("{s:s, s:s}", "name", l->items[i].name, "value", l->items[i].value));
    return a;
}

/* Adds {name, value} for each "name=value" of s split at sep (cookies: "; ", a query: "&"). */
static void split_pairs(json_t *a, const char *s, size_t len, char sep) {
    const char *end = s + len;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == sep)) s++;
        const char *stop = memchr(s, sep, (size_t)(end - s));
        if (!stop) stop = end;
        if (stop > s) {
            const char *eq = memchr(s, '=', (size_t)(stop - s));
            const char *nend = eq ? eq : stop;
            json_array_append_new(a, json_pack("{s:s%, s:s%}", "name", s, (size_t)(nend - s), "value",
                                               eq ? eq + 1 : "", eq ? (size_t)(stop - eq - 1) : 0));
        }
        s = stop;
    }
}

/* Request cookies: every Cookie line; response cookies: the name=value of each Set-Cookie line. */
static json_t *cookies(const cr_kvlist *l, bool response) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->count; i++) {
        const char *v = l->items[i].value;
        if (!response && strcasecmp(l->items[i].name, "Cookie") == 0) split_pairs(a, v, strlen(v), ';');
        if (response && strcasecmp(l->items[i].name, "Set-Cookie") == 0) {
            const char *semi = strchr(v, ';');
            split_pairs(a, v, semi ? (size_t)(semi - v) : strlen(v), ';');
        }
    }
    return a;
}

static json_t *query_string(const char *url) {
    json_t *a = json_array();
    const char *q = strchr(url, '?');
    if (a && q) {
        const char *hash = strchr(q + 1, '#');
        split_pairs(a, q + 1, hash ? (size_t)(hash - q - 1) : strlen(q + 1), '&');
    }
    return a;
}

/* Body text: as it is when UTF-8, else base64 with *encoded set. NULL on no memory. */
static json_t *body_text(const char *body, size_t len, bool *encoded) {
    *encoded = false;
    if (cr_utf8_valid(body, len) && !memchr(body, 0, len)) return json_stringn(body, len);
    cr_buf b = {0};
    if (cr_base64_encode(&b, body, len)) {
        cr_buf_free(&b);
        return NULL;
    }
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    cr_buf_free(&b);
    *encoded = true;
    return s;
}

static double ms(double seconds) { return seconds > 0 ? seconds * 1000.0 : 0; }

int cr_har_append(void *log, const cr_transfer *t, const courier_response *resp) {
    json_t *entries = json_object_get(json_object_get(log, "log"), "entries");
    const courier_metrics *m = &resp->metrics;
    /* Timings from curl's cumulative marks: dns, connect (TCP), ssl (part of connect in HAR), wait
     * (to the first byte), receive (the rest); send is not measured apart (0). */
    double dns = ms(m->dns_s), tcp = m->connect_s > m->dns_s ? ms(m->connect_s - m->dns_s) : 0;
    double ssl = m->tls_s > m->connect_s ? ms(m->tls_s - m->connect_s) : -1;
    double ready = m->tls_s > m->connect_s ? m->tls_s : m->connect_s > m->dns_s ? m->connect_s : m->dns_s;
    double wait = m->first_byte_s > ready ? ms(m->first_byte_s - ready) : 0;
    double receive = m->total_s > m->first_byte_s ? ms(m->total_s - m->first_byte_s) : 0;
    double total = dns + tcp + (ssl > 0 ? ssl : 0) + wait + receive;
    /* startedDateTime: now less the transfer's time, ISO 8601 with milliseconds, UTC. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t start_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - (int64_t)total;
    time_t secs = (time_t)(start_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char started[64];
    snprintf(started, sizeof started, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(start_ms % 1000));

    json_t *request = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:i, s:I}", "method", t->method, "url", t->url,
                                "httpVersion", http_version(m->http_version), "cookies", cookies(&t->headers, false),
                                "headers", name_values(&t->headers), "queryString", query_string(t->url),
                                "headersSize", -1, "bodySize",
                                (json_int_t)(t->has_body ? (int64_t)t->body_len : t->body_file || t->parts ? -1 : 0));
    if (request && t->has_body) {
        bool encoded = false;
        json_t *text = body_text(t->body ? t->body : "", t->body_len, &encoded);
        const char *type = cr_kvlist_get(&t->headers, "Content-Type");
        json_t *post = json_pack("{s:s, s:[], s:o}", "mimeType", type ? type : "", "params", "text", text);
        if (post && encoded) json_object_set_new(post, "_encoding", json_string("base64"));
        json_object_set_new(request, "postData", post);
    }

    const char *type = cr_kvlist_get(&resp->headers, "Content-Type");
    json_t *content = json_pack("{s:I, s:s}", "size", (json_int_t)(resp->body ? (int64_t)resp->body_len : -1),
                                "mimeType", type ? type : "");
    if (content && resp->body) {
        bool encoded = false;
        json_object_set_new(content, "text", body_text(resp->body, resp->body_len, &encoded));
        if (encoded) json_object_set_new(content, "encoding", json_string("base64"));
    }
    const char *location = cr_kvlist_get(&resp->headers, "Location");
    json_t *response = json_pack("{s:i, s:s, s:s, s:o, s:o, s:o, s:s, s:i, s:I}", "status", resp->status, "statusText",
                                 reason(resp->status), "httpVersion", http_version(m->http_version), "cookies",
                                 cookies(&resp->headers, true), "headers", name_values(&resp->headers), "content",
                                 content, "redirectURL", location ? location : "", "headersSize", -1, "bodySize",
                                 (json_int_t)(resp->body ? (int64_t)resp->body_len : -1));
    json_t *timings = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "blocked", -1.0, "dns", m->dns_s > 0 ? dns : -1.0,
                                "connect", m->connect_s > 0 && !m->connection_reused ? tcp + (ssl > 0 ? ssl : 0) : -1.0,
                                "ssl", ssl, "send", 0.0, "wait", wait, "receive", receive);
    json_t *entry = json_pack("{s:s, s:f, s:o, s:o, s:{}, s:o}", "startedDateTime", started, "time", total, "request",
                              request, "response", response, "cache", "timings", timings);
    if (!entry || json_array_append_new(entries, entry)) return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

int cr_har_write(void *log, const char *path, courier_error *err) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    snprintf(tmp, n + 16, "%s.tmp", path);
    int rc = COURIER_OK;
    if (json_dump_file(log, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
        int os = errno;
        rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "the HAR file '%.200s' cannot be written", path);
        if (err) err->os_error = os;
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        int os = errno;
        rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "the HAR file '%.200s' cannot be written", path);
        if (err) err->os_error = os;
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

/* ---- replay ------------------------------------------------------------------------------------ */

static int b64_value(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Decodes base64 (padding and white space skipped). NULL on bad input or no memory. */
static char *b64_decode(const char *s, size_t len, size_t *out_len) {
    char *out = malloc(len / 4 * 3 + 4);
    if (!out) return NULL;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i];
        if (c == '=' || c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
        int v = b64_value(c);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xFF);
        }
    }
    *out_len = n;
    return out;
}

static bool skipped_header(const char *name) {
    return strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Content-Encoding") == 0 ||
           strcasecmp(name, "Transfer-Encoding") == 0;
}

/* Reads a HAR file's entries for replay (engine.h). */
int cr_har_read(const char *path, int (*each)(void *ctx, const cr_har_entry *entry, courier_error *err), void *ctx,
                courier_error *err) {
    char *text = NULL;
    size_t len = 0;
    int rc = cr_read_file(path, "HAR file", INT64_MAX, &text, &len, err);
    if (rc) return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    json_t *entries = json_object_get(json_object_get(root, "log"), "entries");
    if (!json_is_array(entries)) {
        json_decref(root);
        return cr_fail(err, COURIER_E_JSON, "'%.200s' is not a HAR file (no log.entries)", path);
    }
    size_t i;
    json_t *entry;
    json_array_foreach(entries, i, entry) {
        json_t *request = json_object_get(entry, "request"), *response = json_object_get(entry, "response");
        json_t *status = json_object_get(response, "status"), *content = json_object_get(response, "content");
        json_t *body = json_object_get(content, "text");
        const char *enc = json_string_value(json_object_get(content, "encoding"));
        cr_har_entry e = {.method = json_string_value(json_object_get(request, "method")),
                          .url = json_string_value(json_object_get(request, "url")),
                          .status = (int)json_integer_value(status),
                          .body = body ? json_string_value(body) : "",
                          .body_len = body ? json_string_length(body) : 0};
        if (!e.method || !e.url || !json_is_integer(status) || !e.body) {
            rc = cr_fail(err, COURIER_E_JSON, "HAR entry %zu has no request.method, request.url or response.status, "
                         "or a content.text that is not a string", i);
            break;
        }
        char *decoded = NULL;
        if (enc && strcmp(enc, "base64") == 0) {
            if (!(decoded = b64_decode(e.body, e.body_len, &e.body_len))) {
                rc = cr_fail(err, COURIER_E_JSON, "HAR entry %zu's body is not base64", i);
                break;
            }
            e.body = decoded;
        }
        size_t k;
        json_t *h;
        json_array_foreach(json_object_get(response, "headers"), k, h) {
            const char *name = json_string_value(json_object_get(h, "name"));
            const char *value = json_string_value(json_object_get(h, "value"));
            if (!name || !value || skipped_header(name)) continue;
            if (cr_kvlist_add(&e.headers, name, strlen(name), value, strlen(value))) rc = COURIER_E_NO_MEMORY;
        }
        if (rc) rc = cr_fail(err, rc, NULL);
        else rc = each(ctx, &e, err);
        cr_kvlist_clear(&e.headers);
        free(decoded);
        if (rc) break;
    }
    json_decref(root);
    return rc;
}
