/*
 * store_redis_replay.c — the journal's Redis store, the replay's side: new entries of the stream
 * taken into this engine's pending list (XREADGROUP), entries of engines silent for a lease taken
 * over (XAUTOCLAIM), this engine's own kept alive (XCLAIM JUSTID), the per-host heads of ordered
 * records, a pass (what is due, claimed for the wire) and the due times. store_redis.c has the
 * layout, the calls and the rest of the store; store_redis.h what the two share.
 */
#include "journal/store_redis.h"

#ifdef COURIER_REDIS

/* New entries of the stream become this engine's (its pending list). */
int cjr_adopt_new(cr_journal *j) {
    rargs a = {0};
    args_xreadgroup(&a, j);
    cr_redis_cmd c = cmd_of(&a);
    for (int round = 0; round < 100; round++) {
        redisReply *rep;
        int rc = cjr_run(j, &c, 1, &rep, true);
        if (rc) return rc;
        if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOGROUP", 7) == 0) {
            /* The group is gone (a Redis that lost its data, a clear by hand): made again. */
            freeReplyObject(rep);
            if ((rc = cjr_ensure_group(j))) return rc;
            continue;
        }
        courier_error e;
        if (cr_redis_reply_check(rep, "XREADGROUP", &e)) {
            freeReplyObject(rep);
            return cjr_remember(j, &e);
        }
        size_t got = 0;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && rep->element[0]->type == REDIS_REPLY_ARRAY &&
            rep->element[0]->elements == 2)
            got = rep->element[0]->element[1]->elements;
        freeReplyObject(rep);
        if (got < R_BATCH) break;
    }
    return 0;
}

/* Entries whose consumer was silent for a lease (a dead engine's) become this engine's. */
static int adopt_abandoned(cr_journal *j) {
    char cursor[48] = "0-0";
    for (int round = 0; round < 100; round++) {
        rargs a = {0};
        args_xautoclaim(&a, j, cursor);
        cr_redis_cmd c = cmd_of(&a);
        redisReply *rep;
        int rc = cjr_run(j, &c, 1, &rep, false);
        if (rc) return rc;
        bool more = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 && rep->element[0]->type == REDIS_REPLY_STRING &&
                    strcmp(rep->element[0]->str, "0-0") != 0;
        if (more) snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        freeReplyObject(rep);
        if (!more) break;
    }
    return 0;
}

/* A pass's first reads, new entries taken (XREADGROUP), abandoned ones taken over (XAUTOCLAIM)
 * and this engine's pending list (XPENDING), in one round trip: Redis runs a pipeline in order, so
 * the list has what the two before it took. When one of them had more than a batch, or answered an
 * error (the group gone: NOGROUP), the long way instead (each in turn, as often as needed, the
 * group made again). *pend: new, as cjr_my_pending's. */
static int pass_reads(cr_journal *j, redisReply **pend) {
    rargs a = {0}, b = {0}, p = {0};
    args_xreadgroup(&a, j);
    args_xautoclaim(&b, j, "0-0");
    args_xpending(&p, j);
    /* Abandoned entries looked for at most every R_ABANDONED_EVERY_MS (a lease is minutes; an
     * engine's entries given back at close are taken within a second, not at the next pass). */
    int64_t mono = cr_mono_ms();
    bool abandoned = mono - j->redis->abandoned_ms >= R_ABANDONED_EVERY_MS || !j->redis->abandoned_ms;
    cr_redis_cmd c[3] = {cmd_of(&a), cmd_of(&b), cmd_of(&p)};
    if (!abandoned) c[1] = c[2];
    size_t nc = abandoned ? 3 : 2;
    redisReply *rep[3] = {NULL, NULL, NULL};
    int rc = cjr_run(j, c, nc, rep, true);
    if (rc) return rc;
    if (!abandoned) { /* [XREADGROUP, XPENDING]: as if XAUTOCLAIM had found nothing */
        rep[2] = rep[1];
        rep[1] = NULL;
    }
    bool whole = rep[0]->type != REDIS_REPLY_ERROR && rep[2]->type == REDIS_REPLY_ARRAY &&
                 (!abandoned || rep[1]->type == REDIS_REPLY_ARRAY);
    if (whole && rep[0]->type == REDIS_REPLY_ARRAY && rep[0]->elements == 1 &&
        rep[0]->element[0]->type == REDIS_REPLY_ARRAY && rep[0]->element[0]->elements == 2 &&
        rep[0]->element[0]->element[1]->elements >= R_BATCH)
        whole = false; /* more new entries than a batch */
    if (whole && abandoned &&
        (rep[1]->elements < 2 || rep[1]->element[0]->type != REDIS_REPLY_STRING ||
         strcmp(rep[1]->element[0]->str, "0-0") != 0))
        whole = false; /* more abandoned ones than XAUTOCLAIM looked at */
    if (whole) {
        *pend = rep[2];
        rep[2] = NULL;
    }
    cr_redis_replies_free(rep, 3);
    if (whole) {
        if (abandoned) j->redis->abandoned_ms = mono;
        return 0;
    }
    rc = cjr_adopt_new(j);
    if (rc == 0) rc = adopt_abandoned(j);
    if (rc == 0) j->redis->abandoned_ms = mono;
    if (rc == 0) rc = cjr_my_pending(j, pend);
    return rc;
}

