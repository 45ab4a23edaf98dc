/*
 * A bare ring all-gather or sum reduce-scatter of float32 over TCP: how fast a ring with nothing around it goes
 * on a machine's links and cores, against which to see what a transport's own work costs. One thread per rank
 * polls its two sockets (to the next rank, from the previous one), slices of 1 MiB are forwarded as soon as they
 * have arrived, the all-gather receives straight into its output and the reduce-scatter adds each slice into its
 * partial sums as it arrives. No framing, no tags, no failure handling beyond giving up; with CRC = 1 a CRC32C of
 * every slice is computed before it is sent and after it is received (the transport's integrity check), without
 * being sent. Run by `attn4j bench transport --namespaces` beside iperf3.
 *
 * usage: bare-ring P RANK BYTES MODE CRC ITERATIONS NEXT_ADDRESS PORT
 *   MODE 0: all-gather of BYTES (the whole output), 1: reduce-scatter of BYTES (the whole input)
 * prints "TIMES t1 t2 ..." (seconds per call) and exits 0 when the results check out, else prints why, exits 1.
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int P, R, MODE, CRC;
static size_t B;                       /* bytes per block */
static const size_t SLICE = 1 << 20;
static char *out;                      /* all-gather output, or reduce-scatter input and partial sums */
static float *scratch;                 /* one slice received for the reduce-scatter */
static int to_next, from_prev;
static volatile uint32_t crc_sink;

