/*
 * journal_store_test.c — the journal's store in one process: a corrupt, emptied, cut, truncated or
 * damaged data file (kept aside and reported, never a crash), answers recorded in batches, the
 * stored request read back exactly, records another writer or an older library wrote (other JSON,
 * other claim shapes), and the outcome log. Real LMDB files (changed behind the library's back with
 * LMDB itself, lmdb_shim.h), a real server on loopback.
 */
#include "harness.h"
#include "journal_fixture.h"
#include "journal_recorder.h"
#include "lmdb_shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a corrupt journal ---------------------------------------------------------------------- */

static long file_len(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int find_aside(const char *store, char *out, size_t cap) {
    DIR *d = opendir(store);
    if (!d) return 0;
    struct dirent *de;
    int found = 0;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "journal.corrupt-", 16) == 0) {
            snprintf(out, cap, "%s/%s", store, de->d_name);
            found++;
        }
    }
    closedir(d);
    return found;
}

static void freeze_some(const char *store, int n) {
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, jr_free_port(), &o, NULL);
    if (!e) return;
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    for (int i = 0; i < n; i++) send_one(e, freezable("POST", "/c", "x", COURIER_FREEZE_AUTO, 0), &w);
    w_wait(&w, n);
    courier_engine_close(e);
    w_destroy(&w);
}

static void corrupt_journal_is_kept_aside(void) {
    const char *store = th_tmpdir();
    freeze_some(store, 3);
    char data[600];
    snprintf(data, sizeof data, "%s/journal/data.mdb", store);
    long size = file_len(data);
    REQUIRE(size > 0);
    /* Scribble over both meta pages. */
    int fd = open(data, O_WRONLY);
    REQUIRE(fd >= 0);
    char junk[8192];
    memset(junk, 0xAB, sizeof junk);
    CHECK_EQ(pwrite(fd, junk, sizeof junk, 0), (long)sizeof junk);
    close(fd);

    courier_error err;
    courier_engine *e = open_eng(store, jr_free_port(), NULL, &err);
    CHECK(e == NULL);
    CHECK_EQ(err.code, COURIER_E_JOURNAL_CORRUPT);
    char aside[700];
    CHECK_EQ(find_aside(store, aside, sizeof aside), 1);
    char kept[800];
    snprintf(kept, sizeof kept, "%s/data.mdb", aside);
    CHECK_EQ(file_len(kept), size); /* the whole file, as it was: never emptied */
    int kfd = open(kept, O_RDONLY);
    char head[16];
    CHECK_EQ(read(kfd, head, sizeof head), 16);
    CHECK_EQ((unsigned char)head[0], 0xAB);
    close(kfd);
    CHECK_CONTAINS(err.message, aside);

    /* The next open starts a new journal; the old one stays where it was put. */
    e = open_eng(store, jr_free_port(), NULL, &err);
    REQUIRE(e);
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    CHECK_EQ(file_len(kept), size);
}

static void emptied_journal_is_reported(void) {
    const char *store = th_tmpdir();
    freeze_some(store, 2);
    char data[600];
    snprintf(data, sizeof data, "%s/journal/data.mdb", store);
    REQUIRE(truncate(data, 0) == 0); /* LMDB alone would take this for a new, empty journal */
    courier_error err;
    courier_engine *e = open_eng(store, jr_free_port(), NULL, &err);
    CHECK(e == NULL);
    CHECK_EQ(err.code, COURIER_E_JOURNAL_CORRUPT);
    char aside[700];
    CHECK_EQ(find_aside(store, aside, sizeof aside), 1);
    e = open_eng(store, jr_free_port(), NULL, &err);
    CHECK(e != NULL);
    courier_engine_close(e);
}

/* A store with 40 frozen requests, for a test that forks; NULL under ThreadSanitizer, which does not
 * support fork (the test says so and passes). */
static const char *forked_store(void) {
#if defined(__SANITIZE_THREAD__)
    printf("  (skipped under ThreadSanitizer: it does not support fork)\n");
    return NULL;
#else
    const char *store = th_tmpdir();
    freeze_some(store, 40);
    return store;
#endif
}

/* forked_store(), and the path of its journal's data file in data. */
static const char *forked_journal(char *data, size_t cap) {
    const char *store = forked_store();
    if (store) snprintf(data, cap, "%s/journal/data.mdb", store);
    return store;
}

/* Runs fn(store) in a child process: its exit status, or 128 + the signal that ended it. */
static int in_child(int (*fn)(const char *store), const char *store) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(fn(store));
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* In a child: the open says COURIER_E_JOURNAL_CORRUPT (the file kept aside), and the next open
 * starts a new journal. 0, or the step that failed. */
static int open_damaged(const char *store) {
    courier_error err;
    courier_engine *e = open_eng(store, jr_free_port(), NULL, &err);
    if (e || err.code != COURIER_E_JOURNAL_CORRUPT) return 1;
    e = open_eng(store, jr_free_port(), NULL, &err); /* a new journal */
    if (!e || count_of(e) != 0) return 2;
    courier_engine_close(e);
    return 0;
}

/* FNV-1a of a file's first n bytes, or 0 when it has fewer. */
static uint64_t head_hash(const char *path, long n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t h = 1469598103934665603ULL;
    long i = 0;
    for (int c; i < n && (c = fgetc(f)) != EOF; i++) h = (h ^ (uint64_t)c) * 1099511628211ULL;
    fclose(f);
    return i == n ? h : 0;
}

/* A journal whose data file was cut to a third (a restored backup, a copy cut short): LMDB alone
 * opens it and raises SIGBUS at the first page past the end. The open pads the missing pages with a
 * hole (lmdb_file.c: the size alone cannot tell a cut from unwritten free pages), the page walk finds
 * the trees' pages gone, and the open says COURIER_E_JOURNAL_CORRUPT and keeps the file aside: every
 * byte it was found with, in place (zeros after them); in a child, so a crash fails the test. */
static void truncated_journal_is_kept_aside(void) {
    char data[600];
    const char *store = forked_journal(data, sizeof data);
    if (!store) return;
    /* A third of the pages in use (the file is longer: padded past them at open). */
    long size = th_lmdb_used_bytes(data, NULL);
    REQUIRE(size > 0);
    REQUIRE(truncate(data, size / 3) == 0);
    uint64_t found = head_hash(data, size / 3);
    REQUIRE(found != 0);
    CHECK_EQ(in_child(open_damaged, store), 0);
    char aside[700];
    CHECK_EQ(find_aside(store, aside, sizeof aside), 1);
    char kept[800];
    snprintf(kept, sizeof kept, "%s/data.mdb", aside);
    CHECK(file_len(kept) >= size / 3);
    CHECK(head_hash(kept, size / 3) == found);
}

