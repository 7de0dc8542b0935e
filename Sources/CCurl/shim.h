/* The system's libcurl for SwiftPM: CCore's C files include <curl/curl.h> themselves; this target only brings
   the include and library paths (from pkg-config: libcurl.pc) and the install hint. */
#include <curl/curl.h>
