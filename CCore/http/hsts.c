/*
 * hsts.c — HTTP Strict Transport Security (RFC 6797): the engine's list of known HSTS hosts, kept
 * in the store, the upgrade of http:// URLs to those hosts, and the courier_hsts_* API. Also the
 * Alt-Svc setting (RFC 7838), whose cache is libcurl's own file in the store directory.
 *
 * Why not libcurl's HSTS cache (CURLOPT_HSTS_CTRL): libcurl hands its list to the write callback
 * only when an easy handle is cleaned up, so a pooled handle never tells what it learnt while the
 * engine runs (nothing for another process to read); entries cannot be removed from it one by one
 * (a clear, or another process's max-age=0) short of dropping the whole cache; and its upgrade
 * happens inside the transfer, after the cache, stubs and the response's URL have seen http://.
 * So the list is the engine's, and the upgrade happens where the request's URL is made.
 *
 * The store: the journal's environment (synced, never discarded), database `hsts`: one record per
 * host, key the host (lowercase, no trailing dot) -> "EXPIRES SUB" (seconds since the epoch, 0:
 * never; SUB 1 when includeSubDomains). Every lookup reads the store (one read transaction per
 * http:// URL), so a host another engine or process learnt is upgraded on the next request. A
 * private temporary store (courier_config_set_temporary_store), or a journal kept elsewhere (Redis),
 * keeps the list in memory for the engine's life.
 *
 * Threads: lookups on the sending thread (cr_transfer_prepare) and the worker (redirect hops);
 * notes on the worker (after an attempt); the API on any thread. LMDB serializes writers; the
 * in-memory list has its own mutex.
 */
#include "http/http.h"
#include "base/lmdb_env.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <strings.h>
#include <time.h>

#define HSTS_HOST_MAX 255
/* A renewal that moves an entry's expiry forward by less than this is not written: servers send the
 * field on every response, and each write is a synced commit. */
#define HSTS_RENEW_SLACK_S 60

typedef struct hentry {
    char *host;
    int64_t expires; /* seconds since the epoch; 0: never */
    int sub;
} hentry;

struct cr_hsts {
    MDB_env *env; /* NULL: the list lives in `mem` */
    MDB_dbi dbi;
    pthread_mutex_t mu; /* mem */
    hentry *mem;
    size_t count, cap;
};

/* Seconds since the epoch, by the engine's clock (courier_config_set_clock) or the system's. */
static int64_t now_s(courier_engine *e) {
    const cr_callback *clock = cr_core(e)->config->clock;
    if (clock) return ((courier_clock_fn)clock->fn)(clock->user) / 1000;
    return (int64_t)time(NULL);
}

static bool alive(const hentry *h, int64_t now) { return h->expires == 0 || h->expires > now; }

/* ---- the list: the store, or memory ------------------------------------------------------------ */

static int mdb_code(int rc, courier_error *err, const char *what) {
    int code = rc == ENOMEM ? COURIER_E_NO_MEMORY : COURIER_E_STORE;
    cr_fail(err, code, "HSTS list: %s: %s", what, mdb_strerror(rc));
    if (err) {
        if (rc > 0) err->os_error = rc;
        else err->store_error = rc;
    }
    return code;
}

static int begin(struct cr_hsts *h, bool write, MDB_txn **txn) {
    int rc = write ? cr_lmdb_begin_write(h->env, txn) : mdb_txn_begin(h->env, NULL, MDB_RDONLY, txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(h->env, 0);
        rc = write ? cr_lmdb_begin_write(h->env, txn) : mdb_txn_begin(h->env, NULL, MDB_RDONLY, txn);
    }
    return rc;
}

static bool parse_value(const void *data, size_t len, hentry *out) {
    char buf[64];
    if (len >= sizeof buf) return false;
    memcpy(buf, data, len);
    buf[len] = '\0';
    long long exp = 0;
    int sub = 0;
    if (sscanf(buf, "%lld %d", &exp, &sub) != 2) return false;
    out->expires = exp;
    out->sub = sub != 0;
    return true;
}

