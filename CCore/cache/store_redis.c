/*
 * store_redis.c — the cache's store on Redis: the backend the seam (store.h) chooses for a
 * redis:// cache store, on the Redis floor (base/redis.c).
 *
 * Keys (docs/design/redis.md, "The cache on Redis"), T the hex of the 128-bit hash of the primary key
 * (the key text without its Vary suffix), H the hex of the entry's own key hash:
 *   courier:cache:{T}:e:H   -> the entry, in the value layout of store.c (cr_entry_encode)
 *   courier:cache:{T}:v     -> the Vary header names of that URL ("name\n...")
 * The braces are Redis Cluster's hash tag: a URL's entry, its variants and its Vary record live in
 * one slot, so the MULTI of a write and the MGET of a lookup never cross slots. Every key has a
 * TTL: an entry's is its usable lifetime (discard time: expiry plus the stale horizons and the
 * time kept for revalidation), a Vary record's the longest of its variants'. The size limit is
 * Redis' maxmemory with its policy (allkeys-lru or volatile-ttl fit a cache).
 *
 * Reads: a lookup without a Vary record is one GET; with the HTTP policies it is one MGET of the
 * Vary record and the primary entry, then a GET of the variant when there is a Vary record. The
 * borrowed pointers of a read point into replies the cr_read holds until read_end.
 * Writes: each put is one SET ... PX when it writes only its entry, else a MULTI/EXEC of its
 * commands (the entry and its Vary record, or the removals of an invalidation), all puts of a
 * flush in one pipeline. The manager's scans (size, list, remove all / since / expired, verify)
 * walk the keys with SCAN.
 */
#include "cache/store.h"

#ifdef COURIER_REDIS
#include <hiredis/hiredis.h>
#endif

size_t cr_cache_primary_len(const char *key, size_t key_len) {
    static const char mark[] = "\nvary:";
    const size_t ml = sizeof mark - 1;
    for (size_t i = key_len >= ml ? key_len - ml + 1 : 0; i-- > 0;)
        if (key[i] == '\n' && memcmp(key + i, mark, ml) == 0) return i;
    return key_len;
}

#ifdef COURIER_REDIS

#define RK_PREFIX "courier:cache:"
#define RK_PREFIX_LEN 14
#define RK_LEN (RK_PREFIX_LEN + 1 + 32 + 1 + 3 + 32) /* courier:cache:{T}:e:H */
#define SCAN_COUNT "512"

typedef struct redis_backend {
    cr_cache_store base;
    cr_redis *r;
} redis_backend;

#define RB(b) (((redis_backend *)(b))->r)

/* The tag hash of a key text whose own hash is `hash`. */
static void tag_of(const char *key, size_t key_len, const uint8_t hash[16], uint8_t tag[16]) {
    size_t p = key ? cr_cache_primary_len(key, key_len) : key_len;
    if (!key || p == key_len) memcpy(tag, hash, 16);
    else cr_key_hash(key, p, tag);
}

static size_t entry_key(char out[RK_LEN + 1], const uint8_t tag[16], const uint8_t hash[16]) {
    memcpy(out, RK_PREFIX "{", RK_PREFIX_LEN + 1);
    cr_key_hex(tag, out + RK_PREFIX_LEN + 1);
    memcpy(out + RK_PREFIX_LEN + 33, "}:e:", 4);
    cr_key_hex(hash, out + RK_PREFIX_LEN + 37);
    return RK_LEN;
}

static size_t vary_key(char out[RK_LEN + 1], const uint8_t tag[16]) {
    memcpy(out, RK_PREFIX "{", RK_PREFIX_LEN + 1);
    cr_key_hex(tag, out + RK_PREFIX_LEN + 1);
    memcpy(out + RK_PREFIX_LEN + 33, "}:v", 4);
    return RK_PREFIX_LEN + 36;
}

static void rb_release(cr_cache_store *b) {
    if (!b) return;
    cr_redis_close(RB(b));
    free(b);
}

static int rb_read_begin(cr_cache_store *b, cr_read *out) {
    (void)b;
    memset(out, 0, sizeof *out);
    out->slot = -1;
    return COURIER_OK;
}

