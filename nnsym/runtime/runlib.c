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
   A call made while the pool is busy (another thread's kernel) runs serially.

   The pool also runs numpy's OpenBLAS's threaded products (nnsym_blas_threads, at the end):
   there every part must run at once on a thread of its own (a gang task), so no caller
   stealing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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
    unsigned born[NNSYM_MAX_THREADS];  /* P.gen when worker i was made */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;            /* task number, bumped to publish a task */
    atomic_uint_fast64_t next;  /* (task << 32) | next chunk */
    int gang;                   /* this task's part i runs on thread i, and only there */
    atomic_uint_fast64_t gangs; /* a gang task's parts claimed (bit i: part i) */
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

/* A gang task: part `self` runs on thread `self` and nowhere else. P.gangs holds a bit per
   part claimed; publish() sets it to all ones for other tasks, so a worker that arrives late
   from an older task can claim nothing there. A late worker can never be from an unfinished
   gang task (that task waits for it), so a bit it claims is its own part of the gang task
   now published. */
static void run_gang(int self)
{
    if (self >= P.nparts) return;
    const uint64_t bit = (uint64_t)1 << self;
    if (atomic_fetch_or_explicit(&P.gangs, bit, memory_order_acq_rel) & bit) return;
    P.fn(P.ctx, self, P.nparts);
    atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
}

static void *worker(void *arg)
{
    const int self = (int)(intptr_t)arg;
    /* the task number when this worker was made: a task published before the worker first
       runs is still seen as new (a gang task needs every worker) */
    unsigned seen = P.born[self];
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
        if (P.gang)
            run_gang(self);
        else
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
        P.born[P.started + 1] = atomic_load_explicit(&P.gen, memory_order_relaxed);
        int rc = pthread_create(&P.tid[P.started], &a, worker,
                                (void *)(intptr_t)(P.started + 1));
        pthread_attr_destroy(&a);
        if (rc != 0) break;
        P.started++;
    }
    return P.started + 1;
}

/* Publish a task to the workers (P.busy held by the caller). */
static void publish(nnsym_task_t fn, void *ctx, int64_t nparts, int gang)
{
    unsigned task = atomic_load_explicit(&P.gen, memory_order_relaxed) + 1;
    P.fn = fn;
    P.ctx = ctx;
    P.nparts = nparts;
    P.gang = gang;
    atomic_store_explicit(&P.gangs, gang ? 0 : ~(uint64_t)0, memory_order_relaxed);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.next, (uint64_t)task << 32, memory_order_release);
    atomic_store_explicit(&P.gen, task, memory_order_release);
    pthread_mutex_lock(&P.mu);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
}

/* Wait for the published task's parts, then release the pool. */
static void finish(int64_t nparts)
{
    while (atomic_load_explicit(&P.done, memory_order_acquire) < nparts) NNSYM_RELAX();
    atomic_store_explicit(&P.busy, 0, memory_order_release);
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
    publish(fn, ctx, nparts, 0);
    run_chunks(atomic_load_explicit(&P.gen, memory_order_relaxed));
    finish(nparts);
}

/* OpenBLAS's threads, replaced by the pool (openblas_set_threads_callback_function, OpenBLAS
   0.3.27 and later; compiler.py installs it on numpy's OpenBLAS). OpenBLAS hands over
   `numjobs` jobs of one product, and its threaded GEMM's jobs wait for each other's packed
   panels, so every job must run at the same time on a thread of its own: job i runs on
   thread i of the pool (a gang task), never queued behind another job. Where the pool cannot
   give that (busy with another thread's kernel, fewer threads than jobs, workers that could
   not start), the jobs run on threads made for the call.

   Why: with OpenBLAS's own threads, each product left a BLAS thread spinning (its default
   wait is about 0.1 s) on the core that the pool's next pass (im2col, scatter, BatchNorm)
   wanted, three threads on two cores; an 8-image ResNet-18 stage-1 im2col took 420 us on two
   threads against 300 us on one. */
