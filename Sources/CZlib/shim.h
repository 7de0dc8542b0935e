/* The system's zlib for SwiftPM: CCore's WebSocket permessage-deflate (CCore/engine/ws_deflate.c)
   compresses and inflates messages with it; this target brings the include and library paths (from
   pkg-config: zlib.pc) and the install hint. */
#include <zlib.h>
