/*
 * cache_store_test.c — the cache's LMDB store through the manager API: put/get by key, exact
 * totals, expiry with an injected clock, removal, the size limit and eviction, a full map, corrupt
 * and newer-format stores moved aside, two engines on one store, and several processes (fork):
 * concurrent writers and readers, and a writer killed with SIGKILL in the middle of its writes;
 * more reading threads than the store keeps read transactions for, and a map grown by another
 * process while this one reads.
 */
#include "harness.h"
#include "log_lines.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Atomic int64_t clock_offset_ms;
static int64_t test_clock(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + atomic_load(&clock_offset_ms);
}

static const char *store_dir;
static int64_t max_bytes;

static void tweak(courier_config *cfg) {
    courier_config_set_store_dir(cfg, store_dir);
    courier_config_set_clock(cfg, test_clock, NULL, NULL);
    if (max_bytes) courier_config_set_cache_max_bytes(cfg, max_bytes);
}

static courier_engine *open_engine(const char *dir, int64_t limit) {
    store_dir = dir;
    max_bytes = limit;
    return th_engine(tweak);
}

/* A body whose every byte follows from the key, so a torn body is detected. */
static size_t make_body(const char *key, size_t len, char *out) {
    unsigned h = 2166136261u;
    for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    for (size_t i = 0; i < len; i++) {
        h = h * 1103515245u + 12345u;
        out[i] = (char)('a' + (h >> 16) % 26);
    }
    return len;
}

static int put_text(courier_engine *e, const char *key, const char *body, int64_t expiry_s) {
    const char *names[] = {"Content-Type", "X-Test"};
    const char *values[] = {"text/plain", "yes"};
    return courier_cache_put_key(e, key, 200, names, values, 2, body, strlen(body), expiry_s * 1000, NULL);
}

static void test_put_get_by_key(void) {
    courier_engine *e = open_engine(th_tmpdir(), 0);
    REQUIRE(e);
    CHECK_EQ(put_text(e, "GET http://example.test/a?x=1", "hello", 60), COURIER_OK);
    courier_response *r = NULL;
    courier_error err;
    CHECK_EQ(courier_cache_get_key(&r, e, "GET http://example.test/a?x=1", 0, &err), COURIER_OK);
    REQUIRE(r);
    CHECK_EQ(courier_response_status(r), 200);
    size_t len = 0;
    CHECK_STR((const char *)courier_response_body(r, &len), "hello");
    CHECK_EQ(len, 5);
    CHECK_STR(courier_response_header(r, "x-test"), "yes");
    CHECK_STR(courier_response_method(r), "GET");
    CHECK_STR(courier_response_url(r), "http://example.test/a?x=1");
    CHECK_STR(courier_response_cache_key(r), "GET http://example.test/a?x=1");
    CHECK(courier_response_from_cache(r));
    CHECK_EQ(courier_response_cache_status(r), COURIER_CACHE_STATUS_HIT);
    CHECK(courier_response_cache_expires(r) > courier_response_cache_created(r));
    courier_response_free(r);

    int has = -1;
    CHECK_EQ(courier_cache_has_key(&has, e, "GET http://example.test/a?x=1", NULL), COURIER_OK);
    CHECK_EQ(has, 1);
    CHECK_EQ(courier_cache_has_key(&has, e, "GET http://example.test/a?x=2", NULL), COURIER_OK);
    CHECK_EQ(has, 0);
    CHECK_EQ(courier_cache_get_key(&r, e, "nope", 0, &err), COURIER_E_NOT_FOUND);
    CHECK(r == NULL);
    CHECK_EQ(err.code, COURIER_E_NOT_FOUND);

    /* Bad arguments. */
    CHECK_EQ(courier_cache_put_key(e, "", 200, NULL, NULL, 0, "x", 1, 0, NULL), COURIER_E_INVALID_ARGUMENT);
    const char *bad_names[] = {"Bad Name"};
    const char *bad_values[] = {"v"};
    CHECK_EQ(courier_cache_put_key(e, "k", 200, bad_names, bad_values, 1, "x", 1, 0, NULL), COURIER_E_INVALID_HEADER);
    courier_engine_close(e);
}

static void check_totals_match_list(courier_engine *e) {
    int64_t bytes = -1, count = -1;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    courier_cache_list *l = NULL;
    REQUIRE(courier_cache_list_entries(&l, e, NULL) == COURIER_OK);
    int64_t sum = 0;
    for (size_t i = 0; i < courier_cache_list_count(l); i++) {
        courier_cache_entry_info info = {.size = sizeof info};
        CHECK_EQ(courier_cache_list_at(&info, l, i), COURIER_OK);
        sum += info.bytes;
        CHECK(strlen(info.id) == 32);
    }
    CHECK_EQ(count, (int64_t)courier_cache_list_count(l));
    CHECK_EQ(bytes, sum);
    courier_cache_entry_info info = {.size = sizeof info};
    CHECK_EQ(courier_cache_list_at(&info, l, courier_cache_list_count(l)), COURIER_E_NOT_FOUND);
    courier_cache_list_free(l);
}

static void test_totals_are_exact(void) {
    courier_engine *e = open_engine(th_tmpdir(), 0);
    REQUIRE(e);
    char key[64];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(put_text(e, key, "body", 60), COURIER_OK);
    }
    for (int i = 0; i < 10; i++) { /* overwrite with a longer body */
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(put_text(e, key, "a longer body than before", 60), COURIER_OK);
    }
    for (int i = 40; i < 50; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(courier_cache_remove_key(e, key, NULL), COURIER_OK);
    }
    CHECK_EQ(courier_cache_remove_key(e, "k45", NULL), COURIER_E_NOT_FOUND);
    int64_t count = 0;
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 40);
    check_totals_match_list(e);
    int64_t removed = -1;
    CHECK_EQ(courier_cache_remove_all(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 40);
    int64_t bytes = -1;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(bytes, 0);
    CHECK_EQ(count, 0);
    courier_engine_close(e);
}

