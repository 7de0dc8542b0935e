/*
 * courier/group.h — groups: batches and chains of requests.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_GROUP_H
#define COURIER_INC_GROUP_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Groups: batches and chains of requests (group.c)                                            */
/* ========================================================================================== */

/* A group runs several requests on one engine and completes once, when they are all done
 * (HLNetworking's request groups with maxRequestCount, YTKNetwork's batch and chain requests,
 * HTNetworking's batch and ifRequestSucceed:then:else:). Each member is sent with courier_send and
 * cancelled with courier_cancel, so it is an ordinary request with its own id: retry, cache,
 * mock, logging and event monitors apply to it unchanged.
 *
 * Batch: members start in index order, at most max_in_flight at once (0, the default: all at
 * once); the group completes when every member has finished. With fail-fast, the first failure
 * of a member not marked COURIER_GROUP_CONTINUE_ON_FAILURE cancels the members on the wire, and
 * the ones not yet started are never sent.
 * Chain: members run one after another in index order (max_in_flight does not apply). A member
 * added with a build callback makes its request when its turn comes, from the result of the
 * member before it. A failure stops the chain (the rest are never sent) unless the failed member
 * is marked COURIER_GROUP_CONTINUE_ON_FAILURE.
 *
 * Every member gets exactly one result: its completion's code and response; or the code of a
 * send that failed (courier_send's code, or its build callback's); or COURIER_OK without a
 * response when its build callback skipped it; or COURIER_E_CANCELLED ("not sent") when the group
 * stopped before its turn.
 *
 * Threads: build a group on one thread. courier_group_start, courier_group_cancel,
 * courier_group_result, courier_group_take_response, courier_group_count and courier_group_free
 * may then be called from any thread. The group's callbacks (build, member, done) run on the
 * thread that moves the group on: mostly the engine's worker thread (as members complete), but
 * also the thread calling courier_group_start (the first members' builds, and everything when no
 * member reaches the network), courier_group_cancel or courier_group_free. They must not block
 * for long and must not close the engine.
 *
 * Engine: a group keeps a borrowed pointer to its engine. courier_engine_close completes a running
 * group (its members complete with COURIER_E_CANCELLED, later sends fail with COURIER_E_CLOSED);
 * after the engine is closed only courier_group_result, courier_group_take_response,
 * courier_group_count and courier_group_free may be called. */
typedef struct courier_group courier_group;

typedef enum courier_group_mode {
    COURIER_GROUP_BATCH = 0, /* all members run (concurrently, up to max_in_flight) */
    COURIER_GROUP_CHAIN = 1  /* members run in order, one at a time */
} courier_group_mode;

/* Member flags (courier_group_add, courier_group_add_built). */
typedef enum courier_group_flag {
    /* A failure of this member does not stop a chain or trigger fail-fast, and does not make the
     * group's code a failure. */
    COURIER_GROUP_CONTINUE_ON_FAILURE = 1
} courier_group_flag;

/* Builds a member's request when its turn comes (the seeds' flattenMap: a request made from the
 * previous response). In a chain, prev_code and prev_response are the result of the member just
 * before (COURIER_OK and NULL for the first member, or when that member was skipped); in a batch
 * they are always COURIER_OK and NULL. prev_response is borrowed for the call (the group keeps it;
 * courier_group_result may read any earlier member). Set *out_request to a new request (the group
 * takes it) and return COURIER_OK to send it; leave it NULL and return COURIER_OK to skip this
 * member; or return a negative code to fail this member with it (a request left in *out_request
 * is freed). Runs on the thread that moves the group (see above). */
typedef int (*courier_group_build_fn)(courier_group *group, size_t index, int prev_code,
                                      const courier_response *prev_response, courier_request **out_request,
                                      void *user);
/* Told each member's result as it is set (exactly once per member, before the group completes).
 * `response` is borrowed for the call (the group keeps it). May call courier_group_add. */
typedef void (*courier_group_member_fn)(courier_group *group, size_t index, int code, const courier_response *response,
                                        void *user);
/* Called exactly once when the group completes, after every member callback. code: COURIER_OK
 * when no member failed (members marked COURIER_GROUP_CONTINUE_ON_FAILURE are not counted);
 * COURIER_E_CANCELLED when courier_group_cancel (or courier_group_free) stopped it; otherwise the
 * code of the failure that stopped a chain or a fail-fast batch, or in a plain batch the failed
 * member with the lowest index. failed_index: that member's index, or -1. `group` is borrowed: the
 * callback may read and take results, and may call courier_group_free. */
typedef void (*courier_group_done_fn)(courier_group *group, int code, int64_t failed_index, void *user);

