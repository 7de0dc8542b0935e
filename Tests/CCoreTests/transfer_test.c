/*
 * transfer_test.c — multipart upload (data and streamed file parts, part headers), a file as the
 * body, downloads to a file, resume after the downloading process is killed, progress.
 */
#include "harness.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    courier_request_new(&r, method, path);
    return r;
}

static char *body_of(courier_engine *e, courier_request *r, int *code) {
    courier_response *resp = NULL;
    *code = courier_send_sync(&resp, e, r, NULL);
    char *b = resp ? strndup((const char *)courier_response_body(resp, NULL), 1 << 20) : NULL;
    courier_response_free(resp);
    return b;
}

static const char *write_file(const char *name, const char *content, size_t len) {
    static char paths[4][600];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", th_tmpdir(), name);
    FILE *f = fopen(p, "wb");
    if (!f) return NULL;
    fwrite(content, 1, len, f);
    fclose(f);
    return p;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Checks a file holds the test server's /bytes pattern (byte i = i % 251) of length n. */
static int file_is_pattern(const char *path, long n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    long i = 0;
    int c, ok = 1;
    while ((c = fgetc(f)) != EOF) {
        if (c != (int)(i % 251)) ok = 0;
        i++;
    }
    fclose(f);
    return ok && i == n;
}

static void test_multipart(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    const char *path = write_file("notes.txt", "line one\nline two\n", 18);
    REQUIRE(path);
    courier_request *r = req("POST", "/echo");
    courier_request_add_param(r, "title", "Trip");
    CHECK_EQ(courier_request_add_part_header(r, "X-A", "1"), COURIER_E_INVALID_ARGUMENT); /* no part yet */
    CHECK_EQ(courier_request_add_part_data(r, "meta", "{\"a\":1}", 7, NULL, "application/json"), COURIER_OK);
    CHECK_EQ(courier_request_add_part_header(r, "X-Part", "meta-1"), COURIER_OK);
    CHECK_EQ(courier_request_add_part_file(r, "file", path, NULL, "text/plain"), COURIER_OK);
    CHECK_EQ(courier_request_add_part_data(r, "bad", "x", 1, "a\r\nb", NULL), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_part_header(r, "X-Bad", "a\nb"), COURIER_E_INVALID_HEADER);
    int code = 0;
    char *body = body_of(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    CHECK_CONTAINS(body, "multipart/form-data; boundary=");
    CHECK_CONTAINS(body, "Content-Disposition: form-data; name=\\\"title\\\"\\r\\n\\r\\nTrip");
    CHECK_CONTAINS(body, "name=\\\"meta\\\"\\r\\nContent-Type: application/json\\r\\nX-Part: meta-1");
    CHECK_CONTAINS(body, "name=\\\"file\\\"; filename=\\\"notes.txt\\\"\\r\\nContent-Type: text/plain");
    CHECK_CONTAINS(body, "line one\\nline two\\n");
    CHECK(body && strstr(body, "title") < strstr(body, "meta")); /* parameters first */
    free(body);
    courier_request_free(r);

    /* A file part that does not exist fails the send; nothing goes out. */
    long before = cts_server_path_count(th_server(), "/echo");
    r = req("POST", "/echo");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/nope.bin", th_tmpdir());
    courier_request_add_part_file(r, "f", missing, NULL, NULL);
    courier_error err;
    CHECK_EQ(courier_send_sync(NULL, e, r, &err), COURIER_E_NOT_FOUND);
    CHECK(err.os_error != 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo"), before);
    courier_request_free(r);
    courier_engine_close(e);
}

static atomic_llong up_last, up_total_seen, down_last, down_total_seen;
static atomic_int progress_calls;
static void on_progress(uint64_t id, int64_t dn, int64_t dt, int64_t un, int64_t ut, void *user) {
    (void)id;
    (void)user;
    atomic_fetch_add(&progress_calls, 1);
    if (dn < atomic_load(&down_last)) atomic_store(&down_last, -999999); /* went backwards */
    else atomic_store(&down_last, dn);
    atomic_store(&down_total_seen, dt);
    atomic_store(&up_last, un);
    atomic_store(&up_total_seen, ut);
}

static void test_body_file_upload(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    size_t n = 200000;
    char *data = malloc(n);
    REQUIRE(data);
    for (size_t i = 0; i < n; i++) data[i] = (char)('a' + i % 26);
    const char *path = write_file("upload.bin", data, n);
    free(data);
    courier_request *r = req("PUT", "/echo");
    CHECK_EQ(courier_request_set_body_file(r, path, "text/plain"), COURIER_OK);
    courier_request_add_param(r, "v", "1");
    atomic_store(&up_last, 0);
    courier_request_set_progress(r, on_progress, NULL, NULL);
    int code = 0;
    char *body = body_of(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    CHECK_CONTAINS(body, "\"method\":\"PUT\"");
    CHECK_CONTAINS(body, "\"body_length\":200000");
    CHECK_CONTAINS(body, "\"query\":\"v=1\"");
    CHECK_CONTAINS(body, "[\"Content-Type\",\"text/plain\"]");
    CHECK_CONTAINS(body, "\"body\":\"abcdefghijklmnopqrstuvwxyzabc");
    CHECK_EQ(atomic_load(&up_last), 200000);
    CHECK_EQ(atomic_load(&up_total_seen), 200000);
    free(body);
    courier_request_free(r);
    r = req("POST", "/echo");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none", th_tmpdir());
    CHECK_EQ(courier_request_set_body_file(r, missing, NULL), COURIER_OK);
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_E_NOT_FOUND);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_download_to_file(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char path[700];
    snprintf(path, sizeof path, "%s/big.bin", th_tmpdir());
    courier_request *r = req("GET", "/bytes/300000");
    CHECK_EQ(courier_request_set_download_file(r, path, 0), COURIER_OK);
    atomic_store(&down_last, 0);
    atomic_store(&progress_calls, 0);
    courier_request_set_progress(r, on_progress, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    REQUIRE(resp);
    CHECK_STR(courier_response_file(resp), path);
    size_t len = 1;
    courier_response_body(resp, &len);
    CHECK_EQ(len, 0);
    CHECK(file_is_pattern(path, 300000));
    char part[720];
    snprintf(part, sizeof part, "%s.part", path);
    CHECK_EQ(file_size(part), -1);
    CHECK(atomic_load(&progress_calls) >= 1);
    CHECK_EQ(atomic_load(&down_last), 300000);
    CHECK_EQ(atomic_load(&down_total_seen), 300000);
    courier_response_free(resp);
    courier_request_free(r);

    /* An error status keeps its body in memory and writes no file. */
    char p404[700];
    snprintf(p404, sizeof p404, "%s/missing.bin", th_tmpdir());
    r = req("GET", "/status/404");
    courier_request_set_download_file(r, p404, COURIER_DOWNLOAD_RESUME);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_HTTP_STATUS);
    CHECK_STR((const char *)courier_response_body(resp, NULL), "{\"status\":404}");
    CHECK(courier_response_file(resp) == NULL);
    CHECK_EQ(file_size(p404), -1);
    courier_response_free(resp);
    courier_request_free(r);

    /* Larger than the engine's maximum response size: downloads are not limited by it. */
    courier_engine_close(e);
}

/* The child: downloads slowly with resume until killed. */
static void child_download(const char *url, const char *path) {
    courier_engine *e = NULL;
    if (courier_engine_open(&e, NULL, NULL) != COURIER_OK) _exit(3);
    courier_request *r = req("GET", url);
    courier_request_set_download_file(r, path, COURIER_DOWNLOAD_RESUME);
    courier_send_sync(NULL, e, r, NULL);
    _exit(0);
}

static void test_resume_after_kill(void) {
    enum { N = 2000000 };
    char url[200], path[700], part[720];
    snprintf(url, sizeof url, "%s/bytes/%d?rate=2000000", th_base(), N);
    snprintf(path, sizeof path, "%s/resume.bin", th_tmpdir());
    snprintf(part, sizeof part, "%s.part", path);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) child_download(url, path);
    int64_t deadline = th_now_ms() + 20000;
    while (file_size(part) < 300000 && th_now_ms() < deadline) usleep(5000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    long have = file_size(part);
    CHECK(have >= 300000 && have < N);
    CHECK_EQ(file_size(path), -1);

    /* A new process (here: a new engine) continues from the part on disk. */
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char fast[200];
    snprintf(fast, sizeof fast, "%s/bytes/%d?rate=2000000", th_base(), N);
    courier_request *r = req("GET", fast);
    courier_request_set_download_file(r, path, COURIER_DOWNLOAD_RESUME);
    atomic_store(&down_last, 0);
    courier_request_set_progress(r, on_progress, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    REQUIRE(resp);
    CHECK_EQ(courier_response_status(resp), 206);
    courier_metrics m = {.size = sizeof m};
    courier_response_metrics(&m, resp);
    CHECK(m.bytes_received < N - have + 2000); /* only the rest came over the wire */
    CHECK(file_is_pattern(path, N));
    CHECK_EQ(file_size(part), -1);
    CHECK_EQ(atomic_load(&down_last), N); /* progress counts the part already on disk */
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_resume_starts_over_when_validator_changed(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char path[700], part[720], meta[720];
    snprintf(path, sizeof path, "%s/changed.bin", th_tmpdir());
    snprintf(part, sizeof part, "%s.part", path);
    snprintf(meta, sizeof meta, "%s.part.meta", path);
    /* A stale part with a validator the server no longer has. */
    FILE *f = fopen(part, "wb");
    REQUIRE(f);
    fputs("garbage garbage garbage", f);
    fclose(f);
    f = fopen(meta, "w");
    REQUIRE(f);
    fprintf(f, "%s\n\"old-tag\"\n", th_url("/bytes/50000"));
    fclose(f);
    courier_request *r = req("GET", "/bytes/50000");
    courier_request_set_download_file(r, path, COURIER_DOWNLOAD_RESUME);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200); /* If-Range did not match: the whole body */
    CHECK(file_is_pattern(path, 50000));
    CHECK_EQ(file_size(meta), -1);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

/* The part file of the paused download, and its size as the cancelled send's completion saw it. */
static char paused_part[720];
static atomic_long paused_part_size;

static void on_paused(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    courier_response_free(resp);
    atomic_store(&paused_part_size, file_size(paused_part));
    atomic_store((atomic_int *)user, code);
}

static void test_cancel_keeps_part_for_resume(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    enum { N = 1000000 };
    char path[700], part[720];
    snprintf(path, sizeof path, "%s/paused.bin", th_tmpdir());
    snprintf(part, sizeof part, "%s.part", path);
    snprintf(paused_part, sizeof paused_part, "%s", part);
    char slow[64];
    snprintf(slow, sizeof slow, "/bytes/%d?rate=1000000", N);
    courier_request *r = req("GET", slow);
    courier_request_set_download_file(r, path, COURIER_DOWNLOAD_RESUME);
    uint64_t id = 0;
    atomic_int paused_code = 1;
    CHECK_EQ(courier_send(&id, e, r, on_paused, &paused_code, NULL), COURIER_OK);
    int64_t deadline = th_now_ms() + 20000;
    while (file_size(part) < 100000 && th_now_ms() < deadline) usleep(5000);
    CHECK_EQ(courier_cancel(e, id), COURIER_OK); /* pause */
    /* The cancelled send's completion says when the part file is closed: no fixed sleep. */
    while (atomic_load(&paused_code) == 1 && th_now_ms() < deadline) usleep(1000);
    CHECK_EQ(atomic_load(&paused_code), COURIER_E_CANCELLED);
    long have = file_size(part);
    CHECK(have >= 100000 && have < N);
    /* Whole on disk when the completion ran (another engine or process may resume it from there):
     * no byte of it lands later. */
    CHECK_EQ(atomic_load(&paused_part_size), have);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK); /* resume */
    CHECK_EQ(courier_response_status(resp), 206);
    CHECK(file_is_pattern(path, N));
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_multipart), T(test_body_file_upload), T(test_download_to_file), T(test_resume_after_kill),
           T(test_resume_starts_over_when_validator_changed), T(test_cancel_keeps_part_for_resume))
