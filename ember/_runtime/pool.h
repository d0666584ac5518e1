/* ember's worker pool for its FFI kernels (included by _rows.c and _sort.c: each extension module has its own pool).
 * Needs _GNU_SOURCE defined before the first system header (sched_getaffinity, CPU_COUNT). */
#ifndef EMBER_POOL_H
#define EMBER_POOL_H
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- the worker threads --------------------------------------------------------------------------------- */
/* A pool of one thread per CPU but the caller's (cpu_count), started on first use, each running a share of the
 * current job (the caller runs share 0 and any share no worker took yet): starting a thread per call cost 8-37 us
 * (measured), a fifth of a 150 us reduction. One job at a time: a call that finds the pool busy (another XLA thread
 * in the kernel) runs all its shares itself. After fork() the child has no threads: pthread_atfork's child handler
 * forgets the pool (and re-makes its locks), and the next call starts a new one. */
#define MAX_THREADS 16
typedef struct {
    pthread_mutex_t lock, busy;    /* lock: the fields below; busy: held by the call using the pool */
    pthread_cond_t start, done;
    int threads;                   /* workers started (0: none yet) */
    uint64_t generation;           /* a new job was posted when it changes */
    void *(*run)(void *);          /* the job: run(items[k]) for k in [1, shares) */
    char *items;
    size_t item_size;
    int shares, next, pending;     /* shares of the job; the next share to take; shares still running */
} Pool;
static Pool pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                    PTHREAD_COND_INITIALIZER, 0, 0, NULL, NULL, 0, 0, 0, 0};

static void *pool_worker(void *unused) {
    (void)unused;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen || pool.next >= pool.shares) {
            seen = pool.generation;
            pthread_cond_wait(&pool.start, &pool.lock);
        }
        int k = pool.next++;
        pthread_mutex_unlock(&pool.lock);
        pool.run(pool.items + (size_t)k * pool.item_size);
        pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

static void pool_forget(void) { /* (in a fork's child: no threads, and locks perhaps held by parent threads) */
    Pool fresh = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                  PTHREAD_COND_INITIALIZER, 0, 0, NULL, NULL, 0, 0, 0, 0};
    pool = fresh;
}

/* The CPUs this process may use (its affinity: a container given 2 of a machine's 16 CPUs gets 2 threads, not 15
 * contending for them; the online CPUs where affinity is not known), at most MAX_THREADS: the most threads a job
 * is split among. */
static int cpu_count(void) {
    long cpus = 1;
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        cpus = CPU_COUNT(&set);
        return cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
    }
#endif
#ifdef _SC_NPROCESSORS_ONLN
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    return cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
}

/* Start the workers once, one per CPU but the caller's (under pool.busy); how many there are (0: none started). */
static int pool_start(void) {
    static int registered = 0;
    if (pool.threads > 0) return pool.threads;
    if (!registered) registered = pthread_atfork(NULL, NULL, pool_forget) == 0;
    if (!registered) return 0;
    for (int t = 0; t < cpu_count() - 1; t++) {
        pthread_t id;
        if (pthread_create(&id, NULL, pool_worker, NULL) != 0) break;
        pthread_detach(id);
        pool.threads++;
    }
    return pool.threads;
}

/* run(items[k]) for every k in [0, shares): share 0 here, the others by the pool's workers (or here when the pool
 * is busy or has no workers); returns once all are done. */
static void run_shares(void *(*run)(void *), void *items, size_t item_size, int shares) {
    int k = 1;
    if (shares > 1 && pthread_mutex_trylock(&pool.busy) == 0) {
        if (pool_start() > 0) {
            pthread_mutex_lock(&pool.lock);
            pool.run = run;
            pool.items = (char *)items;
            pool.item_size = item_size;
            pool.shares = shares;
            pool.next = 1;
            pool.pending = shares - 1;
            pool.generation++;
            pthread_cond_broadcast(&pool.start);
            pthread_mutex_unlock(&pool.lock);
            run(items);
            pthread_mutex_lock(&pool.lock);
            while (pool.pending > 0) {
                if (pool.next < pool.shares) { /* (a share no worker took yet: run it here) */
                    int mine = pool.next++;
                    pthread_mutex_unlock(&pool.lock);
                    run((char *)items + (size_t)mine * item_size);
                    pthread_mutex_lock(&pool.lock);
                    pool.pending--;
                } else {
                    pthread_cond_wait(&pool.done, &pool.lock);
                }
            }
            pool.shares = 0;
            pthread_mutex_unlock(&pool.lock);
            pthread_mutex_unlock(&pool.busy);
            return;
        }
        pthread_mutex_unlock(&pool.busy);
    }
    run(items);
    for (; k < shares; k++) run((char *)items + (size_t)k * item_size);
}

#endif