static void test_expiry_uses_the_clock(void) {
    atomic_store(&clock_offset_ms, 0);
    courier_engine *e = open_engine(th_tmpdir(), 0);
    REQUIRE(e);
    CHECK_EQ(put_text(e, "short", "s", 10), COURIER_OK);
    CHECK_EQ(put_text(e, "long", "l", 1000), COURIER_OK);
    int has = 0;
    courier_cache_has_key(&has, e, "short", NULL);
    CHECK_EQ(has, 1);
    atomic_store(&clock_offset_ms, 11 * 1000); /* 11 s later, without sleeping */
    courier_cache_has_key(&has, e, "short", NULL);
    CHECK_EQ(has, 0);
    courier_cache_has_key(&has, e, "long", NULL);
    CHECK_EQ(has, 1);
    courier_response *r = NULL;
    CHECK_EQ(courier_cache_get_key(&r, e, "short", 0, NULL), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_cache_get_key(&r, e, "short", COURIER_CACHE_ALLOW_STALE, NULL), COURIER_OK);
    REQUIRE(r);
    CHECK_EQ(courier_response_cache_status(r), COURIER_CACHE_STATUS_STALE);
    CHECK_EQ(courier_response_age_ms(r), 11000);
    courier_response_free(r);
    /* A clock set back before the write must not make an entry fresh forever. */
    atomic_store(&clock_offset_ms, -3600 * 1000);
    courier_cache_has_key(&has, e, "long", NULL);
    CHECK_EQ(has, 0);
    atomic_store(&clock_offset_ms, 11 * 1000);

    int64_t removed = 0;
    CHECK_EQ(courier_cache_remove_expired(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 1);
    int64_t count = 0;
    courier_cache_size(NULL, &count, e, NULL);
    CHECK_EQ(count, 1);
    atomic_store(&clock_offset_ms, 0);
    courier_engine_close(e);
}

static void test_remove_since(void) {
    atomic_store(&clock_offset_ms, 0);
    courier_engine *e = open_engine(th_tmpdir(), 0);
    REQUIRE(e);
    CHECK_EQ(put_text(e, "old1", "x", 600), COURIER_OK);
    CHECK_EQ(put_text(e, "old2", "x", 600), COURIER_OK);
    atomic_store(&clock_offset_ms, 100 * 1000);
    int64_t mark = test_clock(NULL);
    CHECK_EQ(put_text(e, "new1", "x", 600), COURIER_OK);
    CHECK_EQ(put_text(e, "new2", "x", 600), COURIER_OK);
    CHECK_EQ(put_text(e, "new3", "x", 600), COURIER_OK);
    int64_t removed = 0;
    CHECK_EQ(courier_cache_remove_since(&removed, e, mark, NULL), COURIER_OK);
    CHECK_EQ(removed, 3);
    int has = 0;
    courier_cache_has_key(&has, e, "old1", NULL);
    CHECK_EQ(has, 1);
    courier_cache_has_key(&has, e, "new2", NULL);
    CHECK_EQ(has, 0);
    check_totals_match_list(e);
    atomic_store(&clock_offset_ms, 0);
    courier_engine_close(e);
}

static void test_eviction_expired_first_then_oldest(void) {
    atomic_store(&clock_offset_ms, 0);
    courier_engine *e = open_engine(th_tmpdir(), 256 * 1024);
    REQUIRE(e);
    char body[1024], key[64];
    /* 20 entries that expire soon, then 40 long-lived ones. */
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "soon%d", i);
        make_body(key, sizeof body, body);
        CHECK_EQ(courier_cache_put_key(e, key, 200, NULL, NULL, 0, body, sizeof body, 5000, NULL), COURIER_OK);
    }
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "keep%d", i);
        make_body(key, sizeof body, body);
        CHECK_EQ(courier_cache_put_key(e, key, 200, NULL, NULL, 0, body, sizeof body, 3600000, NULL), COURIER_OK);
    }
    atomic_store(&clock_offset_ms, 10 * 1000); /* the "soon" entries are now expired */
    /* Fill past the limit: the expired go first, then the least recently written. Eviction goes
     * to just under the limit, a few entries at a time. */
    int checked = 0, checked_first = 0;
    for (int i = 0; i < 400; i++) {
        snprintf(key, sizeof key, "fill%d", i);
        make_body(key, sizeof body, body);
        CHECK_EQ(courier_cache_put_key(e, key, 200, NULL, NULL, 0, body, sizeof body, 3600000, NULL), COURIER_OK);
        courier_cache_stats st = {.size = sizeof st};
        courier_cache_get_stats(&st, e, NULL);
        if (!checked_first && st.evictions > 0) {
            /* The first eviction took a few entries, expired ones: every long-lived one stays. */
            checked_first = 1;
            CHECK(st.evictions < 20);
            for (int k = 0; k < 40; k++) {
                int has = 0;
                snprintf(key, sizeof key, "keep%d", k);
                courier_cache_has_key(&has, e, key, NULL);
                CHECK_EQ(has, 1);
            }
        }
        if (!checked && st.evictions > 20) {
            /* Every expired entry went before the first long-lived one, the least recently written. */
            checked = 1;
            courier_response *r = NULL;
            CHECK_EQ(courier_cache_get_key(&r, e, "soon19", COURIER_CACHE_ALLOW_STALE, NULL), COURIER_E_NOT_FOUND);
            CHECK_EQ(courier_cache_get_key(&r, e, "soon0", COURIER_CACHE_ALLOW_STALE, NULL), COURIER_E_NOT_FOUND);
            CHECK_EQ(courier_cache_get_key(&r, e, "keep39", 0, NULL), COURIER_OK);
            courier_response_free(r);
            r = NULL;
            CHECK_EQ(courier_cache_get_key(&r, e, "keep0", 0, NULL), COURIER_E_NOT_FOUND);
            CHECK(st.evictions < 30);
        }
    }
    CHECK_EQ(checked_first, 1);
    CHECK_EQ(checked, 1);
    int64_t bytes = 0, count = 0;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK(bytes <= 256 * 1024);
    CHECK(count > 100);
    int has = 0;
    courier_cache_has_key(&has, e, "keep0", NULL); /* least recently written: evicted */
    CHECK_EQ(has, 0);
    courier_cache_has_key(&has, e, "fill399", NULL); /* the newest stays */
    CHECK_EQ(has, 1);
    courier_cache_stats st = {.size = sizeof st};
    CHECK_EQ(courier_cache_get_stats(&st, e, NULL), COURIER_OK);
    CHECK(st.evictions >= 460 - count);
    CHECK_EQ(st.writes, 460);
    CHECK_EQ(st.count, count);
    CHECK_EQ(st.max_bytes, 256 * 1024);
    check_totals_match_list(e);

    /* A body over an eighth of the limit is not kept, and does not empty the cache. */
    static char big[40 * 1024];
    memset(big, 'b', sizeof big);
    CHECK_EQ(courier_cache_put_key(e, "big", 200, NULL, NULL, 0, big, sizeof big, 3600000, NULL), COURIER_OK);
    courier_cache_has_key(&has, e, "big", NULL);
    CHECK_EQ(has, 0);
    int64_t count2 = 0;
    courier_cache_size(NULL, &count2, e, NULL);
    CHECK_EQ(count2, count);
    atomic_store(&clock_offset_ms, 0);
    courier_engine_close(e);
}

