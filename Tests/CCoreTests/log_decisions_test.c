/*
 * log_decisions_test.c — logs that explain, over the loopback server and real stores: levels per
 * component changed while the engine runs, a line for each cache decision (lookup and store, with
 * the courier_cache_reason), the journal's freeze and expiry lines with their reasons, and a file
 * sink rotated by day on the engine's clock as well as by size. Lines are checked by their JSON
 * fields, never their prose.
 */
#include "harness.h"
#include "log_lines.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static courier_engine *open_with(const char *store, int clock, lines *l) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_store_dir(cfg, store);
    courier_config_set_frozen_poll_ms(cfg, 100);
    if (clock) courier_config_set_clock(cfg, th_clock, NULL, NULL);
    courier_engine *e = NULL;
    courier_error err;
    if (courier_engine_open(&e, cfg, &err) != COURIER_OK) th_fail(__FILE__, __LINE__, "open: %s", err.message);
    courier_config_free(cfg);
    if (e && l) courier_log_add_callback(NULL, e, COURIER_LOG_TRACE, on_line, l, NULL);
    return e;
}

static uint64_t get_cached(courier_engine *e, const char *path) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", path);
    courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST);
    courier_response *resp = NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    courier_request_free(r);
    uint64_t id = rc == COURIER_OK ? courier_response_request_id(resp) : 0;
    courier_response_free(resp);
    return id;
}

