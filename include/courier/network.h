/*
 * courier/network.h — network reachability (the network monitor).
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_NETWORK_H
#define COURIER_INC_NETWORK_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Network reachability (the network monitor)                                                  */
/* ========================================================================================== */

/* The engine's view of the network. UNKNOWN (before any evidence) behaves as online. */
typedef enum courier_reachability {
    COURIER_REACHABILITY_UNKNOWN = 0,
    COURIER_REACHABILITY_OFFLINE = 1,
    COURIER_REACHABILITY_ONLINE = 2
} courier_reachability;

/* Where the engine's view comes from. Any response (any status) means online. With from_errors
 * nonzero, a request that cannot resolve its host or cannot connect means offline (default 0: a
 * server being down does not make the engine offline). While offline (detected, not set by the
 * app), a probe runs every interval_ms (0: 5 000): `probe` is an http(s) URL (a HEAD through the
 * engine; any response means online) or "host:port" / "tcp://host:port" (a TCP connect); NULL or
 * "" probes the host:port that failed. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_INVALID_URL. */
COURIER_API int courier_config_set_reachability(courier_config *config, int from_errors, const char *probe,
                                                int64_t interval_ms);
/* The current courier_reachability. Any thread. */
COURIER_API int courier_reachability_status(const courier_engine *engine);
/* The app's word (a phone knows better): holds until the app says otherwise or gives detection
 * back with courier_reachability_set_automatic. A change to online starts a replay of the due
 * frozen requests, whatever their backoff: an automatic replay, so while replay is paused
 * (courier_frozen_pause, courier_config_set_frozen_paused) it waits for courier_frozen_resume, and
 * a change back to offline first voids it. Any thread. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_reachability_set_online(courier_engine *engine);
COURIER_API int courier_reachability_set_offline(courier_engine *engine);
COURIER_API int courier_reachability_set_automatic(courier_engine *engine);

/* A reachability listener: runs on the engine's journal thread with the new courier_reachability,
 * once per change (quick flaps may be collapsed into the latest state). Must not block for long
 * and must not close the engine. */
typedef void (*courier_reachability_fn)(courier_reachability status, void *user);
/* Adds one; *out_token (may be NULL) receives its token, never 0. user_free as for frozen-request
 * listeners. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_reachability_add_listener(uint64_t *out_token, courier_engine *engine,
                                                  courier_reachability_fn fn, void *user,
                                                  courier_user_free_fn user_free);
/* Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. */
COURIER_API int courier_reachability_remove_listener(courier_engine *engine, uint64_t token);

/* Network kinds (HLNetworking's WWAN / WiFi status; the network-layer design's limits per kind).
 * The monitor knows the kind of the path and whether it is expensive from a source: the operating
 * system (courier_config_set_network_watch) or the app (courier_reachability_report). */
typedef enum courier_network_kind {
    COURIER_NETWORK_UNKNOWN = 0,  /* no source said, or no path */
    COURIER_NETWORK_WIRED = 1,    /* Ethernet */
    COURIER_NETWORK_WIFI = 2,     /* Wi-Fi (the kernel's wireless or phy80211 links) */
    COURIER_NETWORK_CELLULAR = 3, /* a cellular modem (wwan links); expensive */
    COURIER_NETWORK_OTHER = 4     /* loopback, tunnels, anything else */
} courier_network_kind;

/* Nonzero: the engine watches the operating system's network path from open to close: on Linux
 * a NETLINK_ROUTE socket (links and routes); the interface of the default route gives the kind
 * (its ARPHRD type and /sys/class/net: wireless or phy80211 is Wi-Fi, DEVTYPE=wwan or raw IP is
 * cellular and expensive, Ethernet is wired); no default route (or its link down) is offline. On
 * Darwin Network.framework's path monitor. Its reports go where courier_reachability_report's go.
 * Default 0 (the kind stays UNKNOWN unless the app reports one). Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_network_watch(courier_config *config, int watch);
/* Limits that hold while the path is of `kind`: requests in flight per host and in all (as
 * courier_config_set_max_connections_per_host / _max_connections), and frozen requests replayed at
 * once (as courier_config_set_frozen_replay's concurrency); 0 keeps the engine's own value. A change
 * of kind applies the new kind's limits at once: queued requests start (or keep waiting) under
 * them, replays follow them. Errors: COURIER_E_INVALID_ARGUMENT (an unknown kind, negative values). */
COURIER_API int courier_config_set_network_limits(courier_config *config, courier_network_kind kind,
                                                  int max_per_host, int max_total, int replay_concurrency);
/* 0: this request must not go over a cellular path (YTKNetwork's allowsCellularAccess = NO): while
 * the kind is CELLULAR it fails with COURIER_E_CELLULAR, at send or, if queued, as soon as the kind
 * becomes cellular. Default 1. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_request_set_allow_cellular(courier_request *request, int allow);
/* A source's report, as the OS watch makes them (tests, and apps with a source of their own):
 * status ONLINE or OFFLINE sets what the monitor detected (the app's word from
 * courier_reachability_set_online/_offline still wins; UNKNOWN leaves it as it is), kind and
 * expensive describe the path. Any thread. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_reachability_report(courier_engine *engine, courier_reachability status,
                                            courier_network_kind kind, int expensive);
/* The path's kind and whether it is expensive (*out_expensive may be NULL). Online or offline is
 * courier_reachability_status. Any thread. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_reachability_path(courier_network_kind *out_kind, int *out_expensive,
                                          const courier_engine *engine);
/* The kind of a network interface by name ("lo", "eth0", "wlan0"), read from the kernel through
 * netlink (RTM_GETLINK) and /sys/class/net as the OS watch reads them. Linux only. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, too long, or not Linux), COURIER_E_NOT_FOUND (no such
 * interface), COURIER_E_INTERNAL (netlink failed; os_error set). */
COURIER_API int courier_network_link_kind(courier_network_kind *out_kind, int *out_expensive, const char *interface,
                                          courier_error *err);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_NETWORK_H */