/* A new, empty group on `engine` (borrowed: see "Engine" above). *out is new: release it with
 * courier_group_free. Errors: COURIER_E_INVALID_ARGUMENT (NULL, unknown mode), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_new(courier_group **out, courier_engine *engine, courier_group_mode mode);
/* Cancels the group if it is running (as courier_group_cancel) and releases the caller's hold on
 * it: the memory, the responses not taken and the callbacks' users (user_free) are released when
 * its run has ended. Accepts NULL. Any thread, including the group's own callbacks. */
COURIER_API void courier_group_free(courier_group *group);

/* Batch only: nonzero makes the first counted failure cancel the rest. Before start.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, or already started). */
COURIER_API int courier_group_set_fail_fast(courier_group *group, int fail_fast);
/* Batch only: at most `max` members on the wire at once (HLNetworking's maxRequestCount); 0 (the
 * default) means no limit of the group's own (the engine's connection limits still hold). Before
 * start. Errors: COURIER_E_INVALID_ARGUMENT (NULL, max < 0, or already started). */
COURIER_API int courier_group_set_max_in_flight(courier_group *group, int max);
/* A callback told each member's result (NULL removes it). user_free (may be NULL) runs once,
 * when the group is released, or at once if this fails. Before start.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, or already started), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_set_member_callback(courier_group *group, courier_group_member_fn fn, void *user,
                                                  courier_user_free_fn user_free);

/* Appends a member that sends `request`. The group TAKES the request in every case, success or
 * failure: do not use or free it afterwards. flags: courier_group_flag bits. *out_index (may be
 * NULL) receives the member's index (0, 1, ...). Allowed until the group completes; while it runs,
 * adding is dependable from the group's own callbacks (a build or member callback), which run
 * before it can complete. Errors: COURIER_E_INVALID_ARGUMENT (NULL, unknown flags, or the group
 * has completed), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_add(size_t *out_index, courier_group *group, courier_request *request, unsigned flags);
/* Appends a member whose request is made by `build` when its turn comes. user_free (may be NULL)
 * runs once, when the group is released, or at once if this fails. Errors as courier_group_add. */
COURIER_API int courier_group_add_built(size_t *out_index, courier_group *group, courier_group_build_fn build,
                                        void *user, courier_user_free_fn user_free, unsigned flags);
/* From inside member `index`'s build callback only: sends `request` (borrowed for the call;
 * courier_send copies it) as that member's request, for callers whose requests live in a scope
 * (Swift's, Python's context managers) and cannot hand one over. The build callback's return
 * value and *out_request are then ignored (a request left there is freed). Returns the send's
 * code: on failure the member fails with it (err, may be NULL, says why). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, or not inside that member's build callback, or called twice),
 * COURIER_E_CANCELLED (the group stopped meanwhile: nothing is sent), or courier_send's codes. */
COURIER_API int courier_group_submit(courier_group *group, size_t index, const courier_request *request,
                                     courier_error *err);

/* Starts the group. `done` (may be NULL) is called exactly once when it completes — on this thread
 * before this returns when nothing needs the network (an empty group, a group cancelled before
 * start, members that all fail to send). user_free (may be NULL) runs once, after `done` has
 * returned, or at once if this fails. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or already
 * started), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_start(courier_group *group, courier_group_done_fn done, void *user,
                                    courier_user_free_fn user_free);
/* Cancels the whole group: members on the wire are cancelled (they complete with
 * COURIER_E_CANCELLED unless they finish first), members not started are never sent, and the group
 * completes with COURIER_E_CANCELLED (unless a failure had already stopped it). Before start, the
 * cancel is remembered and start completes the group at once. Any thread. Returns COURIER_OK, or
 * COURIER_E_NOT_FOUND when the group has already completed (or is completing). */
COURIER_API int courier_group_cancel(courier_group *group);

/* The number of members. Any thread. */
COURIER_API size_t courier_group_count(const courier_group *group);
/* A member's result, once it has one (from its member callback on, and always once the group has
 * completed). *out_code: its code; *out_response: borrowed, valid until courier_group_take_response takes
 * it or the group is released (NULL when none); *out_request_id: its id (0 when it was never sent;
 * also written when there is no result yet); *error: its detail (cleared when code is
 * COURIER_OK). Every out-parameter may be NULL. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL group), COURIER_E_NOT_FOUND (index out of range, or
 * the member has no result yet). */
COURIER_API int courier_group_result(int *out_code, const courier_response **out_response, uint64_t *out_request_id,
                                     const courier_group *group, size_t index, courier_error *error);
/* Takes a member's response once the group has completed (in or after its done callback): new,
 * release it with courier_response_free; the group no longer has it. NULL when there is none, it
 * was taken already, or the group has not completed. Any thread. */
COURIER_API courier_response *courier_group_take_response(courier_group *group, size_t index);
/* The group's engine (borrowed). */
COURIER_API courier_engine *courier_group_engine(const courier_group *group);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_GROUP_H */
