/*
 * cookies.c — the engine's cookie jar: libcurl's cookie engine (one share handle for every easy
 * handle of the engine, so each transfer and each hop of a redirect sees the same cookies) kept in
 * the store, and the courier_cookies_* API.
 *
 * The rules (domains, paths, Secure, HttpOnly, expiry, prefixes, public suffixes through libpsl)
 * are libcurl's. This file only moves cookies between curl's jar and the store, as the lines of
 * curl's cookie-file format ("domain\tTRUE\tpath\tFALSE\texpires\tname\tvalue", "#HttpOnly_" before
 * the domain of an HttpOnly cookie) that CURLINFO_COOKIELIST exports and CURLOPT_COOKIELIST imports.
 *
 * The store: the journal's environment (synced, never discarded), database `cookies`: one record per
 * cookie, key "domain\tpath\tname" -> its line, and "#generation" -> u64, incremented by every write.
 * `saved` is the jar as the store had it after this engine's last read or write, sorted by key. A
 * sync exports curl's jar, writes the difference from `saved` (puts and deletes, so cookies other
 * engines wrote meanwhile stay), and when the generation moved under it (another engine or process
 * wrote) reads the whole jar back into curl. Syncs run: after an attempt whose response had
 * Set-Cookie (before its completion), in every API call, and before a transfer goes on the wire when
 * the environment committed anything since the last look (one mdb_env_info, no transaction, when
 * nothing did). An engine on a private temporary store (courier_config_set_temporary_store) keeps
 * its jar in memory only: nobody else can open that store, and it is removed at close.
 */
#include "http/http.h"

#include <errno.h>
#include <lmdb.h>
#include <strings.h>
#include <time.h>

#define GEN_KEY "#generation"

typedef struct jline {
    char *key;  /* "domain\tpath\tname", domain lowercase without '.' or "#HttpOnly_" */
    char *line; /* the cookie-file line */
} jline;

typedef struct jlines {
    jline *items;
    size_t count, cap;
} jlines;

struct cr_jar {
    CURLSH *share;
    /* curl's share locks, one per kind of data. The cookie one is recursive: a sync holds it from
     * the export to the import (so no transfer sees a jar half re-read, and no Set-Cookie lands
     * between the export and a re-read) while its own calls into curl take it again. */
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
    pthread_mutex_t mu;                            /* everything below; taken before share_mu */
    CURL *api;                                     /* on the share: imports and exports */
    MDB_env *env;
    MDB_dbi dbi;
    uint64_t gen;         /* the store's generation that `saved` matches */
    atomic_size_t seen_txnid; /* the environment's last transaction when the store was last read
                                 (read without `mu` by cr_jar_refresh) */
    jlines saved;
};

/* ---- lines ------------------------------------------------------------------------------------ */

static void jlines_clear(jlines *l) {
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].key);
        free(l->items[i].line);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}

/* Splits a copy of a cookie-file line into its 7 fields (in place). False when it is not one. */
static bool split_line(char *s, char *f[7]) {
    for (int i = 0; i < 7; i++) {
        f[i] = s;
        char *tab = i < 6 ? strchr(s, '\t') : NULL;
        if (i < 6 && !tab) return false;
        if (tab) {
            *tab = '\0';
            s = tab + 1;
        }
    }
    return true;
}

/* Adds a line (copied) with its key; lines of expired cookies are skipped when now > 0. */
static int jlines_add(jlines *l, const char *line, size_t len, time_t now) {
    char *copy = cr_strndup(line, len), *f[7];
    if (!copy) return COURIER_E_NO_MEMORY;
    char *work = cr_strdup(copy);
    if (!work || !split_line(work, f)) {
        free(copy);
        free(work);
        return work ? COURIER_OK : COURIER_E_NO_MEMORY; /* not a cookie line: ignored */
    }
    long long expires = strtoll(f[4], NULL, 10);
    if (now > 0 && expires > 0 && expires <= (long long)now) {
        free(copy);
        free(work);
        return COURIER_OK;
    }
    const char *domain = f[0];
    if (strncmp(domain, "#HttpOnly_", 10) == 0) domain += 10;
    if (*domain == '.') domain++;
    cr_buf key = {0};
    int rc = COURIER_OK;
    if (cr_buf_append_str(&key, domain) || cr_buf_append_char(&key, '\t') || cr_buf_append_str(&key, f[2]) ||
        cr_buf_append_char(&key, '\t') || cr_buf_append_str(&key, f[5]))
        rc = COURIER_E_NO_MEMORY;
    for (size_t i = 0; key.data && key.data[i] && key.data[i] != '\t'; i++)
        key.data[i] = (char)(key.data[i] >= 'A' && key.data[i] <= 'Z' ? key.data[i] + 32 : key.data[i]);
    free(work);
    if (rc == COURIER_OK && l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        jline *p = realloc(l->items, cap * sizeof *p);
        if (!p) rc = COURIER_E_NO_MEMORY;
        else {
            l->items = p;
            l->cap = cap;
        }
    }
    if (rc != COURIER_OK) {
        cr_buf_free(&key);
        free(copy);
        return rc;
    }
    l->items[l->count].key = cr_buf_take(&key, NULL);
    l->items[l->count].line = copy;
    l->count++;
    return COURIER_OK;
}

