#ifndef RELAYTRACE_CSQLITE_SHIM_H
#define RELAYTRACE_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