/* The first engine of the process sizes the map from its small limit; a second engine on the same
 * store with a large limit fills the map: MAP_FULL evicts and retries, never an error. */
static void test_map_full_never_fails(void) {
    const char *dir = th_tmpdir();
    courier_engine *small = open_engine(dir, 64 * 1024); /* map = 4 * 64 KiB + 8 MiB */
    courier_engine *large = open_engine(dir, (int64_t)1 << 30);
    REQUIRE(small && large);
    CHECK_EQ(put_text(small, "first", "opens the store", 60), COURIER_OK);
    static char body[200 * 1024];
    char key[64];
    for (int i = 0; i < 200; i++) { /* 40 MiB through a 9 MiB map */
        snprintf(key, sizeof key, "big%d", i);
        make_body(key, sizeof body, body);
        CHECK_EQ(courier_cache_put_key(large, key, 200, NULL, NULL, 0, body, sizeof body, 3600000, NULL), COURIER_OK);
    }
    int has = 0;
    CHECK_EQ(courier_cache_has_key(&has, large, "big199", NULL), COURIER_OK);
    CHECK_EQ(has, 1);
    courier_response *r = NULL;
    CHECK_EQ(courier_cache_get_key(&r, small, "big199", 0, NULL), COURIER_OK);
    if (r) {
        size_t len = 0;
        const uint8_t *b = courier_response_body(r, &len);
        make_body("big199", sizeof body, body);
        CHECK_EQ(len, sizeof body);
        CHECK(memcmp(b, body, sizeof body) == 0);
    }
    courier_response_free(r);
    courier_cache_stats st = {.size = sizeof st};
    courier_cache_get_stats(&st, large, NULL);
    CHECK(st.evictions > 0);
    check_totals_match_list(large);
    courier_engine_close(small);
    courier_engine_close(large);
}

static void test_two_engines_share_one_store(void) {
    const char *dir = th_tmpdir();
    courier_engine *a = open_engine(dir, 0);
    courier_engine *b = open_engine(dir, 0);
    REQUIRE(a && b);
    CHECK_EQ(put_text(a, "shared", "from a", 60), COURIER_OK);
    courier_response *r = NULL;
    CHECK_EQ(courier_cache_get_key(&r, b, "shared", 0, NULL), COURIER_OK);
    if (r) CHECK_STR((const char *)courier_response_body(r, NULL), "from a");
    courier_response_free(r);
    courier_engine_close(a);
    /* b still works after a closed. */
    CHECK_EQ(put_text(b, "after", "b", 60), COURIER_OK);
    int64_t count = 0;
    CHECK_EQ(courier_cache_size(NULL, &count, b, NULL), COURIER_OK);
    CHECK_EQ(count, 2);
    courier_engine_close(b);
}

static int count_broken(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "cache.broken-", 13) == 0) n++;
    closedir(d);
    return n;
}

static void test_garbage_store_is_moved_aside(void) {
    const char *dir = th_tmpdir();
    courier_engine *e = open_engine(dir, 0);
    REQUIRE(e);
    CHECK_EQ(put_text(e, "before", "x", 60), COURIER_OK);
    courier_engine_close(e);

    char path[600];
    snprintf(path, sizeof path, "%s/cache/data.mdb", dir);
    int fd = open(path, O_WRONLY | O_TRUNC);
    REQUIRE(fd >= 0);
    char junk[16384];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 7 + 13);
    CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
    close(fd);

    e = open_engine(dir, 0);
    REQUIRE(e);
    int64_t count = -1;
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK); /* a fresh, empty cache */
    CHECK_EQ(count, 0);
    CHECK_EQ(put_text(e, "after", "y", 60), COURIER_OK);
    int has = 0;
    courier_cache_has_key(&has, e, "after", NULL);
    CHECK_EQ(has, 1);
    CHECK_EQ(count_broken(dir), 1);
    courier_engine_close(e);

    /* A truncated file, too. */
    snprintf(path, sizeof path, "%s/cache/data.mdb", dir);
    CHECK(truncate(path, 100) == 0);
    e = open_engine(dir, 0);
    REQUIRE(e);
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    CHECK_EQ(count_broken(dir), 2);
    courier_engine_close(e);
}

/* Writes a newer format number into the store's meta database with LMDB itself (loaded at run
 * time: the tests link only the Courier library). */