static void component_levels_and_cache_lines(void) {
    lines l;
    lines_init(&l);
    courier_engine *e = open_with(th_tmpdir(), 0, &l);
    REQUIRE(e);
    courier_log_level lv = COURIER_LOG_OFF;
    CHECK_EQ(courier_log_get_component_level(&lv, e, COURIER_LOG_CACHE, NULL), COURIER_OK);
    CHECK_EQ(lv, COURIER_LOG_INFO);
    CHECK_EQ(courier_log_set_component_level(e, COURIER_LOG_CACHE, COURIER_LOG_DEBUG, NULL), COURIER_OK);
    CHECK_EQ(courier_log_set_component_level(e, COURIER_LOG_TRANSPORT, COURIER_LOG_OFF, NULL), COURIER_OK);
    CHECK_EQ(courier_log_get_component_level(&lv, e, COURIER_LOG_CACHE, NULL), COURIER_OK);
    CHECK_EQ(lv, COURIER_LOG_DEBUG);
    uint64_t first = get_cached(e, "/json?log=1");
    uint64_t second = get_cached(e, "/json?log=1");
    REQUIRE(first && second);
    /* Why the first went to the network and was stored, why the second came from the cache. */
    courier_json *line = find_line(&l, "cache_lookup", first);
    REQUIRE(line);
    CHECK_STR(jstr(line, "decision"), "network");
    CHECK_STR(jstr(line, "reason"), "miss");
    CHECK_STR(jstr(line, "component"), "cache");
    CHECK_STR(jstr(line, "level"), "debug");
    courier_json_free(line);
    line = find_line(&l, "cache_store", first);
    REQUIRE(line);
    CHECK_EQ(courier_json_bool(courier_json_get(line, "stored")), 1);
    CHECK_STR(jstr(line, "reason"), "miss");
    courier_json_free(line);
    line = find_line(&l, "cache_lookup", second);
    REQUIRE(line);
    CHECK_STR(jstr(line, "decision"), "from_cache");
    CHECK_STR(jstr(line, "reason"), "fresh");
    courier_json_free(line);
    line = find_line(&l, "from_cache", second);
    REQUIRE(line);
    CHECK_STR(jstr(line, "component"), "cache");
    courier_json_free(line);
    CHECK(find_line(&l, "finished", 0) == NULL); /* transport off */
    /* Changed while the engine runs: the next request's lines follow. */
    CHECK_EQ(courier_log_set_component_level(e, COURIER_LOG_TRANSPORT, COURIER_LOG_INFO, NULL), COURIER_OK);
    CHECK_EQ(courier_log_set_component_level(e, COURIER_LOG_CACHE, COURIER_LOG_INFO, NULL), COURIER_OK);
    lines_clear(&l);
    uint64_t third = get_cached(e, "/json?log=1");
    line = find_line(&l, "finished", third);
    REQUIRE(line);
    CHECK_STR(jstr(line, "component"), "transport");
    courier_json_free(line);
    CHECK(find_line(&l, "cache_lookup", third) == NULL); /* cache back at info */
    /* The engine-wide level sets every component. */
    CHECK_EQ(courier_log_set_level(e, COURIER_LOG_WARNING), COURIER_OK);
    CHECK_EQ(courier_log_get_component_level(&lv, e, COURIER_LOG_MAPPING, NULL), COURIER_OK);
    CHECK_EQ(lv, COURIER_LOG_WARNING);
    courier_error err;
    CHECK_EQ(courier_log_set_component_level(e, (courier_log_component)5, COURIER_LOG_INFO, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(err.code, COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_set_component_level(e, COURIER_LOG_CACHE, (courier_log_level)9, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_get_component_level(NULL, e, COURIER_LOG_CACHE, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
    lines_clear(&l);
}

/* issue 28 bug 3: the finished line of a request whose response is written to the cache keeps its
 * URL and duration (it read "GET ? -> 200 (0.0 ms) cache: miss"), under each writing policy. */
static void finished_line_of_a_cache_write(void) {
    lines l;
    lines_init(&l);
    courier_engine *e = open_with(th_tmpdir(), 0, &l);
    REQUIRE(e);
    static const struct {
        courier_cache_policy policy;
        const char *path;
    } cases[] = {{COURIER_CACHE_CACHE_FIRST, "/json?finished=first"},
                 {COURIER_CACHE_HTTP, "/cache?max_age=60&body=finished-http"},
                 {COURIER_CACHE_WRITE_ONLY, "/json?finished=write"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        courier_request *r = NULL;
        REQUIRE(courier_request_new(&r, "GET", cases[i].path) == COURIER_OK);
        courier_request_set_cache_policy(r, cases[i].policy);
        courier_response *resp = NULL;
        courier_error err;
        int rc = courier_send_sync(&resp, e, r, &err);
        courier_request_free(r);
        CHECK_EQ(rc, COURIER_OK);
        uint64_t id = rc == COURIER_OK ? courier_response_request_id(resp) : 0;
        CHECK_EQ(courier_response_cache_reason(resp), COURIER_CACHE_REASON_MISS);
        courier_response_free(resp);
        courier_json *line = find_line(&l, "finished", id);
        REQUIRE(line);
        CHECK_STR(jstr(line, "url"), th_url(cases[i].path));
        CHECK_STR(jstr(line, "method"), "GET");
        CHECK_STR(jstr(line, "cache"), "miss");
        CHECK(courier_json_real(courier_json_get(line, "duration_ms")) > 0);
        courier_json_free(line);
        /* Written: the next read of it is a hit. */
        int has = 0;
        REQUIRE(courier_request_new(&r, "GET", cases[i].path) == COURIER_OK);
        courier_request_set_cache_policy(r, cases[i].policy);
        CHECK_EQ(courier_cache_has(&has, e, r, NULL), COURIER_OK);
        CHECK_EQ(has, 1);
        courier_request_free(r);
    }
    courier_engine_close(e);
    lines_clear(&l);
}

static atomic_int frozen_code;
static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id; (void)err; (void)user;
    atomic_store(&frozen_code, code);
    courier_response_free(resp);
}

static _Atomic(const char *) expired_reason;
static void on_frozen_event(const courier_frozen_event *ev, void *user) {
    (void)user;
    if (ev->kind == COURIER_FROZEN_EVENT_EXPIRED) atomic_store(&expired_reason, ev->reason);
}

/* Why a request was frozen, and why it was never resent: from the log alone. */
static void journal_freeze_and_expiry_lines(void) {
    lines l;
    lines_init(&l);
    th_clock_set_offset_ms(0);
    courier_engine *e = open_with(th_tmpdir(), 1, &l);
    REQUIRE(e);
    courier_frozen_pause(e);
    courier_frozen_add_listener(NULL, e, on_frozen_event, NULL, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/gone", th_free_port());
    courier_request *r = NULL;
    courier_request_new(&r, "POST", url);
    courier_request_set_body(r, "x", 1, "text/plain");
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 60000, 0);
    courier_request_set_freeze_id(r, "gone-1");
    atomic_store(&frozen_code, 1);
    uint64_t id = 0;
    REQUIRE(courier_send(&id, e, r, on_done, NULL, NULL) == COURIER_OK);
    courier_request_free(r);
    int64_t until = th_now_ms() + 10000;
    while (atomic_load(&frozen_code) == 1 && th_now_ms() < until) usleep(1000);
    CHECK_EQ(atomic_load(&frozen_code), COURIER_E_FROZEN);
    courier_json *line = find_line(&l, "journal_frozen", id);
    REQUIRE(line);
    CHECK_STR(jstr(line, "freeze_id"), "gone-1");
    CHECK_STR(jstr(line, "reason"), "network_failure");
    CHECK_EQ(courier_json_integer(courier_json_get(line, "code")), COURIER_E_CANNOT_CONNECT);
    CHECK_STR(jstr(line, "policy"), "courier.auto");
    CHECK_STR(jstr(line, "component"), "journal");
    courier_json_free(line);
    th_clock_set_offset_ms(120000); /* past its expiry */
    courier_frozen_resume(e);
    courier_frozen_replay(e, 0, NULL);
    until = th_now_ms() + 10000;
    while (count_lines(&l, "journal_expired", "freeze_id", "gone-1", NULL) == 0 && th_now_ms() < until) usleep(2000);
    CHECK_EQ(count_lines(&l, "journal_expired", "freeze_id", "gone-1", &line), 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "reason"), "expired");
    CHECK_STR(jstr(line, "level"), "info");
    courier_json_free(line);
    until = th_now_ms() + 10000; /* the event (after its line) says why too */
    while (!atomic_load(&expired_reason) && th_now_ms() < until) usleep(1000);
    CHECK_STR(atomic_load(&expired_reason), "expired");
    CHECK_EQ(count_lines(&l, "journal_replay", "freeze_id", "gone-1", NULL), 0); /* never resent */
    courier_engine_close(e);
    th_clock_set_offset_ms(0);
    lines_clear(&l);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

static void file_rotates_by_day(void) {
    th_clock_set_offset_ms(0);
    const char *dir = th_tmpdir();
    courier_engine *e = open_with(dir, 1, NULL);
    REQUIRE(e);
    char path[600], old[620], older[620];
    snprintf(path, sizeof path, "%s/app.log", dir);
    snprintf(old, sizeof old, "%s.1", path);
    snprintf(older, sizeof older, "%s.2", path);
    uint64_t sink = 0;
    courier_error err;
    CHECK_EQ(courier_log_add_rotating_file(&sink, e, COURIER_LOG_INFO, path, 0, 3, COURIER_LOG_ROTATE_DAILY, &err), COURIER_OK);
    CHECK(sink != 0);
    courier_log_write(e, COURIER_LOG_INFO, "app", "day one");
    courier_log_write(e, COURIER_LOG_INFO, "app", "day one again");
    th_clock_set_offset_ms((int64_t)86400000);
    courier_log_write(e, COURIER_LOG_INFO, "app", "day two");
    th_clock_set_offset_ms((int64_t)2 * 86400000);
    courier_log_write(e, COURIER_LOG_INFO, "app", "day three");
    char *now = slurp(path), *one = slurp(older), *two = slurp(old);
    CHECK_CONTAINS(now, "\"message\":\"day three\"");
    CHECK_CONTAINS(two, "\"message\":\"day two\"");
    CHECK_CONTAINS(one, "\"message\":\"day one again\"");
    CHECK(now && !strstr(now, "day two"));
    free(now);
    free(one);
    free(two);
    CHECK_EQ(courier_log_add_rotating_file(NULL, e, COURIER_LOG_INFO, path, 0, 3, (courier_log_rotation)2, &err),
             COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
    th_clock_set_offset_ms(0);
}

TESTS_MAIN(T(component_levels_and_cache_lines), T(finished_line_of_a_cache_write), T(journal_freeze_and_expiry_lines), T(file_rotates_by_day))
