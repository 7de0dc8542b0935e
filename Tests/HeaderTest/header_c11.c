/* courier.h alone, as strict C11: -std=c11 -Wall -Wextra -Werror -pedantic. */
#include "courier.h"
int courier_header_test_c11(void);
int courier_header_test_c11(void) { return COURIER_OK + (int)sizeof(courier_error) * 0; }