static hentry *mem_find(struct cr_hsts *h, const char *host) {
    for (size_t i = 0; i < h->count; i++)
        if (strcmp(h->mem[i].host, host) == 0) return &h->mem[i];
    return NULL;
}

/* The entry for exactly `host` into *out (host not set). 1 found, 0 not, or a negative code. */
static int get_entry(struct cr_hsts *h, MDB_txn *txn, const char *host, hentry *out) {
    if (!h->env) {
        hentry *m = mem_find(h, host);
        if (m) *out = *m;
        return m != NULL;
    }
    MDB_val k = {strlen(host), (void *)host}, v;
    int rc = mdb_get(txn, h->dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return COURIER_E_STORE;
    return parse_value(v.mv_data, v.mv_size, out) ? 1 : 0;
}

static int put_entry(struct cr_hsts *h, MDB_txn *txn, const char *host, int64_t expires, int sub) {
    if (!h->env) {
        hentry *m = mem_find(h, host);
        if (!m) {
            if (h->count == h->cap) {
                size_t cap = h->cap ? h->cap * 2 : 8;
                hentry *p = realloc(h->mem, cap * sizeof *p);
                if (!p) return ENOMEM;
                h->mem = p;
                h->cap = cap;
            }
            char *copy = cr_strdup(host);
            if (!copy) return ENOMEM;
            m = &h->mem[h->count++];
            m->host = copy;
        }
        m->expires = expires;
        m->sub = sub;
        return 0;
    }
    char buf[48];
    int n = snprintf(buf, sizeof buf, "%lld %d", (long long)expires, sub ? 1 : 0);
    MDB_val k = {strlen(host), (void *)host}, v = {(size_t)n, buf};
    return mdb_put(txn, h->dbi, &k, &v, 0);
}

static int del_entry(struct cr_hsts *h, MDB_txn *txn, const char *host) {
    if (!h->env) {
        hentry *m = mem_find(h, host);
        if (m) {
            free(m->host);
            *m = h->mem[--h->count];
        }
        return 0;
    }
    MDB_val k = {strlen(host), (void *)host};
    int rc = mdb_del(txn, h->dbi, &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* A transaction on the list (write or read), or the memory list's lock. */
static int list_open(struct cr_hsts *h, bool write, MDB_txn **txn, courier_error *err) {
    *txn = NULL;
    if (!h->env) {
        pthread_mutex_lock(&h->mu);
        return COURIER_OK;
    }
    int rc = begin(h, write, txn);
    return rc ? mdb_code(rc, err, "cannot begin a transaction") : COURIER_OK;
}

/* Ends what list_open began: commits when commit and rc == 0, else aborts. */
static int list_close(struct cr_hsts *h, MDB_txn *txn, bool commit, int rc, courier_error *err) {
    if (!h->env) {
        pthread_mutex_unlock(&h->mu);
        return rc ? mdb_code(rc, err, "cannot write") : COURIER_OK;
    }
    if (rc == 0 && commit) {
        rc = mdb_txn_commit(txn);
        return rc ? mdb_code(rc, err, "cannot commit") : COURIER_OK;
    }
    mdb_txn_abort(txn);
    return rc ? mdb_code(rc, err, "cannot write") : COURIER_OK;
}

/* ---- hosts -------------------------------------------------------------------------------------- */

/* The host as the list keys it (lowercase, no trailing dot) into out; false when it is empty, too
 * long, or an IP address (RFC 6797 8.1.1, 8.3: addresses are never HSTS hosts). */
static bool host_key(const char *host, size_t len, char out[HSTS_HOST_MAX + 1]) {
    if (len && host[len - 1] == '.') len--;
    if (len == 0 || len > HSTS_HOST_MAX || host[0] == '[') return false;
    bool digits_dots = true;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)host[i];
        if (c <= ' ' || c == '/' || c == ':') return false;
        if (!isdigit(c) && c != '.') digits_dots = false;
        out[i] = (char)tolower(c);
    }
    out[len] = '\0';
    return !digits_dots; /* dotted IPv4 (IPv6 is bracketed in URLs) */
}

/* ---- open, close, the setting ------------------------------------------------------------------ */

int courier_config_set_hsts(courier_config *c, int enabled) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->hsts_off = enabled ? 0 : 1;
    return COURIER_OK;
}