static void rb_read_end(cr_cache_store *b, cr_read *r) {
    (void)b;
    cr_redis_replies_free(r->held, 2);
    r->pre = false;
}

static int decode_reply(const redisReply *rep, cr_entry *out) {
    if (!rep || rep->type == REDIS_REPLY_NIL) return COURIER_E_NOT_FOUND;
    if (rep->type != REDIS_REPLY_STRING) return COURIER_E_REDIS;
    /* Values come whole from Redis (no torn pages): the checksum is checked by verify only. */
    return cr_entry_decode(rep->str, rep->len, false, out) ? COURIER_OK : COURIER_E_NOT_FOUND;
}

static int rb_get(cr_cache_store *b, cr_read *r, const char *key, size_t key_len, const uint8_t hash[16],
                  cr_entry *out) {
    if (r->pre && memcmp(r->pre_hash, hash, 16) == 0) return decode_reply(r->held[0]->element[1], out);
    uint8_t tag[16];
    tag_of(key, key_len, hash, tag);
    char k[RK_LEN + 1];
    const char *argv[2] = {"GET", k};
    size_t lens[2] = {3, entry_key(k, tag, hash)};
    cr_redis_cmd cmd = {2, argv, lens};
    cr_redis_replies_free(&r->held[1], 1);
    int rc = cr_redis_run(RB(b), &cmd, 1, &r->held[1], CR_REDIS_READ, NULL);
    return rc ? rc : decode_reply(r->held[1], out);
}

static int rb_vary_get(cr_cache_store *b, cr_read *r, const char *key, size_t key_len, const uint8_t hash[16],
                       const char **names, size_t *len) {
    (void)key, (void)key_len; /* a primary key: its hash is the tag */
    char vk[RK_LEN + 1], ek[RK_LEN + 1];
    const char *argv[3] = {"MGET", vk, ek};
    size_t lens[3] = {4, vary_key(vk, hash), entry_key(ek, hash, hash)};
    cr_redis_cmd cmd = {3, argv, lens};
    cr_redis_replies_free(&r->held[0], 1);
    r->pre = false;
    int rc = cr_redis_run(RB(b), &cmd, 1, &r->held[0], CR_REDIS_READ, NULL);
    if (rc) return rc;
    const redisReply *rep = r->held[0];
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) return COURIER_E_REDIS;
    r->pre = true; /* the primary entry came along: a get of it needs no round trip */
    memcpy(r->pre_hash, hash, 16);
    if (rep->element[0]->type != REDIS_REPLY_STRING) return COURIER_E_NOT_FOUND;
    *names = rep->element[0]->str;
    *len = rep->element[0]->len;
    return COURIER_OK;
}

/* ---- writes ----------------------------------------------------------------------------------- */

/* Up to 7 commands per put: MULTI, SET/DEL entry, SET + 2 PEXPIRE or DEL of the Vary record, EXEC. */
#define CMDS_PER_PUT 7
#define ARGS_PER_PUT 24

typedef struct wbuild {
    cr_redis_cmd *cmds;
    const char **argv;
    size_t *lens;
    size_t ncmd, narg;
} wbuild;

static void wcmd(wbuild *w, int argc, ...) {
    va_list ap;
    va_start(ap, argc);
    cr_redis_cmd *c = &w->cmds[w->ncmd++];
    c->argc = argc;
    c->argv = &w->argv[w->narg];
    c->argvlen = &w->lens[w->narg];
    for (int i = 0; i < argc; i++) {
        const char *a = va_arg(ap, const char *);
        size_t l = va_arg(ap, size_t);
        w->argv[w->narg] = a;
        w->lens[w->narg++] = l;
    }
    va_end(ap);
}

#define S(lit) lit, sizeof(lit) - 1

