/*
 * Reference for `signfleet-bench transport`: DEALER -> ROUTER echo round trips over TCP
 * loopback with raw libzmq, a client thread and an echo-server thread in one process
 * (the same shape the Swift benchmark measures). Prints one JSON line per figure.
 *
 * Build and run (from loadtests/):
 *   cc -O2 -o .build/zmq_echo reference/zmq_echo.c -lzmq -lpthread && .build/zmq_echo [seconds]
 */
#include <zmq.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *context;
static char endpoint[256];
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void check(int rc, const char *what) {
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", what, zmq_strerror(zmq_errno()));
        exit(1);
    }
}

/* Echoes every multipart message back to its sender until it receives a one-frame "stop". */
static void *echo_server(void *unused) {
    (void)unused;
    void *router = zmq_socket(context, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    check(zmq_bind(router, "tcp://127.0.0.1:*"), "bind");
    size_t size = sizeof endpoint;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &size);
    pthread_mutex_lock(&ready_lock);
    ready = 1;
    pthread_cond_signal(&ready_cond);
    pthread_mutex_unlock(&ready_lock);
    for (;;) {
        zmq_msg_t parts[8];
        int count = 0, more = 1;
        while (more && count < 8) {
            zmq_msg_init(&parts[count]);
            check(zmq_msg_recv(&parts[count], router, 0), "server recv");
            more = zmq_msg_more(&parts[count]);
            count++;
        }
        if (count == 2 && zmq_msg_size(&parts[1]) == 4 && memcmp(zmq_msg_data(&parts[1]), "stop", 4) == 0) {
            for (int i = 0; i < count; i++) zmq_msg_close(&parts[i]);
            break;
        }
        for (int i = 0; i < count; i++) check(zmq_msg_send(&parts[i], router, i + 1 < count ? ZMQ_SNDMORE : 0), "server send");
    }
    zmq_close(router);
    return NULL;
}

static void round_trips(void *dealer, size_t payload_size, double seconds, const char *label) {
    char *payload = malloc(payload_size);
    char *reply = malloc(payload_size);
    memset(payload, 'x', payload_size);
    double warm_end = now_seconds() + 0.2;
    while (now_seconds() < warm_end) {
        check(zmq_send(dealer, payload, payload_size, 0), "send");
        check(zmq_recv(dealer, reply, payload_size, 0), "recv");
    }
    long trips = 0;
    double start = now_seconds(), end = start + seconds, elapsed;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            check(zmq_send(dealer, payload, payload_size, 0), "send");
            check(zmq_recv(dealer, reply, payload_size, 0), "recv");
        }
        trips += 64;
        elapsed = now_seconds() - start;
        if (start + elapsed >= end) break;
    }
    printf("{\"bench\":\"transport\",\"metric\":\"c.rtt.%s.per_s\",\"value\":%.1f,\"unit\":\"rt/s\"}\n", label, trips / elapsed);
    printf("{\"bench\":\"transport\",\"metric\":\"c.rtt.%s.mean_us\",\"value\":%.2f,\"unit\":\"us\"}\n", label, elapsed / trips * 1e6);
    fflush(stdout);
    free(payload);
    free(reply);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    context = zmq_ctx_new();
    pthread_t server;
    pthread_create(&server, NULL, echo_server, NULL);
    pthread_mutex_lock(&ready_lock);
    while (!ready) pthread_cond_wait(&ready_cond, &ready_lock);
    pthread_mutex_unlock(&ready_lock);

    void *dealer = zmq_socket(context, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    check(zmq_connect(dealer, endpoint), "connect");
    round_trips(dealer, 64, seconds, "64B");
    round_trips(dealer, 6 * 1024, seconds, "6KB");
    check(zmq_send(dealer, "stop", 4, 0), "send stop");
    pthread_join(server, NULL);
    zmq_close(dealer);
    zmq_ctx_term(context);
    return 0;
}