int courier_config_set_alt_svc(courier_config *c, int enabled) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->alt_svc = enabled ? 1 : 0;
    return COURIER_OK;
}

int cr_hsts_open(courier_engine *e, struct MDB_env *env, unsigned dbi, courier_error *err) {
    if (cr_core(e)->config->hsts_off) return COURIER_OK;
    struct cr_hsts *h = calloc(1, sizeof *h);
    if (!h) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&h->mu, NULL);
    h->env = env;
    h->dbi = (MDB_dbi)dbi;
    cr_core(e)->hsts = h;
    return COURIER_OK;
}

void cr_hsts_close(courier_engine *e) {
    struct cr_hsts *h = cr_core(e)->hsts;
    if (!h) return;
    cr_core(e)->hsts = NULL;
    for (size_t i = 0; i < h->count; i++) free(h->mem[i].host);
    free(h->mem);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ---- the upgrade -------------------------------------------------------------------------------- */

/* Whether `host` (a key) is a known HSTS host: itself, or a parent domain with includeSubDomains. */
static bool known(struct cr_hsts *h, MDB_txn *txn, const char *host, int64_t now) {
    hentry m;
    for (const char *p = host; p; p = strchr(p, '.')) {
        if (*p == '.') p++;
        if (!*p) break;
        if (get_entry(h, txn, p, &m) == 1 && alive(&m, now) && (p == host || m.sub)) return true;
    }
    return false;
}

int cr_hsts_upgrade(courier_engine *e, char **url, int *upgraded) {
    struct cr_hsts *h = cr_core(e)->hsts;
    if (!h || strncasecmp(*url, "http://", 7) != 0) return COURIER_OK;
    const char *host = *url + 7, *end = host + strcspn(host, "/?#");
    const char *at = memchr(host, '@', (size_t)(end - host));
    if (at) host = at + 1;
    if (*host == '[') return COURIER_OK; /* an IPv6 address */
    const char *colon = memchr(host, ':', (size_t)(end - host));
    const char *hend = colon ? colon : end;
    char key[HSTS_HOST_MAX + 1];
    if (!host_key(host, (size_t)(hend - host), key)) return COURIER_OK;
    MDB_txn *txn = NULL;
    if (list_open(h, false, &txn, NULL) != COURIER_OK) return COURIER_OK; /* an unreadable list upgrades nothing */
    bool hit = known(h, txn, key, now_s(e));
    list_close(h, txn, false, 0, NULL);
    if (!hit) return COURIER_OK;
    /* "https://" + the rest; an explicit port 80 becomes 443 (RFC 6797 8.3), others are kept. */
    bool port80 = colon && end - colon == 3 && memcmp(colon, ":80", 3) == 0;
    cr_buf b = {0};
    if (cr_buf_append_str(&b, "https://") || cr_buf_append(&b, *url + 7, (size_t)((port80 ? colon : end) - (*url + 7))) ||
        (port80 && cr_buf_append_str(&b, ":443")) || cr_buf_append_str(&b, end)) {
        cr_buf_free(&b);
        return COURIER_E_NO_MEMORY;
    }
    char *next = cr_buf_take(&b, NULL);
    if (!next) return COURIER_E_NO_MEMORY;
    free(*url);
    *url = next;
    if (upgraded) *upgraded = 1;
    return COURIER_OK;
}

/* ---- the field --------------------------------------------------------------------------------- */

/* Parses a Strict-Transport-Security value (RFC 6797 6.1): *max_age and *sub; false when the field
 * is invalid (no max-age, a directive twice, a max-age that is not digits) and must be ignored. */
static bool parse_sts(const char *v, int64_t *max_age, int *sub) {
    bool got_age = false, got_sub = false;
    *max_age = 0;
    *sub = 0;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *name = p;
        while (*p && *p != ';' && *p != '=' && *p != ' ' && *p != '\t') p++;
        size_t nlen = (size_t)(p - name);
        while (*p == ' ' || *p == '\t') p++;
        const char *val = NULL;
        size_t vlen = 0;
        if (*p == '=') {
            p++;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == '"') {
                val = ++p;
                while (*p && *p != '"') p++;
                if (*p != '"') return false;
                vlen = (size_t)(p - val);
                p++;
            } else {
                val = p;
                while (*p && *p != ';' && *p != ' ' && *p != '\t') p++;
                vlen = (size_t)(p - val);
            }
            while (*p == ' ' || *p == '\t') p++;
        }
        if (nlen == 7 && strncasecmp(name, "max-age", 7) == 0) {
            if (got_age || !val || vlen == 0 || vlen > 18) return false;
            int64_t a = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (!isdigit((unsigned char)val[i])) return false;
                a = a * 10 + (val[i] - '0');
            }
            *max_age = a;
            got_age = true;
        } else if (nlen == 17 && strncasecmp(name, "includeSubDomains", 17) == 0) {
            if (got_sub || val) return false;
            *sub = 1;
            got_sub = true;
        } else if (nlen == 0 && *p != ';' && *p) {
            return false;
        } /* other directives are ignored (6.1) */
        if (*p == ';') {
            p++;
            continue;
        }
        if (!*p) break;
        return false; /* junk after a directive */
    }
    return got_age;
}

