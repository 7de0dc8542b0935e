/*
 * cstress_frozen.h — the long chaos run of `courier stress frozen`: frozen requests on a journal on
 * Redis Cluster, made and replayed by several processes while the journal's master is SIGKILLed
 * (its replica takes over) and replayer processes are SIGKILLed, then a check from the receiving
 * side of what arrived. The bounded form is journal_redis_cluster_test's
 * test_chaos_processes_masters_killed.
 *
 * Processes: `freezers` freezer processes, each offline (every send frozen) and freezing, every
 * 20 ms, an unordered request to a shared host and, every 4th time, an ordered one to a host of
 * its own (waiting for its answer before going on, so that host's freeze order is known), with WAIT
 * `replicas`; `replayers` replayer processes replaying the journal. Both are the caller's program
 * started again: child_argv (NULL-terminated) followed by one argument, a spec the child passes to
 * cstress_frozen_child. A loopback recorder in the calling process receives every replay and notes
 * its Idempotency-Key.
 *
 * Kills: `kills` times, evenly over the duration, the master of the journal's slot is SIGKILLed
 * (scripts/redis-fixture kill on its node in cluster_dir), the run waits until its replica took
 * over, restarts it (it rejoins as a replica) and waits until it is in sync; a replayer process is
 * SIGKILLed with each master kill and started again. Then the freezers stop, the replayers drain
 * the journal, and the recorder's arrivals are checked.
 *
 * Threads: one run at a time per process (the recorder, children and readers are the run's own).
 */
#ifndef CSTRESS_FROZEN_H
#define CSTRESS_FROZEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cstress_frozen_config {
    const char *journal_url;          /* redis+cluster://...#name */
    const char *cluster_dir;          /* scripts/redis-fixture cluster's DIR (node0..node5): needed for kills */
    const char *fixture;              /* the path of scripts/redis-fixture */
    const char *store_dir;            /* the children's stores go in store_dir/pN (made here) */
    const char *const *child_argv;    /* how to start this program again as a child (spec appended) */
    int freezers, replayers;          /* processes (>= 1 each) */
    int replicas;                     /* each freeze's WAIT N */
    int64_t replicas_timeout_ms;      /* its timeout */
    double duration_s;                /* how long the freezers run */
    int kills;                        /* master kills during it */
    int64_t drain_timeout_ms;         /* how long the replayers may take to empty the journal after */
} cstress_frozen_config;

typedef struct cstress_frozen_result {
    int64_t answered;      /* freezes answered */
    int64_t acknowledged;  /* answered COURIER_E_FROZEN */
    int64_t unconfirmed;   /* answered COURIER_E_REPLICAS_UNCONFIRMED */
    int64_t failed;        /* answered anything else (the journal unreachable during a failover) */
    int failed_code;       /* the code of the first of those (by freezer, kind and number), 0 if none */
    int64_t delivered;     /* distinct requests that arrived */
    int64_t arrivals;      /* arrivals, duplicates included */
    int64_t lost;          /* acknowledged, never arrived */
    int64_t order_violations; /* an acknowledged ordered request whose first arrival came after a later one's */
    int64_t key_mismatches;   /* an arrival whose Idempotency-Key is not its first arrival's, or is not one
                                 the journal made (missing, not 32 characters) */
    int64_t left;          /* requests still in the journal when the drain gave up (-1: unknown) */
    int kills_done;        /* master kills that ended with the replica promoted */
    int replayer_kills;
    double seconds;        /* wall time of the whole run */
    char first_error[256];
} cstress_frozen_result;

/* Runs it. Returns 0 when it ran (the figures say what held), or a negative courier_code when it
 * could not (out->first_error says why; COURIER_E_REDIS_UNSUPPORTED when built without Redis). */
int cstress_frozen_run(const cstress_frozen_config *cfg, cstress_frozen_result *out);

/* A child's work (the spec it was started with): returns its exit status. */
int cstress_frozen_child(const char *spec);

#ifdef __cplusplus
}
#endif

#endif