/* Junk over the last pages, where the journal's newest pages (its roots) are, that LMDB takes for
 * leaves whose nodes lie past the end of the file: before the file was padded at open, SIGBUS at
 * the open; now the open sees records of impossible shapes, says COURIER_E_JOURNAL_CORRUPT and
 * keeps the file aside. */
static void junk_over_the_last_pages_is_kept_aside(void) {
    for (int pages = 2; pages <= 8; pages *= 4) {
        char data[600];
        const char *store = forked_journal(data, sizeof data);
        if (!store) return;
        REQUIRE(th_junk_last_pages(data, pages) == 0);
        CHECK_EQ(in_child(open_damaged, store), 0); /* not padded: 1 under ASan (SIGBUS), 128 + 7 without */
        char aside[700];
        CHECK_EQ(find_aside(store, aside, sizeof aside), 1);
    }
}

/* Leaves whose headers and bounds are whole but whose insides LMDB would trust (two nodes
 * overlapping; a page marked dirty, which LMDB writes in place in its read-only map): the open's
 * page walk says COURIER_E_JOURNAL_CORRUPT and keeps the file aside. Without it the journal
 * opened and its first write went into the damaged page. */
static void damaged_leaves_are_kept_aside(void) {
    for (int how = TH_NODES_OVERLAP; how <= TH_MARKED_DIRTY; how++) {
        char data[600];
        const char *store = forked_journal(data, sizeof data);
        if (!store) return;
        REQUIRE(th_lmdb_damage_leaves(data, (th_leaf_damage)how) > 0);
        int st = in_child(open_damaged, store);
        if (st != 0) printf("  damage %d: child status %d\n", how, st);
        CHECK_EQ(st, 0);
        char aside[700];
        CHECK_EQ(find_aside(store, aside, sizeof aside), 1);
    }
}

/* In a child, on a journal with junk somewhere: the open says COURIER_E_JOURNAL_CORRUPT (then a
 * new journal opens), or the journal opens, lists its requests, freezes one more and opens again.
 * 0, or the step that failed; never a crash. */
static int use_junked(const char *store) {
    opts o = {.paused = 1};
    courier_error err;
    courier_engine *e = open_eng(store, jr_free_port(), &o, &err);
    if (!e) {
        if (err.code != COURIER_E_JOURNAL_CORRUPT) return 1;
        e = open_eng(store, jr_free_port(), &o, &err); /* a new journal */
        int n = e ? (int)count_of(e) : -1;
        courier_engine_close(e);
        return n == 0 ? 0 : 4;
    }
    courier_frozen_list *l = NULL;
    int rc = courier_frozen_list_requests(&l, e, &err);
    courier_frozen_list_free(l);
    if (rc != COURIER_OK && rc != COURIER_E_JOURNAL_CORRUPT) {
        fprintf(stderr, "  listing: %d %s\n", rc, err.message);
        return 2;
    }
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    send_one(e, freezable("POST", "/c", "x", COURIER_FREEZE_AUTO, 0), &w);
    w_wait(&w, 1);
    courier_engine_close(e);
    w_destroy(&w);
    e = open_eng(store, jr_free_port(), &o, &err);
    if (!e && err.code != COURIER_E_JOURNAL_CORRUPT) return 3;
    courier_engine_close(e);
    return 0;
}

/* Junk over an eighth of the journal's pages at each of its eight places, two seeds each. */
static int use_junked_in_child(const char *store) { return in_child(use_junked, store); }

static void junk_anywhere_never_crashes(void) { th_junk_each_eighth(forked_journal, use_junked_in_child); }

/* A journal cut to a third while its engine has it open: the next call on the journal finds the
 * file shorter than it was, pads it back (the missing pages read as zeros, never SIGBUS) and says
 * COURIER_E_JOURNAL_CORRUPT; the next open keeps the file aside. */
static int cut_while_open(const char *store) {
    /* The cut lands between transactions: the journal thread idle (it polls once an hour here).
     * A transaction already running when the file is cut can still fault (docs/design/storage.md,
     * "What remains"). */
    opts o = {.paused = 1, .poll_ms = 3600000};
    courier_error err;
    courier_engine *e = open_eng(store, jr_free_port(), &o, &err);
    if (!e) return 1;
    courier_reachability_set_offline(e);
    if (count_of(e) != 40) return 2;
    if (courier_frozen_wait_idle(e, 10000) != COURIER_OK) return 7;
    char data[600];
    snprintf(data, sizeof data, "%s/journal/data.mdb", store);
    long size = file_len(data), used = th_lmdb_used_bytes(data, NULL);
    if (used <= 0 || truncate(data, used / 3) != 0) return 3;
    courier_frozen_list *l = NULL;
    if (courier_frozen_list_requests(&l, e, &err) != COURIER_E_JOURNAL_CORRUPT) return 4;
    courier_frozen_list_free(l);
    if (file_len(data) < size) return 5; /* padded back */
    courier_engine_close(e);
    return open_damaged(store) ? 6 : 0;
}

static void journal_cut_while_open_is_reported(void) {
    const char *store = forked_store();
    if (!store) return;
    CHECK_EQ(in_child(cut_while_open, store), 0);
    char aside[700];
    CHECK_EQ(find_aside(store, aside, sizeof aside), 1);
}

/* ---- replay in batches, the stored text read back ------------------------------------------ */

/* Many answers are recorded by one synced commit (group commit): every one of them is removed,
 * has its outcome and its event, and each request arrived once. */
