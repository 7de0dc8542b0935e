/*
 * cache.c — the cache as the engine uses it: configuration (a request's own settings are in
 * http/cache_settings.c), the policies in the send path (lookup on the sending thread, answers and
 * grouped writes on the worker), user policies registered by id, entries as responses, and the
 * lookup manager.c shares. The manager
 * API (courier_cache_get/has/remove/put_key/size/verify/stats/list) is in manager.c.
 *
 * Threads: lookups run on the thread that calls courier_send (read transactions, MDB_NOTLS);
 * a hit is handed to the worker, which completes it like any response. Writes happen on the
 * worker after a response passed its judgement (status, validator): every write of one turn of
 * the worker's loop goes in one transaction, committed before those completions run, so a
 * completion may count on its entry being readable. No LMDB transaction is held across a user
 * callback. The store is opened on first use.
 */
#include "cache_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <lmdb.h>

#define CR_CACHE_DEFAULT_MAX ((int64_t)256 * 1024 * 1024)
#define CR_CACHE_MIN_MAX ((int64_t)64 * 1024)
#define CR_CACHE_DEFAULT_EXPIRY_MS 3600000

#define CR_DEFER_PUTS 4 /* an invalidation: the URL (as keyed and as sent), Location, Content-Location */

typedef struct cr_deferred {
    cr_later *later; /* the caller, answered after the write (the engine's cr_answer_ops) */
    int code;
    courier_response *resp;
    courier_error err;
    char *keys[CR_DEFER_PUTS]; /* the final key strings (with a Vary suffix) the puts point to */
    char *vary;   /* Vary names to record, or NULL */
    cr_kvlist headers; /* the fields stored, when some of the response's are not (section 3.1) */
    courier_response *keep; /* the stored response a HEAD updated (its put points into it) */
    cr_store_put put[CR_DEFER_PUTS];
    size_t nput;
    struct cr_deferred *next;
} deferred;

struct cr_cache_xfer {
    cr_ext ext; /* its hooks (request.c frees it through them) */
    int policy;
    policy_reg *reg;
    char *key;
    uint8_t hash[16];
    int64_t expiry_ms;          /* for explicit policies: freshness of a write, from its time */
    courier_response *answer;   /* completes without the network */
    courier_response *stored;   /* the stale entry, for a 304 or stale-if-error */
    int64_t stale_if_error_until;
    int background;             /* a background revalidation (stale-while-revalidate) */
    int invalidate;             /* an unsafe method under the HTTP policy */
    int shared;                 /* COURIER_CACHE_HTTP_SHARED */
    int reason;                 /* courier_cache_reason of what the lookup found (MISS, ...) */
    int answered;               /* x->answer went out: nothing to write */
    courier_response *head_get; /* HEAD: the stored GET response it may update (section 4.3.5) */
    cr_transfer *bg;            /* started when the answer has completed */
};

static bool http_policy(int policy) { return policy == COURIER_CACHE_HTTP || policy == COURIER_CACHE_HTTP_SHARED; }


/* ---- time, settings ------------------------------------------------------------------------- */


int courier_config_set_cache_max_bytes(courier_config *cfg, int64_t max_bytes) {
    if (!cfg || max_bytes < CR_CACHE_MIN_MAX) return COURIER_E_INVALID_ARGUMENT;
    cfg->cache_max_bytes = max_bytes;
    return COURIER_OK;
}

int courier_config_set_cache_expiry_ms(courier_config *cfg, int64_t expiry_ms) {
    if (!cfg || expiry_ms <= 0) return COURIER_E_INVALID_ARGUMENT;
    cfg->cache_expiry_ms = expiry_ms;
    return COURIER_OK;
}

int courier_config_set_cache_store(courier_config *cfg, const char *store) {
    if (!cfg || (store && !*store) || cr_store_setting_mistyped(store)) return COURIER_E_INVALID_ARGUMENT;
    if (cr_redis_is_url(store)) {
        cr_redis_url u;
        int rc = cr_redis_url_parse(store, &u, NULL);
        if (rc) return rc;
        cr_redis_url_free(&u);
        if (!cr_redis_available()) return COURIER_E_REDIS_UNSUPPORTED;
    }
    return cr_set_string(&cfg->cache_store, store);
}

int courier_config_set_cache_policy(courier_config *cfg, courier_cache_policy policy) {
    if (!cfg || policy < 0 || (policy > COURIER_CACHE_HTTP_SHARED && policy < COURIER_CACHE_POLICY_USER_MIN))
        return COURIER_E_INVALID_ARGUMENT;
    cfg->cache_policy = policy;
    return COURIER_OK;
}

int courier_config_set_cache_durability(courier_config *cfg, courier_cache_durability durability) {
    if (!cfg || (int)durability < COURIER_CACHE_DURABLE || (int)durability > COURIER_CACHE_SYNCED) return COURIER_E_INVALID_ARGUMENT;
    cfg->cache_durability = durability;
    return COURIER_OK;
}

int courier_config_set_cache_status_header(courier_config *cfg, int on) {
    if (!cfg) return COURIER_E_INVALID_ARGUMENT;
    cfg->cache_status_header = on != 0;
    return COURIER_OK;
}

int courier_config_set_clock(courier_config *cfg, courier_clock_fn fn, void *user, courier_user_free_fn user_free) {
    if (!cfg) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (rc) return rc;
    cr_callback_release(cfg->clock);
    cfg->clock = cb;
    return COURIER_OK;
}

/* ---- the engine's cache ----------------------------------------------------------------------- */

void cr_cache_policy_release(policy_reg *p) {
    if (!p) return;
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        if (p->user_free) p->user_free(p->user);
        free(p);
    }
}

int cr_cache_engine_init(courier_engine *e, const cr_answer_ops *answer, courier_error *err) {
    struct cr_cache *c = calloc(1, sizeof *c);
    if (!c) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    c->answer = answer;
    pthread_mutex_init(&c->lock, NULL);
    const courier_config *cfg = cr_core(e)->config;
    c->max_bytes = cfg->cache_max_bytes > 0 ? cfg->cache_max_bytes : CR_CACHE_DEFAULT_MAX;
    c->expiry_ms = cfg->cache_expiry_ms > 0 ? cfg->cache_expiry_ms : CR_CACHE_DEFAULT_EXPIRY_MS;
    c->default_policy = cfg->cache_policy;
    c->clock = cr_callback_retain(cfg->clock);
    cr_core(e)->cache = c;
    /* A cache the configuration names (its store, or a policy for every request) is opened now: a
     * store that cannot be opened fails the engine's open with its code (issue 28: it used to
     * turn caching off, said only on stderr). Redis is connected at first use, not here. */
    if (cfg->cache_store || cfg->cache_policy != COURIER_CACHE_NO_CACHE) {
        if (!cr_cache_open_store(e, err)) return cr_cache_store_code(e);
    }
    return COURIER_OK;
}