/* Claims ids again for this engine (JUSTID: no delivery counted), which restarts their idle time:
 * while it lives, no other engine's XAUTOCLAIM takes them. `min_idle` guards against taking back
 * what another engine took over meanwhile. */
static int keep_alive(cr_journal *j, const char **ids, size_t n, int64_t min_idle) {
    for (size_t i = 0; i < n; i += R_BATCH) {
        const char *v[R_BATCH + 8];
        size_t len[R_BATCH + 8];
        char idle[24];
        int k = 0;
        v[k++] = "XCLAIM";
        v[k++] = j->redis->keys[K_STREAM];
        v[k++] = R_GROUP;
        v[k++] = j->redis->consumer;
        snprintf(idle, sizeof idle, "%lld", (long long)min_idle);
        v[k++] = idle;
        for (size_t m = i; m < n && m < i + R_BATCH; m++) v[k++] = ids[m];
        v[k++] = "JUSTID";
        for (int m = 0; m < k; m++) len[m] = strlen(v[m]);
        cr_redis_cmd c = {k, v, len};
        redisReply *rep;
        int rc = cjr_run(j, &c, 1, &rep, false);
        if (rc) return rc;
        freeReplyObject(rep);
    }
    return 0;
}

/* The head of a host's ordered queue (0: none), not counting records removed in this turn (their
 * removal is written at the commit). */
static int host_head(cr_journal *j, struct cj_rtxn *t, const char *host, size_t hl, uint64_t *seq) {
    *seq = 0;
    char lo[J_HOST_MAX + 3], hi[J_HOST_MAX + 3];
    lo[0] = '[';
    hi[0] = '(';
    memcpy(lo + 1, host, hl);
    memcpy(hi + 1, host, hl);
    lo[hl + 1] = '\0';
    hi[hl + 1] = '\1';
    rargs a = {0};
    args(&a, "ZRANGEBYLEX");
    argk(&a, j, K_HOSTQ);
    arg(&a, lo, hl + 2);
    arg(&a, hi, hl + 2);
    args(&a, "LIMIT");
    args(&a, "0");
    args(&a, "64");
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    for (size_t i = 0; !*seq && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        if (rep->element[i]->len <= hl + 1) continue;
        uint64_t s = strtoull(rep->element[i]->str + hl + 1, NULL, 10);
        jstate unused;
        if (deferred_state(t, s, &unused) >= 0) *seq = s;
    }
    freeReplyObject(rep);
    return 0;
}

/* host's index in r->hosts (added when new; -1: out of memory). *last: the index found before,
 * tried first (a pending list is mostly runs of one host). */