static void batched_answers_remove_every_request(void) {
    enum { N = 120 };
    opts o = {.concurrency = 8};
    jr_server srv;
    courier_engine *e = open_served(&srv, &o);
    REQUIRE(e);
    evlog log;
    ev_init(&log);
    courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    for (int i = 0; i < N; i++) {
        char path[32], body[32];
        snprintf(path, sizeof path, "/b/%d", i);
        snprintf(body, sizeof body, "n=%d", i);
        CHECK_EQ(send_one(e, freezable("POST", path, body, COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED), &w), COURIER_OK);
    }
    CHECK_EQ(w_wait(&w, N), N);
    CHECK_EQ(count_of(e), N);
    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK); /* starts replay */
    drain_within(e, 60000);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(count_of(e), 0);
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED), N);
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_RESENT_FAILED), 0);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(w.codes[i], COURIER_E_FROZEN);
        int code = -1, status = 0;
        CHECK_EQ(courier_frozen_last_outcome(&code, &status, NULL, e, w.ids[i], NULL), COURIER_OK);
        CHECK_EQ(code, COURIER_OK);
        CHECK_EQ(status, 200);
        /* Its event, once. */
        int seen = 0;
        for (int k = 0; k < log.n && k < 256; k++)
            seen += log.e[k].kind == COURIER_FROZEN_EVENT_RESENT_SUCCEEDED && strcmp(log.e[k].id, w.ids[i]) == 0 &&
                    log.e[k].body_ok; /* the response whole in the listener (then freed by the worker) */
        CHECK_EQ(seen, 1);
    }
    courier_engine_close(e);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), N);
    for (int i = 0; i < N; i++) {
        char path[32];
        snprintf(path, sizeof path, "/b/%d", i);
        CHECK_EQ(jr_path_count(&srv, path), 1);
    }
    jr_free(&srv);
    w_destroy(&w);
    ev_destroy(&log);
}

static long journal_keys(const char *store, const char *db);

/* Answers of every kind recorded together, while claims and the per-host queue move: a third of
 * the unordered records answer 503 (kept, backoff), a third 400 (removed, failed), a third 200
 * (removed), and an ordered queue on the same host goes one after the other (each answer promotes
 * the next). The write transaction's cursors on `req` and `due` (store.c: req_at, due_del) see
 * keys removed and added around them: every record ends as its answer says, each request
 * arrived once, the ordered ones in order. */
static void mixed_answers_in_one_batch(void) {
    enum { U = 90, O = 30 };
    opts o = {.concurrency = 8, .backoff_base = 60000, .backoff_max = 60000};
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    courier_engine *e = open_eng(store, srv.port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    for (int i = 0; i < U + O; i++) {
        char path[48];
        int k = i / 2; /* ordered and unordered records interleaved in the journal */
        if (i % 2 && k < O) snprintf(path, sizeof path, "/o/%d", k);
        else if (i % 3 == 0) snprintf(path, sizeof path, "/status/503/%d", i);
        else if (i % 3 == 1) snprintf(path, sizeof path, "/status/400/%d", i);
        else snprintf(path, sizeof path, "/ok/%d", i);
        unsigned flags = strncmp(path, "/o/", 3) == 0 ? 0 : COURIER_FREEZE_UNORDERED;
        CHECK_EQ(send_one(e, freezable("POST", path, "b", COURIER_FREEZE_AUTO, flags), &w), COURIER_OK);
    }
    CHECK_EQ(w_wait(&w, U + O), U + O);
    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
    int64_t end = th_now_ms() + 60000;
    size_t want = U + O;
    while (jr_count(&srv) < want && th_now_ms() < end) courier_frozen_wait_idle(e, 1000);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_count(&srv), want);
    int kept = 0, next_ordered = 0;
    for (size_t i = 0; i < jr_count(&srv); i++) {
        jr_hit h = jr_get(&srv, i);
        CHECK_EQ(jr_path_count(&srv, h.path), 1);
        if (strncmp(h.path, "/o/", 3) == 0) CHECK_EQ(atoi(h.path + 3), next_ordered++);
        kept += strncmp(h.path, "/status/503/", 12) == 0;
    }
    CHECK_EQ(next_ordered, O);
    CHECK_EQ(count_of(e), kept); /* only the 503s are left, each tried once, not claimed */
    for (int i = 0; i < U + O; i++) {
        courier_frozen *f = NULL;
        int rc = courier_frozen_get(&f, e, w.ids[i], NULL);
        int code = 0, status = 0;
        int orc = courier_frozen_last_outcome(&code, &status, NULL, e, w.ids[i], NULL);
        if (rc == COURIER_OK) {
            courier_frozen_info info = {.size = sizeof info};
            courier_frozen_get_info(&info, f);
            CHECK_EQ(info.attempts, 1);
            CHECK_EQ(info.last_status, 503);
            CHECK_EQ(info.claimed, 0);
            CHECK_EQ(orc, COURIER_E_NOT_FOUND);
            courier_frozen_free(f);
        } else {
            CHECK_EQ(rc, COURIER_E_NOT_FOUND);
            CHECK_EQ(orc, COURIER_OK);
            CHECK(status == 200 || status == 400);
        }
    }
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
    /* `due` holds a key for each record left (each 503's, back at its next attempt after its claim)
     * and nothing else. */
    long due = journal_keys(store, "due");
    if (due >= 0) CHECK_EQ(due, kept);
}

/* What the journal stores is JSON text with escapes: quotes, backslashes, control characters and
 * UTF-8 in header values and bodies come back byte for byte, in the snapshot and on the wire. */
static void stored_request_reads_back_exactly(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    static const char key[] = "k\"q\\b\tt-\xc3\xbc-\xf0\x9f\x98\x80/";
    static const char note[] = "\"{[,:]}\" \\u0041 \xe2\x82\xac";
    static const char body[] = "{\"a\":\"\\\"\\n\"}\x01\x1f\xff\xfe end";
    courier_request *r = NULL;
    courier_request_new(&r, "PUT", "/esc/x?q=%22a%5C");
    CHECK_EQ(courier_request_add_header(r, "Idempotency-Key", key), COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Note", note), COURIER_OK);
    CHECK_EQ(courier_request_set_body(r, body, sizeof body - 1, "application/octet-stream"), COURIER_OK);
    CHECK_EQ(courier_request_set_timeout_ms(r, 4321), COURIER_OK);
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, 0);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);

    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, w.ids[0], NULL) == COURIER_OK);
    CHECK_STR(courier_frozen_method(f), "PUT");
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/esc/x?q=%%22a%%5C", srv.port);
    CHECK_STR(courier_frozen_url(f), url);
    CHECK_STR(courier_frozen_idempotency_key(f), key);
    int found_key = 0, found_note = 0;
    for (size_t i = 0; i < courier_frozen_header_count(f); i++) {
        const char *n = NULL, *v = NULL;
        CHECK_EQ(courier_frozen_header_at(&n, &v, f, i), COURIER_OK);
        if (strcasecmp(n, "Idempotency-Key") == 0) found_key += strcmp(v, key) == 0;
        if (strcasecmp(n, "X-Note") == 0) found_note += strcmp(v, note) == 0;
    }
    CHECK_EQ(found_key, 1);
    CHECK_EQ(found_note, 1);
    size_t blen = 0;
    const uint8_t *b = courier_frozen_body(f, &blen);
    CHECK_EQ(blen, sizeof body - 1);
    CHECK(b && memcmp(b, body, sizeof body - 1) == 0);
    CHECK(strstr(courier_frozen_json(f), "\"state\":{") != NULL);
    courier_frozen_info info = {.size = sizeof info};
    CHECK_EQ(courier_frozen_get_info(&info, f), COURIER_OK);
    CHECK_EQ(info.timeout_ms, 4321);
    courier_frozen_free(f);

    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
    CHECK_EQ(drain_within(e, 30000), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    REQUIRE(jr_count(&srv) == 1);
    jr_hit h = jr_get(&srv, 0);
    CHECK_STR(h.method, "PUT");
    CHECK_STR(h.path, "/esc/x");
    CHECK_STR(h.key, key);
    CHECK(memcmp(h.body, body, sizeof body - 1) == 0);
    jr_free(&srv);
    w_destroy(&w);
}