static int by_key(const void *a, const void *b) { return strcmp(((const jline *)a)->key, ((const jline *)b)->key); }

/* Keeps the last line of each key (curl's jar has one cookie per key; a store read has one too). */
static void jlines_sort(jlines *l) {
    if (l->count) qsort(l->items, l->count, sizeof *l->items, by_key);
    size_t w = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (w && strcmp(l->items[w - 1].key, l->items[i].key) == 0) {
            free(l->items[w - 1].key);
            free(l->items[w - 1].line);
            w--;
        }
        l->items[w++] = l->items[i];
    }
    l->count = w;
}

/* curl's jar now, expired cookies left out, sorted. Caller holds jar->mu. */
static int export_jar(struct cr_jar *j, jlines *out) {
    memset(out, 0, sizeof *out);
    struct curl_slist *list = NULL;
    if (curl_easy_getinfo(j->api, CURLINFO_COOKIELIST, &list) != CURLE_OK) return COURIER_E_INTERNAL;
    time_t now = time(NULL);
    int rc = COURIER_OK;
    for (struct curl_slist *n = list; n && rc == COURIER_OK; n = n->next) rc = jlines_add(out, n->data, strlen(n->data), now);
    curl_slist_free_all(list);
    if (rc != COURIER_OK) jlines_clear(out);
    else jlines_sort(out);
    return rc;
}

/* Replaces curl's jar with `lines`. Caller holds jar->mu. */
static void import_jar(struct cr_jar *j, const jlines *lines) {
    curl_easy_setopt(j->api, CURLOPT_COOKIELIST, "ALL");
    for (size_t i = 0; i < lines->count; i++) curl_easy_setopt(j->api, CURLOPT_COOKIELIST, lines->items[i].line);
}

/* ---- the store -------------------------------------------------------------------------------- */

static int mdb_code(int rc, courier_error *err, const char *what) {
    int code = rc == ENOMEM ? COURIER_E_NO_MEMORY : COURIER_E_STORE;
    cr_fail(err, code, "cookie jar: %s: %s", what, mdb_strerror(rc));
    if (err) {
        if (rc > 0) err->os_error = rc;
        else err->store_error = rc;
    }
    return code;
}

static uint64_t read_gen(MDB_txn *txn, MDB_dbi dbi) {
    MDB_val k = {sizeof GEN_KEY - 1, (void *)GEN_KEY}, v;
    uint64_t g = 0;
    if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == sizeof g) memcpy(&g, v.mv_data, sizeof g);
    return g;
}

/* Every cookie the store holds, sorted. */
static int read_all(MDB_txn *txn, MDB_dbi dbi, jlines *out) {
    memset(out, 0, sizeof *out);
    MDB_cursor *c = NULL;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc) return rc;
    MDB_val k, v;
    int op = MDB_FIRST;
    while ((rc = mdb_cursor_get(c, &k, &v, op)) == 0) {
        op = MDB_NEXT;
        if (k.mv_size == sizeof GEN_KEY - 1 && memcmp(k.mv_data, GEN_KEY, k.mv_size) == 0) continue;
        if (jlines_add(out, v.mv_data, v.mv_size, 0)) {
            rc = ENOMEM;
            break;
        }
    }
    mdb_cursor_close(c);
    if (rc != MDB_NOTFOUND) {
        jlines_clear(out);
        return rc;
    }
    jlines_sort(out);
    return 0;
}

static int put_line(MDB_txn *txn, MDB_dbi dbi, const jline *l) {
    MDB_val k = {strlen(l->key), l->key}, v = {strlen(l->line), l->line};
    return mdb_put(txn, dbi, &k, &v, 0);
}

