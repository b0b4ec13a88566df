#ifndef RELAYTRACE_CZSTD_SHIM_H
#define RELAYTRACE_CZSTD_SHIM_H
#include <zstd.h>
#include <zstd_errors.h>
#endif