static void put_le_bytes(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

/* A stored request is JSON that any writer may have produced: short escapes (\t, \/), members in
 * another order, unknown members, a duplicate key (the last wins), a number where an integer was
 * expected (read as absent). Written behind the library's back, it reads and replays. */
/* Writes record 1 of store's journal as another writer would: a manual, unordered record with
 * the generated id `id` and the request `text`, for host. 0, or -1 without liblmdb.
 * REC_OLD_CLAIM: the record is instead automatic and claimed by `claimer` (a pid no longer running)
 * as the journal wrote a claim before claims left `due` (JF_DUE_ON_RELEASE): attempts 1, the lease
 * ending in 5 minutes, and its `due` key at the lease's end (flag JF_IN_DUE, 0x100).
 * REC_RELEASED_UNINDEXED: automatic, tried once and due now, marked JF_DUE_ON_RELEASE (0x200) with
 * no claim and no `due` key: a claim of this library given back by an older one, which does not
 * know the flag. */
enum { REC_MANUAL, REC_OLD_CLAIM, REC_RELEASED_UNINDEXED };
static int write_record_as(const char *store, const char *host, const char *id, const char *text, int shape,
                           uint32_t claimer) {
    lmdb_shim m;
    if (!lmdb_shim_load(&m)) return -1;
    uint8_t rec[1400];
    memset(rec, 0, 88);
    rec[0] = 1;                         /* state version */
    rec[1] = shape != REC_MANUAL ? COURIER_FREEZE_AUTO : COURIER_FREEZE_MANUAL; /* manual: sent when the app asks */
    unsigned flag = shape == REC_OLD_CLAIM ? 0x100u : shape == REC_RELEASED_UNINDEXED ? 0x200u : 0;
    put_le_bytes(rec + 2, COURIER_FREEZE_UNORDERED | flag, 2);
    int64_t now = (int64_t)time(NULL) * 1000; /* wall time, as the journal's clock */
    put_le_bytes(rec + 8, (uint64_t)now, 8);              /* created */
    put_le_bytes(rec + 16, (uint64_t)(now + 3600000), 8); /* expires */
    int64_t lease_end = now + 300000;
    if (shape == REC_RELEASED_UNINDEXED) {
        put_le_bytes(rec + 4, 1, 4);              /* attempts */
        put_le_bytes(rec + 24, (uint64_t)now, 8); /* next attempt: now */
        put_le_bytes(rec + 40, (uint64_t)now, 8); /* last attempt */
    }
    if (shape == REC_OLD_CLAIM) {
        put_le_bytes(rec + 4, 1, 4);                     /* attempts */
        put_le_bytes(rec + 24, (uint64_t)now, 8);        /* next attempt */
        put_le_bytes(rec + 32, (uint64_t)lease_end, 8);  /* lease end */
        put_le_bytes(rec + 40, (uint64_t)now, 8);        /* last attempt */
        put_le_bytes(rec + 48, claimer, 4);              /* owner pid */
        put_le_bytes(rec + 52, 1, 4);                    /* owner nonce */
    }
    size_t o = 88, hl = strlen(host), il = strlen(id), tl = strlen(text);
    if (o + 4 + hl + il + tl > sizeof rec) return -2;
    put_le_bytes(rec + o, hl, 2);
    memcpy(rec + o + 2, host, hl);
    o += 2 + hl;
    put_le_bytes(rec + o, il, 2);
    memcpy(rec + o + 2, id, il);
    o += 2 + il;
    memcpy(rec + o, text, tl);
    o += tl;

    char dir[512];
    snprintf(dir, sizeof dir, "%s/journal", store);
    void *env = NULL, *txn = NULL;
    unsigned dbi = 0;
    if (m.env_create(&env) != 0) return -2;
    m.env_set_maxdbs(env, 10);
    m.env_set_mapsize(env, (size_t)2 << 30);
    int rc = m.env_open(env, dir, LMDB_NOTLS, 0600);
    if (rc == 0) rc = m.txn_begin(env, NULL, 0, &txn);
    if (rc == 0) rc = m.dbi_open(txn, "req", 0, &dbi);
    uint8_t key[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    lmdb_val k = {8, key}, v = {o, rec};
    if (rc == 0) rc = m.put(txn, dbi, &k, &v, 0);
    if (rc == 0 && shape == REC_OLD_CLAIM) { /* `due`: lease end | seq, big-endian */
        uint8_t dk[16];
        for (int i = 0; i < 8; i++) dk[i] = (uint8_t)((uint64_t)lease_end >> (56 - 8 * i));
        memcpy(dk + 8, key, 8);
        lmdb_val duek = {16, dk}, empty = {0, ""};
        rc = m.dbi_open(txn, "due", 0, &dbi);
        if (rc == 0) rc = m.put(txn, dbi, &duek, &empty, 0);
    }
    if (rc == 0) rc = m.commit(txn);
    m.env_close(env);
    return rc == 0 ? 0 : -2;
}

static int write_record(const char *store, const char *host, const char *id, const char *text) {
    return write_record_as(store, host, id, text, REC_MANUAL, 0);
}

/* How many keys a database of store's journal holds (the engine closed), or -1. */
static long journal_keys(const char *store, const char *db) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/journal", store);
    long n = lmdb_shim_count_keys(dir, db);
    return n < 0 ? -1 : n;
}

/* A fresh store whose journal holds record 1 (`id`, `text`, for host), written behind the library's
 * back as another writer would, and an engine opened on it: *out. Returns 1, or 0 when liblmdb is
 * not there to write with (nothing is open then; the caller skips). */
static int open_on_foreign_record(courier_engine **out, const char *store, int port, const char *host, const char *id,
                                  const char *text) {
    *out = NULL;
    courier_engine *e = open_eng(store, port, NULL, NULL);
    CHECK(e != NULL);
    courier_engine_close(e); /* the journal exists, empty */
    int wrc = write_record(store, host, id, text);
    CHECK(wrc != -2);
    if (wrc != 0) {
        fprintf(stderr, "  (skipped: liblmdb not found)\n");
        return 0;
    }
    *out = open_eng(store, port, NULL, NULL);
    CHECK(*out != NULL);
    return *out != NULL;
}

/* Record 1 written behind the library's back in `shape` (write_record_as), with `due_keys` keys in
 * `due`; an engine opened on it sends the request once (to `path`, with its Idempotency-Key),
 * records its answer, and leaves `req` and `due` empty. */
static void record_in_shape_replays_once(int shape, const char *id, const char *path, const char *key, long due_keys) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    char host[64], text[1024];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", srv.port);
    snprintf(text, sizeof text,
             "{\"v\":1,\"id\":\"%s\",\"seq\":1,\"method\":\"POST\",\"url\":\"%s%s\",\"headers\":"
             "[[\"Idempotency-Key\",\"%s\"],[\"Content-Type\",\"text/plain\"]],\"body_b64\":\"aGVsbG8=\","
             "\"timeout_ms\":10000,\"idempotency_key\":\"%s\",\"policy\":\"auto\",\"ordered\":false,"
             "\"host\":\"%s\"}",
             id, host, path, key, key, host);
    pid_t dead = fork(); /* a pid that no longer runs: an old claim's owner */
    if (dead == 0) _exit(0);
    REQUIRE(dead > 0);
    waitpid(dead, NULL, 0);
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, srv.port, &o, NULL);
    REQUIRE(e);
    courier_engine_close(e); /* the journal exists, empty */
    int wrc = write_record_as(store, host, id, text, shape, (uint32_t)dead);
    CHECK(wrc != -2);
    if (wrc != 0) {
        fprintf(stderr, "  (skipped: liblmdb not found)\n");
        jr_stop(&srv);
        jr_free(&srv);
        return;
    }
    CHECK_EQ(journal_keys(store, "due"), due_keys);
    e = open_eng(store, srv.port, NULL, NULL);
    REQUIRE(e);
    CHECK_EQ(drain_within(e, 30000), 0);
    int code = -1, status = 0;
    CHECK_EQ(courier_frozen_last_outcome(&code, &status, NULL, e, id, NULL), COURIER_OK);
    CHECK_EQ(code, COURIER_OK);
    courier_engine_close(e);
    jr_stop(&srv);
    REQUIRE(jr_count(&srv) == 1);
    jr_hit h = jr_get(&srv, 0);
    CHECK_STR(h.path, path);
    CHECK_STR(h.key, key);
    CHECK_STR(h.body, "hello");
    jr_free(&srv);
    CHECK_EQ(journal_keys(store, "req"), 0);
    CHECK_EQ(journal_keys(store, "due"), 0);
}

