/*
 * clock_offset.c: an LD_PRELOAD shim that moves one process's wall clock by
 * CLOCK_SHIM_OFFSET_MS milliseconds (signed; unset or 0: no change), for
 * tests of a service whose clock is off. (Not SECKILL_…: the services read
 * every SECKILL_ variable as configuration and refuse unknown ones.)
 *
 * Only wall-clock readings move: clock_gettime for CLOCK_REALTIME,
 * CLOCK_REALTIME_COARSE and CLOCK_TAI, gettimeofday, time and timespec_get.
 * CLOCK_MONOTONIC and CLOCK_BOOTTIME stay true, so Rust's Instant and
 * tokio's timers are untouched.
 *
 * Why not libfaketime: a program that reads the moved clock computes its
 * absolute deadlines on it (librdkafka's condvar waits: now + timeout on
 * CLOCK_REALTIME), and the kernel judges them on the true clock, so a clock
 * 30 s fast makes every such wait 30 s too long, and one 30 s slow makes it
 * return at once, a spin. This shim takes the offset back off every absolute
 * CLOCK_REALTIME deadline the program hands to libc (pthread_cond_timedwait
 * on a condvar using CLOCK_REALTIME, pthread_cond_clockwait,
 * pthread_mutex_timedlock and _clocklock, pthread_rwlock_timed*lock and
 * _clock*lock, sem_timedwait and sem_clockwait, cnd_timedwait, mtx_timedlock,
 * clock_nanosleep with TIMER_ABSTIME), so each waits as long as the program
 * meant. A condvar initialised with CLOCK_MONOTONIC (pthread_condattr_setclock)
 * is remembered at pthread_cond_init and its deadlines passed through.
 *
 * Not covered (nothing in the services uses them): timerfd and POSIX timers
 * armed with absolute realtime times, and files' times, which the kernel
 * stamps.
 *
 * Build: cc -shared -fPIC -O2 -o libclock_offset.so clock_offset.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>
#include <threads.h>
#include <time.h>

#define NS_PER_SEC 1000000000LL

/* The offset in nanoseconds; read once, before main, from the environment. */
static long long offset_ns;

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_pthread_cond_init)(pthread_cond_t *, const pthread_condattr_t *);
static int (*real_pthread_cond_destroy)(pthread_cond_t *);
static int (*real_pthread_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_pthread_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
static int (*real_pthread_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
static int (*real_pthread_mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
static int (*real_pthread_rwlock_timedrdlock)(pthread_rwlock_t *, const struct timespec *);
static int (*real_pthread_rwlock_timedwrlock)(pthread_rwlock_t *, const struct timespec *);
static int (*real_pthread_rwlock_clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
static int (*real_pthread_rwlock_clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
static int (*real_sem_timedwait)(sem_t *, const struct timespec *);
static int (*real_sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
static int (*real_cnd_timedwait)(cnd_t *, mtx_t *, const struct timespec *);
static int (*real_mtx_timedlock)(mtx_t *, const struct timespec *);
static int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);

/* Looks up the next definition of `name` (libc's), once. */
#define NEXT(var, name)                                                                                               \
    do {                                                                                                              \
        if (!(var))                                                                                                   \
            *(void **)(&(var)) = dlsym(RTLD_NEXT, name);                                                              \
    } while (0)

__attribute__((constructor)) static void clock_offset_init(void) {
    const char *ms = getenv("CLOCK_SHIM_OFFSET_MS");
    offset_ns = ms ? strtoll(ms, NULL, 10) * 1000000LL : 0;
    NEXT(real_clock_gettime, "clock_gettime");
}

/* The clocks whose readings move: the wall clock and those that follow it. */
static int moves(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE || clock == CLOCK_TAI;
}

static struct timespec shifted(struct timespec ts, long long by_ns) {
    long long ns = (long long)ts.tv_nsec + by_ns % NS_PER_SEC;
    ts.tv_sec += (time_t)(by_ns / NS_PER_SEC + ns / NS_PER_SEC);
    ns %= NS_PER_SEC;
    if (ns < 0) {
        ns += NS_PER_SEC;
        ts.tv_sec -= 1;
    }
    ts.tv_nsec = (long)ns;
    return ts;
}

/* A deadline the program computed on the moved wall clock, on the true one. */
static struct timespec true_deadline(const struct timespec *deadline) {
    return shifted(*deadline, -offset_ns);
}

/* ---- Readings ---------------------------------------------------------- */

int clock_gettime(clockid_t clock, struct timespec *ts) {
    NEXT(real_clock_gettime, "clock_gettime");
    int result = real_clock_gettime(clock, ts);
    if (result == 0 && offset_ns && moves(clock))
        *ts = shifted(*ts, offset_ns);
    return result;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz; /* The kernel has not filled a timezone in decades. */
    struct timespec now;
    int result = clock_gettime(CLOCK_REALTIME, &now);
    if (result == 0) {
        tv->tv_sec = now.tv_sec;
        tv->tv_usec = now.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return (time_t)-1;
    if (out)
        *out = now.tv_sec;
    return now.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, ts) != 0)
        return 0;
    return base;
}

/* ---- Condvars on CLOCK_MONOTONIC --------------------------------------- */

/* The condvars initialised with a clock other than CLOCK_REALTIME: an open
 * addressing set of their addresses, written with compare-and-swap, so no
 * lock is taken on a wait. A full set forgets the newest (logged nowhere:
 * the capacity is far above what a service creates). */
#define SET_SLOTS 4096
static _Atomic(uintptr_t) not_realtime[SET_SLOTS];
#define TOMBSTONE ((uintptr_t)1)

static size_t slot_of(const void *cond) {
    uintptr_t at = (uintptr_t)cond;
    return (size_t)((at >> 4) ^ (at >> 16)) % SET_SLOTS;
}

static void remember(const void *cond) {
    size_t first = slot_of(cond);
    for (size_t i = 0; i < SET_SLOTS; i++) {
        _Atomic(uintptr_t) *slot = &not_realtime[(first + i) % SET_SLOTS];
        uintptr_t seen = atomic_load(slot);
        if (seen == (uintptr_t)cond)
            return;
        if ((seen == 0 || seen == TOMBSTONE) && atomic_compare_exchange_strong(slot, &seen, (uintptr_t)cond))
            return;
    }
}

static _Atomic(uintptr_t) *find(const void *cond) {
    size_t first = slot_of(cond);
    for (size_t i = 0; i < SET_SLOTS; i++) {
        _Atomic(uintptr_t) *slot = &not_realtime[(first + i) % SET_SLOTS];
        uintptr_t seen = atomic_load(slot);
        if (seen == (uintptr_t)cond)
            return slot;
        if (seen == 0)
            return NULL;
    }
    return NULL;
}

static void forget(const void *cond) {
    _Atomic(uintptr_t) *slot = find(cond);
    if (slot)
        atomic_store(slot, TOMBSTONE);
}

int pthread_cond_init(pthread_cond_t *restrict cond, const pthread_condattr_t *restrict attr) {
    NEXT(real_pthread_cond_init, "pthread_cond_init");
    int result = real_pthread_cond_init(cond, attr);
    clockid_t clock = CLOCK_REALTIME;
    if (attr)
        pthread_condattr_getclock(attr, &clock);
    /* The address may be reused by a condvar of the other kind. */
    if (result == 0 && clock != CLOCK_REALTIME)
        remember(cond);
    else
        forget(cond);
    return result;
}

int pthread_cond_destroy(pthread_cond_t *cond) {
    NEXT(real_pthread_cond_destroy, "pthread_cond_destroy");
    forget(cond);
    return real_pthread_cond_destroy(cond);
}

/* ---- Absolute deadlines ------------------------------------------------ */

int pthread_cond_timedwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           const struct timespec *restrict deadline) {
    NEXT(real_pthread_cond_timedwait, "pthread_cond_timedwait");
    if (!offset_ns || find(cond))
        return real_pthread_cond_timedwait(cond, mutex, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_cond_timedwait(cond, mutex, &at);
}

int pthread_cond_clockwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex, clockid_t clock,
                           const struct timespec *restrict deadline) {
    NEXT(real_pthread_cond_clockwait, "pthread_cond_clockwait");
    if (!offset_ns || !moves(clock))
        return real_pthread_cond_clockwait(cond, mutex, clock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_cond_clockwait(cond, mutex, clock, &at);
}

int pthread_mutex_timedlock(pthread_mutex_t *restrict mutex, const struct timespec *restrict deadline) {
    NEXT(real_pthread_mutex_timedlock, "pthread_mutex_timedlock");
    if (!offset_ns)
        return real_pthread_mutex_timedlock(mutex, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_mutex_timedlock(mutex, &at);
}

int pthread_mutex_clocklock(pthread_mutex_t *restrict mutex, clockid_t clock,
                            const struct timespec *restrict deadline) {
    NEXT(real_pthread_mutex_clocklock, "pthread_mutex_clocklock");
    if (!offset_ns || !moves(clock))
        return real_pthread_mutex_clocklock(mutex, clock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_mutex_clocklock(mutex, clock, &at);
}

int pthread_rwlock_timedrdlock(pthread_rwlock_t *restrict lock, const struct timespec *restrict deadline) {
    NEXT(real_pthread_rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
    if (!offset_ns)
        return real_pthread_rwlock_timedrdlock(lock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_rwlock_timedrdlock(lock, &at);
}

int pthread_rwlock_timedwrlock(pthread_rwlock_t *restrict lock, const struct timespec *restrict deadline) {
    NEXT(real_pthread_rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
    if (!offset_ns)
        return real_pthread_rwlock_timedwrlock(lock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_rwlock_timedwrlock(lock, &at);
}

int pthread_rwlock_clockrdlock(pthread_rwlock_t *restrict lock, clockid_t clock,
                               const struct timespec *restrict deadline) {
    NEXT(real_pthread_rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
    if (!offset_ns || !moves(clock))
        return real_pthread_rwlock_clockrdlock(lock, clock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_rwlock_clockrdlock(lock, clock, &at);
}

int pthread_rwlock_clockwrlock(pthread_rwlock_t *restrict lock, clockid_t clock,
                               const struct timespec *restrict deadline) {
    NEXT(real_pthread_rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
    if (!offset_ns || !moves(clock))
        return real_pthread_rwlock_clockwrlock(lock, clock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_pthread_rwlock_clockwrlock(lock, clock, &at);
}

int sem_timedwait(sem_t *restrict sem, const struct timespec *restrict deadline) {
    NEXT(real_sem_timedwait, "sem_timedwait");
    if (!offset_ns)
        return real_sem_timedwait(sem, deadline);
    struct timespec at = true_deadline(deadline);
    return real_sem_timedwait(sem, &at);
}

int sem_clockwait(sem_t *restrict sem, clockid_t clock, const struct timespec *restrict deadline) {
    NEXT(real_sem_clockwait, "sem_clockwait");
    if (!offset_ns || !moves(clock))
        return real_sem_clockwait(sem, clock, deadline);
    struct timespec at = true_deadline(deadline);
    return real_sem_clockwait(sem, clock, &at);
}

/* C11 condvars and timed mutexes always judge by TIME_UTC, the wall clock. */
int cnd_timedwait(cnd_t *restrict cond, mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    NEXT(real_cnd_timedwait, "cnd_timedwait");
    if (!offset_ns)
        return real_cnd_timedwait(cond, mutex, deadline);
    struct timespec at = true_deadline(deadline);
    return real_cnd_timedwait(cond, mutex, &at);
}

int mtx_timedlock(mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    NEXT(real_mtx_timedlock, "mtx_timedlock");
    if (!offset_ns)
        return real_mtx_timedlock(mutex, deadline);
    struct timespec at = true_deadline(deadline);
    return real_mtx_timedlock(mutex, &at);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request, struct timespec *remain) {
    NEXT(real_clock_nanosleep, "clock_nanosleep");
    if (!offset_ns || !request || !(flags & TIMER_ABSTIME) || !moves(clock))
        return real_clock_nanosleep(clock, flags, request, remain);
    struct timespec at = true_deadline(request);
    return real_clock_nanosleep(clock, flags, &at, remain);
}