static void deferred_free(deferred *d) {
    for (size_t i = 0; i < CR_DEFER_PUTS; i++) free(d->keys[i]);
    free(d->vary);
    cr_kvlist_clear(&d->headers);
    courier_response_free(d->keep);
    free(d);
}

void cr_cache_engine_free(courier_engine *e) {
    struct cr_cache *c = cr_core(e)->cache;
    if (!c) return;
    while (c->dhead) { /* never left by the worker; defensive */
        deferred *d = c->dhead;
        c->dhead = d->next;
        courier_response_free(d->resp);
        c->answer->discard(d->later);
        deferred_free(d);
    }
    if (c->store) c->store->ops->release(c->store);
    while (c->policies) {
        policy_reg *p = c->policies;
        c->policies = p->next;
        cr_cache_policy_release(p);
    }
    cr_callback_release(c->clock);
    pthread_mutex_destroy(&c->lock);
    free(c);
    cr_core(e)->cache = NULL;
}

/* The store, opened at engine open when the configuration names a cache (cr_cache_engine_init),
 * else on first use: the LMDB store in "<store dir>/cache" or the directory the cache store setting
 * names, or Redis for a redis:// URL. NULL when it cannot be opened (not retried; logged once on
 * the engine's logger). */
cr_cache_store *cr_cache_open_store(courier_engine *e, courier_error *err) {
    struct cr_cache *c = cr_core(e)->cache;
    cr_cache_store *open = __atomic_load_n(&c->store, __ATOMIC_ACQUIRE); /* set once, never changed */
    if (open) return open;
    pthread_mutex_lock(&c->lock);
    const char *where = cr_core(e)->config->cache_store;
    char dir[PATH_MAX];
    char note[PATH_MAX * 2 + 256];
    note[0] = '\0'; /* not zero-filled: a store that failed brings every cache request here */
    if (!c->store && !c->open_failed) {
        courier_error local;
        cr_cache_store *s = NULL;
        int rc;
        if (cr_redis_is_url(where)) {
            rc = cr_store_open_redis(where, cr_core(e)->config->timeout_ms, &s, &local);
        } else {
            if (where) snprintf(dir, sizeof dir, "%s", where);
            else snprintf(dir, sizeof dir, "%s/cache", cr_core(e)->store_dir);
            int64_t map = c->max_bytes * 4 + ((int64_t)8 << 20);
            map = (map + ((int64_t)1 << 20) - 1) & ~(((int64_t)1 << 20) - 1);
            rc = cr_store_open_lmdb(e, dir, map, cr_core(e)->config->cache_durability, &s, note, sizeof note, &local);
        }
        __atomic_store_n(&c->store, s, __ATOMIC_RELEASE);
        if (rc) {
            c->open_failed = rc;
            c->open_error = local;
            snprintf(note, sizeof note, "cannot open the cache in '%s': %s", cr_redis_is_url(where) ? "redis" : dir,
                     local.message);
        }
    }
    cr_cache_store *s = c->store;
    int failed = c->open_failed;
    courier_error why = c->open_error;
    pthread_mutex_unlock(&c->lock);
    /* What the open did (a store moved aside, upgraded) or why it failed: on the engine's logger. */
    if (note[0]) cr_cache_note(e, s ? COURIER_LOG_WARNING : COURIER_LOG_ERROR, s ? "cache_store_opened" : "cache_store_failed", "%s", note);
    if (!s) {
        /* The open's own detail (its message, store_error, os_error), whatever its code. */
        if (failed && err) *err = why;
        else cr_fail(err, COURIER_E_STORE, "the cache store cannot be opened");
    }
    return s;
}

/* The code of a store that cannot be opened (cr_cache_open_store returned NULL). */
int cr_cache_store_code(courier_engine *e) {
    int f = cr_core(e)->cache->open_failed;
    return f && f != COURIER_E_STORE ? f : COURIER_E_STORE;
}

policy_reg *cr_cache_find_policy(struct cr_cache *c, int id) {
    pthread_mutex_lock(&c->lock);
    policy_reg *p = c->policies;
    while (p && p->id != id) p = p->next;
    if (p) atomic_fetch_add(&p->refs, 1);
    pthread_mutex_unlock(&c->lock);
    return p;
}

int courier_engine_register_cache_policy(courier_engine *e, int id, const courier_cache_policy_callbacks *fns,
                                         void *user, courier_user_free_fn user_free) {
    if (!e || id < COURIER_CACHE_POLICY_USER_MIN || (fns && !CR_SIZED_OK(fns, courier_cache_policy_callbacks))) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    policy_reg *n = NULL;
    if (fns) {
        n = calloc(1, sizeof *n);
        if (!n) {
            if (user_free) user_free(user);
            return COURIER_E_NO_MEMORY;
        }
        atomic_init(&n->refs, 1);
        n->id = id;
        CR_SIZED_IN(n->fns, fns);
        n->user = user;
        n->user_free = user_free;
    } else if (user_free) {
        user_free(user);
    }
    struct cr_cache *c = cr_core(e)->cache;
    policy_reg *old = NULL;
    pthread_mutex_lock(&c->lock);
    for (policy_reg **pp = &c->policies; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            old = *pp;
            *pp = old->next;
            break;
        }
    }
    if (n) {
        n->next = c->policies;
        c->policies = n;
    }
    pthread_mutex_unlock(&c->lock);
    cr_cache_policy_release(old);
    return COURIER_OK;
}

/* ---- entries as responses ---------------------------------------------------------------------- */

int cr_entry_headers(const cr_entry *e, cr_kvlist *out) {
    size_t i = 0;
    while (i < e->headers_len) {
        const char *n = e->headers + i;
        size_t nl = strnlen(n, e->headers_len - i);
        if (i + nl + 1 >= e->headers_len) break;
        const char *v = n + nl + 1;
        size_t vl = strnlen(v, e->headers_len - i - nl - 1);
        if (cr_kvlist_add(out, n, nl, v, vl)) return COURIER_E_NO_MEMORY;
        i += nl + 1 + vl + 1;
    }
    return COURIER_OK;
}

/* Walks an entry's header block as cr_entry_headers does: the next pair at *i, or false at the end. */
static bool next_header(const cr_entry *e, size_t *i, const char **n, size_t *nl, const char **v, size_t *vl) {
    if (*i >= e->headers_len) return false;
    *n = e->headers + *i;
    *nl = strnlen(*n, e->headers_len - *i);
    if (*i + *nl + 1 >= e->headers_len) return false;
    *v = *n + *nl + 1;
    *vl = strnlen(*v, e->headers_len - *i - *nl - 1);
    *i += *nl + 1 + *vl + 1;
    return true;
}

static bool is_age(const char *n, size_t nl) { return nl == 3 && strncasecmp(n, "Age", 3) == 0; }

/* Decimal digits of v into out (no NUL); returns the length. */
static size_t format_u64(uint64_t v, char out[20]) {
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t k = 0; k < n; k++) out[k] = tmp[n - 1 - k];
    return n;
}