/* A store in the shape written before claims left `due`: a record claimed by a process that died,
 * its `due` key at the lease's end. An engine opened on it takes the claim over (the scan finds the
 * dead owner; its key moves back to the next attempt), sends the request once, removes it, and
 * leaves `due` empty (no key left behind at the old lease's end). */
static void a_claim_in_the_old_shape_is_taken_over(void) {
    record_in_shape_replays_once(REC_OLD_CLAIM, "0000000000000001fedcba9876543210", "/old", "old-key", 1);
}

/* A claim given back by an older library (one from before JF_DUE_ON_RELEASE, opening the store
 * after this one crashed mid-replay) keeps the flag and has no `due` key: the scan finds it and
 * puts the key back, and it is replayed, once. */
static void a_claim_given_back_by_an_older_library_replays(void) {
    record_in_shape_replays_once(REC_RELEASED_UNINDEXED, "0000000000000001aaaabbbbccccdddd", "/released", "rel-key", 0);
}

static void a_record_another_writer_wrote_reads(void) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    static const char id[] = "0000000000000001abcdef0123456789"; /* generated form: record 1 */
    char host[64], text[1024];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", srv.port);
    snprintf(text, sizeof text,
             "{\"unknown\":{\"x\":[1,2.5,null,\"\\u00e9\"]},\"v\":1,\"id\":\"%s\",\"method\":\"PUT\",\"url\":"
             "\"http://127.0.0.1:%d\\/other\",\"headers\":[[\"X-Tab\",\"a\\tb\",\"extra\"],[\"Idempotency-Key\",\"key\\/1\"],"
             "[\"Content-Type\",\"text/plain\"]],\"timeout_ms\":1234.5,\"body_b64\":\"aGVsbG8=\",\"idempotency_key\":"
             "\"key/1\",\"policy\":\"manual\",\"ordered\":false,\"host\":\"%s\",\"retry\":[],\"method\":\"POST\"}",
             id, srv.port, host);
    courier_engine *e = NULL;
    if (!open_on_foreign_record(&e, store, srv.port, host, id, text)) {
        jr_stop(&srv);
        jr_free(&srv);
        return;
    }
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, id, NULL) == COURIER_OK);
    CHECK_STR(courier_frozen_method(f), "POST");
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/other", srv.port);
    CHECK_STR(courier_frozen_url(f), url);
    CHECK_STR(courier_frozen_idempotency_key(f), "key/1");
    CHECK_EQ(courier_frozen_header_count(f), 3);
    const char *n = NULL, *val = NULL;
    CHECK_EQ(courier_frozen_header_at(&n, &val, f, 0), COURIER_OK);
    CHECK_STR(n, "X-Tab");
    CHECK_STR(val, "a\tb");
    size_t blen = 0;
    const uint8_t *b = courier_frozen_body(f, &blen);
    CHECK_EQ(blen, 5);
    CHECK(b && memcmp(b, "hello", 5) == 0);
    courier_frozen_info info = {.size = sizeof info};
    CHECK_EQ(courier_frozen_get_info(&info, f), COURIER_OK);
    CHECK_EQ(info.timeout_ms, 0);
    CHECK_EQ(info.policy, COURIER_FREEZE_MANUAL);
    courier_frozen_free(f);

    CHECK_EQ(courier_frozen_resend(e, id, NULL), COURIER_OK);
    CHECK_EQ(drain_within(e, 30000), 0);
    int code = -1, status = 0;
    CHECK_EQ(courier_frozen_last_outcome(&code, &status, NULL, e, id, NULL), COURIER_OK);
    CHECK_EQ(code, COURIER_OK);
    CHECK_EQ(status, 200);
    courier_engine_close(e);
    jr_stop(&srv);
    REQUIRE(jr_count(&srv) == 1);
    jr_hit h = jr_get(&srv, 0);
    CHECK_STR(h.method, "POST");
    CHECK_STR(h.path, "/other");
    CHECK_STR(h.key, "key/1");
    CHECK_STR(h.body, "hello");
    jr_free(&srv);
}