static uint32_t crc32c(uint32_t c, const unsigned char *p, size_t n) {
#if defined(__SSE4_2__) && defined(__x86_64__)
    /* three independent streams over thirds of the buffer, as hardware CRC32C implementations interleave */
    size_t third = n / 24 * 8;
    uint64_t a = c, b = 0, d = 0;
    for (size_t i = 0; i < third; i += 8) {
        a = __builtin_ia32_crc32di(a, *(const uint64_t *) (p + i));
        b = __builtin_ia32_crc32di(b, *(const uint64_t *) (p + third + i));
        d = __builtin_ia32_crc32di(d, *(const uint64_t *) (p + 2 * third + i));
    }
    for (size_t i = 3 * third; i < n; i++) a = __builtin_ia32_crc32qi((uint32_t) a, p[i]);
    return (uint32_t) (a ^ b ^ d);     /* the cost of a CRC32C, not its value: the streams are not combined */
#else
    c = ~c;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
#endif
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int mod(int a) { return ((a % P) + P) % P; }

/* The block sent at stream position pos (in bytes), and received at it. */
static char *sent_at(size_t pos) {
    int step = (int) (pos / B);
    return out + (size_t) mod(MODE == 0 ? R - step : R - step - 1) * B + pos % B;
}
static char *received_at(size_t pos) {
    int step = (int) (pos / B);
    return out + (size_t) mod(MODE == 0 ? R - step - 1 : R - step - 2) * B + pos % B;
}

static void fail(const char *what) {
    fprintf(stdout, "rank %d: %s\n", R, what);
    fflush(stdout);
    exit(1);
}

/* One collective: P - 1 blocks out to the next rank and in from the previous one. */
static void ring(void) {
    size_t total = (size_t) (P - 1) * B, sent = 0, received = 0, checked = 0, partial = 0;
    while (sent < total || received < total) {
        /* a slice may leave once it is this rank's own block (step 0) or has arrived whole (later steps) */
        size_t ready = received + B < total ? received + B : total;
        struct pollfd f[2];
        int n = 0, si = -1, ri = -1;
        if (sent < ready) { f[n].fd = to_next; f[n].events = POLLOUT; si = n++; }
        if (received < total) { f[n].fd = from_prev; f[n].events = POLLIN; ri = n++; }
        if (poll(f, n, 10000) <= 0) fail("poll timed out or failed");
        if (ri >= 0 && (f[ri].revents & (POLLIN | POLLHUP | POLLERR))) {
            size_t want = B - received % B < SLICE ? B - received % B : SLICE;
            if (MODE == 0) {
                ssize_t r = recv(from_prev, received_at(received), want, MSG_DONTWAIT);
                if (r == 0) fail("the previous rank closed its connection");
                if (r > 0) {
                    if (CRC) crc_sink ^= crc32c(0, (unsigned char *) received_at(received), (size_t) r);
                    received += (size_t) r;
                }
            } else {
                ssize_t r = recv(from_prev, (char *) scratch + partial, want - partial, MSG_DONTWAIT);
                if (r == 0) fail("the previous rank closed its connection");
                if (r > 0) {
                    if (CRC) crc_sink ^= crc32c(0, (unsigned char *) scratch + partial, (size_t) r);
                    size_t from = partial / 4, to = (partial + (size_t) r) / 4;
                    float *sum = (float *) received_at(received);
                    for (size_t i = from; i < to; i++) sum[i] += scratch[i];
                    partial += (size_t) r;
                    if (partial == want) { received += want; partial = 0; }
                }
            }
        }
        if (si >= 0 && (f[si].revents & POLLOUT)) {
            size_t len = ready - sent;
            if (len > B - sent % B) len = B - sent % B;
            if (len > SLICE) len = SLICE;
            if (CRC && sent + len > checked) {
                crc_sink ^= crc32c(0, (unsigned char *) sent_at(sent) + (checked - sent), sent + len - checked);
                checked = sent + len;
            }
            ssize_t w = send(to_next, sent_at(sent), len, MSG_DONTWAIT);
            if (w > 0) sent += (size_t) w;
        }
    }
}

static void fill(void) {
    float *f = (float *) out;
    size_t per = B / 4;
    for (int b = 0; b < P; b++)
        for (size_t i = 0; i < per; i++) f[(size_t) b * per + i] = MODE == 0 ? (b == R ? (float) (b + 1) : 0.0f)
                                                                           : (float) (R + 1);
}

static void check(void) {
    float *f = (float *) out;
    size_t per = B / 4;
    for (int b = 0; b < P; b++) {
        if (MODE == 1 && b != R) continue;
        float want = MODE == 0 ? (float) (b + 1) : (float) (P * (P + 1) / 2);
        for (size_t i = 0; i < per; i += 997)
            if (f[(size_t) b * per + i] != want) fail("wrong result");
    }
}

static void exchange_byte(void) {
    char c = 1;
    if (send(to_next, &c, 1, 0) != 1 || recv(from_prev, &c, 1, MSG_WAITALL) != 1) fail("lost a peer");
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stdout, "usage: bare-ring P RANK BYTES MODE CRC ITERATIONS NEXT_ADDRESS PORT\n");
        return 1;
    }
    P = atoi(argv[1]); R = atoi(argv[2]);
    size_t bytes = strtoull(argv[3], 0, 10);
    MODE = atoi(argv[4]); CRC = atoi(argv[5]);
    int iterations = atoi(argv[6]), port = atoi(argv[8]);
    if (P < 2 || R < 0 || R >= P || bytes % ((size_t) P * 4) != 0 || iterations < 1 || iterations > 1000)
        fail("bad arguments");
    B = bytes / (size_t) P;
    out = malloc(bytes);
    scratch = malloc(SLICE);
    if (!out || !scratch) fail("out of memory");

    int one = 1, listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in me = {0};
    me.sin_family = AF_INET;
    me.sin_port = htons((uint16_t) port);
    if (bind(listener, (struct sockaddr *) &me, sizeof me) || listen(listener, 1)) fail("cannot listen");
    struct sockaddr_in next = {0};
    next.sin_family = AF_INET;
    next.sin_port = htons((uint16_t) port);
    if (inet_pton(AF_INET, argv[7], &next.sin_addr) != 1) fail("bad next address");
    double deadline = now() + 30;
    for (;;) {
        to_next = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(to_next, (struct sockaddr *) &next, sizeof next) == 0) break;
        close(to_next);
        if (now() > deadline) fail("cannot connect to the next rank");
        usleep(20000);
    }
    setsockopt(to_next, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    from_prev = accept(listener, 0, 0);
    if (from_prev < 0) fail("accept failed");

    double *times = calloc((size_t) iterations, sizeof(double));
    for (int it = 0; it < iterations; it++) {
        fill();
        exchange_byte();               /* every rank has filled its arrays */
        double t0 = now();
        ring();
        times[it] = now() - t0;
        check();
    }
    printf("TIMES");
    for (int it = 0; it < iterations; it++) printf(" %.6f", times[it]);
    printf("\n");
    return 0;
}
