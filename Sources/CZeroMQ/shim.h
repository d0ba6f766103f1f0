#include <zmq.h>

#ifdef __linux__
#include <sys/eventfd.h>
#include <pthread.h>

// Glibc's Swift module map leaves out <sys/eventfd.h>, and pthread_setname_np
// needs _GNU_SOURCE; these wrappers expose both to the ZeroMQ module.
static inline int signfleet_eventfd(unsigned int initval, int flags) {
    return eventfd(initval, flags);
}

int pthread_setname_np(pthread_t thread, const char *name);
static inline int signfleet_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}
#endif
