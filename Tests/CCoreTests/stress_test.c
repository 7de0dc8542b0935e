/*
 * stress_test.c — short runs of the stress worker loop (Benchmarks/CBench/stress.c, the loop of
 * `courier stress cache`) on real stores: threads on one engine, two processes on one store,
 * eviction pressure, expiry during the run, the whole request path against the loopback server;
 * each ends with no error, no value read back torn, and a clean courier_cache_verify. Bounded by
 * operation counts, never by the clock.
 */
#include "harness.h"

#include "cstress.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static cstress_config base_config(const char *dir) {
    cstress_config c;
    memset(&c, 0, sizeof c);
    c.store_dir = dir;
    c.threads = 2;
    c.ops = 20000;
    c.entries = 2000;
    c.value_min = 16;
    c.value_max = 4096;
    c.mix_get = 80;
    c.mix_put = 15;
    c.mix_remove = 5;
    c.zipf = 1;
    c.zipf_s = 0.99;
    c.durability = COURIER_CACHE_FAST;
    c.seed = 7;
    c.ack_fd = -1;
    return c;
}

static const char *verify_dir;
static void tweak(courier_config *cfg) { courier_config_set_store_dir(cfg, verify_dir); }

static void check_verify(const char *dir, int64_t *entries) {
    verify_dir = dir;
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    courier_cache_verify_report rep = {.size = sizeof rep};
    courier_error err;
    CHECK_EQ(courier_cache_verify(&rep, e, &err), COURIER_OK);
    CHECK_EQ(rep.problems, 0);
    if (entries) *entries = rep.entries;
    courier_engine_close(e);
}

static void check_result(const cstress_result *r, int64_t ops) {
    if (r->first_error[0]) printf("  first error: %s\n", r->first_error);
    CHECK_EQ(r->errors, 0);
    CHECK_EQ(r->torn, 0);
    CHECK_EQ(r->ops, ops);
    CHECK_EQ(r->gets + r->puts + r->removes, r->ops);
    CHECK(r->nseconds >= 1);
    int64_t sum = 0;
    for (int i = 0; i < r->nseconds; i++) sum += r->series[i].ops;
    CHECK_EQ(sum, r->ops);
    CHECK(r->gets == 0 || r->get_p50 > 0);
    CHECK(r->get_p50 <= r->get_p99 && r->get_p99 <= r->get_p999);
    CHECK(r->get_p999 <= r->get_max);
    CHECK(r->rss_anon_max > 0);
}

static void test_threads_on_one_engine(void) {
    const char *dir = th_tmpdir();
    cstress_config c = base_config(dir);
    cstress_result r;
    REQUIRE(cstress_run(&c, &r, NULL, NULL) == 0);
    check_result(&r, c.ops);
    CHECK(r.hits > 0);
    cstress_result_free(&r);
    int64_t n = 0;
    check_verify(dir, &n);
    CHECK(n > 0);
}

static void test_prefill_then_gets_hit(void) {
    const char *dir = th_tmpdir();
    cstress_config c = base_config(dir);
    c.mix_get = 1;
    c.mix_put = c.mix_remove = 0;
    char error[256] = "";
    REQUIRE(cstress_prefill(&c, error, sizeof error) == 0);
    cstress_result r;
    REQUIRE(cstress_run(&c, &r, NULL, NULL) == 0);
    check_result(&r, c.ops);
    CHECK_EQ(r.hits, c.ops); /* every key is there, and whole */
    CHECK_EQ(r.misses, 0);
    cstress_result_free(&r);
    int64_t n = 0;
    check_verify(dir, &n);
    CHECK_EQ(n, c.entries);
}

static void test_eviction_and_expiry(void) {
    const char *dir = th_tmpdir();
    cstress_config c = base_config(dir);
    c.size_limit = 256 * 1024; /* a fraction of what the puts write: eviction all along */
    c.value_min = c.value_max = 2048;
    c.mix_get = 50;
    c.mix_put = 50;
    c.mix_remove = 0;
    c.zipf = 0;
    c.expiry_s = 1;
    c.durability = COURIER_CACHE_DURABLE;
    c.ops = 6000;
    cstress_result r;
    REQUIRE(cstress_run(&c, &r, NULL, NULL) == 0);
    check_result(&r, c.ops);
    CHECK(r.evictions > 0);
    cstress_result_free(&r);
    check_verify(dir, NULL);
}

