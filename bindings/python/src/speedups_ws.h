/* courier._speedups: the WebSocket part (speedups_ws.c), added to the module by PyInit__speedups. */
#ifndef COURIER_SPEEDUPS_WS_H
#define COURIER_SPEEDUPS_WS_H
/* ws_init, ws_send, ws_next, ws_read, WsWake, WsAio, WS_NOTIFY and WS_USER_FREE into module m: 0, or -1 with an
 * exception set. */
int cr_speedups_ws_add(PyObject *m);

/* From speedups.c, for WsAio: a new Pending of `loop` as an awaitable yields it (the task parks on
 * it); a future's state (0 pending, 1 done, 2 cancelled; -1 not a Pending); settle(fut, value, exc,
 * direct): fut done with value (exc NULL) or exc, its callbacks (the task's wake-up) run now when
 * direct (only from a loop callback that is no task's step), else scheduled with loop.call_soon.
 * -1 with an exception when setting it failed. The GIL held. */
PyObject *cr_speedups_pending_parked(PyObject *loop);
int cr_speedups_pending_state(PyObject *fut);
int cr_speedups_settle(PyObject *fut, PyObject *value, PyObject *exc, int direct);
#endif
