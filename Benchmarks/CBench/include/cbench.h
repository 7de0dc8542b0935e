/*
 * cbench.h — the C side of Courier's benchmarks.
 *
 * Each transport client here is measured without Swift in the way:
 *   - cbench_curl_multi: a plain libcurl multi loop, the ceiling any libcurl-based client can reach;
 *   - cbench_courier_c:  the Courier C API (include/courier.h) driven from C.
 * Both send `total` GETs of one URL with `concurrency` requests in flight over keep-alive, after a
 * warm-up of `warmup` requests on the same connections that is not timed.
 *
 * Plus the little process plumbing the benchmark needs to run nginx as its server: a free port,
 * waiting for a port to accept, and a child process that cannot outlive the benchmark.
 *
 * Nothing here is thread-safe unless stated; each function is called from one thread.
 */
#ifndef CBENCH_H
#define CBENCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- transport ------------------------------------------------------------------------------- */

/* What one timed phase measured. */
typedef struct cbench_result {
    double seconds;          /* wall time of the timed phase (warm-up excluded) */
    long completed;          /* requests that finished, successfully or not */
    long errors;             /* failures plus responses whose status was not 200 */
    int64_t body_bytes;      /* response body bytes received in the timed phase */
    char first_error[256];   /* the first error seen, "" when none */
    double cpu_seconds;      /* CPU time (user + system) of this whole process during the timed
                                phase: steadier than wall time on a busy machine */
    /* Transport clients only, over the client's whole life (warm-up and timed phase): */
    long connections;        /* new connections the client made, as it counts them (libcurl's
                                CURLINFO_NUM_CONNECTS per transfer; Courier's metrics: transfers
                                whose connection_reused is 0) */
    int http_version;        /* the HTTP version of the last successful transfer: 11, 20, ... 0 if none */
} cbench_result;

/* How the transport clients talk to the server; NULL (or all zero) is plain defaults. */
typedef struct cbench_transport_options {
    const char *ca_file; /* the CA the server's certificate is signed by (CURLOPT_CAINFO, or
                            courier_config_set_ca_file); NULL: the system's */
    int multiplex;       /* the libcurl loops set what Courier sets over TLS: CURLMOPT_PIPELINING
                            CURLPIPE_MULTIPLEX and CURLOPT_PIPEWAIT, so requests wait for the first
                            connection's ALPN answer and share it over h2 instead of each opening its
                            own (curl's http2-download example) */
} cbench_transport_options;

/* A libcurl multi loop: `concurrency` easy handles reused, curl_multi_poll, a finished handle is
 * re-added at once while requests remain; bodies are discarded into a counter.
 * Returns 0, or -1 when libcurl could not be set up (out->first_error says why). */
int cbench_curl_multi(const char *url, long total, int concurrency, long warmup,
                      const cbench_transport_options *options, cbench_result *out);

/* The same loop sending the request Courier sends by default: its User-Agent and Accept-Encoding
 * header lines (the encodings this libcurl decodes, with CURLOPT_ACCEPT_ENCODING "" so that it
 * decodes them), set the way Courier sets them. The like-for-like ceiling: cbench_curl_multi sends
 * neither header, and libcurl formats every header line byte by byte. */
int cbench_curl_multi_headers(const char *url, long total, int concurrency, long warmup,
                              const cbench_transport_options *options, cbench_result *out);

/* The Courier C API: courier_engine_open with max connections per host >= concurrency, then
 * `concurrency` requests in flight with courier_send; each completion frees its response and
 * sends the next request; the caller waits on a condition variable until all have completed.
 * Coalescing is turned off (courier_request_set_coalesce 0): each send is one network request.
 * Returns 0, or a negative courier_code when the engine could not be opened or nothing could be
 * sent (out->first_error says why). */
int cbench_courier_c(const char *url, long total, int concurrency, long warmup,
                     const cbench_transport_options *options, cbench_result *out);

/* libcurl's built-in CA bundle (CURLINFO_CAINFO of a fresh handle) into out. Returns 0, or -1
 * when this libcurl has none or it does not fit. */
int cbench_curl_default_cainfo(char *out, size_t size);