static void test_two_processes_on_one_store(void) {
#if defined(__SANITIZE_THREAD__)
    printf("  (skipped under ThreadSanitizer: it does not support fork)\n");
    return;
#endif
    const char *dir = th_tmpdir();
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        cstress_config c = base_config(dir);
        c.seed = 99;
        cstress_result r;
        int rc = cstress_run(&c, &r, NULL, NULL);
        int bad = rc != 0 || r.errors != 0 || r.torn != 0;
        if (bad) fprintf(stderr, "child: %s\n", r.first_error);
        cstress_result_free(&r);
        _exit(bad ? 1 : 0);
    }
    cstress_config c = base_config(dir);
    cstress_result r;
    REQUIRE(cstress_run(&c, &r, NULL, NULL) == 0);
    check_result(&r, c.ops);
    cstress_result_free(&r);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    check_verify(dir, NULL);
}

static void test_whole_request_path(void) {
    const char *dir = th_tmpdir();
    cstress_config c = base_config(dir);
    c.http_base_url = th_base();
    c.ops = 1500;
    c.entries = 200;
    cstress_result r;
    REQUIRE(cstress_run(&c, &r, NULL, NULL) == 0);
    check_result(&r, c.ops);
    CHECK(r.hits > 0);   /* answered by the cache */
    CHECK(r.misses > 0); /* and by the network */
    cstress_result_free(&r);
    check_verify(dir, NULL);
}

/* A writer killed with SIGKILL at a random moment: every write it acknowledged is in the store,
 * whole, at least as new as acknowledged. */
static void test_killed_writer_loses_no_acknowledged_write(void) {
#if defined(__SANITIZE_THREAD__)
    printf("  (skipped under ThreadSanitizer: it does not support fork)\n");
    return;
#endif
    const char *dir = th_tmpdir();
    char acks[2][600];
    const char *paths[2];
    for (int round = 0; round < 2; round++) {
        snprintf(acks[round], sizeof acks[round], "%s/acks-%d", dir, round);
        paths[round] = acks[round];
        fflush(NULL);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            cstress_config c = base_config(dir);
            c.mix_get = 1;
            c.mix_put = 3;
            c.mix_remove = 0;
            c.ops = 0;
            c.duration_s = 60;
            c.durability = COURIER_CACHE_DURABLE;
            c.ack_fd = open(acks[round], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            c.key_slot = round;
            c.key_slots = 2;
            cstress_result r;
            cstress_run(&c, &r, NULL, NULL);
            _exit(0);
        }
        /* Kill it once it has acknowledged some writes (the ack file tells), not after a sleep. */
        struct stat st;
        for (int i = 0; i < 20000 && (stat(acks[round], &st) != 0 || st.st_size < 16 * 50); i++) usleep(1000);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));
    }
    int64_t checked = 0, lost = -1, torn = -1;
    char error[256] = "";
    CHECK_EQ(cstress_check_acks(dir, 2000, paths, 2, &checked, &lost, &torn, error, sizeof error), 0);
    CHECK(checked > 0);
    CHECK_EQ(lost, 0);
    CHECK_EQ(torn, 0);
    check_verify(dir, NULL);
}

static void test_bad_settings(void) {
    cstress_config c = base_config(th_tmpdir());
    c.value_min = 8;
    cstress_result r;
    CHECK_EQ(cstress_run(&c, &r, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    c = base_config(th_tmpdir());
    c.mix_get = c.mix_put = c.mix_remove = 0;
    CHECK_EQ(cstress_run(&c, &r, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
}

TESTS_MAIN(T(test_threads_on_one_engine), T(test_prefill_then_gets_hit), T(test_eviction_and_expiry), T(test_two_processes_on_one_store),
           T(test_whole_request_path), T(test_killed_writer_loses_no_acknowledged_write), T(test_bad_settings))