typedef void (*nnsym_dojob_t)(int thread, void *job, int data);

static atomic_llong blas_calls[2];  /* products run on the pool, on threads made for them */

/* out[0] = threaded BLAS products run on the pool so far, out[1] = on threads made for them */
void nnsym_blas_counts(int64_t *out)
{
    out[0] = atomic_load(&blas_calls[0]);
    out[1] = atomic_load(&blas_calls[1]);
}

typedef struct {
    nnsym_dojob_t dojob;
    char *jobs;
    size_t elsize;
    int data;
} blas_gang;

static void blas_gang_part(void *ctx, int64_t part, int64_t nparts)
{
    (void)nparts;
    const blas_gang *g = (const blas_gang *)ctx;
    g->dojob((int)part, g->jobs + (size_t)part * g->elsize, g->data);
}

typedef struct {
    const blas_gang *g;
    int part;
} blas_spawned;

static void *blas_spawned_run(void *arg)
{
    const blas_spawned *s = (const blas_spawned *)arg;
    blas_gang_part((void *)s->g, s->part, 0);
    return NULL;
}

static void blas_spawn(const blas_gang *g, int numjobs)
{
    atomic_fetch_add(&blas_calls[1], 1);
    pthread_t *tid = malloc(sizeof(pthread_t) * (size_t)numjobs);
    blas_spawned *arg = malloc(sizeof(blas_spawned) * (size_t)numjobs);
    char *made = calloc((size_t)numjobs, 1);
    if (!tid || !arg || !made) numjobs = -numjobs;  /* no memory: every job on this thread */
    for (int i = 1; i < numjobs; ++i) {
        arg[i] = (blas_spawned){g, i};
        made[i] = pthread_create(&tid[i], NULL, blas_spawned_run, &arg[i]) == 0;
    }
    /* NOTE: a job whose thread could not be made (or any job, out of memory) runs here after
       job 0, which OpenBLAS's GEMM jobs may wait on forever; that needs a process out of
       threads or memory, where OpenBLAS's own pool could not have started either. */
    const int n = numjobs < 0 ? -numjobs : numjobs;
    blas_gang_part((void *)g, 0, n);
    for (int i = 1; i < n; ++i) {
        if (numjobs > 0 && made[i])
            pthread_join(tid[i], NULL);
        else
            blas_gang_part((void *)g, i, n);
    }
    free(tid);
    free(arg);
    free(made);
}

static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;

static void blas_forget_after_fork(void) { pthread_mutex_init(&blas_mu, NULL); }

static void blas_run(const blas_gang *g, int numjobs)
{
    if (numjobs == 1) {
        blas_gang_part((void *)g, 0, 1);
        return;
    }
    if (numjobs > P.threads || atomic_exchange_explicit(&P.busy, 1, memory_order_acquire)) {
        blas_spawn(g, numjobs);
        return;
    }
    if (P.started + 1 < numjobs && start_workers() < numjobs) {
        atomic_store_explicit(&P.busy, 0, memory_order_release);
        blas_spawn(g, numjobs);
        return;
    }
    atomic_fetch_add(&blas_calls[0], 1);
    publish(blas_gang_part, (void *)g, numjobs, 1);
    run_gang(0);
    finish(numjobs);
}

void nnsym_blas_threads(int sync, nnsym_dojob_t dojob, int numjobs, size_t elsize, void *jobs,
                        int data)
{
    (void)sync;  /* OpenBLAS's exec_blas passes 1: return when every job has finished */
    if (numjobs <= 0) return;
    static atomic_int atfork;
    if (!atomic_exchange(&atfork, 1)) pthread_atfork(NULL, NULL, blas_forget_after_fork);
    /* One product's jobs at a time: OpenBLAS gives the jobs of concurrent products the same
       per-thread buffers (by job index) on this path. Measured: four Python threads running
       numpy products at once gave wrong results without this lock, the same bits with it. */
    pthread_mutex_lock(&blas_mu);
    const blas_gang g = {dojob, (char *)jobs, elsize, data};
    blas_run(&g, numjobs);
    pthread_mutex_unlock(&blas_mu);
}