static void test_newer_format_is_moved_aside(void) {
    void *lib = dlopen("liblmdb.so.0", RTLD_NOW);
    if (!lib) lib = dlopen("liblmdb.so", RTLD_NOW);
    if (!lib) {
        printf("  (skipped: liblmdb not loadable)\n");
        return;
    }
    int (*env_create)(void **) = (int (*)(void **))dlsym(lib, "mdb_env_create");
    int (*env_set_maxdbs)(void *, unsigned) = (int (*)(void *, unsigned))dlsym(lib, "mdb_env_set_maxdbs");
    int (*env_open)(void *, const char *, unsigned, int) = (int (*)(void *, const char *, unsigned, int))dlsym(lib, "mdb_env_open");
    void (*env_close)(void *) = (void (*)(void *))dlsym(lib, "mdb_env_close");
    int (*txn_begin)(void *, void *, unsigned, void **) = (int (*)(void *, void *, unsigned, void **))dlsym(lib, "mdb_txn_begin");
    int (*dbi_open)(void *, const char *, unsigned, unsigned *) = (int (*)(void *, const char *, unsigned, unsigned *))dlsym(lib, "mdb_dbi_open");
    typedef struct { size_t size; void *data; } val;
    int (*put)(void *, unsigned, val *, val *, unsigned) = (int (*)(void *, unsigned, val *, val *, unsigned))dlsym(lib, "mdb_put");
    int (*commit)(void *) = (int (*)(void *))dlsym(lib, "mdb_txn_commit");
    REQUIRE(env_create && env_set_maxdbs && env_open && env_close && txn_begin && dbi_open && put && commit);

    const char *dir = th_tmpdir();
    courier_engine *e = open_engine(dir, 0);
    REQUIRE(e);
    CHECK_EQ(put_text(e, "old", "x", 60), COURIER_OK);
    courier_engine_close(e);

    char path[600];
    snprintf(path, sizeof path, "%s/cache", dir);
    void *env = NULL, *txn = NULL;
    unsigned dbi = 0;
    REQUIRE(env_create(&env) == 0);
    env_set_maxdbs(env, 8);
    REQUIRE(env_open(env, path, 0x400000 /* MDB_NOTLS */, 0600) == 0);
    REQUIRE(txn_begin(env, NULL, 0, &txn) == 0);
    REQUIRE(dbi_open(txn, "meta", 0, &dbi) == 0);
    uint32_t future = 99;
    val k = {6, "format"}, v = {4, &future};
    CHECK_EQ(put(txn, dbi, &k, &v, 0), 0);
    CHECK_EQ(commit(txn), 0);
    env_close(env);
    dlclose(lib);

    e = open_engine(dir, 0);
    REQUIRE(e);
    int64_t count = -1;
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    CHECK_EQ(count_broken(dir), 1);
    CHECK_EQ(put_text(e, "new", "y", 60), COURIER_OK);
    courier_engine_close(e);
}

/* A store of format 1 (entries, expiry and order in named databases, the totals in meta) is
 * upgraded in place when opened: every entry stays readable, the totals are rebuilt exact, and
 * the rebuilt expiry index purges. The format 1 store is made from a current one with LMDB itself:
 * the entries move into a named "entries" database, the index records and totals are dropped. Then
 * clearing the store (which drops LMDB's main database whole) leaves it opening cleanly. */