static int del_key(MDB_txn *txn, MDB_dbi dbi, const char *key) {
    MDB_val k = {strlen(key), (void *)key};
    int rc = mdb_del(txn, dbi, &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Brings curl's jar and the store together (see the top of the file). `clear_store` empties the
 * store's jar first (courier_cookies_clear). Caller holds jar->mu. */
static int sync_jar(struct cr_jar *j, bool clear_store, courier_error *err) {
    jlines now;
    int rc = export_jar(j, &now);
    if (rc) return cr_fail(err, rc, "cannot read the cookie jar");
    if (!j->env) { /* a private temporary store: nobody else will read it, the jar stays in memory */
        jlines_clear(&j->saved);
        j->saved = now;
        return COURIER_OK;
    }
    /* The difference from what the store had: keys whose line changed or appeared, keys gone. */
    bool changed = clear_store;
    for (size_t a = 0, b = 0; !changed && (a < now.count || b < j->saved.count);) {
        int cmp = a == now.count ? 1 : b == j->saved.count ? -1 : strcmp(now.items[a].key, j->saved.items[b].key);
        if (cmp != 0 || strcmp(now.items[a].line, j->saved.items[b].line) != 0) changed = true;
        a += cmp <= 0;
        b += cmp >= 0;
    }
    if (!changed) {
        MDB_envinfo info;
        if (mdb_env_info(j->env, &info) == 0 && info.me_last_txnid == atomic_load(&j->seen_txnid)) {
            jlines_clear(&now);
            return COURIER_OK;
        }
    }
    MDB_txn *txn = NULL;
    rc = mdb_txn_begin(j->env, NULL, changed ? 0 : MDB_RDONLY, &txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(j->env, 0);
        rc = mdb_txn_begin(j->env, NULL, changed ? 0 : MDB_RDONLY, &txn);
    }
    if (rc) {
        jlines_clear(&now);
        return mdb_code(rc, err, "cannot begin a transaction");
    }
    uint64_t gen = read_gen(txn, j->dbi);
    bool others = gen != j->gen;
    if (changed) {
        if (clear_store) rc = mdb_drop(txn, j->dbi, 0);
        for (size_t a = 0, b = 0; rc == 0 && (a < now.count || b < j->saved.count);) {
            int cmp = a == now.count ? 1 : b == j->saved.count ? -1 : strcmp(now.items[a].key, j->saved.items[b].key);
            if (cmp < 0 || (cmp == 0 && (clear_store || strcmp(now.items[a].line, j->saved.items[b].line) != 0)))
                rc = put_line(txn, j->dbi, &now.items[a]);
            else if (cmp > 0 && !clear_store)
                rc = del_key(txn, j->dbi, j->saved.items[b].key);
            a += cmp <= 0;
            b += cmp >= 0;
        }
        gen++;
        MDB_val k = {sizeof GEN_KEY - 1, (void *)GEN_KEY}, v = {sizeof gen, &gen};
        if (rc == 0) rc = mdb_put(txn, j->dbi, &k, &v, 0);
    }
    jlines stored = {0};
    bool reread = rc == 0 && others && !clear_store;
    if (reread) rc = read_all(txn, j->dbi, &stored);
    size_t txnid = mdb_txn_id(txn); /* a write's id is the one its commit makes the last */
    if (rc == 0) rc = changed ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), 0);
    else mdb_txn_abort(txn);
    if (rc) {
        jlines_clear(&now);
        jlines_clear(&stored);
        return mdb_code(rc, err, "cannot write the jar");
    }
    atomic_store(&j->seen_txnid, txnid);
    j->gen = gen;
    jlines_clear(&j->saved);
    if (reread) {
        import_jar(j, &stored); /* the store's jar, ours included */
        j->saved = stored;
        jlines_clear(&now);
    } else {
        j->saved = now;
    }
    return COURIER_OK;
}

/* The jar's lock, then curl's cookie lock (see share_mu). */
static void jar_lock(struct cr_jar *j) {
    pthread_mutex_lock(&j->mu);
    pthread_mutex_lock(&j->share_mu[CURL_LOCK_DATA_COOKIE]);
}

static void jar_unlock(struct cr_jar *j) {
    pthread_mutex_unlock(&j->share_mu[CURL_LOCK_DATA_COOKIE]);
    pthread_mutex_unlock(&j->mu);
}