static long host_index(cj_redis *r, const char *host, size_t hl, long *last) {
    if (*last >= 0 && (size_t)*last < r->nhosts && r->hosts[*last].len == hl && memcmp(r->hosts[*last].name, host, hl) == 0)
        return *last;
    for (size_t i = 0; i < r->nhosts; i++)
        if (r->hosts[i].len == hl && memcmp(r->hosts[i].name, host, hl) == 0) return *last = (long)i;
    if (r->nhosts == r->caphosts) {
        size_t cap = r->caphosts ? r->caphosts * 2 : 8;
        struct rhost *h = realloc(r->hosts, cap * sizeof *h);
        if (!h) return -1;
        r->hosts = h;
        r->caphosts = cap;
    }
    struct rhost *h = &r->hosts[r->nhosts];
    memcpy(h->name, host, hl);
    h->name[hl] = '\0';
    h->len = hl;
    h->head = 0;
    h->known = false;
    return *last = (long)r->nhosts++;
}

/* The head of the host r->hosts[k], read once per pass (host_head). */
static int head_of(cr_journal *j, struct cj_rtxn *t, long k, uint64_t *seq) {
    struct rhost *h = &j->redis->hosts[k];
    if (!h->known) {
        int rc = host_head(j, t, h->name, h->len, &h->head);
        if (rc) return rc;
        h->known = true;
    }
    *seq = h->head;
    return 0;
}

static int cmp_waiting(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = ((const struct rwaiting *)b)->seq;
    return x < y ? -1 : x > y;
}

/* seq noted waiting for the head of host k (kept ascending: a seq below the last one is left for
 * the next full read). */
static void note_waiting(cj_redis *r, uint64_t seq, long k) {
    if (r->nwaiting && r->waiting[r->nwaiting - 1].seq >= seq) return;
    if (r->nwaiting == r->capwaiting) {
        size_t cap = r->capwaiting ? r->capwaiting * 2 : 256;
        struct rwaiting *w = realloc(r->waiting, cap * sizeof *w);
        if (!w) return; /* only a hint: its state is read next pass */
        r->waiting = w;
        r->capwaiting = cap;
    }
    r->waiting[r->nwaiting++] = (struct rwaiting){seq, (uint32_t)k};
}

/* The texts of the records of seqs[0..n) (their states read ahead in t) that this pass will
 * likely claim, read ahead in one round trip, at most *left of them: due (or in a replay-now),
 * not claimed by a live lease, not expired, automatic and unordered (an ordered record waits for
 * the head of its host, a manual one for a replay-now that includes it: read when claimed). */
static void texts_ahead(cr_journal *j, struct cj_rtxn *t, const uint64_t *seqs, size_t n, int64_t now, unsigned mode,
                        int64_t since, long *left) {
    uint64_t *want = malloc(n * sizeof *want);
    if (!want) return;
    size_t k = 0;
    for (size_t i = 0; i < n && (long)k < *left; i++) {
        rcached *c = cjr_cached(t, seqs[i]);
        jstate st;
        if (!c || !c->state || c->state->type != REDIS_REPLY_STRING) continue;
        int kept = deferred_state(t, seqs[i], &st);
        if (kept < 0 || (!kept && !cj_state_decode(c->state->str, c->state->len, &st))) continue;
        if (st.claim_ms && !cj_claim_stale(j, &st, now)) continue;
        if (st.expires_ms <= now || st.policy == COURIER_FREEZE_MANUAL || is_ordered_auto(&st)) continue;
        if (due_time(&st) > now && !((mode & J_KICK_NOW) && st.last_ms < since)) continue;
        want[k++] = seqs[i];
    }
    if (k && cjr_read_texts(j, t, want, k) == 0) *left -= (long)k;
    free(want);
}

/* A pass: new entries and the abandoned ones become this engine's; its own are kept alive; then
 * each of its records is looked at as the LMDB store's due index would give it (cj_consider):
 * automatic ones that are not ordered, and the head of each host's ordered queue (wherever it
 * is pending: only its holder sends it). */