/* Products C[m, n] = alpha * A[m, k] . B[n, k]ᵀ (+ beta * C) with a few rows m, for the kernels'
   nnsym_gemm (prologue.c.j2 calls these through pointers set at load time): built once here
   rather than into every kernel library (it made each compile 25% longer there). */
#define NNSYM_SKINNY_PAR 65536
typedef float nnsym_vec_f32 __attribute__((vector_size(32)));
typedef double nnsym_vec_f64 __attribute__((vector_size(32)));
static inline nnsym_vec_f32 nnsym_vload_f32(const float *p)
{
    nnsym_vec_f32 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline nnsym_vec_f64 nnsym_vload_f64(const double *p)
{
    nnsym_vec_f64 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline float nnsym_vsum_f32(nnsym_vec_f32 v)
{
    float s = 0;
    for (int i = 0; i < 8; ++i) s += v[i];
    return s;
}
static inline double nnsym_vsum_f64(nnsym_vec_f64 v)
{
    double s = 0;
    for (int i = 0; i < 4; ++i) s += v[i];
    return s;
}

/* Row-major C[m, n] = alpha * A[m, k] . B[n, k]ᵀ (+ beta * C when beta != 0) for a few rows m
   (a FullyConnected layer at a small batch): OpenBLAS's sgemm runs such a product far below
   its peak (8x512 by 1000x512: 173 us, 4 MFLOP). Here each four rows of B (a weight's rows)
   are read once, from memory, and dotted with two rows of A at a time from cache: eight
   accumulators, the products fused (FMA) as a BLAS's are. Each element's sum is computed
   the same way whatever the split over the pool, so results do not depend on the thread
   count. */
#define NNSYM_SKINNY(SFX, T, W)                                                                   \
__attribute__((optimize("fp-contract=fast")))                                                     \
static void nnsym_skinny_rows_##SFX(const T *a, int64_t lda, int64_t m, const T *b,               \
                                    int64_t ldb, int64_t k, T alpha, T beta, T *c,                \
                                    int64_t ldc, int64_t j0, int64_t j1)                          \
{                                                                                                 \
    typedef nnsym_vec_##SFX V;                                                                    \
    const int64_t kv = k - k % W;                                                                 \
    int64_t j = j0;                                                                               \
    for (; j + 4 <= j1; j += 4) {                                                                 \
        const T *b0 = b + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;                \
        for (int64_t i = 0; i < m; i += 2) {                                                      \
            const int two = i + 1 < m;                                                            \
            const T *x0 = a + i * lda, *x1 = two ? x0 + lda : x0;                                 \
            V s00 = {0}, s01 = {0}, s02 = {0}, s03 = {0};                                         \
            V s10 = {0}, s11 = {0}, s12 = {0}, s13 = {0};                                         \
            for (int64_t q = 0; q < kv; q += W) {                                                 \
                const V w0 = nnsym_vload_##SFX(b0 + q), w1 = nnsym_vload_##SFX(b1 + q);           \
                const V w2 = nnsym_vload_##SFX(b2 + q), w3 = nnsym_vload_##SFX(b3 + q);           \
                const V u0 = nnsym_vload_##SFX(x0 + q), u1 = nnsym_vload_##SFX(x1 + q);           \
                s00 += w0 * u0; s01 += w1 * u0; s02 += w2 * u0; s03 += w3 * u0;                   \
                s10 += w0 * u1; s11 += w1 * u1; s12 += w2 * u1; s13 += w3 * u1;                   \
            }                                                                                     \
            T r[2][4] = {                                                                         \
                {nnsym_vsum_##SFX(s00), nnsym_vsum_##SFX(s01), nnsym_vsum_##SFX(s02),             \
                 nnsym_vsum_##SFX(s03)},                                                          \
                {nnsym_vsum_##SFX(s10), nnsym_vsum_##SFX(s11), nnsym_vsum_##SFX(s12),             \
                 nnsym_vsum_##SFX(s13)}};                                                         \
            for (int64_t q = kv; q < k; ++q) {                                                    \
                r[0][0] += b0[q] * x0[q]; r[0][1] += b1[q] * x0[q];                               \
                r[0][2] += b2[q] * x0[q]; r[0][3] += b3[q] * x0[q];                               \
                r[1][0] += b0[q] * x1[q]; r[1][1] += b1[q] * x1[q];                               \
                r[1][2] += b2[q] * x1[q]; r[1][3] += b3[q] * x1[q];                               \
            }                                                                                     \
            for (int ii = 0; ii <= two; ++ii)                                                     \
                for (int t = 0; t < 4; ++t) {                                                     \
                    T *o = c + (i + ii) * ldc + j + t;                                            \
                    const T v = alpha * r[ii][t];                                                 \
                    *o = beta != 0 ? v + beta * *o : v;                                           \
                }                                                                                 \
        }                                                                                         \
    }                                                                                             \
    for (; j < j1; ++j) {                                                                         \
        const T *b0 = b + j * ldb;                                                                \
        for (int64_t i = 0; i < m; ++i) {                                                         \
            const T *x0 = a + i * lda;                                                            \
            V s0 = {0};                                                                           \
            for (int64_t q = 0; q < kv; q += W)                                                   \
                s0 += nnsym_vload_##SFX(b0 + q) * nnsym_vload_##SFX(x0 + q);                      \
            T r = nnsym_vsum_##SFX(s0);                                                           \
            for (int64_t q = kv; q < k; ++q) r += b0[q] * x0[q];                                  \
            T *o = c + i * ldc + j;                                                               \
            const T v = alpha * r;                                                                \
            *o = beta != 0 ? v + beta * *o : v;                                                   \
        }                                                                                         \
    }                                                                                             \
}                                                                                                 \
typedef struct {                                                                                  \
    const T *a, *b;                                                                               \
    T *c;                                                                                         \
    int64_t lda, m, ldb, k, ldc, n;                                                               \
    T alpha, beta;                                                                                \
} nnsym_skinny_task_##SFX;                                                                        \
static void nnsym_skinny_part_##SFX(void *ctx, int64_t part, int64_t nparts)                      \
{                                                                                                 \
    const nnsym_skinny_task_##SFX *t = ctx;                                                       \
    /* whole groups of four rows of B per part */                                                 \
    const int64_t g = (t->n + 3) / 4, j0 = 4 * (g * part / nparts);                               \
    int64_t j1 = 4 * (g * (part + 1) / nparts);                                                   \
    if (j1 > t->n) j1 = t->n;                                                                     \
    if (j0 < j1)                                                                                  \
        nnsym_skinny_rows_##SFX(t->a, t->lda, t->m, t->b, t->ldb, t->k, t->alpha, t->beta,        \
                                t->c, t->ldc, j0, j1);                                            \
}                                                                                                 \
void nnsym_skinny_##SFX(const T *a, int64_t lda, int64_t m, const T *b, int64_t ldb,              \
                        int64_t k, T alpha, T beta, T *c, int64_t ldc, int64_t n)                 \
{                                                                                                 \
    int threads = P.threads;                                                                      \
    if (threads > 1 && n >= 8 && n * k >= NNSYM_SKINNY_PAR) {                                     \
        nnsym_skinny_task_##SFX t = {a, b, c, lda, m, ldb, k, ldc, n, alpha, beta};               \
        nnsym_parallel(nnsym_skinny_part_##SFX, &t, threads);                                     \
    } else {                                                                                      \
        nnsym_skinny_rows_##SFX(a, lda, m, b, ldb, k, alpha, beta, c, ldc, 0, n);                 \
    }                                                                                             \
}

NNSYM_SKINNY(f32, float, 8)
NNSYM_SKINNY(f64, double, 4)