/* ---- curl's share handle ---------------------------------------------------------------------- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user) {
    (void)h;
    (void)access;
    pthread_mutex_lock(&((struct cr_jar *)user)->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user) {
    (void)h;
    pthread_mutex_unlock(&((struct cr_jar *)user)->share_mu[data]);
}

void cr_jar_close(courier_engine *e) {
    struct cr_jar *j = cr_core(e)->jar;
    if (!j) return;
    cr_core(e)->jar = NULL;
    cr_easy_cleanup(j->api);
    if (j->share) curl_share_cleanup(j->share);
    jlines_clear(&j->saved);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&j->share_mu[i]);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

int cr_jar_open(courier_engine *e, struct MDB_env *env, unsigned dbi, courier_error *err) {
    if (cr_core(e)->config->cookies_off) return COURIER_OK;
    struct cr_jar *j = calloc(1, sizeof *j);
    if (!j) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutexattr_t rec;
    pthread_mutexattr_init(&rec);
    pthread_mutexattr_settype(&rec, PTHREAD_MUTEX_RECURSIVE);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&j->share_mu[i], i == CURL_LOCK_DATA_COOKIE ? &rec : NULL);
    pthread_mutexattr_destroy(&rec);
    pthread_mutex_init(&j->mu, NULL);
    atomic_init(&j->seen_txnid, 0);
    cr_core(e)->jar = j;
    j->env = env;
    if (!cr_core(e)->store_is_temp && !env) {
        cr_jar_close(e);
        return cr_fail(err, COURIER_E_STORE, "the cookie jar needs the store's journal");
    }
    j->dbi = (MDB_dbi)dbi;
    j->share = curl_share_init();
    j->api = curl_easy_init();
    if (!j->share || !j->api || curl_share_setopt(j->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
        curl_share_setopt(j->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
        curl_share_setopt(j->share, CURLSHOPT_USERDATA, j) != CURLSHE_OK ||
        curl_share_setopt(j->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE) != CURLSHE_OK ||
        cr_jar_base(e, j->api) != COURIER_OK) {
        cr_jar_close(e);
        return cr_fail(err, COURIER_E_INTERNAL, "cannot set up libcurl's cookie engine");
    }
    j->gen = UINT64_MAX; /* never the store's: the first sync reads it */
    jar_lock(j);
    int rc = sync_jar(j, false, err);
    jar_unlock(j);
    if (rc) cr_jar_close(e);
    return rc;
}

int cr_jar_base(courier_engine *e, CURL *h) {
    if (!cr_core(e)->jar) return COURIER_OK;
    CURLcode c = curl_easy_setopt(h, CURLOPT_SHARE, cr_core(e)->jar->share);
    /* The cookie engine on, with no file (the share alone does not turn it on). libcurl 7.88 keeps
     * the "" in a list that neither curl_easy_cleanup nor curl_easy_reset frees: cr_easy_cleanup
     * and cr_easy_reset do. */
    if (c == CURLE_OK) c = curl_easy_setopt(h, CURLOPT_COOKIEFILE, "");
    return c == CURLE_OK ? COURIER_OK : c == CURLE_OUT_OF_MEMORY ? COURIER_E_NO_MEMORY : COURIER_E_INTERNAL;
}

void cr_easy_cleanup(CURL *h) {
    if (!h) return;
    curl_easy_setopt(h, CURLOPT_COOKIEFILE, NULL); /* frees cr_jar_base's list; the share keeps the jar */
    curl_easy_cleanup(h);
}

void cr_easy_reset(CURL *h) {
    curl_easy_setopt(h, CURLOPT_COOKIEFILE, NULL); /* as above: a reset drops the list unfreed */
    curl_easy_reset(h);
}

void cr_jar_refresh(courier_engine *e) {
    struct cr_jar *j = cr_core(e)->jar;
    if (!j || !j->env) return;
    MDB_envinfo info;
    if (mdb_env_info(j->env, &info) == 0 && info.me_last_txnid == j->seen_txnid) return; /* nothing committed */
    jar_lock(j);
    courier_error err;
    if (sync_jar(j, false, &err) != COURIER_OK) cr_log(e, COURIER_LOG_WARNING, "cookies", "%s", err.message);
    jar_unlock(j);
}

