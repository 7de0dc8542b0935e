/* The system's OpenSSL libcrypto for SwiftPM: CCore's WebSocket handshake (CCore/engine/ws.c)
   takes its SHA-1 from <openssl/evp.h>; this target brings the include and library paths (from
   pkg-config: libcrypto.pc) and the install hint. */
#include <openssl/evp.h>
