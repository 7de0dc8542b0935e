/*
 * wake.c — what any thread tells the journal thread (journal.c): wake up for a turn, or replay
 * now (the network came back), and the replay concurrency. Under the journal's mu; nothing here
 * calls the thread's own functions, so the rooms above the store (policy.c: a policy added) and
 * the engine (the monitor) wake it through here, and so does the Redis store's listener
 * (store_redis_wake.c, cj_kick: it has the journal, not the engine, at close).
 */
#include "journal/journal_internal.h"

void cr_journal_set_concurrency(courier_engine *e, long n) {
    cr_journal *j = e ? cr_core(e)->journal : NULL;
    if (!j) return;
    const struct cr_frozen_conf *fc = &cr_core(e)->config->frozen;
    atomic_store(&j->concurrency, n > 0 ? n : fc->concurrency > 0 ? fc->concurrency : J_DEFAULT_CONCURRENCY);
    cr_journal_wake(e, CR_WAKE_TURN);
}

static void wake_j(cr_journal *j, unsigned how) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->kick = 1;
    if (how & CR_WAKE_REPLAY_NOW) {
        j->kick_mode |= J_KICK_NOW;
        j->kick_since = cj_jnow(j);
    }
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void cr_journal_wake(courier_engine *e, unsigned how) { wake_j(e ? cr_core(e)->journal : NULL, how); }

void cj_kick(cr_journal *j) { wake_j(j, CR_WAKE_TURN); }