static void test_format1_store_is_upgraded(void) {
    void *lib = dlopen("liblmdb.so.0", RTLD_NOW);
    if (!lib) lib = dlopen("liblmdb.so", RTLD_NOW);
    if (!lib) {
        printf("  (skipped: liblmdb not loadable)\n");
        return;
    }
    typedef struct { size_t size; void *data; } val;
    int (*env_create)(void **) = (int (*)(void **))dlsym(lib, "mdb_env_create");
    int (*env_set_maxdbs)(void *, unsigned) = (int (*)(void *, unsigned))dlsym(lib, "mdb_env_set_maxdbs");
    int (*env_open)(void *, const char *, unsigned, int) = (int (*)(void *, const char *, unsigned, int))dlsym(lib, "mdb_env_open");
    void (*env_close)(void *) = (void (*)(void *))dlsym(lib, "mdb_env_close");
    int (*txn_begin)(void *, void *, unsigned, void **) = (int (*)(void *, void *, unsigned, void **))dlsym(lib, "mdb_txn_begin");
    int (*dbi_open)(void *, const char *, unsigned, unsigned *) = (int (*)(void *, const char *, unsigned, unsigned *))dlsym(lib, "mdb_dbi_open");
    int (*put)(void *, unsigned, val *, val *, unsigned) = (int (*)(void *, unsigned, val *, val *, unsigned))dlsym(lib, "mdb_put");
    int (*del)(void *, unsigned, val *, val *) = (int (*)(void *, unsigned, val *, val *))dlsym(lib, "mdb_del");
    int (*cursor_open)(void *, unsigned, void **) = (int (*)(void *, unsigned, void **))dlsym(lib, "mdb_cursor_open");
    int (*cursor_get)(void *, val *, val *, int) = (int (*)(void *, val *, val *, int))dlsym(lib, "mdb_cursor_get");
    void (*cursor_close)(void *) = (void (*)(void *))dlsym(lib, "mdb_cursor_close");
    int (*commit)(void *) = (int (*)(void *))dlsym(lib, "mdb_txn_commit");
    REQUIRE(env_create && env_set_maxdbs && env_open && env_close && txn_begin && dbi_open && put && del &&
            cursor_open && cursor_get && cursor_close && commit);

    const char *dir = th_tmpdir();
    courier_engine *e = open_engine(dir, 0);
    REQUIRE(e);
    char key[32];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(put_text(e, key, key, i < 5 ? 10 : 3600), COURIER_OK);
    }
    int64_t bytes_before = -1, count = -1;
    CHECK_EQ(courier_cache_size(&bytes_before, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 20);
    courier_engine_close(e);

    char path[600];
    snprintf(path, sizeof path, "%s/cache", dir);
    void *env = NULL, *txn = NULL, *cur = NULL;
    unsigned main_dbi = 0, entries = 0, expiry = 0, order = 0, meta = 0;
    REQUIRE(env_create(&env) == 0);
    env_set_maxdbs(env, 8);
    REQUIRE(env_open(env, path, 0x200000 /* MDB_NOTLS */, 0600) == 0);
    REQUIRE(txn_begin(env, NULL, 0, &txn) == 0);
    REQUIRE(dbi_open(txn, NULL, 0, &main_dbi) == 0);
    REQUIRE(dbi_open(txn, "entries", 0x40000 /* MDB_CREATE */, &entries) == 0);
    REQUIRE(dbi_open(txn, "expiry", 0x40000, &expiry) == 0);
    REQUIRE(dbi_open(txn, "order", 0x40000, &order) == 0);
    REQUIRE(dbi_open(txn, "meta", 0, &meta) == 0);
    /* Collect the main database's records first (not deleting under the cursor). */
    enum { MAX = 128 };
    static unsigned char keys[MAX][32];
    static size_t key_len[MAX];
    size_t n = 0, moved = 0;
    REQUIRE(cursor_open(txn, main_dbi, &cur) == 0);
    val k, v;
    for (int op = 0 /* MDB_FIRST */; cursor_get(cur, &k, &v, op) == 0 && n < MAX; op = 8 /* MDB_NEXT */) {
        if (k.size != 16 && k.size != 9 && k.size != 1 && k.size != 25) continue; /* "meta", "vary", ... */
        memcpy(keys[n], k.data, k.size);
        key_len[n++] = k.size;
    }
    cursor_close(cur);
    for (size_t i = 0; i < n; i++) {
        val kk = {key_len[i], keys[i]}, vv;
        if (key_len[i] == 16) {
            REQUIRE(cursor_open(txn, main_dbi, &cur) == 0);
            REQUIRE(cursor_get(cur, &kk, &vv, 15 /* MDB_SET */) == 0);
            static unsigned char copy[4096];
            REQUIRE(vv.size <= sizeof copy);
            memcpy(copy, vv.data, vv.size);
            cursor_close(cur);
            val cv = {vv.size, copy};
            CHECK_EQ(put(txn, entries, &kk, &cv, 0), 0);
            moved++;
        }
        CHECK_EQ(del(txn, main_dbi, &kk, NULL), 0);
    }
    CHECK_EQ(moved, 20);
    uint32_t one = 1;
    uint64_t junk[3] = {1, 2, 3};
    val fk = {6, "format"}, fv = {4, &one}, tk = {6, "totals"}, tv = {sizeof junk, junk};
    CHECK_EQ(put(txn, meta, &fk, &fv, 0), 0);
    CHECK_EQ(put(txn, meta, &tk, &tv, 0), 0);
    CHECK_EQ(commit(txn), 0);
    env_close(env);
    dlclose(lib);

    e = open_engine(dir, 0);
    REQUIRE(e);
    int64_t bytes = -1;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 20);
    CHECK_EQ(bytes, bytes_before);
    CHECK_EQ(count_broken(dir), 0);
    check_totals_match_list(e);
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%d", i);
        courier_response *r = NULL;
        CHECK_EQ(courier_cache_get_key(&r, e, key, 0, NULL), COURIER_OK);
        size_t len = 0;
        if (r) CHECK_STR((const char *)courier_response_body(r, &len), key);
        courier_response_free(r);
    }
    /* The rebuilt expiry index: the five short-lived entries go. */
    atomic_store(&clock_offset_ms, 60 * 1000);
    int64_t removed = -1;
    CHECK_EQ(courier_cache_remove_expired(&removed, e, NULL), COURIER_OK);
    atomic_store(&clock_offset_ms, 0);
    CHECK_EQ(removed, 5);
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 15);
    check_totals_match_list(e);
    CHECK_EQ(put_text(e, "after", "upgrade", 60), COURIER_OK);
    /* Clearing drops the main database whole; the store still opens as itself afterwards. */
    CHECK_EQ(courier_cache_remove_all(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 16);
    courier_engine_close(e);
    e = open_engine(dir, 0);
    REQUIRE(e);
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    CHECK_EQ(bytes, 0);
    CHECK_EQ(count_broken(dir), 0);
    CHECK_EQ(put_text(e, "again", "z", 60), COURIER_OK);
    courier_response *r = NULL;
    CHECK_EQ(courier_cache_get_key(&r, e, "again", 0, NULL), COURIER_OK);
    courier_response_free(r);
    check_totals_match_list(e);
    courier_engine_close(e);
}

/* ---- several processes ------------------------------------------------------------------------ */

/* ThreadSanitizer does not support fork() in a multithreaded process: under it, the tests that
 * fork say so and pass (they run under ASan); the others run. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifdef UNDER_TSAN
#define SKIP_FORK_UNDER_TSAN()                                                       \
    do {                                                                             \
        fprintf(stderr, "  (skipped under ThreadSanitizer: it does not support fork)\n"); \
        return;                                                                      \
    } while (0)
#else
#define SKIP_FORK_UNDER_TSAN() ((void)0)
#endif

/* Writes entries "p<tag>-<i>" with bodies derived from their keys; returns the number of errors. */
static int writer_loop(courier_engine *e, const char *tag, int64_t until_ms, int batch_max) {
    char key[64];
    static char body[6000];
    int errors = 0;
    for (int i = 0; th_now_ms() < until_ms && (batch_max <= 0 || i < batch_max); i++) {
        snprintf(key, sizeof key, "p%s-%d", tag, i % 500);
        size_t len = 100 + (size_t)(i * 37) % (sizeof body - 100);
        make_body(key, len, body);
        if (courier_cache_put_key(e, key, 200, NULL, NULL, 0, body, len, 3600000, NULL) != COURIER_OK) errors++;
        if (i % 7 == 0) {
            courier_response *r = NULL;
            int rc = courier_cache_get_key(&r, e, key, 0, NULL);
            if (rc != COURIER_OK) errors++;
            courier_response_free(r);
        }
    }
    return errors;
}

