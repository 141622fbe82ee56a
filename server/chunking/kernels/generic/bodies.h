// Every algorithm's stage-1 body, <Function>Body for each row of
// CHUNKD_KERNEL_FUNCTIONS (../functions.h): the list a kernel set's
// translation unit includes inside its namespace (README.md), one file per
// algorithm. No include guard: each translation unit includes it once.
#include "chunking/kernels/generic/buzhash.h"
#include "chunking/kernels/generic/crc32.h"
#include "chunking/kernels/generic/fastcdc.h"
#include "chunking/kernels/generic/rabin.h"
#include "chunking/kernels/generic/repmaxcdc.h"
#include "chunking/kernels/generic/seqcdc.h"
