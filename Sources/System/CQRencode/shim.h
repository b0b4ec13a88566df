#ifndef RELAYTRACE_CQRENCODE_SHIM_H
#define RELAYTRACE_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