static int rb_write(cr_cache_store *b, const cr_store_put *puts, size_t n, int64_t limit_bytes, int64_t now_ms,
                    cr_store_effect *effect, courier_error *err) {
    memset(effect, 0, sizeof *effect);
    if (!n) return COURIER_OK;
    /* One allocation for the commands, their arguments, key names, TTL texts and values' pointers. */
    typedef struct pbuf {
        char ek[RK_LEN + 1], vk[RK_LEN + 1], ttl[24];
        uint8_t *value;
    } pbuf;
    wbuild w = {0};
    w.cmds = malloc(n * CMDS_PER_PUT * sizeof *w.cmds);
    w.argv = malloc(n * ARGS_PER_PUT * sizeof *w.argv);
    w.lens = malloc(n * ARGS_PER_PUT * sizeof *w.lens);
    pbuf *pb = calloc(n, sizeof *pb);
    int rc = COURIER_OK;
    if (!w.cmds || !w.argv || !w.lens || !pb) {
        rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        goto done;
    }
    uint64_t written = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const cr_store_put *p = &puts[i];
        pbuf *q = &pb[i];
        uint8_t tag[16];
        tag_of(p->entry.key, p->entry.key_len, p->hash, tag);
        size_t ekl = entry_key(q->ek, tag, p->hash);
        size_t vkl = p->vary_names || p->remove_vary ? vary_key(q->vk, p->vary_hash) : 0;
        bool drop = p->remove_only || cr_store_too_large(p, limit_bytes);
        bool multi = drop ? p->remove_vary : p->vary_names || p->remove_vary;
        if (multi) wcmd(&w, 1, S("MULTI"));
        if (drop) {
            wcmd(&w, 2, S("DEL"), q->ek, ekl);
            if (!p->remove_only) skipped++;
        } else {
            int64_t ttl = p->entry.discard_ms - now_ms;
            if (ttl < 1) ttl = 1;
            size_t tl = (size_t)snprintf(q->ttl, sizeof q->ttl, "%lld", (long long)ttl);
            size_t size = cr_entry_encoded_size(p);
            if (!(q->value = malloc(size))) {
                rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
                goto done;
            }
            cr_entry_encode(p, q->value, size);
            wcmd(&w, 5, S("SET"), q->ek, ekl, (const char *)q->value, size, S("PX"), q->ttl, tl);
            written++;
            if (p->vary_names) {
                /* The record lives as long as its longest-lived variant: NX sets a TTL on a new
                 * record, GT only lengthens an existing one (Redis >= 7.0). */
                wcmd(&w, 4, S("SET"), q->vk, vkl, p->vary_names, strlen(p->vary_names), S("KEEPTTL"));
                wcmd(&w, 4, S("PEXPIRE"), q->vk, vkl, q->ttl, tl, S("NX"));
                wcmd(&w, 4, S("PEXPIRE"), q->vk, vkl, q->ttl, tl, S("GT"));
            }
        }
        if (p->remove_vary) wcmd(&w, 2, S("DEL"), q->vk, vkl);
        if (multi) wcmd(&w, 1, S("EXEC"));
    }
    redisReply **reps = calloc(w.ncmd, sizeof *reps);
    if (!reps) {
        rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        goto done;
    }
    rc = cr_redis_run(RB(b), w.cmds, w.ncmd, reps, 0, err);
    for (size_t i = 0; rc == COURIER_OK && i < w.ncmd; i++) {
        rc = cr_redis_reply_check(reps[i], "a cache write", err);
        if (rc == COURIER_OK && reps[i]->type == REDIS_REPLY_ARRAY) /* EXEC: each command's reply */
            for (size_t k = 0; rc == COURIER_OK && k < reps[i]->elements; k++)
                rc = cr_redis_reply_check(reps[i]->element[k], "a cache write", err);
    }
    cr_redis_replies_free(reps, w.ncmd);
    free(reps);
    if (rc == COURIER_OK) {
        effect->written = written;
        effect->skipped = skipped;
    }
done:
    if (pb)
        for (size_t i = 0; i < n; i++) free(pb[i].value);
    free(pb);
    free(w.cmds);
    free(w.argv);
    free(w.lens);
    return rc;
}

