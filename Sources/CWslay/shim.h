/* The system's wslay for SwiftPM: CCore's WebSocket (CCore/engine/ws.c) includes <wslay/wslay.h>
   itself; this target brings the library (and the install hint). Debian's libwslay-dev has no
   pkg-config file, so the header and library are taken from the compiler's default paths. */
#include <wslay/wslay.h>