/*
 * The response of an entry in two allocations (a read is the cache's hot path: the field-by-field
 * version made 9 allocations per hit): the body (body_len + 1, NUL-terminated, owned as usual, so
 * it can be replaced or freed like any response's), and one block for everything else:
 *   courier_response | cr_kv items[n] | method\0 | url\0 | key\0 | "name\0value\0"...
 * one_block tells courier_response_free (transport.c) not to free the block's parts one by one;
 * code that changes the headers or strings of such a response calls cr_response_detach first.
 * The body apart keeps both allocations small for small bodies (glibc serves up to 1032 bytes from
 * its per-thread cache; one block holding a 1 KiB body would not fit). The HTTP policy's entries
 * get a recomputed Age header (the stored one left out), last, as before.
 */
courier_response *cr_cache_response_from_entry(const cr_entry *e, int cache_status, int64_t now_ms) {
    bool http = (e->flags & CR_EF_HTTP) != 0;
    int64_t age_s = http ? cr_http_age_s(e, now_ms) : (now_ms > e->created_ms ? (now_ms - e->created_ms) / 1000 : 0);
    char age[20];
    size_t age_len = http ? format_u64(age_s > 0 ? (uint64_t)age_s : 0, age) : 0;
    /* Count the header pairs and their bytes. Without an Age header to leave out, the pairs are the
     * block's NUL-terminated strings taken two by two (what next_header walks), copied at once. */
    size_t nh = 0, hbytes = 0, i = 0, nl, vl;
    const char *n, *v;
    if (!http) {
        /* The block ends with a NUL (cr_entry_decode checks it), so strlen stays inside. */
        size_t strings = 0;
        for (size_t b = 0; b < e->headers_len; strings++) {
            b += strlen(e->headers + b) + 1;
            if (strings % 2 == 1) hbytes = b;
        }
        nh = strings / 2;
    } else {
        while (next_header(e, &i, &n, &nl, &v, &vl)) {
            if (is_age(n, nl)) continue;
            nh++;
            hbytes += nl + vl + 2;
        }
    }
    if (http) {
        nh++;
        hbytes += 3 + age_len + 2;
    }
    size_t head = (sizeof(courier_response) + _Alignof(cr_kv) - 1) / _Alignof(cr_kv) * _Alignof(cr_kv);
    size_t size = head + nh * sizeof(cr_kv) + e->method_len + 1 + e->url_len + 1 + e->key_len + 1 + hbytes;
    char *block = malloc(size);
    char *body = malloc(e->body_len + 1);
    if (!block || !body) {
        free(block);
        free(body);
        return NULL;
    }
    courier_response *r = (courier_response *)block;
    memset(r, 0, sizeof *r);
    cr_kv *items = nh ? (cr_kv *)(block + head) : NULL;
    char *q = block + head + nh * sizeof(cr_kv);
#define PUT_STR(dst, src, len)                \
    do {                                      \
        (dst) = q;                            \
        if (len) memcpy(q, (src), (len));     \
        q[len] = '\0';                        \
        q += (len) + 1;                       \
    } while (0)
    PUT_STR(r->method, e->method, e->method_len);
    PUT_STR(r->url, e->url, e->url_len);
    PUT_STR(r->cache_key, e->key, e->key_len);
    size_t k = 0;
    if (!http) {
        if (hbytes) memcpy(q, e->headers, hbytes);
        for (; k < nh; k++) {
            items[k].name = q;
            q += strlen(q) + 1;
            items[k].value = q;
            q += strlen(q) + 1;
        }
    } else {
        i = 0;
        while (next_header(e, &i, &n, &nl, &v, &vl)) {
            if (is_age(n, nl)) continue;
            PUT_STR(items[k].name, n, nl);
            PUT_STR(items[k].value, v, vl);
            k++;
        }
    }
    if (http) {
        PUT_STR(items[k].name, "Age", 3);
        PUT_STR(items[k].value, age, age_len);
        k++;
    }
#undef PUT_STR
    if (e->body_len) memcpy(body, e->body, e->body_len);
    body[e->body_len] = '\0';
    r->body = body;
    r->headers.items = items;
    r->headers.count = r->headers.cap = nh;
    r->body_len = e->body_len;
    r->one_block = 1;
    r->status = e->status;
    r->cache_status = cache_status;
    r->cache_reason = cache_status == COURIER_CACHE_STATUS_HIT ? COURIER_CACHE_REASON_FRESH : COURIER_CACHE_REASON_NONE;
    r->cache_created_ms = e->created_ms;
    r->cache_expires_ms = e->expires_ms;
    r->cache_age_s = age_s;
    return r;
}

/* Fresh: not past its expiry, and not written "in the future" (a clock set back must not pin an
 * entry forever). */
static bool entry_fresh(const cr_entry *e, int64_t now) {
    return now < e->expires_ms && now >= e->created_ms - 1000 && !(e->flags & CR_EF_NO_CACHE);
}

/* ---- lookups ----------------------------------------------------------------------------------- */


const char *cr_cache_header_lookup(const void *p, const char *name) {
    const cr_header_ctx *h = p;
    if (h->headers) return cr_kvlist_get(h->headers, name);
    const char *v = cr_kvlist_get(&h->r->headers, name);
    if (!v) v = cr_kvlist_get(&cr_core(h->e)->config->headers, name);
    if (!v && strcasecmp(name, "user-agent") == 0)
        v = cr_core(h->e)->config->user_agent ? cr_core(h->e)->config->user_agent : "Courier/" COURIER_VERSION_STRING;
    return v;
}

/* Looks up the entry of a key (following a Vary record) and turns it into a response (new).
 * Returns COURIER_OK, COURIER_E_NOT_FOUND, or an error. *fresh says whether it is fresh. With
 * fresh_only, an entry that is not fresh is reported (COURIER_OK, *fresh false, *out NULL) without
 * building its response. key_hash: the key's cr_key_hash when the caller has it, or NULL. */
int cr_cache_lookup(courier_engine *e, cr_cache_store *s, const char *key, const uint8_t key_hash[16],
                    const cr_header_ctx *hc, int64_t now, bool fresh_only, courier_response **out, cr_entry *meta,
                    bool *fresh, bool *had_vary) {
    *out = NULL;
    if (had_vary) *had_vary = false;
    uint8_t hash[16];
    size_t klen = strlen(key);
    if (key_hash) memcpy(hash, key_hash, sizeof hash); /* the send's, hashed once in xfer_new */
    else cr_key_hash(key, klen, hash);
    cr_read rd;
    if (s->ops->read_begin(s, &rd) != COURIER_OK) return COURIER_E_STORE;
    cr_entry ent;
    const char *names;
    size_t nlen;
    int rc;
    cr_buf vk = {0};
    if (hc && s->ops->vary_get(s, &rd, key, klen, hash, &names, &nlen) == COURIER_OK) {
        if (cr_buf_append(&vk, key, klen) || cr_cache_vary_suffix(&vk, names, nlen, cr_cache_header_lookup, hc)) {
            s->ops->read_end(s, &rd);
            cr_buf_free(&vk);
            return COURIER_E_NO_MEMORY;
        }
        key = vk.data;
        klen = vk.len;
        cr_key_hash(key, klen, hash);
        if (had_vary) *had_vary = true;
    }
    rc = s->ops->get(s, &rd, key, klen, hash, &ent);
    /* The hash found it; the stored key text must match too (a 128-bit collision reads as a miss). */
    if (rc == COURIER_OK && (ent.key_len != klen || memcmp(ent.key, key, klen) != 0)) rc = COURIER_E_NOT_FOUND;
    if (rc == COURIER_OK) {
        *fresh = entry_fresh(&ent, now);
        if (*fresh || !fresh_only) {
            *out = cr_cache_response_from_entry(&ent, COURIER_CACHE_STATUS_HIT, now);
            if (!*out) rc = COURIER_E_NO_MEMORY;
        }
        if (meta) {
            *meta = ent;
            /* Pointers into the map are not valid after the transaction: keep only numbers. */
            meta->key = meta->method = meta->url = meta->etag = meta->last_modified = meta->headers = NULL;
            meta->body = NULL;
        }
    }
    s->ops->read_end(s, &rd);
    cr_buf_free(&vk);
    (void)e;
    return rc;
}

