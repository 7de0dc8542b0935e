#include "harness.h"

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef COURIER_TEST_REDIS
#include <hiredis/hiredis.h>
#endif

static int failures_in_test;
static const char *current_test;
static cts_server *server;
static char *tmpdirs[64];
static int ntmpdirs;

void th_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "  FAIL %s (%s:%d): ", current_test ? current_test : "?", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    failures_in_test++;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static void cleanup(void) {
    cts_server_stop(server);
    server = NULL;
    for (int i = 0; i < ntmpdirs; i++) {
        nftw(tmpdirs[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(tmpdirs[i]);
    }
    ntmpdirs = 0;
}

cts_server *th_server(void) {
    if (!server) {
        int rc = cts_server_start(&server, "127.0.0.1", 0);
        if (rc != 0) {
            fprintf(stderr, "cannot start the test server: %d\n", rc);
            exit(2);
        }
    }
    return server;
}

const char *th_base(void) {
    static char buf[64];
    snprintf(buf, sizeof buf, "http://127.0.0.1:%d", cts_server_port(th_server()));
    return buf;
}

const char *th_url(const char *path) {
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s%s", th_base(), path);
    return b;
}

const char *th_tmpdir(void) {
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/courier-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(path) || ntmpdirs == 64) {
        fprintf(stderr, "cannot create a temporary directory\n");
        exit(2);
    }
    tmpdirs[ntmpdirs++] = strdup(path);
    return tmpdirs[ntmpdirs - 1];
}

courier_engine *th_engine(void (*tweak)(courier_config *cfg)) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    if (courier_config_new(&cfg) != COURIER_OK) {
        th_fail(__FILE__, __LINE__, "courier_config_new");
        return NULL;
    }
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_temporary_store(cfg, 1); /* each test engine its own store (a tweak may set one) */
    if (getenv("COURIER_TEST_CACHE_REDIS")) { /* the same tests with the cache on Redis (CMakeLists.txt) */
        const char *url = th_redis_url();
        if (!url || th_redis_flush() != 0 || courier_config_set_cache_store(cfg, url) != COURIER_OK) {
            th_fail(__FILE__, __LINE__, "the cache on Redis (%s)", url ? url : "no redis-server");
            courier_config_free(cfg);
            return NULL;
        }
    }
    if (tweak) tweak(cfg);
    int rc = courier_engine_open(&e, cfg, &err);
    courier_config_free(cfg);
    if (rc != COURIER_OK) {
        th_fail(__FILE__, __LINE__, "courier_engine_open: %d %s", rc, err.message);
        return NULL;
    }
    return e;
}

int th_silent_listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int th_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

int th_can_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int64_t th_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static _Atomic int64_t th_clock_offset;

int64_t th_clock(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + atomic_load(&th_clock_offset);
}

void th_clock_set_offset_ms(int64_t ms) { atomic_store(&th_clock_offset, ms); }

static char th_redirect_buf[2][1024];
static const char *_Atomic th_redirect_url;

int th_redirect_customize(courier_outgoing *o, void *user) {
    (void)user;
    const char *to = atomic_load(&th_redirect_url);
    return to ? courier_outgoing_set_url(o, to) : COURIER_OK;
}

void th_redirect_to(const char *url) {
    static int flip;
    if (!url) {
        atomic_store(&th_redirect_url, NULL);
        return;
    }
    flip ^= 1; /* the other buffer: a sender may still read the current one */
    snprintf(th_redirect_buf[flip], sizeof th_redirect_buf[flip], "%s", url);
    atomic_store(&th_redirect_url, th_redirect_buf[flip]);
}

int th_run(int argc, char **argv, const th_test *tests, size_t n) {
    const char *only = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    atexit(cleanup);
    /* An engine opened with the default store writes under $XDG_DATA_HOME: never the real home. */
    char data[600];
    snprintf(data, sizeof data, "%s/data", th_tmpdir());
    setenv("XDG_DATA_HOME", data, 1);
    for (size_t i = 0; i < n; i++) {
        if (only && strcmp(only, tests[i].name) != 0) continue;
        current_test = tests[i].name;
        failures_in_test = 0;
        int64_t t0 = th_now_ms();
        tests[i].fn();
        if (failures_in_test) {
            failed++;
            fprintf(stderr, "not ok %s\n", tests[i].name);
        } else {
            passed++;
            printf("ok %s (%lld ms)\n", tests[i].name, (long long)(th_now_ms() - t0));
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* ---- Redis ----------------------------------------------------------------------------------- */

static char th_redis_dir[600];
static char th_redis_buf[300];
static pid_t th_redis_owner;

static int th_redis_fixture(const char *verb) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/redis-fixture' %s '%s' >/dev/null", COURIER_SOURCE_DIR, verb,
             th_redis_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* At exit, without a shell (under TSan a fork at exit may not run): SIGTERM to the pid the
 * fixture wrote, wait for it to go (up to 10 s), then SIGKILL. */
static void th_redis_atexit(void) {
    if (th_redis_owner != getpid() || !th_redis_dir[0]) return;
    char path[700];
    snprintf(path, sizeof path, "%s/redis.pid", th_redis_dir);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1) pid = 0;
        fclose(f);
    }
    if (pid <= 0 || kill(pid, SIGTERM) != 0) return;
    for (int i = 0; i < 400 && kill(pid, 0) == 0; i++) usleep(25000);
    kill(pid, SIGKILL);
}

const char *th_redis_url(void) {
    if (th_redis_buf[0]) return th_redis_buf;
    if (!th_redis_dir[0]) snprintf(th_redis_dir, sizeof th_redis_dir, "%s/redis", th_tmpdir());
    if (th_redis_fixture("start") != 0) {
        th_fail(__FILE__, __LINE__, "redis-server did not start (scripts/redis-fixture; scripts/setup installs it)");
        return NULL;
    }
    if (!th_redis_owner) atexit(th_redis_atexit);
    th_redis_owner = getpid();
    char path[700];
    snprintf(path, sizeof path, "%s/redis.url", th_redis_dir);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(th_redis_buf, sizeof th_redis_buf, f)) {
        if (f) fclose(f);
        th_fail(__FILE__, __LINE__, "scripts/redis-fixture wrote no URL");
        return NULL;
    }
    fclose(f);
    th_redis_buf[strcspn(th_redis_buf, "\r\n")] = '\0';
    return th_redis_buf;
}

int th_redis_flush(void) {
#ifdef COURIER_TEST_REDIS
    const char *url = th_redis_url();
    const char *colon = url ? strrchr(url, ':') : NULL;
    if (!colon) return -1;
    redisContext *c = redisConnect("127.0.0.1", atoi(colon + 1));
    if (!c || c->err) {
        if (c) redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "FLUSHDB");
    int rc = r && r->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
#else
    return -1;
#endif
}

int th_redis_stop(void) { return th_redis_dir[0] ? th_redis_fixture("stop") : 0; }

int th_redis_restart(void) { return th_redis_dir[0] ? th_redis_fixture("restart") : -1; }

int th_redis_built(void) {
#ifdef COURIER_TEST_REDIS
    return 1;
#else
    return 0;
#endif
}
