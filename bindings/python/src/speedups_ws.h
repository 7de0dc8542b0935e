/* courier._speedups: the WebSocket part (speedups_ws.c), added to the module by PyInit__speedups. */
#ifndef COURIER_SPEEDUPS_WS_H
#define COURIER_SPEEDUPS_WS_H
/* ws_init, ws_send, ws_next, WsWake, WS_NOTIFY and WS_USER_FREE into module m: 0, or -1 with an
 * exception set. */
int cr_speedups_ws_add(PyObject *m);
#endif