void cr_jar_save(courier_engine *e) {
    struct cr_jar *j = cr_core(e)->jar;
    if (!j || !j->env) return;
    jar_lock(j);
    courier_error err;
    if (sync_jar(j, false, &err) != COURIER_OK) cr_log(e, COURIER_LOG_WARNING, "cookies", "%s", err.message);
    jar_unlock(j);
}

/* ---- the API ---------------------------------------------------------------------------------- */

struct courier_cookie_list {
    size_t count;
    courier_cookie *items;
    char **blocks; /* one copy of each line, split in place; the items point into them */
};

int courier_config_set_cookies(courier_config *c, int enabled) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->cookies_off = enabled ? 0 : 1;
    return COURIER_OK;
}

int courier_cookie_init(courier_cookie *c) {
    if (!CR_SIZED_OK(c, courier_cookie)) return COURIER_E_INVALID_ARGUMENT;
    courier_cookie z = {.size = sizeof z};
    CR_SIZED_OUT(c, z);
    return COURIER_OK;
}

static void to_cookie(char *f[7], courier_cookie *c) {
    memset(c, 0, sizeof *c);
    c->size = sizeof *c;
    char *domain = f[0];
    if (strncmp(domain, "#HttpOnly_", 10) == 0) {
        domain += 10;
        c->http_only = 1;
    }
    if (*domain == '.') domain++;
    c->domain = domain;
    c->include_subdomains = strcmp(f[1], "TRUE") == 0;
    c->path = f[2];
    c->secure = strcmp(f[3], "TRUE") == 0;
    c->expires = strtoll(f[4], NULL, 10);
    c->name = f[5];
    c->value = f[6];
}

void courier_cookie_list_free(courier_cookie_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) free(l->blocks[i]);
    free(l->blocks);
    free(l->items);
    free(l);
}

int courier_cookies_list(courier_cookie_list **out, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    if (!e || !out || !cr_core(e)->jar)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, e && out ? "the cookie jar is off" : NULL);
    struct cr_jar *j = cr_core(e)->jar;
    jar_lock(j);
    int rc = sync_jar(j, false, err);
    courier_cookie_list *l = rc ? NULL : calloc(1, sizeof *l);
    if (!rc && !l) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (!rc && j->saved.count) {
        l->items = calloc(j->saved.count, sizeof *l->items);
        l->blocks = calloc(j->saved.count, sizeof *l->blocks);
        if (!l->items || !l->blocks) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        for (size_t i = 0; !rc && i < j->saved.count; i++) {
            char *f[7];
            if (!(l->blocks[l->count] = cr_strdup(j->saved.items[i].line))) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            else if (split_line(l->blocks[l->count], f)) to_cookie(f, &l->items[l->count++]);
            else free(l->blocks[l->count]);
        }
    }
    jar_unlock(j);
    if (rc) {
        courier_cookie_list_free(l);
        return rc;
    }
    *out = l;
    return COURIER_OK;
}

size_t courier_cookie_list_count(const courier_cookie_list *l) { return l ? l->count : 0; }

int courier_cookie_list_at(courier_cookie *out, const courier_cookie_list *l, size_t i) {
    if (!l || !CR_SIZED_OK(out, courier_cookie)) return COURIER_E_INVALID_ARGUMENT;
    if (i >= l->count) return COURIER_E_NOT_FOUND;
    CR_SIZED_OUT(out, l->items[i]);
    return COURIER_OK;
}

/* A field of a cookie line: no tab, CR, LF, ';' or other control byte; optionally no '='. */
static bool field_ok(const char *s, bool no_equals) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == ';' || (no_equals && *p == '=')) return false;
    return cr_utf8_valid(s, strlen(s));
}

/* The cookie-file line of a cookie (expires given apart: removal writes one in the past). */
static int cookie_line(const courier_cookie *c, int64_t expires, cr_buf *out) {
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)expires);
    const char *path = c->path ? c->path : "/";
    if (cr_buf_append_str(out, c->http_only ? "#HttpOnly_" : "") ||
        cr_buf_append_str(out, c->include_subdomains ? "." : "") || cr_buf_append_str(out, c->domain) ||
        cr_buf_append_str(out, c->include_subdomains ? "\tTRUE\t" : "\tFALSE\t") || cr_buf_append_str(out, path) ||
        cr_buf_append_str(out, c->secure ? "\tTRUE\t" : "\tFALSE\t") || cr_buf_append_str(out, num) ||
        cr_buf_append_char(out, '\t') || cr_buf_append_str(out, c->name) || cr_buf_append_char(out, '\t') ||
        cr_buf_append_str(out, c->value ? c->value : ""))
        return COURIER_E_NO_MEMORY;
    for (char *p = out->data + (c->http_only ? 10 : 0) + (c->include_subdomains ? 1 : 0); *p && *p != '\t'; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p + 32);
    return COURIER_OK;
}

