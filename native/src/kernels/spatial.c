/*
 * spatial.c - padding modes, pixel shuffles and sampling (being written).
 */
#include "../kernel.h"

const px_kernel_def px_kernels_spatial[] = {
    {NULL, NULL, NULL},
};
