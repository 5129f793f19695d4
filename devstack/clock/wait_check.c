/*
 * wait_check.c: shows how long each kind of absolute-deadline wait takes in
 * true time when its deadline is computed, as librdkafka computes its own,
 * as "the wall clock now + 300 ms". Run under clock_offset.c's shim with a
 * large offset, each must still take about 300 ms: without the shim's
 * correction a clock 30 s fast makes them wait 30.3 s, one 30 s slow makes
 * them return at once.
 *
 * Prints one line per wait: `<name> <true milliseconds waited> <result>`,
 * then `wall <seconds since the epoch on the wall clock>`, the reading the
 * program sees. Elapsed time is measured on CLOCK_MONOTONIC, which the shim
 * leaves alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/time.h>
#include <threads.h>
#include <time.h>

#define WAIT_MS 300

static long long monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* `clock`'s now + WAIT_MS. */
static struct timespec deadline_on(clockid_t clock) {
    struct timespec at;
    clock_gettime(clock, &at);
    at.tv_nsec += WAIT_MS * 1000000L;
    at.tv_sec += at.tv_nsec / 1000000000L;
    at.tv_nsec %= 1000000000L;
    return at;
}

/* As librdkafka's own deadlines are made: gettimeofday plus the timeout. */
static struct timespec deadline_from_gettimeofday(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct timespec at = {tv.tv_sec, tv.tv_usec * 1000L + WAIT_MS * 1000000L};
    at.tv_sec += at.tv_nsec / 1000000000L;
    at.tv_nsec %= 1000000000L;
    return at;
}

static void report(const char *name, long long started, int result) {
    printf("%s %lld %d\n", name, monotonic_ms() - started, result);
    fflush(stdout);
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t written = PTHREAD_RWLOCK_INITIALIZER;

/* Times a lock already held by the main thread. */
static void *try_locks(void *unused) {
    (void)unused;
    struct timespec at = deadline_on(CLOCK_REALTIME);
    long long started = monotonic_ms();
    report("pthread_mutex_timedlock", started, pthread_mutex_timedlock(&held, &at));
    at = deadline_on(CLOCK_REALTIME);
    started = monotonic_ms();
    report("pthread_rwlock_timedrdlock", started, pthread_rwlock_timedrdlock(&written, &at));
    return NULL;
}

int main(void) {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t realtime = PTHREAD_COND_INITIALIZER;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_t monotonic;
    pthread_cond_init(&monotonic, &attr);

    pthread_mutex_lock(&mutex);
    struct timespec at = deadline_from_gettimeofday();
    long long started = monotonic_ms();
    report("pthread_cond_timedwait", started, pthread_cond_timedwait(&realtime, &mutex, &at));
    at = deadline_on(CLOCK_MONOTONIC);
    started = monotonic_ms();
    report("pthread_cond_timedwait_monotonic", started, pthread_cond_timedwait(&monotonic, &mutex, &at));
    at = deadline_on(CLOCK_REALTIME);
    started = monotonic_ms();
    report("pthread_cond_clockwait", started, pthread_cond_clockwait(&realtime, &mutex, CLOCK_REALTIME, &at));
    pthread_mutex_unlock(&mutex);

    cnd_t cnd;
    mtx_t mtx;
    cnd_init(&cnd);
    mtx_init(&mtx, mtx_timed);
    mtx_lock(&mtx);
    timespec_get(&at, TIME_UTC);
    at.tv_nsec += WAIT_MS * 1000000L;
    at.tv_sec += at.tv_nsec / 1000000000L;
    at.tv_nsec %= 1000000000L;
    started = monotonic_ms();
    report("cnd_timedwait", started, cnd_timedwait(&cnd, &mtx, &at));
    mtx_unlock(&mtx);

    sem_t sem;
    sem_init(&sem, 0, 0);
    at = deadline_on(CLOCK_REALTIME);
    started = monotonic_ms();
    report("sem_timedwait", started, sem_timedwait(&sem, &at) == 0 ? 0 : errno);

    at = deadline_on(CLOCK_REALTIME);
    started = monotonic_ms();
    report("clock_nanosleep", started, clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL));

    pthread_mutex_lock(&held);
    pthread_rwlock_wrlock(&written);
    pthread_t other;
    pthread_create(&other, NULL, try_locks, NULL);
    pthread_join(other, NULL);

    printf("wall %lld\n", (long long)time(NULL));
    return 0;
}