/* The host of an https:// URL as a key, or false. */
static bool https_host(const char *url, char key[HSTS_HOST_MAX + 1]) {
    if (strncasecmp(url, "https://", 8) != 0) return false;
    const char *host = url + 8, *end = host + strcspn(host, "/?#");
    const char *at = memchr(host, '@', (size_t)(end - host));
    if (at) host = at + 1;
    if (*host == '[') return false;
    const char *colon = memchr(host, ':', (size_t)(end - host));
    return host_key(host, (size_t)((colon ? colon : end) - host), key);
}

void cr_hsts_note(courier_engine *e, const char *url, const char *value) {
    struct cr_hsts *h = cr_core(e)->hsts;
    char key[HSTS_HOST_MAX + 1];
    int64_t age;
    int sub;
    if (!h || !url || !value || !https_host(url, key) || !parse_sts(value, &age, &sub)) return;
    int64_t now = now_s(e), expires = age > INT64_MAX / 2 - now ? INT64_MAX / 2 : now + age;
    MDB_txn *txn = NULL;
    courier_error err;
    /* A read first: most responses repeat what the list holds, and a read commits nothing. */
    if (list_open(h, false, &txn, &err) != COURIER_OK) goto failed;
    hentry m;
    int found = get_entry(h, txn, key, &m);
    bool same = found == 1 && m.sub == sub && m.expires != 0 && expires >= m.expires &&
                expires - m.expires < HSTS_RENEW_SLACK_S;
    list_close(h, txn, false, 0, NULL);
    if ((age == 0 && found != 1) || same) return;
    if (list_open(h, true, &txn, &err) != COURIER_OK) goto failed;
    int rc = age == 0 ? del_entry(h, txn, key) : put_entry(h, txn, key, expires, sub);
    if (list_close(h, txn, true, rc, &err) == COURIER_OK) return;
failed:
    cr_log(e, COURIER_LOG_WARNING, "hsts", "%s", err.message);
}

/* ---- the API ---------------------------------------------------------------------------------- */

struct courier_hsts_entries {
    size_t count;
    hentry *items;
};

static int by_host(const void *a, const void *b) { return strcmp(((const hentry *)a)->host, ((const hentry *)b)->host); }