/* What nginx's stub_status says (GET of `url`, trusting `ca_file` when not NULL): connections
 * accepted and requests served so far, this request and its connection included. Returns 0, or -1
 * (error gets why, up to error_size bytes). */
int cbench_nginx_status(const char *url, const char *ca_file, long *accepts, long *requests, char *error,
                        size_t error_size);

/* CPU time (user + system) this process has used so far, in seconds. */
double cbench_process_cpu_seconds(void);

/* stream_bench.c: one GET of url read whole as it arrives, its bytes counted and dropped: by a
 * plain libcurl easy transfer with a discarding write callback, and through a Courier stream (the
 * most the engine held in *max_held). buffer_size: CURLOPT_BUFFERSIZE (0: libcurl's 16 KiB; Courier's
 * streams use 256 KiB). 0, or -1 on a failure. Wall and process CPU seconds. */
int cbench_stream_curl(const char *url, long buffer_size, int64_t *bytes, double *wall_s, double *cpu_s);
int cbench_stream_courier(const char *url, int64_t *bytes, int64_t *max_held, double *wall_s, double *cpu_s);

/* ---- processes and ports --------------------------------------------------------------------- */

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and released), or -1. */
int cbench_free_port(void);

/* Waits until 127.0.0.1:port accepts a TCP connection. Returns 0, or -1 after timeout_ms. */
int cbench_wait_port(int port, int timeout_ms);

typedef struct cbench_child cbench_child;

/* Starts argv[0] (an absolute path) with arguments argv (NULL-terminated), its stdin from
 * /dev/null and its stdout and stderr appended to `log_path` (NULL: /dev/null). On Linux the child
 * receives SIGTERM if this process dies (PR_SET_PDEATHSIG, tied to a helper thread that lives as
 * long as the child), so a killed benchmark leaves no server behind.
 * *out is new: release it with cbench_child_stop. Returns 0 or a negative errno value. */
int cbench_child_start(cbench_child **out, const char *const *argv, const char *log_path);

/* The child's process id. */
long cbench_child_pid(const cbench_child *child);

/* 1 while the child runs, 0 once it has exited (then *status, if not NULL, gets its wait status). */
int cbench_child_running(cbench_child *child, int *status);

/* Sends SIGTERM (then SIGKILL after grace_ms), reaps the child and frees the handle. Accepts NULL.
 * Safe to call from any thread, once per child. */
void cbench_child_stop(cbench_child *child, int grace_ms);

/* ---- cache (lmdb_cache_bench.c) ---------------------------------------------------------------- */

/* What one cache benchmark run measured. */
typedef struct cbench_cache_result {
    double put_ops;      /* single-put commits per second (one put, one commit) */
    double get_ops;      /* hits per second, one thread */
    double get_ops_2t;   /* hits per second, two threads together */
    double get_ns_p50;   /* median latency of one hit, nanoseconds */
    long errors;         /* failed puts or gets (a get that misses counts) */
    char first_error[256];
} cbench_cache_result;

/* The key of entry i: 32 bytes of text (out gets 32 + NUL). Bodies are 1 KiB. */
void cbench_cache_key(long i, char out[33]);

/* Raw LMDB in `dir` (created): `timed_puts` single-put commits of keys 0.. (with `durability`'s
 * flags: a courier_cache_durability), the rest of `entries` loaded untimed in big transactions,
 * then `gets` random hits on 1 and 2 threads (a reset read transaction renewed per get, the value
 * copied out), then 20,001 timed single gets for the median. Returns 0 or -1. */
int cbench_cache_raw(const char *dir, long entries, long timed_puts, long gets, int durability,
                     cbench_cache_result *out);

/* The same through the Courier C cache API (courier_cache_put_key, courier_cache_get_key with
 * the response freed) on an engine whose store is `dir` and whose cache durability is
 * `durability`: every entry is put one call (one commit) at a time; the first `timed_puts` are
 * timed. Returns 0 or a negative courier_code. */
int cbench_cache_courier(const char *dir, long entries, long timed_puts, long gets, int durability,
                         cbench_cache_result *out);

