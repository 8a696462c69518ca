/* A load client for RocketMQ brokers that costs little per message.
 *
 * One TCP connection, requests pipelined by opaque, N in flight, JSON headers laid out
 * as the C++ client writes them (code, extFields, flag, language "CPP", opaque, remark,
 * version). Modes:
 *   single  SEND_MESSAGE_V2 (310), one 1 KiB message per request
 *   batch   SEND_BATCH_MESSAGE (320), --batch messages per request
 *   pull    PULL_MESSAGE (11) of --batch messages, queue by queue from offset 0, until
 *           --total messages have come back (the topic must hold them)
 * Sends run --warmup s, then count --seconds s, then wait for the last answers; with
 * --total they send exactly that many messages instead. Prints one JSON object.
 *
 * Sends go back to back, or paced with --rate N (messages/s): one request is started per
 * slot of a fixed schedule (N / --batch slots a second in batch mode), never more than
 * --inflight outstanding; a slot that finds the window full is skipped and counted as
 * late, not made up later. --stamp 1 writes the send's start time into the first 8 bytes
 * of each body (big-endian CLOCK_MONOTONIC nanoseconds, what Python's time.monotonic_ns()
 * reads), so that a reader can tell how old each message is. In the JSON, sent, slots and
 * late count the messages started, scheduled and skipped in the counted window, whose
 * bounds window_from_ns and window_to_ns are on the stamps' clock.
 *
 * With --access-key K --secret-key S every send is signed for an ACL broker as the C++
 * client signs (docs/spec/acl.md): AccessKey and Signature added to its extFields, the
 * Signature being the Base64 HMAC-SHA1 of the extFields' values in key order (the
 * integers as their decimal text) followed by the body.
 *
 *   cc -O2 -o rocketmq_load rocketmq_load.c -lcrypto
 *   rocketmq_load --addr 127.0.0.1:10911 --mode single --inflight 64 --topic T
 *   rocketmq_load --addr 127.0.0.1:10911 --queues 1 --rate 20000 --stamp 1 --topic T
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
/* the low-level SHA-1 calls are deprecated in OpenSSL 3 in favour of EVP, whose per-call
 * lookups cost more than hashing a 1 KiB message */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_QUEUES 64
#define SLOTS 65536 /* send times by opaque; in flight must stay below this */
#define MAX_LATENCIES 2000000

enum mode { SINGLE, BATCH, PULL };

static struct {
    const char *host, *port, *topic, *group, *access_key, *secret_key;
    enum mode mode;
    int inflight, queues, batch, body, stamp;
    double seconds, warmup, rate;
    long total;
} opt = {"127.0.0.1", "10911", "BenchC", "bench-c", NULL, NULL, SINGLE, 64, 4, 32, 1024, 0, 5, 1, 0, 0};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "rocketmq_load: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

/* --- output buffer ----------------------------------------------------------------- */

static char *out;
static size_t out_len, out_sent, out_cap;

static void put(const void *bytes, size_t n) {
    memcpy(out + out_len, bytes, n);
    out_len += n;
}
#define PUT(literal) put(literal, sizeof(literal) - 1)
static void put_str(const char *s) { put(s, strlen(s)); }

/* ``v`` in decimal into ``text`` (20 bytes at most); its length */
static size_t decimal(uint64_t v, char *text) {
    char digits[24];
    size_t n = 0, length = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) text[length++] = digits[--n];
    return length;
}

static void put_u64(uint64_t v) { out_len += decimal(v, out + out_len); }

static void put_be32(uint32_t v) {
    out[out_len++] = (char)(v >> 24);
    out[out_len++] = (char)(v >> 16);
    out[out_len++] = (char)(v >> 8);
    out[out_len++] = (char)v;
}

static void stamp_be64(char *at, int64_t ns) {
    for (int i = 7; i >= 0; i--, ns >>= 8) at[i] = (char)(ns & 0xFF);
}

