// courier.h alone, as C++: -Wall -Wextra -Werror -pedantic.
#include "courier.h"
int courier_header_test_cxx();
int courier_header_test_cxx() { return COURIER_OK + static_cast<int>(sizeof(courier_metrics)) * 0; }
