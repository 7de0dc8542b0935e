/*
 * store_redis_wake.c — the journal's Redis store, the handoff between engines: a thread per
 * replaying engine subscribed to its own channel ("<tag>:wake:<consumer>"), on which another
 * engine's removal script PUBLISHes when it made a record this engine holds the head of its
 * host's ordered queue (store_redis_calls.c, the script's `handoff`). Only a head's holder sends
 * it, and without this it learnt of its new head at its next poll (10 s by default): a backlog of
 * one ordered host split in blocks between two replayers drained a block per poll interval.
 * docs/design/redis-handoff.md has the why and the figures.
 *
 * Threads: the listener (its own, "courier-jwake"); cjr_wake_start from the journal thread (a
 * pass), cjr_wake_stop from the store's close (after the journal thread ended). The listener
 * touches the journal only through cj_kick and `woken`.
 */
#include "journal/store_redis.h"

#ifdef COURIER_REDIS

#include <sys/socket.h>

/* After a failed connect or a lost connection the listener tries again this much later; after a
 * refused SUBSCRIBE (an ACL user without channel permissions) twice as late each time, up to the
 * most (the poll interval still finds the work meanwhile). */
#define R_WAKE_RETRY_MS 1000
#define R_WAKE_RETRY_MAX_MS 60000

struct cjr_wake {
    cr_journal *j;
    pthread_t thread;
    pthread_mutex_t mu; /* stop, fd */
    pthread_cond_t cv;  /* stop was set */
    bool stop;
    int fd; /* the subscribed connection's socket (-1: none), shut down by stop to end its read */
    char channel[sizeof ((cj_redis *)0)->keys[0] + sizeof ((cj_redis *)0)->consumer + 8];
};

void cjr_wake_channel(const cj_redis *r, char *buf, size_t cap) {
    size_t tag = r->keylen[K_STREAM] - strlen("stream"); /* "{courier:journal:NAME}:" */
    snprintf(buf, cap, "%.*swake:%s", (int)tag, r->keys[K_STREAM], r->consumer);
}

/* Work may be waiting for this engine: the next turn's peek says so, and its pass looks. */
static void woken(cr_journal *j) {
    atomic_store(&j->redis->woken, true);
    cj_kick(j);
}

static bool stopping(struct cjr_wake *w) {
    pthread_mutex_lock(&w->mu);
    bool stop = w->stop;
    pthread_mutex_unlock(&w->mu);
    return stop;
}

/* One connection's life: SUBSCRIBE, then every message wakes the journal. Returns when the
 * connection fails or stop shut it down: false when Redis refused the SUBSCRIBE. */
static bool listen_on(struct cjr_wake *w, redisContext *ctx) {
    const char *argv[2] = {"SUBSCRIBE", w->channel};
    redisReply *rep = redisCommandArgv(ctx, 2, argv, NULL);
    if (!rep) return true; /* (the connection failed: not a refusal) */
    bool ok = rep->type == REDIS_REPLY_ARRAY;
    freeReplyObject(rep);
    if (!ok) return false;
    /* Subscribed: what was published before (while this engine was not listening, or before its
     * first subscription) is found by the pass this wakes. */
    woken(w->j);
    for (;;) {
        void *m = NULL;
        if (redisGetReply(ctx, &m) != REDIS_OK || !m) return true;
        freeReplyObject(m);
        woken(w->j);
    }
}

static void *wake_main(void *arg) {
    struct cjr_wake *w = arg;
    cr_thread_set_name("courier-jwake");
    int64_t retry_ms = R_WAKE_RETRY_MS;
    for (int attempt = 0; !stopping(w); attempt++) {
        redisContext *ctx = NULL;
        courier_error err;
        bool refused = false;
        if (cr_redis_connect_alone(w->j->redis->db, attempt, &ctx, &err) == COURIER_OK) {
            pthread_mutex_lock(&w->mu);
            bool stop = w->stop;
            if (!stop) w->fd = ctx->fd;
            pthread_mutex_unlock(&w->mu);
            if (!stop) refused = !listen_on(w, ctx);
            pthread_mutex_lock(&w->mu);
            w->fd = -1;
            pthread_mutex_unlock(&w->mu);
            redisFree(ctx);
        }
        if (!refused) retry_ms = R_WAKE_RETRY_MS;
        int64_t wait_ms = retry_ms;
        if (refused) retry_ms = retry_ms * 2 > R_WAKE_RETRY_MAX_MS ? R_WAKE_RETRY_MAX_MS : retry_ms * 2;
        pthread_mutex_lock(&w->mu);
        if (!w->stop) {
            struct timespec until = cr_cond_deadline(wait_ms * 1000);
            pthread_cond_timedwait(&w->cv, &w->mu, &until);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

void cjr_wake_start(cr_journal *j) {
    cj_redis *r = j->redis;
    if (r->wake) return;
    struct cjr_wake *w = calloc(1, sizeof *w);
    if (!w) return;
    w->j = j;
    w->fd = -1;
    cjr_wake_channel(r, w->channel, sizeof w->channel);
    pthread_mutex_init(&w->mu, NULL);
    cr_cond_init(&w->cv);
    if (pthread_create(&w->thread, NULL, wake_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return;
    }
    cr_thread_name(w->thread, "courier-jwake");
    r->wake = w;
}

void cjr_wake_stop(cr_journal *j) {
    struct cjr_wake *w = j->redis ? j->redis->wake : NULL;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    if (w->fd >= 0) shutdown(w->fd, SHUT_RDWR); /* ends the listener's blocked read */
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
    j->redis->wake = NULL;
}

#endif /* COURIER_REDIS */