static void hex8(char *at, uint32_t v) {
    static const char digits[] = "0123456789ABCDEF";
    for (int i = 7; i >= 0; i--, v >>= 4) at[i] = digits[v & 15];
}

/* --- requests ---------------------------------------------------------------------- */

static char unique_prefix[25]; /* 24 hex digits; a counter makes the last 8 */
static uint32_t unique_counter;
static char born_ms[24];
static char *body;            /* the single message's body */
static char *batch_body;      /* a batch body; UNIQ_KEY digits patched per message */
static size_t batch_body_len, batch_record_len, batch_key_at;
static uint32_t next_opaque = 1;
static double sent_at[SLOTS];

/* writes the frame's length fields once the header and body are in place */
static size_t begin_frame(void) {
    size_t start = out_len;
    out_len += 8;
    return start;
}

static void end_frame(size_t start, size_t header_len) {
    size_t frame_len = out_len - start - 4;
    size_t end = out_len;
    out_len = start;
    put_be32((uint32_t)frame_len);
    put_be32((uint32_t)header_len); /* serialize type 0: JSON */
    out_len = end;
}

/* --- signing (--access-key, --secret-key) ------------------------------------------- */

/* what a send's signature covers, but for its body: its extFields' values in key order
 * (sized at start for the key, group and topic given) */
static char *signed_values;
static size_t signed_length, signed_capacity;

static void sign_add(const char *text, size_t n) {
    if (!opt.access_key) return; /* unsigned sends gather nothing */
    if (signed_length + n > signed_capacity) die("signed values larger than planned");
    memcpy(signed_values + signed_length, text, n);
    signed_length += n;
}
#define SIGN_ADD(literal) sign_add(literal, sizeof(literal) - 1)

static void sign_add_u64(uint64_t v) {
    char digits[24];
    sign_add(digits, decimal(v, digits));
}

/* HMAC-SHA1 with the secret: the inner and outer hash states after its padded key block,
 * made once, so that a send hashes only its own bytes (OpenSSL's one-shot HMAC() looks
 * the digest up and keys it anew each call: several microseconds a send) */
static SHA_CTX keyed_inner, keyed_outer;

static void prepare_key(void) {
    unsigned char block[SHA_CBLOCK] = {0}, pad[SHA_CBLOCK];
    size_t length = strlen(opt.secret_key);
    if (length > SHA_CBLOCK)
        SHA1((const unsigned char *)opt.secret_key, length, block);
    else
        memcpy(block, opt.secret_key, length);
    for (int i = 0; i < SHA_CBLOCK; i++) pad[i] = block[i] ^ 0x36;
    SHA1_Init(&keyed_inner);
    SHA1_Update(&keyed_inner, pad, SHA_CBLOCK);
    for (int i = 0; i < SHA_CBLOCK; i++) pad[i] = block[i] ^ 0x5c;
    SHA1_Init(&keyed_outer);
    SHA1_Update(&keyed_outer, pad, SHA_CBLOCK);
}

/* the Base64 HMAC-SHA1 of the values gathered and ``body`` into ``at`` (28 characters) */
static void write_signature(char *at, const char *body_bytes, size_t body_len) {
    unsigned char digest[SHA_DIGEST_LENGTH], text[32];
    SHA_CTX hashing = keyed_inner;
    SHA1_Update(&hashing, signed_values, signed_length);
    SHA1_Update(&hashing, body_bytes, body_len);
    SHA1_Final(digest, &hashing);
    hashing = keyed_outer;
    SHA1_Update(&hashing, digest, sizeof digest);
    SHA1_Final(digest, &hashing);
    EVP_EncodeBlock(text, digest, SHA_DIGEST_LENGTH);
    memcpy(at, text, 28);
}