/* Puts measured side by side, like the gets below: a writer holds a store open (raw LMDB with the
 * flags of `durability`, or a Courier engine with that cache durability) and the caller alternates
 * chunks of single-put commits between the writers. Keys 0..capacity-1 (capacity > 0); with
 * `scattered` (raw only), key i*step mod capacity for a step coprime with capacity: every key once,
 * in a scattered order, as a store of hashed keys receives them. */
typedef struct cbench_cache_writer cbench_cache_writer;
cbench_cache_writer *cbench_cache_writer_open(int kind, const char *dir, long capacity, int durability, int scattered);
/* Puts keys from..from+n-1 (in the writer's order), one commit each; adds the wall and the calling
 * thread's CPU time. Returns the puts that failed. */
long cbench_cache_writer_puts(cbench_cache_writer *w, long from, long n, double *wall_s, double *cpu_s);
void cbench_cache_writer_close(cbench_cache_writer *w);

/* Gets measured side by side. On a shared machine the load drifts from second to second, so
 * gets measured in separate phases (raw, then Courier seconds later) compare two different
 * machines. A reader opens a store that cbench_cache_raw or cbench_cache_courier loaded, and the
 * caller alternates small chunks of gets between the readers (and the Swift facade), summing wall
 * and CPU time per reader: a load change then slows them alike. */
typedef struct cbench_cache_reader cbench_cache_reader;
#define CBENCH_CACHE_RAW 0     /* raw LMDB: a reset read transaction per thread, renewed per get */
#define CBENCH_CACHE_COURIER 1 /* courier_cache_get_key on an engine with the default durability */
/* Opens the store in `dir` holding keys 0..entries-1. NULL on failure. */
cbench_cache_reader *cbench_cache_reader_open(int kind, const char *dir, long entries);
/* `n` random hits on each of `threads` threads (1 or 2), keys drawn from `seed`: adds the wall time
 * (until the last thread is done) to *wall_s and the threads' CPU time to *cpu_s. Returns the gets
 * that failed or missed. */
long cbench_cache_reader_gets(cbench_cache_reader *r, long n, int threads, uint64_t seed, double *wall_s,
                              double *cpu_s);
/* The median latency of `samples` single gets, in nanoseconds. */
double cbench_cache_reader_p50(cbench_cache_reader *r, int samples, uint64_t seed);
void cbench_cache_reader_close(cbench_cache_reader *r);
/* Raw readers only: with nocopy, a get looks at the value in the map (its first and last bytes)
 * instead of copying it out: the ceiling as LMDB's own benchmarks take it. */
void cbench_cache_reader_set_nocopy(cbench_cache_reader *r, int nocopy);
/* The calling thread's CPU time (user + system) so far, in seconds. */
double cbench_thread_cpu_seconds(void);

/* ---- mapping (mapping_bench.c) --------------------------------------------------------------- */

/* The mapping benchmark's document: a JSON array of `count` objects of 10 mixed fields (id, name,
 * email, price, quantity, active, rating, created_at, tags, note), about 210 bytes each, the same
 * bytes on every call. New: release with cbench_mapping_document_free. NULL on no memory. */
char *cbench_mapping_document(int count, size_t *len);
void cbench_mapping_document_free(char *doc);
/* Raw jansson: json_loadb (no flags) and a walk that reads every value; returns a checksum, -1 on
 * a parse error. _parse_only skips the walk (for the profile). */
long long cbench_jansson_parse_walk(const void *data, size_t len);
long long cbench_jansson_parse_only(const void *data, size_t len);
/* A courier_mapping of the document's 10 fields with their types (renames: id -> identifier,
 * created_at -> createdAt, which makes the core build new objects). Opaque here; free with
 * cbench_mapping_free. */
void *cbench_mapping_new(int renames);
void cbench_mapping_free(void *mapping);
/* The core: courier_json_tape_parse (limits, duplicate keys refused) + courier_mapping_apply_tape,
 * then both freed; returns the number of mapped objects, -1 on failure. _jansson_run: the same on
 * a jansson document (courier_json_parse + courier_mapping_apply). _paths_agree: 1 when both give
 * the same output. _parse_only: the jansson parse alone; _parse_split: that parse with the
 * top-level array split across the processors. */
