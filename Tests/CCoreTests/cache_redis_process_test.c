/*
 * cache_redis_process_test.c — two processes with different local settings (store directory, app
 * id, cache size limit, durability, default policy) share one Redis cache: the first fetches from
 * the loopback server and writes, the second hits without the network; a third on another Redis
 * database does not see it. The children are this executable started again with "--child" (fresh
 * processes, no state shared but Redis). Apart from cache_redis_test.c because it forks (not under
 * TSan).
 */
#include "harness.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define TARGET "/cache?max_age=600&body=shared-across-processes"

/* argv: self --child fetch|hit|miss store_dir redis_url base_url; exit 0 when the answer's cache
 * status is what the mode expects. */
static int child_main(int argc, char **argv) {
    if (argc < 6) return 64;
    const char *mode = argv[2];
    bool first = strcmp(mode, "fetch") == 0;
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, argv[3]);
    courier_config_set_app_id(cfg, first ? "fetcher" : "reader");
    courier_config_set_base_url(cfg, argv[5]);
    courier_config_set_cache_max_bytes(cfg, first ? 1 << 20 : 64 << 20);
    courier_config_set_cache_durability(cfg, first ? COURIER_CACHE_FAST : COURIER_CACHE_SYNCED);
    courier_config_set_cache_policy(cfg, COURIER_CACHE_HTTP);
    if (courier_config_set_cache_store(cfg, argv[4]) != COURIER_OK) return 2;
    courier_engine *e = NULL;
    int rc = courier_engine_open(&e, cfg, NULL);
    courier_config_free(cfg);
    if (rc != COURIER_OK) return 3;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", TARGET);
    courier_response *resp = NULL;
    rc = courier_send_sync(&resp, e, r, NULL);
    int want = strcmp(mode, "hit") == 0 ? COURIER_CACHE_STATUS_HIT : COURIER_CACHE_STATUS_NETWORK;
    int out = 0;
    if (rc != COURIER_OK || !resp) out = 4;
    else if (courier_response_cache_status(resp) != want) out = 5;
    else if (strcmp((const char *)courier_response_body(resp, NULL), "shared-across-processes") != 0) out = 6;
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    return out;
}

static int run_child(const char *mode, const char *url) {
    const char *store = th_tmpdir(); /* each process its own local store */
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {"self", "--child", (char *)mode, (char *)store, (char *)url, (char *)th_base(), NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_two_processes_share_one_cache(void) {
    const char *url = th_redis_url();
    REQUIRE(url && th_redis_flush() == 0);
    th_server();
    cts_server_reset_counts(th_server());
    CHECK_EQ(run_child("fetch", url), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/cache"), 1);
    CHECK_EQ(run_child("hit", url), 0); /* another process, other local settings: from Redis */
    CHECK_EQ(cts_server_path_count(th_server(), "/cache"), 1);
    char other_db[300];
    snprintf(other_db, sizeof other_db, "%.*s5", (int)strlen(url) - 1, url); /* ".../0" -> ".../5" */
    CHECK_EQ(run_child("miss", other_db), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/cache"), 2);
}

static const th_test tests[] = {T(test_two_processes_share_one_cache)};

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