/* the header of a send; with signing, where its Signature's 28 characters go (else 0) */
static size_t send_header(int code, int queue, uint32_t opaque) {
    uint32_t unique = unique_counter++;
    signed_length = 0;
    if (opt.access_key) sign_add(opt.access_key, strlen(opt.access_key)); /* "AccessKey" < "a" */
    PUT("{\"code\":");
    put_u64((uint64_t)code);
    PUT(",\"extFields\":{\"a\":\"");
    put_str(opt.group);
    sign_add(opt.group, strlen(opt.group));
    PUT("\",\"b\":\"");
    put_str(opt.topic);
    sign_add(opt.topic, strlen(opt.topic));
    PUT("\",\"c\":\"TBW102\",\"d\":4,\"e\":");
    SIGN_ADD("TBW102");
    SIGN_ADD("4");
    put_u64((uint64_t)queue);
    sign_add_u64((uint64_t)queue);
    PUT(",\"f\":0,\"g\":\"");
    SIGN_ADD("0");
    put_str(born_ms);
    sign_add(born_ms, strlen(born_ms));
    SIGN_ADD("0"); /* h */
    if (code == 310) {
        PUT("\",\"h\":0,\"i\":\"KEYS\\u0001bench\\u0002TAGS\\u0001TagA\\u0002UNIQ_KEY\\u0001");
        SIGN_ADD("KEYS\001bench\002TAGS\001TagA\002UNIQ_KEY\001");
        put(unique_prefix, 24);
        sign_add(unique_prefix, 24);
        hex8(out + out_len, unique);
        sign_add(out + out_len, 8);
        out_len += 8;
        PUT("\\u0002WAIT\\u0001true\\u0002\",\"j\":\"0\",\"k\":\"0\",\"m\":\"0\"");
        SIGN_ADD("\002WAIT\001true\002");
        SIGN_ADD("0"); /* j */
        SIGN_ADD("0"); /* k */
        SIGN_ADD("0"); /* m */
    } else {
        PUT("\",\"h\":0,\"i\":\"WAIT\\u0001true\\u0002\",\"j\":\"0\",\"k\":\"0\",\"m\":\"true\"");
        SIGN_ADD("WAIT\001true\002");
        SIGN_ADD("0"); /* j */
        SIGN_ADD("0"); /* k */
        SIGN_ADD("true"); /* m */
    }
    size_t signature_at = 0;
    if (opt.access_key) {
        PUT(",\"AccessKey\":\"");
        put_str(opt.access_key);
        PUT("\",\"Signature\":\"");
        signature_at = out_len;
        PUT("............................\"");
    }
    PUT("},\"flag\":0,\"language\":\"CPP\",\"opaque\":");
    put_u64(opaque);
    PUT(",\"remark\":\"\",\"version\":63}");
    return signature_at;
}

static void add_send(int queue) {
    uint32_t opaque = next_opaque++;
    size_t start = begin_frame();
    size_t signature_at = send_header(opt.mode == SINGLE ? 310 : 320, queue, opaque);
    size_t header_len = out_len - start - 8;
    int64_t stamp = opt.stamp ? now_ns() : 0;
    size_t body_at = out_len;
    if (opt.mode == SINGLE) {
        put(body, (size_t)opt.body);
        if (opt.stamp) stamp_be64(out + out_len - opt.body, stamp);
    } else {
        char *records = out + out_len;
        put(batch_body, batch_body_len);
        for (int i = 0; i < opt.batch; i++) {
            hex8(records + i * batch_record_len + batch_key_at, unique_counter++);
            if (opt.stamp) stamp_be64(records + i * batch_record_len + 20, stamp);
        }
    }
    if (signature_at) write_signature(out + signature_at, out + body_at, out_len - body_at);
    end_frame(start, header_len);
    sent_at[opaque % SLOTS] = now_s();
}