/* ---- the send path ------------------------------------------------------------------------------ */


static void xfer_free(struct cr_cache_xfer *x) {
    if (!x) return;
    cr_cache_policy_release(x->reg);
    free(x->key);
    courier_response_free(x->answer);
    courier_response_free(x->stored);
    courier_response_free(x->head_get);
    /* A background revalidation dropped with its send, never started (the send refused after the
     * lookup, or the engine closing): its FINISHED (cancelled) ends what its interceptors began. */
    if (x->bg) cr_transfer_refuse(x->bg->engine, x->bg, COURIER_E_CANCELLED, NULL);
    free(x);
}

static void xfer_free_hook(void *x) { xfer_free(x); }

static const cr_ext_ops xfer_ops = {NULL, xfer_free_hook}; /* a transfer's state is never copied */

static bool is_safe_method(const char *m) {
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0 || strcmp(m, "TRACE") == 0;
}

static int add_conditionals(cr_transfer *t, const courier_response *stored) {
    const char *etag = cr_kvlist_get(&stored->headers, "ETag");
    const char *lm = cr_kvlist_get(&stored->headers, "Last-Modified");
    if (etag && !cr_kvlist_get(&t->headers, "If-None-Match") &&
        cr_kvlist_add(&t->headers, "If-None-Match", 13, etag, strlen(etag)))
        return COURIER_E_NO_MEMORY;
    if (lm && !cr_kvlist_get(&t->headers, "If-Modified-Since") &&
        cr_kvlist_add(&t->headers, "If-Modified-Since", 17, lm, strlen(lm)))
        return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

static struct cr_cache_xfer *xfer_new(int policy, const char *key) {
    struct cr_cache_xfer *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->ext.ops = &xfer_ops;
    x->policy = policy;
    if (!(x->key = cr_strdup(key))) {
        free(x);
        return NULL;
    }
    cr_key_hash(key, strlen(key), x->hash);
    return x;
}

static void decision_line(courier_engine *e, uint64_t request_id, const char *event, int reason, const char *decision,
                          int stored, int policy);

/* The response only-if-cached gets when nothing usable is stored (section 5.2.1.7): a 504 made
 * here, judged like a network 504. */
static courier_response *only_if_cached_504(const cr_transfer *t) {
    courier_response *r = NULL;
    if (courier_response_new(&r, 504) != COURIER_OK) return NULL;
    if (cr_set_string(&r->url, t->url) || cr_set_string(&r->method, t->method)) {
        courier_response_free(r);
        return NULL;
    }
    r->cache_reason = COURIER_CACHE_REASON_ONLY_IF_CACHED;
    return r;
}

/* The HTTP policies before sending: what the stored response (if any) allows under the request's
 * directives (section 5.2.1) and the stored response's (section 4.2.4). */
static int http_lookup(courier_engine *e, cr_cache_store *s, const courier_request *r, cr_transfer *t,
                       struct cr_cache_xfer *x, int64_t now) {
    struct cr_cache *c = cr_core(e)->cache;
    x->shared = x->policy == COURIER_CACHE_HTTP_SHARED;
    x->reason = COURIER_CACHE_REASON_MISS;
    if (!is_safe_method(r->method)) {
        x->invalidate = 1;
        return COURIER_OK;
    }
    cr_header_ctx hc = {e, NULL, &t->headers};
    courier_response *found = NULL;
    bool fresh = false, had_vary = false;
    cr_entry meta;
    if (strcmp(r->method, "HEAD") == 0) {
        /* A HEAD answer freshens or invalidates the stored GET response (section 4.3.5). */
        const char *sp = strchr(x->key, ' ');
        cr_buf k = {0};
        int rc = COURIER_OK;
        if (sp && !cr_buf_append_str(&k, "GET") && !cr_buf_append_str(&k, sp))
            rc = cr_cache_lookup(e, s, k.data, NULL, &hc, now, false, &found, &meta, &fresh, NULL);
        cr_buf_free(&k);
        if (rc == COURIER_OK) x->head_get = found;
        x->reason = COURIER_CACHE_REASON_NOT_STORED_METHOD;
        return COURIER_OK;
    }
    if (strcmp(r->method, "GET") != 0) {
        x->reason = COURIER_CACHE_REASON_NOT_STORED_METHOD;
        return COURIER_OK;
    }
    cr_cc qc;
    cr_cc_parse(&t->headers, &qc);
    if (qc.no_store) return COURIER_OK; /* neither served nor stored (the write says why) */
    int rc = cr_cache_lookup(e, s, x->key, x->hash, &hc, now, false, &found, &meta, &fresh, &had_vary);
    if (rc != COURIER_OK) {
        atomic_fetch_add(&c->misses, 1);
        x->reason = had_vary ? COURIER_CACHE_REASON_VARY_MISS : COURIER_CACHE_REASON_MISS;
        if (qc.only_if_cached && !(x->answer = only_if_cached_504(t))) return COURIER_E_NO_MEMORY;
        return COURIER_OK;
    }
    int64_t age_s = cr_http_age_s(&meta, now);
    int64_t stale_ms = now - meta.expires_ms; /* >= 0: stale by that much */
    bool no_cache = qc.no_cache || (meta.flags & CR_EF_NO_CACHE);
    bool must_revalidate = (meta.flags & CR_EF_MUST_REVALIDATE) != 0;
    /* request max-age: no older than that (an invalid one: revalidate); min-fresh: fresh for that
     * much longer; max-stale: stale by at most that much (any, without a value) */
    bool age_ok = !qc.max_age_invalid && (qc.max_age < 0 || age_s <= qc.max_age);
    bool min_fresh_ok = !qc.min_fresh_invalid && (qc.min_fresh < 0 || meta.expires_ms - now >= qc.min_fresh * 1000);
    bool may_stale = !no_cache && !must_revalidate; /* section 4.2.4 */
    bool max_stale_ok = !fresh && may_stale && stale_ms >= 0 && age_ok &&
                        (qc.max_stale_any || (qc.max_stale >= 0 && !qc.max_stale_invalid && stale_ms <= qc.max_stale * 1000));
    bool plain_request = qc.max_age < 0 && !qc.max_age_invalid && qc.min_fresh < 0 && !qc.min_fresh_invalid;
    if (fresh && !no_cache && age_ok && min_fresh_ok) {
        x->answer = found;
        atomic_fetch_add(&c->hits, 1);
    } else if (max_stale_ok) {
        found->cache_status = COURIER_CACHE_STATUS_STALE;
        found->cache_reason = COURIER_CACHE_REASON_STALE_ACCEPTED;
        x->answer = found;
        atomic_fetch_add(&c->stale, 1);
    } else if (may_stale && plain_request && stale_ms >= 0 && stale_ms < (int64_t)meta.swr_s * 1000) {
        /* stale-while-revalidate: answer now, revalidate in the background. */
        found->cache_status = COURIER_CACHE_STATUS_STALE;
        found->cache_reason = COURIER_CACHE_REASON_STALE_WHILE_REVALIDATE;
        x->answer = found;
        atomic_fetch_add(&c->stale, 1);
        cr_transfer *bg = NULL;
        courier_error bgerr;
        if (cr_transfer_prepare(e, r, &bg, &bgerr) == COURIER_OK) {
            /* bg->id: its own, given by cr_transfer_prepare */
            struct cr_cache_xfer *bx = xfer_new(x->policy, x->key);
            courier_response *copy = bx ? cr_response_copy(found) : NULL;
            if (bx && copy && add_conditionals(bg, copy) == COURIER_OK) {
                bx->background = 1;
                bx->shared = x->shared;
                bx->reason = COURIER_CACHE_REASON_STALE_REFETCHED;
                bx->stored = copy;
                bg->cache = bx;
                x->bg = bg;
            } else {
                courier_response_free(copy);
                xfer_free(bx);
                cr_transfer_refuse(e, bg, COURIER_E_NO_MEMORY, NULL); /* request.c: its FINISHED */
            }
        }
    } else if (qc.only_if_cached) {
        courier_response_free(found);
        atomic_fetch_add(&c->misses, 1);
        if (!(x->answer = only_if_cached_504(t))) return COURIER_E_NO_MEMORY;
    } else {
        /* Stale (or not to be used unvalidated): revalidate; stale-if-error (the response's or
         * the request's, RFC 5861 section 4) may still answer if the origin fails. */
        int64_t sie = (int64_t)meta.sie_s > qc.sie ? (int64_t)meta.sie_s : qc.sie;
        if (may_stale && sie > 0) x->stale_if_error_until = meta.expires_ms + sie * 1000;
        x->stored = found;
        x->reason = COURIER_CACHE_REASON_STALE_REFETCHED;
        if (add_conditionals(t, found)) return COURIER_E_NO_MEMORY;
    }
    /* A single Range the stored response answers: 206 (or 416) from the cache. A revalidated answer
     * stays whole: it is stored again as it is. */
    if (x->answer && cr_http_range_answer(x->answer, &t->headers) != COURIER_OK) return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

int cr_cache_before_send(courier_engine *e, const courier_request *r, cr_transfer *t, courier_error *err) {
    struct cr_cache *c = cr_core(e)->cache;
    if (!c) return COURIER_OK;
    int policy = r->cache && r->cache->policy >= 0 ? r->cache->policy : c->default_policy;
    if (t->ce_raw_asked) policy = COURIER_CACHE_NO_CACHE; /* coded bodies: the cache holds decoded ones */
    if (policy == COURIER_CACHE_NO_CACHE) {
        /* An unsafe method sent without a cache policy still invalidates what the HTTP policies
         * stored for its URLs (section 4.4), once this engine's cache is open (it has been used). */
        if (is_safe_method(r->method) || !__atomic_load_n(&c->store, __ATOMIC_ACQUIRE)) return COURIER_OK;
        policy = COURIER_CACHE_HTTP;
    }
    policy_reg *reg = NULL;
    if (policy >= COURIER_CACHE_POLICY_USER_MIN) {
        reg = cr_cache_find_policy(c, policy);
        if (!reg) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "cache policy %d is not registered", policy);
    }
    courier_error local;
    cr_cache_store *s = cr_cache_open_store(e, &local);
    if (!s) {
        cr_cache_policy_release(reg);
        return COURIER_OK; /* a cache that cannot open never fails a request */
    }
    char *key = NULL;
    int rc = cr_cache_key_for(e, r, &key);
    if (rc) {
        cr_cache_policy_release(reg);
        return cr_fail(err, rc, NULL);
    }
    struct cr_cache_xfer *x = xfer_new(policy, key);
    free(key);
    if (!x) {
        cr_cache_policy_release(reg);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    x->reg = reg;
    t->cache = x;
    int64_t now = cr_cache_now_ms(c);
    int64_t expiry_ms = r->cache && r->cache->expiry_ms > 0 ? r->cache->expiry_ms : c->expiry_ms;
    x->expiry_ms = expiry_ms;

    courier_response *found = NULL;
    bool fresh = false;
    switch (policy) {
    case COURIER_CACHE_WRITE_ONLY:
        break;
    case COURIER_CACHE_CACHE_FIRST:
        rc = cr_cache_lookup(e, s, x->key, x->hash, NULL, now, false, &found, NULL, &fresh, NULL);
        if (rc == COURIER_OK && fresh) {
            x->answer = found;
            atomic_fetch_add(&c->hits, 1);
        } else {
            courier_response_free(found);
            atomic_fetch_add(&c->misses, 1);
        }
        break;
    case COURIER_CACHE_HTTP:
    case COURIER_CACHE_HTTP_SHARED:
        rc = http_lookup(e, s, r, t, x, now);
        if (rc) return cr_fail(err, rc, NULL);
        break;
    default: { /* a user policy */
        rc = cr_cache_lookup(e, s, x->key, x->hash, NULL, now, false, &found, NULL, &fresh, NULL);
        bool has = false;
        if (rc == COURIER_OK) {
            has = reg->fns.has_cache ? reg->fns.has_cache(found, now, reg->user) != 0 : fresh;
        } else if (reg->fns.has_cache) {
            (void)reg->fns.has_cache(NULL, now, reg->user);
        }
        if (has && (!reg->fns.answer_from_cache || reg->fns.answer_from_cache(found, now, reg->user))) {
            x->answer = found;
            found = NULL;
            atomic_fetch_add(&c->hits, 1);
        } else {
            atomic_fetch_add(&c->misses, 1);
        }
        courier_response_free(found);
        break;
    }
    }
    int reason = x->answer ? (x->answer->cache_reason ? x->answer->cache_reason : COURIER_CACHE_REASON_FRESH)
                           : (x->reason ? x->reason : COURIER_CACHE_REASON_MISS);
    decision_line(e, t->id, "cache_lookup", reason, x->answer ? "from_cache" : x->stored ? "revalidate" : "network", -1,
                  policy);
    return COURIER_OK;
}

int cr_cache_before_hop(courier_engine *e, const cr_transfer *prev, cr_transfer *next, courier_error *err) {
    const struct cr_cache_xfer *x = prev->cache;
    if (!x || x->background || x->policy == COURIER_CACHE_NO_CACHE) return COURIER_OK;
    /* The hop as a request of its own: its absolute URL and headers, the chain's policy and
     * expiry; the key is the hop's URL (a key of the caller's own names the first hop alone). */
    cr_cache_req c = {.policy = x->policy, .expiry_ms = x->expiry_ms};
    courier_request r;
    memset(&r, 0, sizeof r);
    r.method = next->method;
    r.target = next->url;
    r.headers = next->headers;
    r.cache = &c;
    r.body_encoding = -1;
    return cr_cache_before_send(e, &r, next, err);
}

/* ---- what the cache did ----------------------------------------------------------------------- */

/* Sets a response's reason and, when the engine asks for it, its Cache-Status field (RFC 9211):
 * "Courier; hit" for an answer from the cache, else "Courier; fwd=<why it went forward>" with
 * "fwd-status" and "stored" when they apply; then "detail=<reason name>". */
static void mark(const courier_engine *e, courier_response *r, int reason, bool stored) {
    r->cache_reason = reason;
    if (!cr_core(e)->config->cache_status_header) return;
    const char *fwd = NULL;
    switch (reason) {
    case COURIER_CACHE_REASON_FRESH:
    case COURIER_CACHE_REASON_STALE_WHILE_REVALIDATE:
    case COURIER_CACHE_REASON_STALE_IF_ERROR:
    case COURIER_CACHE_REASON_STALE_ACCEPTED:
    case COURIER_CACHE_REASON_ONLY_IF_CACHED: break;
    case COURIER_CACHE_REASON_VARY_MISS: fwd = "vary-miss"; break;
    case COURIER_CACHE_REASON_REVALIDATED:
    case COURIER_CACHE_REASON_STALE_REFETCHED: fwd = "stale"; break;
    case COURIER_CACHE_REASON_NOT_STORED_METHOD:
    case COURIER_CACHE_REASON_INVALIDATED:
    case COURIER_CACHE_REASON_UPDATED_STORED: fwd = "method"; break;
    default: fwd = "uri-miss"; break;
    }
    char v[160];
    int n;
    if (!fwd) n = snprintf(v, sizeof v, "Courier; %s", reason == COURIER_CACHE_REASON_ONLY_IF_CACHED ? "fwd=miss" : "hit");
    else n = snprintf(v, sizeof v, "Courier; fwd=%s", fwd);
    if (fwd && r->status) n += snprintf(v + n, sizeof v - (size_t)n, "; fwd-status=%d", reason == COURIER_CACHE_REASON_REVALIDATED ? 304 : r->status);
    if (stored) n += snprintf(v + n, sizeof v - (size_t)n, "; stored");
    snprintf(v + n, sizeof v - (size_t)n, "; detail=%s", courier_cache_reason_name(reason));
    if (cr_response_detach(r) == COURIER_OK) {
        cr_kvlist_remove(&r->headers, "Cache-Status");
        (void)cr_kvlist_add(&r->headers, "Cache-Status", 12, v, strlen(v));
    }
}

/* The cache's decision lines (component "cache", debug): what a lookup found and what it means for
 * the request, and whether an answer was stored, each with the courier_cache_reason. */
static void decision_line(courier_engine *e, uint64_t request_id, const char *event, int reason, const char *decision,
                          int stored, int policy) {
    if (!cr_log_wants(e, COURIER_LOG_CACHE, COURIER_LOG_DEBUG)) return;
    const char *name = courier_cache_reason_name(reason);
    cr_logf f[3];
    size_t n = 0;
    f[n++] = (cr_logf){"reason", name, 0, 0};
    if (decision) f[n++] = (cr_logf){"decision", decision, 0, 0};
    if (stored >= 0) f[n++] = (cr_logf){"stored", NULL, stored, 1};
    if (policy >= 0 && n < 3) f[n++] = (cr_logf){"cache_policy", NULL, policy, 0};
    char msg[96];
    snprintf(msg, sizeof msg, "%s: %s%s%s", event, name, decision ? " -> " : stored > 0 ? ", stored" : stored == 0 ? ", not stored" : "",
             decision ? decision : "");
    cr_log_fields(e, COURIER_LOG_CACHE, COURIER_LOG_DEBUG, event, request_id, msg, f, n);
}

bool cr_cache_answer(courier_engine *e, cr_transfer *t, cr_complete_fn complete, cr_start_fn start) {
    struct cr_cache_xfer *x = t->cache;
    if (!x || !x->answer) return false;
    courier_response *resp = x->answer;
    x->answer = NULL;
    x->answered = 1;
    resp->id = t->id;
    if (resp->cache_reason == COURIER_CACHE_REASON_NONE && resp->cache_status == COURIER_CACHE_STATUS_HIT)
        resp->cache_reason = COURIER_CACHE_REASON_FRESH;
    if (cr_core(e)->config->cache_status_header) mark(e, resp, resp->cache_reason, false);
    cr_transfer *bg = x->bg;
    x->bg = NULL;
    courier_error err;
    cr_error_clear(&err);
    if (resp->cache_status != COURIER_CACHE_STATUS_NETWORK)
        cr_event_from_cache(e, t, resp); /* event monitors (log.c), before the FINISHED */
    complete(e, t, COURIER_OK, resp, &err); /* the engine's normal path: judged, then answered */
    if (bg) {
        atomic_fetch_add(&cr_core(e)->queued, 1); /* counted like a submission */
        start(e, bg);
    }
    return true;
}

static bool error_allows_stale(int code, const courier_response *resp) {
    switch (code) {
    case COURIER_E_CANNOT_RESOLVE:
    case COURIER_E_CANNOT_CONNECT:
    case COURIER_E_TIMEOUT:
    case COURIER_E_NETWORK:
    case COURIER_E_PARTIAL_RESPONSE: return true;
    case COURIER_OK:
    case COURIER_E_HTTP_STATUS:
        return resp && (resp->status == 500 || resp->status == 502 || resp->status == 503 || resp->status == 504);
    default: return false;
    }
}

int cr_cache_on_answer(courier_engine *e, cr_transfer *t, int code, courier_response **resp, courier_error *err) {
    struct cr_cache_xfer *x = t->cache;
    if (!x || !x->stored) return code;
    struct cr_cache *c = cr_core(e)->cache;
    if (code == COURIER_OK && *resp && (*resp)->status == 304) {
        courier_response *m = x->stored;
        x->stored = NULL;
        /* Its headers change: they need allocations of their own (the entry's response is one block). */
        if (cr_response_detach(m) || cr_http_merge_304(&m->headers, &(*resp)->headers)) {
            courier_response_free(m);
            return code;
        }
        m->id = t->id;
        m->metrics = (*resp)->metrics;
        m->cache_status = COURIER_CACHE_STATUS_REVALIDATED;
        m->cache_reason = COURIER_CACHE_REASON_REVALIDATED;
        m->cache_age_s = 0;
        cr_kvlist_remove(&m->headers, "Age");
        courier_response_free(*resp);
        *resp = m;
        x->reason = COURIER_CACHE_REASON_REVALIDATED;
        atomic_fetch_add(&c->revalidations, 1);
        return COURIER_OK;
    }
    if (x->stale_if_error_until && cr_cache_now_ms(c) < x->stale_if_error_until && error_allows_stale(code, *resp)) {
        courier_response *m = x->stored;
        x->stored = NULL;
        m->id = t->id;
        m->cache_status = COURIER_CACHE_STATUS_STALE;
        mark(e, m, COURIER_CACHE_REASON_STALE_IF_ERROR, false);
        decision_line(e, t->id, "cache_stale_if_error", COURIER_CACHE_REASON_STALE_IF_ERROR, "from_cache", -1, -1);
        x->answered = 1; /* the origin's error is not stored over it */
        courier_response_free(*resp);
        *resp = m;
        cr_error_clear(err);
        atomic_fetch_add(&c->stale, 1);
        return COURIER_OK;
    }
    return code;
}

/* ---- grouped writes on the worker ------------------------------------------------------------ */

static void fill_entry_from_response(cr_entry *en, const courier_response *resp, const char *key) {
    en->status = resp->status;
    en->key = key;
    en->key_len = strlen(key);
    en->method = resp->method && resp->method[0] ? resp->method : "GET";
    en->method_len = strlen(en->method);
    en->url = resp->url ? resp->url : "";
    en->url_len = strlen(en->url);
    en->body = (const uint8_t *)resp->body;
    en->body_len = resp->body_len;
    if (!en->etag) {
        const char *v = cr_kvlist_get(&resp->headers, "ETag");
        if (v) {
            en->etag = v;
            en->etag_len = strlen(v);
        }
    }
    if (!en->last_modified) {
        const char *v = cr_kvlist_get(&resp->headers, "Last-Modified");
        if (v) {
            en->last_modified = v;
            en->last_modified_len = strlen(v);
        }
    }
}

/* A removal of the response stored under `key` (and of a Vary record under it). Takes key. */
static bool add_removal(deferred *d, char *key) {
    if (!key || d->nput == CR_DEFER_PUTS) {
        free(key);
        return false;
    }
    cr_store_put *p = &d->put[d->nput];
    d->keys[d->nput++] = key;
    cr_key_hash(key, strlen(key), p->hash);
    p->remove_only = 1;
    memcpy(p->vary_hash, p->hash, 16);
    p->remove_vary = 1;
    p->entry.key = key;
    p->entry.key_len = strlen(key);
    return true;
}

/* Section 4.4: a non-error answer to an unsafe method invalidates the GET responses stored for its
 * URL and for the same-origin URLs of its Location and Content-Location. */
static bool plan_invalidation(courier_engine *e, cr_transfer *t, struct cr_cache_xfer *x, const courier_response *resp,
                              deferred *d) {
    const char *sp = strchr(x->key, ' ');
    if (!sp) return false;
    cr_buf k = {0};
    if (cr_buf_append_str(&k, "GET") || cr_buf_append(&k, sp, strcspn(sp, "\n"))) {
        cr_buf_free(&k);
        return false;
    }
    const char *base = k.data + 4;
    bool any = false;
    const char *refs[] = {cr_kvlist_get(&resp->headers, "Location"), cr_kvlist_get(&resp->headers, "Content-Location")};
    for (size_t i = 0; i < 2; i++) {
        char *rk = NULL;
        if (refs[i] && cr_cache_get_key_of_ref(e, base, refs[i], &rk) == COURIER_OK) any |= add_removal(d, rk);
    }
    /* The URL as sent: a POST's parameters go in its body but in its key ("POST url?a=1"), so the
     * key's URL is not the target's. */
    char *sent = NULL;
    if (t->url && cr_cache_get_key_of_ref(e, t->url, t->url, &sent) == COURIER_OK && strcmp(sent, k.data) != 0)
        any |= add_removal(d, sent);
    else free(sent);
    any |= add_removal(d, cr_buf_take(&k, NULL));
    cr_buf_free(&k);
    return any;
}

/* Section 4.3.5: a HEAD answer whose validators (or, without any, Content-Length) match the stored
 * GET response updates its fields as a 304 would; one that differs invalidates it. Returns the
 * reason, or NONE when there is nothing to do. */
static int plan_head(courier_engine *e, cr_transfer *t, struct cr_cache_xfer *x, const courier_response *resp,
                     deferred *d, int64_t now) {
    courier_response *stored = x->head_get;
    if (!stored || !stored->cache_key || resp->status / 100 != 2) return COURIER_CACHE_REASON_NOT_STORED_METHOD;
    const char *names[] = {"ETag", "Last-Modified", "Content-Length"};
    bool match = false, decided = false;
    for (size_t i = 0; i < 3 && !decided; i++) {
        const char *a = cr_kvlist_get(&stored->headers, names[i]), *b = cr_kvlist_get(&resp->headers, names[i]);
        if (a && b) {
            match = strcmp(a, b) == 0;
            decided = true;
        } else if (a || b) {
            decided = i < 2; /* a validator on one side only: not the same representation */
        }
    }
    if (!match) /* (the variant's key holds no Vary record: removing one is a no-op) */
        return add_removal(d, cr_strdup(stored->cache_key)) ? COURIER_CACHE_REASON_INVALIDATED
                                                           : COURIER_CACHE_REASON_NOT_STORED_METHOD;
    x->head_get = NULL;
    d->keep = stored;
    if (cr_response_detach(stored) || cr_http_merge_304(&stored->headers, &resp->headers))
        return COURIER_CACHE_REASON_NOT_STORED_METHOD;
    cr_kvlist_remove(&stored->headers, "Age");
    cr_store_put *p = &d->put[0];
    if (cr_http_storable("GET", stored, &t->headers, x->shared, now, resp->metrics.total_s, &p->entry) != 0)
        return COURIER_CACHE_REASON_NOT_STORED_METHOD;
    char *key = cr_strdup(stored->cache_key);
    if (!key) return COURIER_CACHE_REASON_NOT_STORED_METHOD;
    d->keys[0] = key;
    d->nput = 1;
    cr_key_hash(key, strlen(key), p->hash);
    fill_entry_from_response(&p->entry, stored, key);
    p->entry.method = "GET";
    p->entry.method_len = 3;
    p->headers = &stored->headers;
    return COURIER_CACHE_REASON_UPDATED_STORED;
}

/* The HTTP policies' write: plans d's puts and returns the response's reason, and whether it is
 * stored in *stored. */
static int plan_http(courier_engine *e, cr_transfer *t, struct cr_cache_xfer *x, int code, courier_response *resp,
                     deferred *d, int64_t now, bool *stored) {
    struct cr_cache *c = cr_core(e)->cache;
    *stored = false;
    if (x->invalidate) {
        if (code != COURIER_OK || resp->status >= 400) return COURIER_CACHE_REASON_NOT_STORED_METHOD;
        plan_invalidation(e, t, x, resp, d);
        return COURIER_CACHE_REASON_INVALIDATED;
    }
    if (x->head_get || (t->method && strcmp(t->method, "HEAD") == 0)) return plan_head(e, t, x, resp, d, now);
    cr_store_put *p = &d->put[0];
    cr_entry *en = &p->entry;
    int why = cr_http_storable(t->method ? t->method : resp->method, resp, &t->headers, x->shared, now,
                               resp->metrics.total_s, en);
    if (why) return why;
    if (cr_http_vary_names(&resp->headers, &d->vary) != COURIER_OK) return COURIER_CACHE_REASON_NONE;
    if (strcmp(d->vary, "*") == 0) return COURIER_CACHE_REASON_NOT_STORED_VARY;
    cr_buf k = {0};
    int rc = cr_buf_append_str(&k, x->key);
    cr_header_ctx hc = {e, NULL, &t->headers};
    if (!rc && *d->vary) rc = cr_cache_vary_suffix(&k, d->vary, strlen(d->vary), cr_cache_header_lookup, &hc);
    if (rc || !(d->keys[0] = cr_buf_take(&k, NULL))) {
        cr_buf_free(&k);
        return COURIER_CACHE_REASON_NONE;
    }
    cr_buf_free(&k);
    d->nput = 1;
    cr_key_hash(d->keys[0], strlen(d->keys[0]), p->hash);
    memcpy(p->vary_hash, x->hash, 16);
    if (*d->vary) p->vary_names = d->vary;
    else p->remove_vary = 1;
    fill_entry_from_response(en, resp, d->keys[0]);
    /* The fields that are not stored (section 3.1, no-cache="f", private="f") */
    cr_cc rcc;
    cr_cc_parse(&resp->headers, &rcc);
    p->headers = &resp->headers;
    if (cr_http_fields_filtered(&resp->headers, &rcc, x->shared)) {
        for (size_t i = 0; i < resp->headers.count; i++) {
            const cr_kv *kv = &resp->headers.items[i];
            if (cr_http_field_stored(&resp->headers, &rcc, x->shared, kv->name) &&
                cr_kvlist_add(&d->headers, kv->name, strlen(kv->name), kv->value, strlen(kv->value))) {
                d->nput = 0;
                return COURIER_CACHE_REASON_NONE;
            }
        }
        p->headers = &d->headers;
    }
    if (cr_store_too_large(p, c->max_bytes)) return COURIER_CACHE_REASON_NOT_STORED_TOO_LARGE; /* the put removes the old copy */
    *stored = true;
    return resp->cache_status == COURIER_CACHE_STATUS_REVALIDATED ? COURIER_CACHE_REASON_REVALIDATED : x->reason;
}

bool cr_cache_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    struct cr_cache_xfer *x = t->cache;
    struct cr_cache *c = cr_core(e)->cache;
    if (!x || !c || x->policy == COURIER_CACHE_NO_CACHE || !resp || x->answered) return false;
    bool http = http_policy(x->policy);
    if (code != COURIER_OK && !(http && code == COURIER_E_HTTP_STATUS)) return false;
    if (resp->cache_status != COURIER_CACHE_STATUS_NETWORK && resp->cache_status != COURIER_CACHE_STATUS_REVALIDATED)
        return false;
    cr_cache_store *s = c->store; /* opened by the lookup */
    if (!s) return false;
    int64_t now = cr_cache_now_ms(c);
    deferred *d = calloc(1, sizeof *d);
    if (!d) return false;
    if (http) {
        bool stored;
        int reason = plan_http(e, t, x, code, resp, d, now, &stored);
        if (reason != COURIER_CACHE_REASON_NONE) mark(e, resp, reason, stored);
        if (reason != COURIER_CACHE_REASON_NONE) decision_line(e, t->id, "cache_store", reason, NULL, stored && d->nput, -1);
    } else if (code == COURIER_OK) {
        cr_entry *en = &d->put[0].entry;
        int64_t expires = now + x->expiry_ms;
        bool write = true;
        if (x->reg && x->reg->fns.should_write)
            write = x->reg->fns.should_write(resp, &expires, x->reg->user) != 0;
        if (!write) mark(e, resp, COURIER_CACHE_REASON_NOT_STORED_POLICY, false);
        decision_line(e, t->id, "cache_store", write ? COURIER_CACHE_REASON_MISS : COURIER_CACHE_REASON_NOT_STORED_POLICY,
                      NULL, write, -1);
        if (write && (d->keys[0] = cr_strdup(x->key))) {
            d->nput = 1;
            memcpy(d->put[0].hash, x->hash, 16);
            en->created_ms = now;
            en->expires_ms = expires;
            en->discard_ms = expires;
            fill_entry_from_response(en, resp, d->keys[0]);
            d->put[0].headers = &resp->headers;
            mark(e, resp, COURIER_CACHE_REASON_MISS, true);
        }
    }
    if (!d->nput) {
        deferred_free(d);
        return false;
    }
    /* The caller is answered after the write (the engine's detached handle); the engine frees t as
     * soon as this returns. */
    if (!(d->later = c->answer->detach(e, t, false))) {
        deferred_free(d);
        return false;
    }
    d->code = code;
    d->resp = resp;
    if (err) d->err = *err;
    if (c->dtail) c->dtail->next = d;
    else c->dhead = d;
    c->dtail = d;
    return true;
}

void cr_cache_flush(courier_engine *e) {
    struct cr_cache *c = cr_core(e)->cache;
    if (!c || !c->dhead) return;
    deferred *list = c->dhead;
    c->dhead = c->dtail = NULL;
    size_t n = 0;
    for (deferred *d = list; d; d = d->next) n += d->nput;
    cr_store_put *puts = malloc(n * sizeof *puts);
    if (puts) {
        size_t i = 0;
        for (deferred *d = list; d; d = d->next)
            for (size_t k = 0; k < d->nput; k++) puts[i++] = d->put[k];
        cr_store_effect eff = {0};
        courier_error err;
        int rc = c->store->ops->write(c->store, puts, n, c->max_bytes, cr_cache_now_ms(c), &eff, &err);
        if (rc) {
            atomic_fetch_add(&c->write_failures, (long long)n);
        } else {
            atomic_fetch_add(&c->writes, (long long)eff.written);
            atomic_fetch_add(&c->evictions, (long long)eff.evicted);
            atomic_fetch_add(&c->write_failures, (long long)eff.skipped);
        }
        free(puts);
    } else {
        atomic_fetch_add(&c->write_failures, (long long)n);
    }
    while (list) {
        deferred *d = list;
        list = d->next;
        c->answer->answer(e, d->later, d->code, d->resp, &d->err);
        deferred_free(d);
    }
}
