/* The system's jansson for SwiftPM: CCore's C files include <jansson.h> themselves; this target only brings
   the include and library paths (from pkg-config: jansson.pc) and the install hint. */
#include <jansson.h>