int cjr_pass(cr_journal *j, cj_txn *txn, int64_t now, long slots, unsigned mode, int64_t since, jsend ***sends,
                  jevent ***events, int64_t *next, bool *mode_done) {
    cj_redis *r = j->redis;
    *next = INT64_MAX;
    *mode_done = true;
    /* This pass reads the heads another engine's handoff may have changed (a message after this
     * wakes another turn); the listener starts with the first pass, before this engine holds
     * anything another engine could hand it. */
    atomic_store(&r->woken, false);
    cjr_wake_start(j);
    redisReply *pend = NULL;
    int rc = pass_reads(j, &pend);
    if (rc) return rc;
    size_t n = pend->elements;
    const char **stale = calloc(n ? n : 1, sizeof *stale);
    uint64_t *seqs = calloc(n ? n : 1, sizeof *seqs);
    size_t nstale = 0, nseq = 0;
    if (!stale || !seqs) rc = ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        redisReply *e = pend->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_STRING) continue;
        uint64_t s = seq_of_id(e->element[0]->str);
        if (s) seqs[nseq++] = s;
        if (e->element[2]->type == REDIS_REPLY_INTEGER && e->element[2]->integer > j->lease_ms / 3)
            stale[nstale++] = e->element[0]->str;
    }
    if (rc == 0 && nstale) rc = keep_alive(j, stale, nstale, j->lease_ms / 3);
    free(stale);
    jseqs expired = {0};
    bool full = false;
    int64_t next_due = INT64_MAX;
    struct cj_rtxn *t = (struct cj_rtxn *)txn;
    /* Host heads looked up once per pass, each host's (hosts interleaved in the pending list cost
     * one ZRANGEBYLEX each, not one per change of host). */
    for (size_t k = 0; k < r->nhosts; k++) r->hosts[k].known = false;
    long last_k = -1;
    /* The ordered records found waiting are skipped unread while their host's head is another
     * record; every R_WAITING_EVERY_MS the list is made again from all the states (a record
     * changed meanwhile, by another engine or the API, is seen then). */
    int64_t mono = cr_mono_ms();
    bool full_read = !r->waiting_ms || mono - r->waiting_ms >= R_WAITING_EVERY_MS;
    if (full_read) {
        r->nwaiting = 0;
        r->nhosts = 0;
    } else if (r->nwaiting) {
        size_t kept = 0;
        for (size_t i = 0; rc == 0 && i < nseq; i++) {
            const struct rwaiting *w = bsearch(&seqs[i], r->waiting, r->nwaiting, sizeof *r->waiting, cmp_waiting);
            uint64_t head;
            if (w && (rc = head_of(j, t, (long)w->host, &head)) == 0 && head != seqs[i]) continue; /* still waits */
            seqs[kept++] = seqs[i];
        }
        nseq = kept;
    }
    /* The states of this engine's records, a thousand per round trip, kept by the turn (rec_get
     * reads them there), and the texts of those it is about to claim, in one round trip more. */
    size_t send = 0;
    long texts_left = slots;
    for (size_t i = 0; rc == 0 && i < nseq; i++) {
        if (i == send) {
            /* Every slot taken: the records after this batch wait for the next pass (which runs as
             * soon as answers free slots: due_now), their states unread. So a pass reads about as
             * many states as it can claim, not the whole pending list each time (quadratic in a
             * long replay: a replay of 8,000 read 14 x 8,000 states). An expired one among them
             * is swept by the pass that reaches it. */
            if (full) break;
            size_t m = nseq - i < R_BATCH ? nseq - i : R_BATCH;
            send = i + m;
            if ((rc = cjr_read_states(j, t, seqs + i, m))) break;
            if (texts_left > 0) texts_ahead(j, t, seqs + i, m, now, mode, since, &texts_left);
        }
        rcached *ahead = cjr_cached(t, seqs[i]);
        if (!ahead || !ahead->state) {
            rc = ENOMEM;
            break;
        }
        const redisReply *sv = ahead->state;
        jstate st;
        if (sv->type != REDIS_REPLY_STRING) continue; /* removed meanwhile */
        int kept = deferred_state((struct cj_rtxn *)txn, seqs[i], &st);
        if (kept < 0) continue; /* removed in this turn */
        if (!kept && !cj_state_decode(sv->str, sv->len, &st)) continue; /* does not decode: for the app to see and remove */
        if (st.claim_ms && !cj_claim_stale(j, &st, now)) {
            if (due_time(&st) < next_due) next_due = due_time(&st);
            continue; /* on the wire */
        }
        if (st.expires_ms <= now) {
            cj_seqs_add(&expired, seqs[i]);
            continue;
        }
        if (st.policy == COURIER_FREEZE_MANUAL) {
            if ((mode & J_KICK_MANUAL) && st.last_ms < since && !full)
                rc = j->pass->consider_manual(j, txn, seqs[i], &st, now, &slots, mode, sends, next, mode_done, &full);
            continue;
        }
        if (is_ordered_auto(&st)) {
            long k = host_index(r, st.host, st.host_len, &last_k);
            uint64_t head;
            if (k < 0) {
                rc = ENOMEM;
                break;
            }
            if ((rc = head_of(j, t, k, &head))) break;
            if (head != seqs[i]) { /* waits for the one before it */
                note_waiting(r, seqs[i], k);
                continue;
            }
        }
        if (full) {
            if (due_time(&st) < next_due) next_due = due_time(&st);
            continue;
        }
        rc = j->pass->consider(j, txn, seqs[i], &st, NULL, 0, now, &slots, mode, since, sends, events, next, mode_done, &full);
        if (rc == 0 && due_time(&st) < next_due) next_due = due_time(&st); /* as written (a claim: the lease's end) */
    }
    if (rc == 0 && expired.n) rc = j->pass->sweep_expired(j, txn, expired.v, expired.n, now, events);
    free(expired.v);
    free(seqs);
    freeReplyObject(pend);
    r->due_now = full;
    r->next_due = next_due;
    if (rc == 0 && full_read) r->waiting_ms = mono;
    if (rc) r->waiting_ms = 0; /* a failed pass: the next one reads every state */
    return rc;
}