/* Every listed entry reads back whole: its body is the one its key dictates. */
static void verify_store(courier_engine *e) {
    courier_cache_list *l = NULL;
    REQUIRE(courier_cache_list_entries(&l, e, NULL) == COURIER_OK);
    static char expect[6000];
    size_t n = courier_cache_list_count(l), bad = 0;
    for (size_t i = 0; i < n; i++) {
        courier_cache_entry_info info = {.size = sizeof info};
        courier_cache_list_at(&info, l, i);
        courier_response *r = NULL;
        if (courier_cache_get_key(&r, e, info.key, COURIER_CACHE_ALLOW_STALE, NULL) != COURIER_OK) {
            bad++;
            continue;
        }
        size_t len = 0;
        const uint8_t *b = courier_response_body(r, &len);
        if (len < 100 || len > sizeof expect) bad++;
        else {
            make_body(info.key, len, expect);
            if (memcmp(b, expect, len) != 0) bad++;
        }
        courier_response_free(r);
    }
    CHECK_EQ(bad, 0);
    courier_cache_list_free(l);
    check_totals_match_list(e);
}

static void test_two_processes_write_and_read(void) {
    SKIP_FORK_UNDER_TSAN();
    const char *dir = th_tmpdir();
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        courier_engine *e = open_engine(dir, 4 * 1024 * 1024);
        int errors = e ? writer_loop(e, "child", th_now_ms() + 2000, 0) : 1;
        courier_engine_close(e);
        _exit(errors ? 1 : 0);
    }
    courier_engine *e = open_engine(dir, 4 * 1024 * 1024);
    REQUIRE(e);
    int errors = writer_loop(e, "parent", th_now_ms() + 2000, 0);
    /* And read what the child writes. */
    int seen_child = 0;
    for (int i = 0; i < 500; i++) {
        char key[64];
        snprintf(key, sizeof key, "pchild-%d", i);
        int has = 0;
        if (courier_cache_has_key(&has, e, key, NULL) != COURIER_OK) errors++;
        seen_child += has;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(errors, 0);
    CHECK(seen_child > 0);
    verify_store(e);
    courier_engine_close(e);
}

static void test_kill9_in_the_middle_of_writes(void) {
    SKIP_FORK_UNDER_TSAN();
    const char *dir = th_tmpdir();
    for (int round = 0; round < 3; round++) {
        fflush(NULL);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            courier_engine *e = open_engine(dir, 2 * 1024 * 1024);
            if (e) writer_loop(e, round == 0 ? "a" : round == 1 ? "b" : "c", th_now_ms() + 60000, 0);
            _exit(0);
        }
        usleep(150000 + 100000 * round);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));
    }
    courier_engine *e = open_engine(dir, 2 * 1024 * 1024);
    REQUIRE(e);
    int64_t count = 0;
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK(count > 0);
    CHECK_EQ(count_broken(dir), 0);
    verify_store(e);
    /* And it keeps working. */
    CHECK_EQ(writer_loop(e, "after", th_now_ms() + 60000, 200), 0);
    verify_store(e);
    courier_engine_close(e);
}

/* ---- read transactions: many threads, a map grown by another process ----------------------- */

typedef struct reader_arg {
    courier_engine *e;
    int nkeys;
    atomic_int *stop;
    long reads;
    long errors;
    unsigned seed;
} reader_arg;

/* Reads "rk<i>" entries whose bodies follow from their keys (1000 + i*13 bytes) until told to stop. */
static void *reader_main(void *p) {
    reader_arg *a = p;
    static _Thread_local char expect[8192];
    char key[32];
    while (!atomic_load(a->stop)) {
        a->seed = a->seed * 1103515245u + 12345u;
        int i = (int)((a->seed >> 8) % (unsigned)a->nkeys);
        snprintf(key, sizeof key, "rk%d", i);
        courier_response *r = NULL;
        if (courier_cache_get_key(&r, a->e, key, 0, NULL) != COURIER_OK || !r) {
            a->errors++;
            continue;
        }
        size_t len = 0;
        const uint8_t *b = courier_response_body(r, &len);
        size_t want = 1000 + (size_t)i * 13;
        make_body(key, want, expect);
        if (len != want || memcmp(b, expect, len) != 0 || !courier_response_header(r, "X-Test") ||
            strcmp(courier_response_cache_key(r), key) != 0)
            a->errors++;
        /* A retained response is freed by its last release. */
        courier_response *again = courier_response_retain(r);
        courier_response_free(r);
        courier_response_free(again);
        a->reads++;
    }
    return NULL;
}

static void put_reader_keys(courier_engine *e, int nkeys) {
    static char body[8192];
    const char *names[] = {"Content-Type", "X-Test"};
    const char *values[] = {"text/plain", "yes"};
    char key[32];
    for (int i = 0; i < nkeys; i++) {
        snprintf(key, sizeof key, "rk%d", i);
        size_t len = make_body(key, 1000 + (size_t)i * 13, body);
        CHECK_EQ(courier_cache_put_key(e, key, 200, names, values, 2, body, len, 3600000, NULL), COURIER_OK);
    }
}

/* More reading threads than the store keeps read transactions for (16), and a writer rewriting
 * the same entries: every read is whole, none fails. */