void courier_hsts_entries_free(courier_hsts_entries *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) free(l->items[i].host);
    free(l->items);
    free(l);
}

static int hsts_of(courier_engine *e, courier_error *err, struct cr_hsts **out) {
    cr_error_clear(err);
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    *out = cr_core(e)->hsts;
    if (!*out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "HSTS is off for this engine");
    return COURIER_OK;
}

/* Appends an entry (host copied) to l. */
static int entries_add(courier_hsts_entries *l, size_t *cap, const char *host, size_t hlen, const hentry *m) {
    if (l->count == *cap) {
        size_t n = *cap ? *cap * 2 : 8;
        hentry *p = realloc(l->items, n * sizeof *p);
        if (!p) return ENOMEM;
        l->items = p;
        *cap = n;
    }
    char *copy = cr_strndup(host, hlen);
    if (!copy) return ENOMEM;
    l->items[l->count] = *m;
    l->items[l->count++].host = copy;
    return 0;
}

int courier_hsts_list(courier_hsts_entries **out, courier_engine *e, courier_error *err) {
    struct cr_hsts *h;
    if (out) *out = NULL;
    int rc = hsts_of(e, err, &h);
    if (rc) return rc;
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    courier_hsts_entries *l = calloc(1, sizeof *l);
    if (!l) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    size_t cap = 0;
    int64_t now = now_s(e);
    MDB_txn *txn = NULL;
    if ((rc = list_open(h, false, &txn, err)) != COURIER_OK) {
        courier_hsts_entries_free(l);
        return rc;
    }
    int mrc = 0;
    if (!h->env) {
        for (size_t i = 0; i < h->count && mrc == 0; i++)
            if (alive(&h->mem[i], now)) mrc = entries_add(l, &cap, h->mem[i].host, strlen(h->mem[i].host), &h->mem[i]);
    } else {
        MDB_cursor *c = NULL;
        mrc = mdb_cursor_open(txn, h->dbi, &c);
        MDB_val k, v;
        int op = MDB_FIRST;
        while (mrc == 0 && (mrc = mdb_cursor_get(c, &k, &v, op)) == 0) {
            op = MDB_NEXT;
            hentry m;
            if (parse_value(v.mv_data, v.mv_size, &m) && alive(&m, now)) mrc = entries_add(l, &cap, k.mv_data, k.mv_size, &m);
        }
        if (c) mdb_cursor_close(c);
        if (mrc == MDB_NOTFOUND) mrc = 0;
    }
    rc = list_close(h, txn, false, mrc, err);
    if (rc) {
        courier_hsts_entries_free(l);
        return rc;
    }
    if (l->count) qsort(l->items, l->count, sizeof *l->items, by_host);
    *out = l;
    return COURIER_OK;
}

size_t courier_hsts_entries_count(const courier_hsts_entries *l) { return l ? l->count : 0; }

int courier_hsts_entries_at(courier_hsts_entry *out, const courier_hsts_entries *l, size_t i) {
    if (!out || !l || out->size < sizeof(size_t)) return COURIER_E_INVALID_ARGUMENT;
    if (i >= l->count) return COURIER_E_NOT_FOUND;
    courier_hsts_entry v = {.size = out->size,
                            .host = l->items[i].host,
                            .include_subdomains = l->items[i].sub,
                            .expires = l->items[i].expires};
    size_t n = out->size < sizeof v ? out->size : sizeof v;
    memcpy(out, &v, n);
    return COURIER_OK;
}

int courier_hsts_clear(int64_t *out_removed, courier_engine *e, courier_error *err) {
    if (out_removed) *out_removed = 0;
    struct cr_hsts *h;
    int rc = hsts_of(e, err, &h);
    if (rc) return rc;
    MDB_txn *txn = NULL;
    if ((rc = list_open(h, true, &txn, err)) != COURIER_OK) return rc;
    int64_t removed = 0;
    int mrc = 0;
    if (!h->env) {
        removed = (int64_t)h->count;
        for (size_t i = 0; i < h->count; i++) free(h->mem[i].host);
        h->count = 0;
    } else {
        MDB_stat st;
        mrc = mdb_stat(txn, h->dbi, &st);
        if (mrc == 0) removed = (int64_t)st.ms_entries;
        if (mrc == 0) mrc = mdb_drop(txn, h->dbi, 0);
    }
    rc = list_close(h, txn, true, mrc, err);
    if (rc == COURIER_OK && out_removed) *out_removed = removed;
    return rc;
}

