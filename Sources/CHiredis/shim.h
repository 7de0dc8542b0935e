/* The system's hiredis for SwiftPM (the trait Redis): CCore's C files include <hiredis/hiredis.h>
   themselves; this target only brings the include and library paths (from pkg-config: hiredis.pc)
   and the install hint. */
#include <hiredis/hiredis.h>
