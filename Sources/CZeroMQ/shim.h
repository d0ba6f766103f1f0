#include <zmq.h>

#ifdef __linux__
#include <sys/eventfd.h>
#include <pthread.h>

// Glibc's Swift module map leaves out <sys/eventfd.h>, and pthread_setname_np
// needs _GNU_SOURCE; these wrappers expose both to the ZeroMQ module.
static inline int signfleet_eventfd(unsigned int initval, int flags) {
    return eventfd(initval, flags);
}

#include <sys/epoll.h>

// epoll for the I/O loop's readiness set (ReadinessSet.swift). `struct epoll_event` is packed on
// x86-64, so Swift never touches it: these wrappers trade in a plain 64-bit key per fd.
static inline int signfleet_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

static inline int signfleet_epoll_add(int epfd, int fd, unsigned long long key) {
    struct epoll_event event = {0};
    event.events = EPOLLIN;
    event.data.u64 = key;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

static inline int signfleet_epoll_remove(int epfd, int fd) {
    struct epoll_event event = {0};
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &event);
}

// Waits up to `timeout` ms (-1: forever) and writes the keys of up to `capacity` (at most 256)
// ready fds to `keys`; returns their count, or -1 with errno set.
static inline int signfleet_epoll_wait(int epfd, unsigned long long *keys, int capacity, int timeout) {
    struct epoll_event events[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epfd, events, capacity, timeout);
    for (int index = 0; index < count; index++) keys[index] = events[index].data.u64;
    return count;
}

int pthread_setname_np(pthread_t thread, const char *name);
static inline int signfleet_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

#include <malloc.h>

// glibc's malloc_trim (MemoryReturn.swift): <malloc.h> is outside Glibc's Swift module map.
static inline int signfleet_malloc_trim(void) {
    return malloc_trim(0);
}
#endif
