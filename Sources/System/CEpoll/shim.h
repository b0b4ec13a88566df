#ifndef RELAYTRACE_CEPOLL_SHIM_H
#define RELAYTRACE_CEPOLL_SHIM_H
/* Linux readiness notification for the event loop (Sources/Net/EventLoop.swift): epoll and eventfd,
   which Swift's Glibc module does not export. Both come with libc6-dev. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
