#ifndef SMP_CZLIB_SHIM_H
#define SMP_CZLIB_SHIM_H
// zlib for the zip reader of firmware packages: raw inflate of deflated entries and CRC-32.
#include <zlib.h>
#endif