/* Imports one line into curl's jar and writes the jar. */
static int import_and_sync(struct cr_jar *j, const char *line, courier_error *err) {
    CURLcode c = curl_easy_setopt(j->api, CURLOPT_COOKIELIST, line);
    if (c != CURLE_OK) return cr_fail(err, c == CURLE_OUT_OF_MEMORY ? COURIER_E_NO_MEMORY : COURIER_E_INTERNAL, "libcurl refused the cookie");
    return sync_jar(j, false, err);
}

int courier_cookies_set(courier_engine *e, const courier_cookie *c, courier_error *err) {
    cr_error_clear(err);
    if (!e || !c || !cr_core(e)->jar || !CR_SIZED_OK(c, courier_cookie) || !c->domain || !*c->domain || !c->name ||
        !*c->name || (c->path && c->path[0] != '/') || *c->domain == '.')
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT,
                       e && !cr_core(e)->jar ? "the cookie jar is off" : "incomplete cookie");
    if (!field_ok(c->domain, true) || !field_ok(c->name, true) || (c->path && !field_ok(c->path, false)) ||
        (c->value && !field_ok(c->value, false)) || strchr(c->domain, ' ') || strchr(c->name, ' '))
        return cr_fail(err, COURIER_E_INVALID_HEADER, "a cookie field holds a character a cookie cannot carry");
    cr_buf line = {0};
    if (cookie_line(c, c->expires > 0 && c->expires <= (int64_t)time(NULL) ? 1 : c->expires, &line)) {
        cr_buf_free(&line);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    jar_lock(cr_core(e)->jar);
    int rc = import_and_sync(cr_core(e)->jar, line.data, err);
    jar_unlock(cr_core(e)->jar);
    cr_buf_free(&line);
    return rc;
}

int courier_cookies_remove(courier_engine *e, const char *domain, const char *path, const char *name,
                           courier_error *err) {
    cr_error_clear(err);
    if (!e || !cr_core(e)->jar || !domain || !name) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    struct cr_jar *j = cr_core(e)->jar;
    cr_buf key = {0};
    if (cr_buf_append_str(&key, *domain == '.' ? domain + 1 : domain) || cr_buf_append_char(&key, '\t') ||
        cr_buf_append_str(&key, path ? path : "/") || cr_buf_append_char(&key, '\t') || cr_buf_append_str(&key, name)) {
        cr_buf_free(&key);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    for (char *p = key.data; *p && *p != '\t'; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p + 32);
    jar_lock(j);
    int rc = sync_jar(j, false, err);
    const jline *found = NULL;
    for (size_t i = 0; !rc && i < j->saved.count && !found; i++)
        if (strcmp(j->saved.items[i].key, key.data) == 0) found = &j->saved.items[i];
    if (!rc && !found) rc = cr_fail(err, COURIER_E_NOT_FOUND, "no such cookie");
    if (!rc) {
        /* The same cookie expired: curl replaces it in place (under the share's lock, so a transfer
         * on the worker never sees a half-changed jar) and leaves it out from then on. */
        char *copy = cr_strdup(found->line), *f[7];
        cr_buf line = {0};
        courier_cookie c = {.size = sizeof c};
        if (!copy || !split_line(copy, f)) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        else {
            to_cookie(f, &c);
            if (cookie_line(&c, 1, &line)) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            else rc = import_and_sync(j, line.data, err);
        }
        cr_buf_free(&line);
        free(copy);
    }
    jar_unlock(j);
    cr_buf_free(&key);
    return rc;
}

int courier_cookies_clear(int64_t *removed, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (removed) *removed = 0;
    if (!e || !cr_core(e)->jar) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    struct cr_jar *j = cr_core(e)->jar;
    jar_lock(j);
    int rc = sync_jar(j, false, err); /* what the store has now, so the count is right */
    size_t n = j->saved.count;
    if (!rc) {
        curl_easy_setopt(j->api, CURLOPT_COOKIELIST, "ALL");
        rc = sync_jar(j, true, err);
    }
    jar_unlock(j);
    if (!rc && removed) *removed = (int64_t)n;
    return rc;
}
