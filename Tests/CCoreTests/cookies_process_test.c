/*
 * cookies_process_test.c — the cookie jar across processes on one store: a child process (this
 * executable started again with "--child", a fresh process with its own LMDB environment) sends the
 * parent's cookie on its first request, and a cookie it sets reaches the parent's open engine.
 * Apart from cookies_test.c because it forks (not under TSan).
 */
#include "cookies_common.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- another process ------------------------------------------------------------------------ */

static int child_main(int argc, char **argv) {
    if (argc < 5) return 64;
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, argv[3]);
    courier_config_set_base_url(cfg, argv[4]);
    courier_engine *e = NULL;
    int rc = courier_engine_open(&e, cfg, NULL);
    courier_config_free(cfg);
    if (rc != COURIER_OK) return 2;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", strcmp(argv[2], "set") == 0 ? "/cookies/set?child=1" : "/cookies");
    courier_response *resp = NULL;
    rc = courier_send_sync(&resp, e, r, NULL);
    size_t len = 0;
    const uint8_t *body = courier_response_body(resp, &len);
    if (strcmp(argv[2], "get") == 0 && rc == COURIER_OK) rc = memmem(body, len, "parent=1", 8) ? 0 : 3;
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    return rc == COURIER_OK ? 0 : 1;
}

static int run_child(const char *mode, const char *store) {
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {"self", "--child", (char *)mode, (char *)store, (char *)th_base(), NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_another_process_sees_the_jar(void) {
    const char *store = th_tmpdir();
    th_server(); /* started before the children need it */
    courier_engine *e = open_on(store, 0, NULL);
    REQUIRE(e);
    free(get(e, "/cookies/set?parent=1", NULL));
    CHECK_EQ(run_child("get", store), 0);  /* the child's first request carries the parent's cookie */
    CHECK_EQ(run_child("set", store), 0);  /* the child sets one while this engine stays open */
    char *body = cookies_seen(e, NULL);
    CHECK_CONTAINS(body, "child=1");
    CHECK_CONTAINS(body, "parent=1");
    free(body);
    courier_engine_close(e);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
    static const th_test tests[] = {
        T(test_another_process_sees_the_jar),
    };
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