/* The replay's request borrows the decoded record's method, url, headers and body, checked as the
 * setters check them: a header that may not be sent (a line break in its value, written by another
 * writer) keeps the record off the wire and is its final answer (the code courier_request_add_header
 * gives); the same record with a plain header (and a body but no Content-Type) is sent. */
static void a_replayed_record_is_checked_as_a_request(void) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    char host[64], text[1024];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", srv.port);
    static const char id[] = "0000000000000001abcdef0123456789";
    for (int bad = 1; bad >= 0; bad--) {
        const char *store = th_tmpdir();
        snprintf(text, sizeof text,
                 "{\"v\":1,\"id\":\"%s\",\"method\":\"POST\",\"url\":\"%s/checked/%d\",\"headers\":[[\"X-Note\",\"%s\"],"
                 "[\"Idempotency-Key\",\"k-%d\"]],\"body_b64\":\"aGVsbG8=\",\"timeout_ms\":0,\"idempotency_key\":\"k-%d\","
                 "\"policy\":\"manual\",\"ordered\":false,\"host\":\"%s\"}",
                 id, host, bad, bad ? "a\\r\\nX-Injected: 1" : "fine", bad, bad, host);
        courier_engine *e = NULL;
        if (!open_on_foreign_record(&e, store, srv.port, host, id, text)) {
            jr_stop(&srv);
            jr_free(&srv);
            return;
        }
        evlog log;
        ev_init(&log);
        courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
        CHECK_EQ(courier_frozen_resend(e, id, NULL), COURIER_OK);
        CHECK_EQ(drain_within(e, 30000), 0);
        int code = 1;
        CHECK_EQ(courier_frozen_last_outcome(&code, NULL, NULL, e, id, NULL), COURIER_OK);
        CHECK_EQ(code, bad ? COURIER_E_INVALID_HEADER : COURIER_OK); /* as courier_request_add_header says */
        courier_engine_close(e);
        CHECK_EQ(ev_count(&log, bad ? COURIER_FROZEN_EVENT_RESENT_FAILED : COURIER_FROZEN_EVENT_RESENT_SUCCEEDED), 1);
        ev_destroy(&log);
    }
    jr_stop(&srv);
    REQUIRE(jr_count(&srv) == 1); /* only the good one reached the server */
    jr_hit h = jr_get(&srv, 0);
    CHECK_STR(h.path, "/checked/0");
    CHECK_STR(h.key, "k-0");
    CHECK_STR(h.body, "hello");
    jr_free(&srv);
}

/* A record whose text does not decode (parsed by the journal thread once its claim is committed)
 * is never sent: the claim is given back as not tried, the record stays listed for the app to
 * remove, and no resend event is given. */
static void a_record_that_does_not_decode_is_set_aside(void) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    char host[64], text[256];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", srv.port);
    static const char id[] = "0000000000000001abcdef0123456789";
    snprintf(text, sizeof text, "{\"v\":1,\"id\":\"%s\",\"method\":\"POST\",\"url\":\"%s/cut", id, host);
    courier_engine *e = NULL;
    if (!open_on_foreign_record(&e, store, srv.port, host, id, text)) {
        jr_stop(&srv);
        jr_free(&srv);
        return;
    }
    evlog log;
    ev_init(&log);
    courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
    CHECK_EQ(courier_frozen_resend(e, id, NULL), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(count_of(e), 1);
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, id, NULL) == COURIER_OK);
    courier_frozen_info info = {.size = sizeof info};
    CHECK_EQ(courier_frozen_get_info(&info, f), COURIER_OK);
    CHECK_EQ(info.last_code, COURIER_E_JOURNAL_CORRUPT);
    CHECK_EQ(info.attempts, 0); /* claimed, then given back as not tried */
    courier_frozen_free(f);
    courier_engine_close(e);
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED) + ev_count(&log, COURIER_FROZEN_EVENT_RESENT_FAILED), 0);
    ev_destroy(&log);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), 0);
    jr_free(&srv);
}

/* A replay sends what was frozen byte for byte, though its strings are no longer copied out of the
 * record's parse but point into the parse's text (where escapes were undone in place) and its body
 * is decoded from base64 in place: header values with escapes (a quote, a backslash, a tab, a
 * slash, a 4-byte UTF-8 character, a literal "\u0041"), bodies of every length modulo 3 with NUL
 * and high bytes. With a listener (the events' snapshot takes the decoded request and lends it to
 * the send) and without (the claimed record's decoded request is lent). */
static void a_replay_sends_the_record_byte_exact(void) {
    static const char note[] = "q\"b\\s\t/x \xf0\x9f\x98\x80 \\u0041 \xe2\x82\xac";
    static const unsigned char bytes[70] = {0,    0xff, 'a', 0x01, '"', '\\', 0x80, 0xfe, '=', 0, 0x7f, 0x20,
                                            '\n', '\r', 0x1f, 0xc3, 0xbc, '/', '+', 0x00, 'z'};
    static const size_t lens[] = {1, 2, 3, 4, 5, 70};
    enum { N = sizeof lens / sizeof lens[0] };
    for (int listen = 0; listen <= 1; listen++) {
        jr_server srv;
        courier_engine *e = open_served(&srv, NULL);
        REQUIRE(e);
        evlog log;
        ev_init(&log);
        if (listen) courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
        waiter w;
        w_init(&w, e);
        CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
        for (int i = 0; i < N; i++) {
            char path[64], key[64];
            snprintf(path, sizeof path, "/exact/%d", i);
            snprintf(key, sizeof key, "k\\\"%d\t/\xc3\xbc", i);
            courier_request *r = NULL;
            courier_request_new(&r, "POST", path);
            CHECK_EQ(courier_request_add_header(r, "Idempotency-Key", key), COURIER_OK);
            CHECK_EQ(courier_request_add_header(r, "X-Note", note), COURIER_OK);
            CHECK_EQ(courier_request_set_body(r, bytes, lens[i], "application/octet-stream"), COURIER_OK);
            courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, COURIER_FREEZE_UNORDERED);
            CHECK_EQ(send_one(e, r, &w), COURIER_OK);
        }
        CHECK_EQ(w_wait(&w, N), N);
        for (int i = 0; i < N; i++) CHECK_EQ(w.codes[i], COURIER_E_FROZEN);
        CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
        CHECK_EQ(drain_within(e, 30000), 0);
        courier_engine_close(e);
        if (listen) CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED), N);
        ev_destroy(&log);
        jr_stop(&srv);
        REQUIRE(jr_count(&srv) == N);
        char line[128];
        snprintf(line, sizeof line, "\r\nX-Note: %s\r\n", note);
        for (size_t k = 0; k < N; k++) {
            jr_hit h = jr_get(&srv, k);
            int i = -1;
            CHECK(sscanf(h.path, "/exact/%d", &i) == 1 && i >= 0 && i < N);
            if (i < 0 || i >= N) continue;
            char key[64];
            snprintf(key, sizeof key, "k\\\"%d\t/\xc3\xbc", i);
            CHECK_STR(h.method, "POST");
            CHECK_STR(h.key, key);
            CHECK(strstr(h.head, line) != NULL);
            CHECK_EQ(h.body_len, lens[i]);
            CHECK(memcmp(h.body, bytes, lens[i]) == 0);
        }
        jr_free(&srv);
        w_destroy(&w);
    }
}