static int rb_remove(cr_cache_store *b, const char *key, size_t key_len, const uint8_t hash[16], courier_error *err) {
    uint8_t tag[16];
    tag_of(key, key_len, hash, tag);
    char k[RK_LEN + 1];
    const char *argv[2] = {"DEL", k};
    size_t lens[2] = {3, entry_key(k, tag, hash)};
    cr_redis_cmd cmd = {2, argv, lens};
    redisReply *rep = NULL;
    int rc = cr_redis_run(RB(b), &cmd, 1, &rep, 0, err);
    if (rc == COURIER_OK) rc = cr_redis_reply_check(rep, "DEL", err);
    if (rc == COURIER_OK && (rep->type != REDIS_REPLY_INTEGER || rep->integer == 0))
        rc = cr_fail(err, COURIER_E_NOT_FOUND, "no cache entry");
    cr_redis_replies_free(&rep, 1);
    return rc;
}

/* ---- the manager's scans -------------------------------------------------------------------------- */

/* Whether a key name is an entry's, and its hash (from the name). */
static bool entry_name(const redisReply *k, uint8_t hash[16]) {
    if (k->type != REDIS_REPLY_STRING || k->len != RK_LEN || memcmp(k->str + RK_PREFIX_LEN + 33, "}:e:", 4) != 0)
        return false;
    const char *h = k->str + RK_PREFIX_LEN + 37;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return false;
        hash[i] = (uint8_t)v;
    }
    return true;
}

/* Called with each batch of key names SCAN returns (an array reply); may send commands. */
typedef int (*scan_fn)(redis_backend *b, const redisReply *keys, void *ctx, courier_error *err);

/* Walks every shard (one server, or each master of a cluster) with SCAN. */
static int scan(redis_backend *b, const char *pattern, scan_fn fn, void *ctx, courier_error *err) {
    int shards = 0;
    int rc = cr_redis_shards(b->r, &shards, err);
    for (int shard = 0; rc == COURIER_OK && shard < shards; shard++) {
    char cursor[32] = "0";
    do {
        const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
        size_t lens[6] = {4, strlen(cursor), 5, strlen(pattern), 5, sizeof SCAN_COUNT - 1};
        cr_redis_cmd cmd = {6, argv, lens};
        redisReply *rep = NULL;
        rc = cr_redis_run_shard(b->r, shard, &cmd, 1, &rep, CR_REDIS_READ, err);
        if (rc == COURIER_OK) rc = cr_redis_reply_check(rep, "SCAN", err);
        if (rc == COURIER_OK && (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
                                 rep->element[0]->type != REDIS_REPLY_STRING || rep->element[1]->type != REDIS_REPLY_ARRAY))
            rc = cr_fail(err, COURIER_E_REDIS, "Redis answered SCAN with something else than a cursor and keys");
        if (rc == COURIER_OK) {
            snprintf(cursor, sizeof cursor, "%.*s", (int)rep->element[0]->len, rep->element[0]->str);
            if (rep->element[1]->elements) rc = fn(b, rep->element[1], ctx, err);
        }
        cr_redis_replies_free(&rep, 1);
        if (rc) return rc;
    } while (strcmp(cursor, "0") != 0);
    }
    return rc;
}

/* One command per key of the batch ("GET k", "STRLEN k", "DEL k"), pipelined; replies[] new. */
static int per_key(redis_backend *b, const redisReply *keys, const char *verb, redisReply ***out, courier_error *err) {
    size_t n = keys->elements;
    cr_redis_cmd *cmds = malloc(n * sizeof *cmds);
    const char **argv = malloc(2 * n * sizeof *argv);
    size_t *lens = malloc(2 * n * sizeof *lens);
    redisReply **reps = calloc(n, sizeof *reps);
    int rc = COURIER_OK;
    if (!cmds || !argv || !lens || !reps) {
        rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    } else {
        for (size_t i = 0; i < n; i++) {
            argv[2 * i] = verb;
            lens[2 * i] = strlen(verb);
            argv[2 * i + 1] = keys->element[i]->str;
            lens[2 * i + 1] = keys->element[i]->len;
            cmds[i] = (cr_redis_cmd){2, &argv[2 * i], &lens[2 * i]};
        }
        rc = cr_redis_run(b->r, cmds, n, reps, 0, err);
    }
    free(cmds);
    free(argv);
    free(lens);
    if (rc) {
        free(reps);
        return rc;
    }
    *out = reps;
    return COURIER_OK;
}