void cjr_due_edges(cr_journal *j, cj_txn *txn, int64_t now, bool *due_now, int64_t *next_due) {
    (void)txn;
    *due_now = j->redis->due_now || j->redis->next_due <= now;
    *next_due = j->redis->next_due > now ? j->redis->next_due : INT64_MAX;
}

/* Whether the group has entries no consumer took yet (XINFO GROUPS' lag; unknown counts as yes). */
static bool undelivered(cr_journal *j) {
    rargs a = {0};
    args(&a, "XINFO");
    args(&a, "GROUPS");
    argk(&a, j, K_STREAM);
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    if (cjr_run(j, &c, 1, &rep, false)) return true;
    bool any = true;
    for (size_t g = 0; rep->type == REDIS_REPLY_ARRAY && g < rep->elements; g++) {
        redisReply *m = rep->element[g];
        bool ours = false;
        long long lag = -1;
        for (size_t k = 0; m->type == REDIS_REPLY_ARRAY && k + 1 < m->elements; k += 2) {
            redisReply *key = m->element[k], *val = m->element[k + 1];
            if (key->type != REDIS_REPLY_STRING) continue;
            if (strcmp(key->str, "name") == 0) ours = val->type == REDIS_REPLY_STRING && strcmp(val->str, R_GROUP) == 0;
            else if (strcmp(key->str, "lag") == 0 && val->type == REDIS_REPLY_INTEGER) lag = val->integer;
        }
        if (ours) any = lag != 0;
    }
    freeReplyObject(rep);
    return any;
}

/* Without a pass: what the last pass saw, whether another engine handed this one a host's head
 * (woken: store_redis_wake.c), and whether entries wait to be taken (another engine's freezes,
 * this engine's own before its first pass). Every poll interval (scan) a pass looks again anyway:
 * for claims of the silent. */
int cjr_peek(cr_journal *j, int64_t now, bool scan, bool *due_now, int64_t *next_due, jseqs *dead,
                  jseqs *expired) {
    (void)dead, (void)expired;
    cjr_due_edges(j, NULL, now, due_now, next_due);
    if (scan || atomic_load(&j->redis->woken) || (!*due_now && undelivered(j))) *due_now = true;
    return 0;
}

#endif /* COURIER_REDIS */