long long cbench_mapping_run(const void *data, size_t len, const void *mapping);
long long cbench_mapping_jansson_run(const void *data, size_t len, const void *mapping);
int cbench_mapping_paths_agree(const void *data, size_t len, const void *mapping);
long long cbench_mapping_parse_only(const void *data, size_t len);
long long cbench_mapping_parse_split(const void *data, size_t len);
/* The Swift decoder's parse alone: courier_json_tape_parse (the same limits and checks), freed;
 * returns the number of tape entries, -1 on failure. */
long long cbench_tape_parse_only(const void *data, size_t len);

/* ---- frozen requests (frozen_bench.c) -------------------------------------------------------- */

/* The journal's store of the engines the functions below open: NULL or "" their store directory's
 * (LMDB, the default); a redis:// URL: a Redis journal per store directory (named after its last
 * path component). */
void cbench_frozen_set_journal(const char *location);
/* With a Redis journal: each freeze followed by WAIT replicas timeout_ms
 * (courier_config_set_frozen_replicas); 0 (the default): no WAIT. */
void cbench_frozen_set_replicas(int replicas, int64_t timeout_ms);

/* The ceiling: n single-put commits of value_bytes each into a fresh LMDB environment in `dir`
 * opened as the journal opens its own (LMDB's default durability: every commit synced; MDB_NOTLS,
 * the same map size and database count), keys numbered upwards and appended, as the journal
 * writes its records. completed = commits. Returns 0 or a negative errno value. */
int cbench_lmdb_sync_commits(const char *dir, long n, size_t value_bytes, cbench_result *out);
/* The size of one frozen request as the journal stores it (state and request text, the value of
 * one `req` record): freezes a few of the benchmark's POSTs to `url` into `store` (a fresh
 * directory) and returns the mean value size in bytes, or 0 when it cannot be measured. The raw
 * commits are measured with this size, like for like. */
long cbench_frozen_record_bytes(const char *store, const char *url);
/* Freezes n POSTs of a 70-byte JSON body to `url` through the Courier C API: an engine on `store`
 * (replay paused) set offline, `concurrency` sends in flight, each completion (COURIER_E_FROZEN,
 * after its durable commit) sending the next. With concurrency > 1 the journal groups concurrent
 * freezes into one commit. Returns 0 or a negative courier_code. */
int cbench_frozen_freeze(const char *store, const char *url, long n, int concurrency, cbench_result *out);
/* Replays every frozen request of `store` (to the URLs they were frozen with) with `concurrency`
 * replays in flight, timed from resume until the journal is empty (or timeout_ms). completed =
 * answers (events), errors = failed resends + requests left. Returns 0 or a negative courier_code. */
int cbench_frozen_replay(const char *store, int concurrency, long timeout_ms, cbench_result *out);
/* The same POSTs sent normally (not frozen) with `concurrency` in flight: the engine's own
 * transport rate to compare replay with. Returns 0 or a negative courier_code. */
int cbench_frozen_transport(const char *url, long n, int concurrency, cbench_result *out);

/* ---- the cache on Redis (redis_cache_bench.c) ----------------------------------------------- */

typedef struct cbench_redis_result {
    double hiredis_get_ops, hiredis_put_ops; /* a plain hiredis GET / SET loop, one connection */
    double courier_get_ops, courier_put_ops; /* courier_cache_get_key / courier_cache_put_key */
    long errors;
    char first_error[256];
} cbench_redis_result;

/* `entries` puts of value_size-byte bodies under cbench_cache_key keys, then `gets` random hits,
 * each side by side with hiredis in `chunks` alternating chunks, on the Redis at `url` (its keys
 * removed after); a redis+cluster:// URL: hiredis sends each command to its slot's master. 0; -1 when it cannot connect or open (first_error says why); -2 in a build
 * without Redis. */
int cbench_redis_cache(const char *url, long entries, long gets, int chunks, size_t value_size,
                       cbench_redis_result *out);

#ifdef __cplusplus
}
#endif

#endif /* CBENCH_H */