/* "YYYYMMDD HH:MM:SS" (UTC) to seconds since the epoch; -1 when it is not that. */
static int64_t parse_stamp(const char *s) {
    struct tm tm = {0};
    if (sscanf(s, "%4d%2d%2d %2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
               &tm.tm_sec) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

int courier_hsts_preload(int64_t *out_added, courier_engine *e, const char *path, courier_error *err) {
    if (out_added) *out_added = 0;
    struct cr_hsts *h;
    int rc = hsts_of(e, err, &h);
    if (rc) return rc;
    if (!path) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "path is NULL");
    FILE *f = fopen(path, "r");
    if (!f) {
        int os = errno;
        rc = cr_fail(err, os == ENOENT ? COURIER_E_NOT_FOUND : COURIER_E_INVALID_ARGUMENT, "cannot open '%.200s'", path);
        if (err) err->os_error = os;
        return rc;
    }
    MDB_txn *txn = NULL;
    if ((rc = list_open(h, true, &txn, err)) != COURIER_OK) {
        fclose(f);
        return rc;
    }
    int64_t now = now_s(e), added = 0;
    char line[1024];
    int mrc = 0;
    while (mrc == 0 && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || !*p) continue;
        /* curl's format: [.]host "YYYYMMDD HH:MM:SS" | "unlimited" (a leading '.': includeSubDomains) */
        char *sp = strpbrk(p, " \t"), *q1 = sp ? strchr(sp, '"') : NULL, *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
        if (!q2) continue;
        *sp = '\0';
        *q2 = '\0';
        int sub = *p == '.';
        char key[HSTS_HOST_MAX + 1];
        if (!host_key(p + sub, strlen(p + sub), key)) continue;
        int64_t expires = strcmp(q1 + 1, "unlimited") == 0 ? 0 : parse_stamp(q1 + 1);
        if (expires < 0 || (expires != 0 && expires <= now)) continue;
        hentry m;
        int found = get_entry(h, txn, key, &m);
        if (found < 0) {
            mrc = MDB_PANIC;
            break;
        }
        if (found == 1 && alive(&m, now)) { /* as curl does: the later expiry, the stricter rule */
            if (m.expires == 0 || (expires != 0 && expires <= m.expires)) expires = m.expires;
            sub = sub || m.sub;
            if (expires == m.expires && sub == m.sub) continue;
        }
        mrc = put_entry(h, txn, key, expires, sub);
        if (mrc == 0) added++;
    }
    fclose(f);
    rc = list_close(h, txn, true, mrc, err);
    if (rc == COURIER_OK && out_added) *out_added = added;
    return rc;
}

/* ---- Alt-Svc --------------------------------------------------------------------------------- */

int cr_altsvc_base(courier_engine *e, CURL *h) {
    const cr_engine_core *core = cr_core(e);
    if (!core->config->alt_svc) return COURIER_OK;
    CURLcode c = curl_easy_setopt(h, CURLOPT_ALTSVC_CTRL, (long)(CURLALTSVC_H1 | CURLALTSVC_H2 | CURLALTSVC_H3));
    if (c == CURLE_OK && !core->store_is_temp && core->store_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/alt-svc.txt", core->store_dir);
        c = curl_easy_setopt(h, CURLOPT_ALTSVC, path); /* read now; written when the handle is cleaned up */
    }
    return c == CURLE_OK ? COURIER_OK : c == CURLE_OUT_OF_MEMORY ? COURIER_E_NO_MEMORY : COURIER_E_INTERNAL;
}