static void per_key_free(redisReply **reps, size_t n) {
    cr_redis_replies_free(reps, n);
    free(reps);
}

/* A set of the entries already seen (SCAN may return a key twice). */
static bool first_time(cr_idset *seen, const uint8_t hash[16]) {
    uint64_t id;
    memcpy(&id, hash, 8);
    id |= 1;
    if (id == UINT64_MAX) id--;
    if (cr_idset_has(seen, id)) return false;
    cr_idset_add(seen, id);
    return true;
}

typedef struct removal {
    int mode; /* 0: all, 1: created >= t, 2: discard <= t */
    int64_t t;
    int64_t removed;
} removal;

static int remove_batch(redis_backend *b, const redisReply *keys, void *ctx, courier_error *err) {
    removal *m = ctx;
    size_t n = keys->elements;
    redisReply **vals = NULL;
    if (m->mode) {
        int rc = per_key(b, keys, "GET", &vals, err);
        if (rc) return rc;
    }
    /* The keys to remove, as a batch of their own for one DEL each. */
    redisReply sel = {0};
    redisReply **picked = malloc(n * sizeof *picked);
    if (!picked) {
        if (vals) per_key_free(vals, n);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t h[16];
        if (!entry_name(keys->element[i], h) && m->mode) continue; /* by time: entries only */
        if (m->mode) {
            cr_entry e;
            if (vals[i]->type != REDIS_REPLY_STRING || !cr_entry_decode(vals[i]->str, vals[i]->len, false, &e)) continue;
            if (m->mode == 1 ? e.created_ms < m->t : e.discard_ms > m->t) continue;
        }
        picked[np++] = keys->element[i];
    }
    int rc = COURIER_OK;
    if (np) {
        sel.type = REDIS_REPLY_ARRAY;
        sel.elements = np;
        sel.element = picked;
        redisReply **dels = NULL;
        rc = per_key(b, &sel, "DEL", &dels, err);
        if (rc == COURIER_OK) {
            for (size_t i = 0; i < np; i++) {
                uint8_t h[16];
                if (dels[i]->type == REDIS_REPLY_INTEGER && dels[i]->integer > 0 && entry_name(picked[i], h)) m->removed++;
            }
            per_key_free(dels, np);
        }
    }
    free(picked);
    if (vals) per_key_free(vals, n);
    return rc;
}

static int rb_remove_by(cr_cache_store *b, int mode, int64_t t, int64_t *removed, courier_error *err) {
    removal m = {mode, t, 0};
    int rc = scan((redis_backend *)b, mode ? RK_PREFIX "*}:e:*" : RK_PREFIX "*", remove_batch, &m, err);
    if (removed) *removed = m.removed;
    return rc;
}

static int rb_remove_all(cr_cache_store *b, int64_t *removed, courier_error *err) {
    return rb_remove_by(b, 0, 0, removed, err);
}
static int rb_remove_since(cr_cache_store *b, int64_t since_ms, int64_t *removed, courier_error *err) {
    return rb_remove_by(b, 1, since_ms, removed, err);
}
static int rb_remove_expired(cr_cache_store *b, int64_t now_ms, int64_t *removed, courier_error *err) {
    return rb_remove_by(b, 2, now_ms, removed, err);
}

/* Entries and their bytes (value + 16, as the LMDB totals count key and value); with `verify`,
 * values are read and checked (damaged ones counted apart); with `list`, listed. */
typedef struct tally {
    bool read_values, verify;
    cr_idset seen;
    int64_t entries, bytes, damaged;
    cr_list_item *items;
    size_t count, cap;
    bool list;
} tally;