/* A body's base64 as another writer may write it: without its padding, cut after a character
 * that ends no byte, or padded early (what follows the first '=' is not read); a stray character
 * before the padding makes the record one that does not decode. Read as the list reads it. */
static void record_bodies_in_any_base64_read(void) {
    static const struct {
        const char *b64, *body; /* body NULL: the record does not decode */
    } cases[] = {
        {"aGVsbG8=", "hello"},  {"aGVsbG8", "hello"},  {"aGVsbA==", "hell"},   {"aGVsbA", "hell"},
        {"aGVsbGE", "hella"},   {"aGVs", "hel"},       {"aGVsbG8=junk!", "hello"}, {"", ""},
        {"aGVsbG8*", NULL},     {"aG!sbG8=", NULL},    {"aGVsbG8 ", NULL},
    };
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    static const char id[] = "0000000000000001abcdef0123456789";
    char host[64], text[1024];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", srv.port);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *store = th_tmpdir();
        snprintf(text, sizeof text,
                 "{\"v\":1,\"id\":\"%s\",\"method\":\"POST\",\"url\":\"%s/b64\",\"headers\":[[\"Idempotency-Key\","
                 "\"k\"]],\"body_b64\":\"%s\",\"timeout_ms\":0,\"idempotency_key\":\"k\",\"policy\":\"manual\","
                 "\"ordered\":false,\"host\":\"%s\"}",
                 id, host, cases[c].b64, host);
        courier_engine *e = NULL;
        if (!open_on_foreign_record(&e, store, srv.port, host, id, text)) break;
        courier_frozen *f = NULL;
        REQUIRE(courier_frozen_get(&f, e, id, NULL) == COURIER_OK);
        size_t blen = 99;
        const uint8_t *b = courier_frozen_body(f, &blen);
        courier_frozen_info info = {.size = sizeof info};
        CHECK_EQ(courier_frozen_get_info(&info, f), COURIER_OK);
        if (cases[c].body) {
            CHECK_EQ(info.last_code, 0);
            CHECK_EQ(blen, strlen(cases[c].body));
            CHECK(b && memcmp(b, cases[c].body, blen) == 0);
        } else {
            CHECK_EQ(info.last_code, COURIER_E_JOURNAL_CORRUPT);
        }
        courier_frozen_free(f);
        courier_engine_close(e);
    }
    jr_stop(&srv);
    jr_free(&srv);
}

static atomic_int answered;

static void count_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)code, (void)resp, (void)err, (void)user;
    atomic_fetch_add(&answered, 1);
}

/* The outcome log numbers each answer one past the last, across a replay's many commits (each
 * commit's answers after the first take the number on from the one before, not from a look-up),
 * and trims itself to the newest 1,000 once it holds 100 more: after 1,150 answers it holds
 * numbers 102 to 1,150, with no gap. */
static void outcome_log_numbers_and_trims(void) {
    enum { N = 1150 };
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    opts o = {.concurrency = 8};
    courier_engine *e = open_eng(store, srv.port, &o, NULL);
    REQUIRE(e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    atomic_store(&answered, 0);
    for (int i = 0; i < N; i++) {
        courier_request *r = freezable("POST", "/o", "n=1", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED);
        CHECK_EQ(courier_send(NULL, e, r, count_done, NULL, NULL), COURIER_OK);
        courier_request_free(r);
    }
    int64_t end = th_now_ms() + 60000;
    while (atomic_load(&answered) < N && th_now_ms() < end) usleep(10000);
    CHECK_EQ(count_of(e), N);
    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
    CHECK_EQ(drain_within(e, 120000), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), N);
    jr_free(&srv);

    lmdb_shim m;
    if (!lmdb_shim_load(&m)) {
        fprintf(stderr, "  (skipped: liblmdb not found)\n");
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/journal", store);
    void *env = NULL, *txn = NULL, *c = NULL;
    unsigned dbi = 0;
    REQUIRE(m.env_create(&env) == 0);
    m.env_set_maxdbs(env, 10);
    m.env_set_mapsize(env, (size_t)2 << 30);
    int rc = m.env_open(env, dir, LMDB_NOTLS | LMDB_RDONLY, 0600);
    if (rc == 0) rc = m.txn_begin(env, NULL, LMDB_RDONLY, &txn);
    if (rc == 0) rc = m.dbi_open(txn, "outcome", 0, &dbi);
    if (rc == 0) rc = m.cursor_open(txn, dbi, &c);
    CHECK_EQ(rc, 0);
    uint64_t first = 0, last = 0, n = 0;
    bool contiguous = true;
    lmdb_val k, v;
    for (int grc = c ? m.cursor_get(c, &k, &v, LMDB_FIRST) : -1; grc == 0; grc = m.cursor_get(c, &k, &v, LMDB_NEXT)) {
        uint64_t key = 0;
        for (size_t i = 0; i < 8 && k.size == 8; i++) key = key << 8 | ((const uint8_t *)k.data)[i];
        if (n == 0) first = key;
        else if (key != last + 1) contiguous = false;
        last = key;
        n++;
    }
    if (c) m.cursor_close(c);
    if (txn) m.abort(txn);
    m.env_close(env);
    CHECK_EQ(n, 1049);
    CHECK_EQ(first, 102);
    CHECK_EQ(last, N);
    CHECK(contiguous);
}

/* ---- the `due` keys of the newest records (store.c, due_catch_up) ------------------------------ */

/* Freezes n unordered automatic POSTs to /<prefix>/<i> through e (set offline), each answered
 * COURIER_E_FROZEN; the ids in w. */
static void freeze_offline(courier_engine *e, waiter *w, const char *prefix, int n) {
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    int before = w->n;
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/%s/%d", prefix, i);
        CHECK_EQ(send_one(e, freezable("POST", path, "b", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED), w), COURIER_OK);
    }
    CHECK_EQ(w_wait(w, before + n), before + n);
    for (int i = before; i < before + n; i++) CHECK_EQ(w->codes[i], COURIER_E_FROZEN);
}

