/* nnsym's small C runtime, built once into the kernel cache (codegen/compiler.py runtime()):

   - nnsym_run_list: runs a list of prebound kernel calls in one foreign call;
   - nnsym_parallel: a persistent worker pool the generated kernels reach through a pointer
     set at load time (nnsym_set_blas). One pool per process, so kernels never stack
     thread pools on top of each other.

   The pool: workers spin for a short while after each task (a batch-1 forward issues its
   parallel products microseconds apart) and then sleep on a condition variable. The spin is
   short (30 us) because a spinning worker holds a core that the BLAS's own threads want: the
   convolutions alternate pool passes (im2col, scatter) with threaded OpenBLAS products, and
   with a 200 us spin each product ran with one of its two threads sharing a core with our
   spinning worker. On the 2-core machine (ResNet-18 b8 3x64x64, one process, alternating):
   forward 25.3 -> 21.7 ms, training step 75 -> 67.6 ms, a chain of 1M-element nd calls
   0.105 -> 0.083 ms per call, the MLP's batch-64 step unchanged (1.01 ms); 5 us made the nd
   calls slower again (0.104 ms: the workers slept between Python calls), 100 us gave back
   part of the convolutions' gain. The caller
   always takes part and claims chunks from a shared counter, so a sleeping worker costs one
   wake-up call, never a wait: the caller does the work itself if nobody else arrives.
   After fork() the child forgets the parent's workers (they do not exist there) and starts
   its own on first use: the hazard that keeps OpenMP off by default does not apply.
   A call made while the pool is busy (another thread's kernel) runs serially. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef void (*nnsym_kernel_t)(void *const *, const int64_t *, const double *);

void nnsym_run_list(int64_t n, nnsym_kernel_t *f, void *const **p, const int64_t **ia,
                    const double **fa)
{
    for (int64_t i = 0; i < n; ++i) f[i](p[i], ia[i], fa[i]);
}

typedef void (*nnsym_task_t)(void *ctx, int64_t part, int64_t nparts);

static int64_t now_ns(void);

/* nnsym_run_list, recording each call's wall time in ns[i] (Executor.profile). */
void nnsym_run_list_timed(int64_t n, nnsym_kernel_t *f, void *const **p, const int64_t **ia,
                          const double **fa, int64_t *ns)
{
    for (int64_t i = 0; i < n; ++i) {
        int64_t t0 = now_ns();
        f[i](p[i], ia[i], fa[i]);
        ns[i] = now_ns() - t0;
    }
}

#define NNSYM_MAX_THREADS 64

#if defined(__x86_64__) || defined(__i386__)
#define NNSYM_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define NNSYM_RELAX() __asm__ __volatile__("yield")
#else
#define NNSYM_RELAX() ((void)0)
#endif

static struct {
    int threads;                /* wanted, caller included */
    int started;                /* workers running (in this process) */
    int64_t spin_ns;            /* how long an idle worker spins before sleeping */
    pthread_t tid[NNSYM_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;            /* task number, bumped to publish a task */
    atomic_uint_fast64_t next;  /* (task << 32) | next chunk */
    atomic_int_fast64_t done;   /* chunks finished */
    atomic_int busy;
    nnsym_task_t fn;
    void *ctx;
    int64_t nparts;
    int atfork;
} P = {.threads = 1, .spin_ns = 30000, .mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Claim and run chunks of task `task` until none is left (or a newer task replaced it). */
static void run_chunks(unsigned task)
{
    for (;;) {
        uint64_t v = atomic_load_explicit(&P.next, memory_order_acquire);
        if ((unsigned)(v >> 32) != task) return;
        int64_t i = (int64_t)(uint32_t)v;
        if (i >= P.nparts) return;
        if (!atomic_compare_exchange_weak_explicit(&P.next, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        P.fn(P.ctx, i, P.nparts);
        atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    unsigned seen = atomic_load_explicit(&P.gen, memory_order_acquire);
    for (;;) {
        int64_t until = now_ns() + P.spin_ns;
        unsigned g;
        int k = 0;
        while ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen) {
            NNSYM_RELAX();
            if (++k == 256) {
                k = 0;
                if (now_ns() > until) break;
            }
        }
        if (g == seen) {
            pthread_mutex_lock(&P.mu);
            while ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&P.cv, &P.mu);
            pthread_mutex_unlock(&P.mu);
        }
        seen = g;
        run_chunks(g);
    }
    return NULL;
}

static void forget_after_fork(void)
{
    /* The child has only the forking thread: its workers are gone, the locks may be held. */
    P.started = 0;
    pthread_mutex_init(&P.mu, NULL);
    pthread_cond_init(&P.cv, NULL);
    atomic_store(&P.busy, 0);
}

/* Threads used by nnsym_parallel, the caller included (1 = serial). Returns the number set. */
int nnsym_set_threads(int n)
{
    if (n < 1) n = 1;
    if (n > NNSYM_MAX_THREADS) n = NNSYM_MAX_THREADS;
    P.threads = n;  /* more workers start on next use; fewer: the extra ones just idle */
    return n;
}

int nnsym_get_threads(void) { return P.threads; }

static int start_workers(void)
{
    if (!P.atfork) {
        pthread_atfork(NULL, NULL, forget_after_fork);
        P.atfork = 1;
    }
    while (P.started + 1 < P.threads) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&P.tid[P.started], &a, worker, NULL);
        pthread_attr_destroy(&a);
        if (rc != 0) break;
        P.started++;
    }
    return P.started + 1;
}

/* Run fn(ctx, i, nparts) for i in [0, nparts) on the pool; returns when all have finished. */
void nnsym_parallel(nnsym_task_t fn, void *ctx, int64_t nparts)
{
    if (nparts <= 1 || P.threads <= 1 ||
        atomic_exchange_explicit(&P.busy, 1, memory_order_acquire)) {
        for (int64_t i = 0; i < nparts; ++i) fn(ctx, i, nparts);
        return;
    }
    if (P.started + 1 < P.threads && start_workers() < 2) {
        atomic_store_explicit(&P.busy, 0, memory_order_release);
        for (int64_t i = 0; i < nparts; ++i) fn(ctx, i, nparts);
        return;
    }
    unsigned task = atomic_load_explicit(&P.gen, memory_order_relaxed) + 1;
    P.fn = fn;
    P.ctx = ctx;
    P.nparts = nparts;
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.next, (uint64_t)task << 32, memory_order_release);
    atomic_store_explicit(&P.gen, task, memory_order_release);
    pthread_mutex_lock(&P.mu);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    run_chunks(task);
    while (atomic_load_explicit(&P.done, memory_order_acquire) < nparts) NNSYM_RELAX();
    atomic_store_explicit(&P.busy, 0, memory_order_release);
}