static int tally_batch(redis_backend *b, const redisReply *keys, void *ctx, courier_error *err) {
    tally *t = ctx;
    size_t n = keys->elements;
    redisReply **reps = NULL;
    int rc = per_key(b, keys, t->read_values ? "GET" : "STRLEN", &reps, err);
    if (rc) return rc;
    for (size_t i = 0; i < n && rc == COURIER_OK; i++) {
        uint8_t h[16];
        if (!entry_name(keys->element[i], h)) continue;
        const redisReply *v = reps[i];
        if (v->type == REDIS_REPLY_ERROR) {
            rc = cr_redis_reply_check(v, "a cache scan", err);
            break;
        }
        if (!first_time(&t->seen, h)) continue;
        if (!t->read_values) {
            if (v->type == REDIS_REPLY_INTEGER && v->integer > 0) {
                t->entries++;
                t->bytes += v->integer + 16;
            }
            continue;
        }
        if (v->type != REDIS_REPLY_STRING) continue; /* gone since the scan */
        cr_entry e;
        if (!cr_entry_decode(v->str, v->len, t->verify, &e)) {
            t->damaged++;
            continue;
        }
        t->entries++;
        t->bytes += (int64_t)e.stored_size;
        if (!t->list) continue;
        if (t->count == t->cap) {
            size_t nc = t->cap ? t->cap * 2 : 64;
            cr_list_item *p = realloc(t->items, nc * sizeof *p);
            if (!p) {
                rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
                break;
            }
            t->items = p;
            t->cap = nc;
        }
        if (cr_list_item_fill(&t->items[t->count++], &e, h)) {
            rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            break;
        }
    }
    per_key_free(reps, n);
    return rc;
}

static int rb_totals(cr_cache_store *b, int64_t *bytes, int64_t *count, courier_error *err) {
    tally t = {0};
    int rc = scan((redis_backend *)b, RK_PREFIX "*}:e:*", tally_batch, &t, err);
    cr_idset_free(&t.seen);
    if (bytes) *bytes = rc ? 0 : t.bytes;
    if (count) *count = rc ? 0 : t.entries;
    return rc;
}

static int rb_verify(cr_cache_store *b, courier_cache_verify_report *r, courier_error *err) {
    tally t = {.read_values = true, .verify = true};
    int rc = scan((redis_backend *)b, RK_PREFIX "*}:e:*", tally_batch, &t, err);
    cr_idset_free(&t.seen);
    if (rc) return rc;
    /* No index and no totals of its own on Redis: the totals are the scan's. */
    r->entries = r->total_entries = t.entries;
    r->bytes = r->total_bytes = t.bytes;
    r->damaged = t.damaged;
    r->problems = t.damaged;
    return t.damaged ? cr_fail(err, COURIER_E_CACHE_INCONSISTENT, "%lld damaged entries", (long long)t.damaged)
                     : COURIER_OK;
}

static int rb_list(cr_cache_store *b, cr_list_item **items, size_t *count, courier_error *err) {
    tally t = {.read_values = true, .list = true};
    int rc = scan((redis_backend *)b, RK_PREFIX "*}:e:*", tally_batch, &t, err);
    cr_idset_free(&t.seen);
    if (rc) {
        cr_list_items_free(t.items, t.count);
        return rc;
    }
    *items = t.items;
    *count = t.count;
    return COURIER_OK;
}

static const cr_store_ops redis_ops = {
    .name = "redis",
    .release = rb_release,
    .read_begin = rb_read_begin,
    .read_end = rb_read_end,
    .get = rb_get,
    .vary_get = rb_vary_get,
    .write = rb_write,
    .remove = rb_remove,
    .remove_all = rb_remove_all,
    .remove_since = rb_remove_since,
    .remove_expired = rb_remove_expired,
    .totals = rb_totals,
    .verify = rb_verify,
    .list = rb_list,
};

int cr_store_open_redis(const char *url, int64_t timeout_ms, cr_cache_store **out, courier_error *err) {
    *out = NULL;
    redis_backend *b = calloc(1, sizeof *b);
    if (!b) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    int rc = cr_redis_open(url, timeout_ms, &b->r, err);
    if (rc) {
        free(b);
        return rc;
    }
    b->base.ops = &redis_ops;
    *out = &b->base;
    return COURIER_OK;
}

#else /* no hiredis */

int cr_store_open_redis(const char *url, int64_t timeout_ms, cr_cache_store **out, courier_error *err) {
    *out = NULL;
    cr_redis *r = NULL;
    return cr_redis_open(url, timeout_ms, &r, err); /* COURIER_E_REDIS_UNSUPPORTED (or a bad URL) */
}

#endif