/* Each of /<prefix>/0 .. n-1 arrived once. */
static void arrived_once(jr_server *srv, const char *prefix, int n) {
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/%s/%d", prefix, i);
        CHECK_EQ(jr_path_count(srv, path), 1);
    }
}

/* An automatic unordered freeze made offline commits its record and no `due` key (whose leaf and
 * branch were two of the six pages each freeze's synced commit wrote: Benchmarks/README.md, "Frozen
 * requests: freezes"). Counted in the closed store: `req` holds every request, `due` nothing. An
 * engine opened on it later (its first scan puts the keys) sends each once; nothing is left. */
static void offline_freezes_write_no_due_key(void) {
    enum { N = 20 };
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, srv.port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    freeze_offline(e, &w, "u", N);
    courier_engine_close(e);
    w_destroy(&w);
    long due = journal_keys(store, "due");
    if (due == -1) fprintf(stderr, "  (keys not counted: liblmdb not found)\n");
    else CHECK_EQ(due, 0);
    if (due != -1) CHECK_EQ(journal_keys(store, "req"), N);
    e = open_eng(store, srv.port, NULL, NULL);
    REQUIRE(e);
    CHECK_EQ(drain_within(e, 30000), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), N);
    arrived_once(&srv, "u", N);
    jr_free(&srv);
    if (due != -1) CHECK_EQ(journal_keys(store, "req"), 0);
    if (due != -1) CHECK_EQ(journal_keys(store, "due"), 0);
}

/* The network's return replays freezes that have no `due` key yet: the pass puts their keys before
 * it reads `due`. The poll is ten minutes, so no scan after the first turn could find them. */
static void the_network_return_replays_freezes_without_keys(void) {
    enum { N = 12 };
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    const char *store = th_tmpdir();
    opts o = {.poll_ms = 600000};
    courier_engine *e = open_eng(store, srv.port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    freeze_offline(e, &w, "n", N);
    CHECK_EQ(jr_count(&srv), 0);
    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
    CHECK_EQ(drain_within(e, 30000), 0);
    courier_engine_close(e);
    w_destroy(&w);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), N);
    arrived_once(&srv, "n", N);
    jr_free(&srv);
}

/* A paused engine, online, whose sends failed to connect: its freezes (unordered, due after one
 * short backoff) have no `due` key while it is paused. courier_frozen_resume wakes a turn that kicks
 * no replay-now; its look at `due` counts the newest records as due (store.c, due_behind), so the
 * pass runs, puts their keys and sends them. The poll is ten minutes: no scan finds them first. */
static void resume_replays_freezes_without_keys(void) {
    enum { N = 3 };
    const char *store = th_tmpdir();
    int port = jr_free_port(); /* nobody listens there yet */
    REQUIRE(port > 0);
    opts o = {.paused = 1, .poll_ms = 600000};
    courier_engine *e = open_eng(store, port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    for (int i = 0; i < N; i++) {
        char path[64];
        snprintf(path, sizeof path, "/r/%d", i);
        CHECK_EQ(send_one(e, freezable("POST", path, "b", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED), &w), COURIER_OK);
    }
    CHECK_EQ(w_wait(&w, N), N);
    for (int i = 0; i < N; i++) CHECK_EQ(w.codes[i], COURIER_E_FROZEN);
    jr_server srv;
    REQUIRE(jr_open(&srv, port) == 0);
    CHECK_EQ(courier_frozen_resume(e), COURIER_OK);
    CHECK_EQ(drain_within(e, 30000), 0);
    courier_engine_close(e);
    w_destroy(&w);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), N);
    arrived_once(&srv, "r", N);
    jr_free(&srv);
}

/* `due_upto` (meta) says every record up to it has its `due` key. Three freezes of an online engine
 * (a failed connect; the pass of each turn puts the keys and sets it to 3), the newest two removed:
 * the next freeze, offline, is numbered 2 again, not past it, so it is written with its key at once
 * (a record without its key below `due_upto` would be found only by the scan). */
static void a_reused_number_gets_its_due_key_at_once(void) {
    const char *store = th_tmpdir();
    int port = jr_free_port(); /* nobody listens there */
    REQUIRE(port > 0);
    opts o = {.poll_ms = 600000, .backoff_base = 600000, .backoff_max = 600000};
    courier_engine *e = open_eng(store, port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_one(e, freezable("POST", "/x", "b", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED), &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 3), 3);
    CHECK_EQ(courier_frozen_remove(e, w.ids[1], NULL), COURIER_OK);
    CHECK_EQ(courier_frozen_remove(e, w.ids[2], NULL), COURIER_OK);
    freeze_offline(e, &w, "again", 1);
    CHECK_EQ(count_of(e), 2);
    courier_engine_close(e);
    w_destroy(&w);
    long due = journal_keys(store, "due");
    if (due == -1) fprintf(stderr, "  (skipped: liblmdb not found)\n");
    else CHECK_EQ(due, 2);
}

TESTS_MAIN(T(corrupt_journal_is_kept_aside), T(emptied_journal_is_reported), T(truncated_journal_is_kept_aside),
           T(junk_over_the_last_pages_is_kept_aside), T(damaged_leaves_are_kept_aside),
           T(junk_anywhere_never_crashes), T(journal_cut_while_open_is_reported),
           T(batched_answers_remove_every_request), T(mixed_answers_in_one_batch),
           T(stored_request_reads_back_exactly), T(a_record_another_writer_wrote_reads),
           T(a_claim_in_the_old_shape_is_taken_over), T(a_claim_given_back_by_an_older_library_replays),
           T(a_replayed_record_is_checked_as_a_request), T(a_record_that_does_not_decode_is_set_aside),
           T(a_replay_sends_the_record_byte_exact), T(record_bodies_in_any_base64_read),
           T(outcome_log_numbers_and_trims), T(offline_freezes_write_no_due_key),
           T(the_network_return_replays_freezes_without_keys), T(resume_replays_freezes_without_keys),
           T(a_reused_number_gets_its_due_key_at_once))
