/* The system's lmdb for SwiftPM: CCore's C files include <lmdb.h> themselves; this target only brings
   the include and library paths (from pkg-config: lmdb.pc) and the install hint. */
#include <lmdb.h>