static void test_many_readers_and_a_writer(void) {
    courier_engine *e = open_engine(th_tmpdir(), 0);
    REQUIRE(e);
    enum { NKEYS = 200, NREADERS = 24 };
    put_reader_keys(e, NKEYS);
    atomic_int stop = 0;
    reader_arg args[NREADERS];
    pthread_t th[NREADERS];
    for (int i = 0; i < NREADERS; i++) {
        args[i] = (reader_arg){e, NKEYS, &stop, 0, 0, (unsigned)i * 7919u + 1};
        REQUIRE(pthread_create(&th[i], NULL, reader_main, &args[i]) == 0);
    }
    int64_t until = th_now_ms() + 600;
    int rounds = 0;
    while (th_now_ms() < until || rounds < 2) {
        put_reader_keys(e, NKEYS); /* same keys, same bodies: a reader sees the old or the new one */
        rounds++;
    }
    atomic_store(&stop, 1);
    long reads = 0, errors = 0;
    for (int i = 0; i < NREADERS; i++) {
        pthread_join(th[i], NULL);
        reads += args[i].reads;
        errors += args[i].errors;
    }
    CHECK_EQ(errors, 0);
    CHECK(reads > NREADERS);
    check_totals_match_list(e);
    courier_engine_close(e);
}

/* Another process, whose map is larger, grows the data beyond this process's map while this
 * process's threads read: they adopt the new size (MDB_MAP_RESIZED) and go on without an error;
 * then this process reads and writes beyond its old map. */
static void test_map_grown_by_another_process(void) {
    SKIP_FORK_UNDER_TSAN();
    const char *dir = th_tmpdir();
    /* The child is forked before this process has an engine or reader threads (a fork while other
     * threads allocate can leave the child with a lock of the allocator held: AddressSanitizer's,
     * hung once in a loaded ctest run), and waits on a pipe until the readers run. */
    int go[2];
    REQUIRE(pipe(go) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 1) _exit(2);
        /* The registry forgot the parent's environment: this one is opened with a 1 GiB limit. */
        courier_engine *big = open_engine(dir, (int64_t)1 << 30);
        int errors = big ? 0 : 1;
        static char body[256 * 1024];
        char key[32];
        for (int i = 0; i < 64 && big; i++) { /* 16 MiB: well past the parent's 8.25 MiB map */
            snprintf(key, sizeof key, "grow%d", i);
            make_body(key, sizeof body, body);
            if (courier_cache_put_key(big, key, 200, NULL, NULL, 0, body, sizeof body, 3600000, NULL) != COURIER_OK)
                errors++;
        }
        courier_engine_close(big);
        _exit(errors ? 1 : 0);
    }
    close(go[0]);
    courier_engine *e = open_engine(dir, 64 * 1024); /* map = 4 * 64 KiB + 8 MiB */
    enum { NKEYS = 20, NREADERS = 3 };
    if (e) put_reader_keys(e, NKEYS);
    atomic_int stop = 0;
    reader_arg args[NREADERS];
    pthread_t th[NREADERS];
    int started = 0;
    for (int i = 0; e && i < NREADERS; i++) {
        args[i] = (reader_arg){e, NKEYS, &stop, 0, 0, (unsigned)i * 104729u + 3};
        if (pthread_create(&th[i], NULL, reader_main, &args[i]) == 0) started++;
    }
    /* Grow now (or, when this process could not start, let the child end at once). */
    if (write(go[1], "g", 1) != 1) th_fail(__FILE__, __LINE__, "cannot start the child");
    close(go[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(e && started == NREADERS);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    usleep(100000); /* the readers meet the grown map */
    atomic_store(&stop, 1);
    long errors = 0, reads = 0;
    for (int i = 0; i < NREADERS; i++) {
        pthread_join(th[i], NULL);
        errors += args[i].errors;
        reads += args[i].reads;
    }
    CHECK_EQ(errors, 0);
    CHECK(reads > 0);
    /* The child's last entry lies beyond the old map. */
    courier_response *r = NULL;
    CHECK_EQ(courier_cache_get_key(&r, e, "grow63", 0, NULL), COURIER_OK);
    if (r) {
        static char expect[256 * 1024];
        size_t len = 0;
        const uint8_t *b = courier_response_body(r, &len);
        make_body("grow63", sizeof expect, expect);
        CHECK_EQ(len, sizeof expect);
        CHECK(memcmp(b, expect, sizeof expect) == 0);
    }
    courier_response_free(r);
    CHECK_EQ(put_text(e, "after-grow", "still writes", 60), COURIER_OK);
    CHECK_EQ(courier_cache_get_key(&r, e, "after-grow", 0, NULL), COURIER_OK);
    if (r) CHECK_STR((const char *)courier_response_body(r, NULL), "still writes");
    courier_response_free(r);
    courier_engine_close(e);
}

/* ---- issue 28 bug 9: a store that cannot be opened fails the open; nothing on stderr ---------- */

/* fd 2 sent to a file of its own from stderr_begin to stderr_end, which returns the bytes written
 * there (the library must write none). */
static char stderr_path[700];
static int stderr_begin(void) {
    fflush(stderr);
    snprintf(stderr_path, sizeof stderr_path, "%s/stderr.txt", th_tmpdir());
    int saved = dup(2), fd = open(stderr_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0) th_fail(__FILE__, __LINE__, "cannot redirect fd 2");
    dup2(fd, 2);
    close(fd);
    return saved;
}
static long stderr_end(int saved) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    return stat(stderr_path, &st) == 0 ? (long)st.st_size : -1;
}

static int open_with_cache(courier_engine **e, const char *dir, const char *cache_store, int policy,
                           courier_error *err) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_store_dir(cfg, dir);
    if (cache_store) CHECK_EQ(courier_config_set_cache_store(cfg, cache_store), COURIER_OK);
    if (policy) courier_config_set_cache_policy(cfg, (courier_cache_policy)policy);
    int rc = courier_engine_open(e, cfg, err);
    courier_config_free(cfg);
    return rc;
}

static void make_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    close(fd);
}