static void add_pull(int queue, long offset) {
    uint32_t opaque = next_opaque++;
    size_t start = begin_frame();
    PUT("{\"code\":11,\"extFields\":{\"commitOffset\":0,\"consumerGroup\":\"");
    put_str(opt.group);
    PUT("\",\"expressionType\":\"TAG\",\"maxMsgNums\":");
    put_u64((uint64_t)opt.batch);
    PUT(",\"queueId\":");
    put_u64((uint64_t)queue);
    PUT(",\"queueOffset\":");
    put_u64((uint64_t)offset);
    PUT(",\"subVersion\":");
    put_str(born_ms);
    /* sysFlag 4: the subscription travels with the request (no heartbeat needed) */
    PUT(",\"subscription\":\"*\",\"suspendTimeoutMillis\":0,\"sysFlag\":4,\"topic\":\"");
    put_str(opt.topic);
    PUT("\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":");
    put_u64(opaque);
    PUT(",\"remark\":\"\",\"version\":63}");
    end_frame(start, out_len - start - 8);
    sent_at[opaque % SLOTS] = now_s();
}

static void build_bodies(void) {
    body = malloc((size_t)opt.body);
    memset(body, 'x', (size_t)opt.body);
    snprintf(unique_prefix, sizeof unique_prefix, "7F000001%04X%012llX", getpid() & 0xFFFF,
             (unsigned long long)time(NULL));
    /* batch record: totalSize, magic, crc, flag, bodyLength, body, propertiesLength, props */
    char props[128];
    int props_len = snprintf(props, sizeof props,
                             "KEYS\001bench\002TAGS\001TagA\002UNIQ_KEY\001%s00000000\002"
                             "WAIT\001true\002",
                             unique_prefix);
    batch_key_at = 20 + (size_t)opt.body + 2 + (size_t)(strstr(props, "UNIQ_KEY") - props) + 9 + 24;
    batch_record_len = 20 + (size_t)opt.body + 2 + (size_t)props_len;
    batch_body_len = batch_record_len * (size_t)opt.batch;
    batch_body = calloc(1, batch_body_len);
    for (int i = 0; i < opt.batch; i++) {
        unsigned char *r = (unsigned char *)batch_body + (size_t)i * batch_record_len;
        uint32_t fields[5] = {(uint32_t)batch_record_len, 0, 0, 0, (uint32_t)opt.body};
        for (int f = 0; f < 5; f++)
            for (int b = 0; b < 4; b++) r[f * 4 + b] = (unsigned char)(fields[f] >> (24 - 8 * b));
        memset(r + 20, 'x', (size_t)opt.body);
        r[20 + opt.body] = (unsigned char)(props_len >> 8);
        r[21 + opt.body] = (unsigned char)props_len;
        memcpy(r + 22 + opt.body, props, (size_t)props_len);
    }
}

static void refresh_born_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(born_ms, sizeof born_ms, "%lld", (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000);
}

/* --- responses --------------------------------------------------------------------- */

/* the integer after "key": in a JSON header (quoted or not); -1 when absent */
static long json_int(const char *header, size_t len, const char *key) {
    size_t key_len = strlen(key);
    const char *at = memmem(header, len, key, key_len);
    if (!at) return -1;
    const char *end = header + len;
    at += key_len;
    while (at < end && (*at == ':' || *at == '"' || *at == ' ')) at++;
    int negative = at < end && *at == '-';
    if (negative) at++;
    long v = 0;
    while (at < end && *at >= '0' && *at <= '9') v = v * 10 + (*at++ - '0');
    return negative ? -v : v;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static struct {
    long responses_counted, messages_counted, messages_all, failed, first_failure_code;
    long acked[MAX_QUEUES];
    double *latencies;
    long latency_count;
} seen;
static char first_failure[256];

static int counting; /* inside the measured window */

static void on_response(const unsigned char *frame, uint32_t frame_len, double now) {
    uint32_t header_len = be32(frame) & 0xFFFFFF;
    const char *header = (const char *)frame + 4;
    const unsigned char *payload = frame + 4 + header_len;
    uint32_t payload_len = frame_len - 4 - header_len;
    long code = json_int(header, header_len, "\"code\"");
    long opaque = json_int(header, header_len, "\"opaque\"");
    long messages = 0;
    if (code == 0) {
        if (opt.mode == PULL) {
            for (uint32_t at = 0; at + 4 <= payload_len; at += be32(payload + at)) {
                if (be32(payload + at) == 0) break;
                messages++;
            }
        } else {
            messages = opt.mode == SINGLE ? 1 : opt.batch;
            long queue = json_int(header, header_len, "\"queueId\"");
            if (queue >= 0 && queue < MAX_QUEUES) seen.acked[queue] += messages;
        }
    } else {
        if (!seen.failed++) {
            seen.first_failure_code = code;
            snprintf(first_failure, sizeof first_failure, "%.*s",
                     (int)(header_len < 200 ? header_len : 200), header);
            for (char *c = first_failure; *c; c++)
                if (*c == '"' || *c == '\\') *c = '\'';
        }
    }
    seen.messages_all += messages;
    if (counting) {
        seen.responses_counted++;
        seen.messages_counted += messages;
        if (seen.latency_count < MAX_LATENCIES && opaque >= 0)
            seen.latencies[seen.latency_count++] = now - sent_at[opaque % SLOTS];
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile_us(double fraction) {
    if (!seen.latency_count) return -1;
    long i = (long)(seen.latency_count * fraction);
    if (i >= seen.latency_count) i = seen.latency_count - 1;
    return seen.latencies[i] * 1e6;
}

/* --- the loop ---------------------------------------------------------------------- */

static int connect_to(void) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found;
    if (getaddrinfo(opt.host, opt.port, &hints, &found)) die("resolving --addr");
    int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) die("socket");
    if (connect(fd, found->ai_addr, found->ai_addrlen) && errno != EINPROGRESS) die("connect");
    struct pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, 5000);
    int error = 0;
    socklen_t size = sizeof error;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error) {
        errno = error;
        die("connect");
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    freeaddrinfo(found);
    return fd;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--addr")) {
            char *copy = strdup(v), *colon = strrchr(copy, ':');
            if (!colon) die("--addr wants host:port");
            *colon = 0;
            opt.host = copy;
            opt.port = colon + 1;
        } else if (!strcmp(k, "--mode")) {
            opt.mode = !strcmp(v, "batch") ? BATCH : !strcmp(v, "pull") ? PULL : SINGLE;
        } else if (!strcmp(k, "--inflight")) opt.inflight = atoi(v);
        else if (!strcmp(k, "--queues")) opt.queues = atoi(v);
        else if (!strcmp(k, "--batch")) opt.batch = atoi(v);
        else if (!strcmp(k, "--body")) opt.body = atoi(v);
        else if (!strcmp(k, "--seconds")) opt.seconds = atof(v);
        else if (!strcmp(k, "--warmup")) opt.warmup = atof(v);
        else if (!strcmp(k, "--total")) opt.total = atol(v);
        else if (!strcmp(k, "--topic")) opt.topic = v;
        else if (!strcmp(k, "--group")) opt.group = v;
        else if (!strcmp(k, "--rate")) opt.rate = atof(v);
        else if (!strcmp(k, "--stamp")) opt.stamp = atoi(v) != 0;
        else if (!strcmp(k, "--access-key")) opt.access_key = v;
        else if (!strcmp(k, "--secret-key")) opt.secret_key = v;
        else {
            fprintf(stderr, "rocketmq_load: unknown option %s\n", k);
            return 2;
        }
    }
    if (opt.inflight < 1 || opt.inflight >= SLOTS / 2 || opt.queues < 1 ||
        opt.queues > MAX_QUEUES || (opt.mode == PULL && opt.total <= 0)) {
        fprintf(stderr, "rocketmq_load: bad --inflight/--queues, or pull without --total\n");
        return 2;
    }
    if (!opt.access_key != !opt.secret_key || (opt.access_key && opt.mode == PULL)) {
        fprintf(stderr, "rocketmq_load: --access-key and --secret-key go together, for sends\n");
        return 2;
    }
    if (opt.rate < 0 || (opt.mode == PULL && (opt.rate > 0 || opt.stamp)) ||
        (opt.stamp && opt.body < 8)) {
        fprintf(stderr, "rocketmq_load: --rate and --stamp are for sends; --stamp needs"
                        " --body 8 or more\n");
        return 2;
    }
    /* a paced sender sleeps to the next slot: ask for wake-ups without the 50 us slack */
    if (opt.rate > 0) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    build_bodies();
    refresh_born_ms();
    if (opt.secret_key) prepare_key();
    /* a header is ~400 bytes besides the names the options give */
    size_t names = strlen(opt.group) + strlen(opt.topic) +
                   (opt.access_key ? strlen(opt.access_key) : 0);
    size_t frame_max = 1024 + names + 8 + (opt.mode == BATCH ? batch_body_len : (size_t)opt.body);
    signed_capacity = 256 + names; /* the fixed values are ~130 bytes */
    signed_values = malloc(signed_capacity);
    out_cap = frame_max * (size_t)opt.inflight;
    out = malloc(out_cap);
    size_t in_cap = 16 << 20, in_len = 0;
    unsigned char *in = malloc(in_cap);
    seen.latencies = malloc(sizeof(double) * MAX_LATENCIES);
    int fd = connect_to();

    long per_request = opt.mode == SINGLE ? 1 : opt.batch;
    long requests_left = opt.total > 0 ? (opt.total + per_request - 1) / per_request : -1;
    long pull_per_queue = opt.mode == PULL ? opt.total / opt.queues : 0;
    long pull_offset[MAX_QUEUES] = {0};
    long warm_messages = opt.mode == PULL ? opt.total / 10 : 0; /* pulls: first 10% warm up */
    int next_queue = 0, inflight = 0, draining = 0;
    double started = now_s(), measure_from = started + opt.warmup;
    double stop_at = measure_from + opt.seconds, counted_from = 0, counted_to = 0;
    if (opt.total > 0) { /* by count: the whole run counts (pulls: after the warm-up) */
        counting = opt.mode != PULL;
        counted_from = started;
        stop_at = 1e300;
    }
    double slot_s = opt.rate > 0 ? per_request / opt.rate : 0; /* one request per slot */
    long next_slot = 0;
    long sent = 0, slots = 0, late = 0; /* messages: started, scheduled, skipped (counted) */
    double last_answer = started;

    for (;;) {
        double now = now_s();
        if (opt.total <= 0) {
            if (!counting && !draining && now >= measure_from) {
                counting = 1;
                counted_from = now;
            }
            if (!draining && now >= stop_at) {
                draining = 1;
                counting = 0;
                counted_to = now;
            }
        }
        if (opt.rate > 0) {
            if (!draining && out_sent) { /* keep what is still unsent, append behind it */
                memmove(out, out + out_sent, out_len - out_sent);
                out_len -= out_sent;
                out_sent = 0;
            }
            int born_fresh = 0;
            while (!draining && requests_left != 0) {
                double due = started + next_slot * slot_s;
                if (due > now || due >= stop_at) break;
                next_slot++;
                int in_window = opt.total > 0 || due >= measure_from;
                if (in_window) slots += per_request;
                if (inflight >= opt.inflight) { /* the slot is lost, not made up later */
                    if (in_window) late += per_request;
                    continue;
                }
                if (!born_fresh++) refresh_born_ms();
                add_send(next_queue);
                if (requests_left > 0) requests_left--;
                if (in_window) sent += per_request;
                next_queue = (next_queue + 1) % opt.queues;
                inflight++;
            }
        } else if (out_sent == out_len) {
            out_len = out_sent = 0;
            if (opt.mode != PULL) refresh_born_ms();
            while (!draining && inflight < opt.inflight && requests_left != 0) {
                if (opt.mode == PULL) {
                    int tries = 0;
                    while (pull_offset[next_queue] >= pull_per_queue && tries++ < opt.queues)
                        next_queue = (next_queue + 1) % opt.queues;
                    if (pull_offset[next_queue] >= pull_per_queue) {
                        requests_left = 0;
                        break;
                    }
                    add_pull(next_queue, pull_offset[next_queue]);
                    pull_offset[next_queue] += opt.batch;
                } else {
                    add_send(next_queue);
                    if (requests_left > 0) requests_left--;
                    if (counting) sent += per_request;
                }
                next_queue = (next_queue + 1) % opt.queues;
                inflight++;
            }
        }
        if (inflight == 0 && (draining || requests_left == 0)) break;
        struct pollfd p = {fd, POLLIN | (out_sent < out_len ? POLLOUT : 0), 0};
        double wait = 10;
        if (opt.rate > 0 && !draining && requests_left != 0) { /* until the next slot */
            wait = started + next_slot * slot_s - now_s();
            wait = wait < 0 ? 0 : wait > 10 ? 10 : wait;
        }
        struct timespec timeout = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        int ready = ppoll(&p, 1, &timeout, NULL);
        if (ready < 0 && errno != EINTR) die("poll");
        if (ready <= 0) {
            if (inflight > 0 && now_s() - last_answer >= 10) die("no answer within 10 s");
            continue;
        }
        if (p.revents & POLLOUT) {
            ssize_t n = send(fd, out + out_sent, out_len - out_sent, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN) die("send");
            if (n > 0) out_sent += (size_t)n;
        }
        if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
            ssize_t n = recv(fd, in + in_len, in_cap - in_len, 0);
            if (n == 0) die("the broker closed the connection");
            if (n < 0 && errno != EAGAIN) die("recv");
            if (n > 0) in_len += (size_t)n;
            size_t at = 0;
            now = now_s();
            while (in_len - at >= 4) {
                uint32_t frame_len = be32(in + at);
                if (in_len - at < 4 + (size_t)frame_len) break;
                if (opt.mode == PULL && !counting && seen.messages_all >= warm_messages &&
                    counted_to == 0) {
                    counting = 1;
                    counted_from = now;
                }
                on_response(in + at + 4, frame_len, now);
                last_answer = now;
                inflight--;
                at += 4 + frame_len;
            }
            memmove(in, in + at, in_len - at);
            in_len -= at;
        }
    }
    if (counted_to == 0) counted_to = now_s();
    close(fd);

    qsort(seen.latencies, (size_t)seen.latency_count, sizeof(double), compare_doubles);
    double elapsed = counted_to - counted_from;
    printf("{\"mode\":\"%s\",\"inflight\":%d,\"batch\":%ld,\"messages\":%ld,\"responses\":%ld,"
           "\"seconds\":%.4f,\"messages_per_s\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
           "\"messages_all\":%ld,\"failed\":%ld,\"first_failure_code\":%ld,"
           "\"first_failure\":\"%s\",\"acked_per_queue\":[",
           opt.mode == SINGLE ? "single" : opt.mode == BATCH ? "batch" : "pull", opt.inflight,
           per_request, seen.messages_counted, seen.responses_counted, elapsed,
           elapsed > 0 ? seen.messages_counted / elapsed : 0, percentile_us(0.5),
           percentile_us(0.99), seen.messages_all, seen.failed, seen.first_failure_code,
           first_failure);
    for (int q = 0; q < opt.queues; q++) printf(q ? ",%ld" : "%ld", seen.acked[q]);
    /* the window as CLOCK_MONOTONIC ns, to pick the counted messages out by their stamps */
    double window_from = opt.total > 0 ? counted_from : measure_from;
    double window_to = opt.total > 0 ? counted_to : stop_at;
    printf("],\"rate\":%.0f,\"stamp\":%s,\"sent\":%ld,\"slots\":%ld,\"late\":%ld,"
           "\"window_from_ns\":%lld,\"window_to_ns\":%lld}\n",
           opt.rate, opt.stamp ? "true" : "false", sent, slots, late,
           (long long)(window_from * 1e9), (long long)(window_to * 1e9));
    return 0;
}