static void test_unopenable_cache_store_fails_open(void) {
    const char *dir = th_tmpdir();
    char file[700], under_file[800], store2[700], cache2[800];
    snprintf(file, sizeof file, "%s/a-file", dir);
    make_file(file);
    snprintf(under_file, sizeof under_file, "%s/cache", file); /* cannot be created: ENOTDIR, even as root */
    /* A cache store the configuration names. */
    courier_engine *e = NULL;
    courier_error err;
    int saved = stderr_begin();
    int rc = open_with_cache(&e, dir, under_file, 0, &err);
    long written = stderr_end(saved);
    CHECK_EQ(rc, COURIER_E_STORE);
    CHECK_EQ(err.code, COURIER_E_STORE);
    CHECK_EQ(err.os_error, ENOTDIR);
    CHECK(e == NULL);
    CHECK_EQ(written, 0);
    /* The default store's cache, with a default policy: "<store dir>/cache" is a file. */
    snprintf(store2, sizeof store2, "%s/store2", dir);
    CHECK(mkdir(store2, 0700) == 0);
    snprintf(cache2, sizeof cache2, "%s/cache", store2);
    make_file(cache2);
    saved = stderr_begin();
    rc = open_with_cache(&e, store2, NULL, COURIER_CACHE_CACHE_FIRST, &err);
    written = stderr_end(saved);
    CHECK_EQ(rc, COURIER_E_STORE);
    CHECK_EQ(err.code, COURIER_E_STORE);
    CHECK_EQ(written, 0);
    /* No cache named: the engine opens; a request with a policy is sent without the cache, and
     * why is on the engine's logger, not on stderr. */
    REQUIRE(open_with_cache(&e, store2, NULL, 0, &err) == COURIER_OK);
    lines l;
    lines_init(&l);
    courier_log_add_callback(NULL, e, COURIER_LOG_TRACE, on_line, &l, NULL);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/json?bug9") == COURIER_OK);
    courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST);
    courier_response *resp = NULL;
    saved = stderr_begin();
    rc = courier_send_sync(&resp, e, r, NULL);
    int64_t count = -1;
    int size_rc = courier_cache_size(NULL, &count, e, &err);
    written = stderr_end(saved);
    CHECK_EQ(rc, COURIER_OK);
    CHECK_EQ(size_rc, COURIER_E_STORE);
    CHECK_EQ(written, 0);
    courier_response_free(resp);
    courier_request_free(r);
    courier_json *line = find_line(&l, "cache_store_failed", 0);
    CHECK(line != NULL);
    if (line) CHECK_STR(jstr(line, "level"), "error");
    courier_json_free(line);
    courier_engine_close(e);
    lines_clear(&l);
}

/* A store setting that looks like a mistyped URL ("redis//host" would be the relative directory
 * "redis/host") is refused; a directory of that shape is written "./...". */
static void test_mistyped_store_url_is_refused(void) {
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    static const char *bad[] = {"redis//localhost:6379", "rediss//h", "redis:/h", "http://h/x", "file:///tmp/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (courier_config_set_cache_store(cfg, bad[i]) != COURIER_E_INVALID_ARGUMENT)
            th_fail(__FILE__, __LINE__, "cache store %s accepted", bad[i]);
        if (courier_config_set_frozen_store(cfg, bad[i]) != COURIER_E_INVALID_ARGUMENT)
            th_fail(__FILE__, __LINE__, "frozen store %s accepted", bad[i]);
    }
    static const char *good[] = {"./redis//h", "/tmp//x", "cache/dir", "redis", "a.b-c"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_EQ(courier_config_set_cache_store(cfg, good[i]), COURIER_OK);
        CHECK_EQ(courier_config_set_frozen_store(cfg, good[i]), COURIER_OK);
    }
    courier_config_free(cfg);
}

/* A store moved aside at open is said on the engine's logger, never on stderr. */
static void test_moved_aside_is_logged_not_printed(void) {
    const char *dir = th_tmpdir();
    courier_engine *e = NULL;
    courier_error err;
    REQUIRE(open_with_cache(&e, dir, NULL, 0, &err) == COURIER_OK);
    CHECK_EQ(put_text(e, "before", "x", 60), COURIER_OK);
    courier_engine_close(e);
    char path[700];
    snprintf(path, sizeof path, "%s/cache/data.mdb", dir);
    CHECK(truncate(path, 100) == 0);
    REQUIRE(open_with_cache(&e, dir, NULL, 0, &err) == COURIER_OK); /* the cache opens at first use */
    lines l;
    lines_init(&l);
    courier_log_add_callback(NULL, e, COURIER_LOG_TRACE, on_line, &l, NULL);
    int saved = stderr_begin();
    int64_t count = -1;
    int rc = courier_cache_size(NULL, &count, e, NULL);
    long written = stderr_end(saved);
    CHECK_EQ(rc, COURIER_OK);
    CHECK_EQ(count, 0);
    CHECK_EQ(written, 0);
    CHECK_EQ(count_broken(dir), 1);
    courier_json *line = find_line(&l, "cache_store_opened", 0);
    CHECK(line != NULL);
    if (line) CHECK_STR(jstr(line, "level"), "warning");
    courier_json_free(line);
    courier_engine_close(e);
    lines_clear(&l);
}

TESTS_MAIN(T(test_unopenable_cache_store_fails_open), T(test_mistyped_store_url_is_refused),
           T(test_moved_aside_is_logged_not_printed), T(test_put_get_by_key), T(test_totals_are_exact), T(test_expiry_uses_the_clock), T(test_remove_since),
           T(test_eviction_expired_first_then_oldest), T(test_map_full_never_fails),
           T(test_two_engines_share_one_store), T(test_garbage_store_is_moved_aside),
           T(test_newer_format_is_moved_aside), T(test_format1_store_is_upgraded), T(test_two_processes_write_and_read),
           T(test_kill9_in_the_middle_of_writes), T(test_many_readers_and_a_writer),
           T(test_map_grown_by_another_process))
