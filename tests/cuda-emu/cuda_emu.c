/*
 * A CUDA driver (libcuda.so.1) emulated in host memory, so that the `cuda` feature's logic runs
 * on machines with no GPU (CI is one). Built by scripts/cuda-emu.sh; every driver entry point
 * this file does not define fails with CUDA_ERROR_NOT_SUPPORTED and says so on stderr.
 *
 * It is strict where the real driver is permissive, so that a test passing here is evidence and
 * not luck. It verifies our logic, never a GPU: timings, kernels, real devices and other
 * libraries (CuPy, Numba, PyTorch, JAX) are for the GPU suite.
 *
 * - CUDA_EMU_DEVICES devices (1 to 8; 1 when unset), each with one primary context, reference
 *   counted: when the last reference is released, its allocations are freed and its streams
 *   die, as on a real driver. All devices share one address space (unified addressing), and a
 *   pointer's attributes name the device and context it was allocated in.
 * - Device memory (cuMemAlloc) gets addresses in a reserved range that the host cannot read or
 *   write (PROT_NONE), so host code that dereferences a device pointer crashes here as it would
 *   on a GPU. Its bytes live in a shadow mapping; allocations up to 16 MiB are filled with
 *   0xA5 (cuMemAlloc does not zero), larger ones keep fresh zero pages (filling them would
 *   cost more than the tests). Addresses are never reused, so a freed pointer stays unknown.
 * - Managed (cuMemAllocManaged) and pinned host (cuMemAllocHost) memory are host memory,
 *   registered with their type.
 * - Streams are lazy: enqueued work runs only when something must observe it (a stream, event
 *   or context synchronize, a synchronous copy to the host, a free). A consumer that reads
 *   without ordering itself after the producer sees stale bytes, every time.
 * - The legacy default stream (NULL or 1) waits for all earlier work on blocking streams, and
 *   blocking streams wait for earlier work on it (non-blocking streams are independent). The
 *   per-thread default stream (2) is a blocking stream of its own per thread.
 * - Copies and memsets must lie inside one allocation: anything else is CUDA_ERROR_INVALID_VALUE.
 *
 * Set CUDA_EMU_VERBOSE=1 to print every error it returns, with the reason.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct emu_ctx *CUcontext;
typedef struct emu_stream *CUstream;
typedef struct emu_event *CUevent;

enum {
    SUCCESS = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_DEVICE = 101,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    NOT_READY = 600,
    CONTEXT_IS_DESTROYED = 709,
    NOT_SUPPORTED = 801,
};

#define TOTAL_MEMORY (80ull << 30)
#define DEVICE_VA_SIZE (1ull << 40)
#define ALLOC_GAP (64u << 10) /* unmapped bytes between two device allocations */
#define POISON_LIMIT (16u << 20) /* larger allocations keep the mapping's zero pages */

/* ---- diagnostics and the lock ---------------------------------------------------------- */

static CUresult fail(const char *fn, CUresult code, const char *why, ...) {
    static int verbose = -1;
    if (verbose < 0) {
        const char *v = getenv("CUDA_EMU_VERBOSE");
        verbose = v && *v && strcmp(v, "0") != 0;
    }
    if (verbose) {
        va_list ap;
        va_start(ap, why);
        fprintf(stderr, "cuda-emu: %s -> %d: ", fn, code);
        vfprintf(stderr, why, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    return code;
}
#define FAIL(code, ...) fail(__func__, code, __VA_ARGS__)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void unlock_mu(int *unused) {
    (void)unused;
    pthread_mutex_unlock(&mu);
}
/* Holds the lock until the end of the enclosing function. */
#define LOCKED                                                                                 \
    pthread_mutex_lock(&mu);                                                                   \
    __attribute__((cleanup(unlock_mu))) int guard_ = 0;                                        \
    (void)guard_

static int initialized;
#define NEED_INIT                                                                              \
    do {                                                                                       \
        if (!initialized)                                                                      \
            return FAIL(NOT_INITIALIZED, "cuInit was not called");                             \
    } while (0)

/* An ordinal names one of the emulated devices. */
#define NEED_DEVICE(dev)                                                                       \
    do {                                                                                       \
        if ((dev) < 0 || (dev) >= device_count)                                                \
            return FAIL(INVALID_DEVICE, "device %d", (dev));                                   \
    } while (0)

/* ---- contexts -------------------------------------------------------------------------- */

struct emu_stream;

struct emu_ctx {
    int device;
    int refcount;
    int active;
    unsigned generation; /* bumped when the context is destroyed */
    struct emu_stream *legacy;
};

#define MAX_DEVICES 8
static struct emu_ctx primaries[MAX_DEVICES];
/* Contexts made with cuCtxCreate: a slot is reused once its context is destroyed, so a stale
 * handle may name another context later, as the real driver's may. */
#define MAX_CREATED 16
static struct emu_ctx created[MAX_CREATED];
static int device_count = 1;

static __thread CUcontext ctx_stack[32];
static __thread int ctx_depth;

static CUcontext current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

static CUresult need_ctx(const char *fn, struct emu_ctx **out) {
    struct emu_ctx *c = current();
    if (!c)
        return fail(fn, INVALID_CONTEXT, "no context is current on this thread");
    if (!c->active)
        return fail(fn, CONTEXT_IS_DESTROYED, "the current context was destroyed");
    *out = c;
    return SUCCESS;
}
#define NEED_CTX(c)                                                                            \
    struct emu_ctx *c;                                                                         \
    do {                                                                                       \
        NEED_INIT;                                                                             \
        CUresult r_ = need_ctx(__func__, &c);                                                  \
        if (r_)                                                                                \
            return r_;                                                                         \
    } while (0)

/* ---- streams and their lazy queues ----------------------------------------------------- */

enum op_kind { OP_MARK, OP_WAIT, OP_COPY, OP_SET };

struct op {
    enum op_kind kind;
    char *dst;
    const char *src;
    size_t n;        /* bytes for a copy, items for a set */
    unsigned value;  /* a set's value */
    int width;       /* a set's item size */
    char *staged;    /* a copy of pageable host bytes, owned */
    struct emu_stream *wait_on;
    uint64_t wait_until;
};

#define STREAM_MAGIC 0x57524541u

struct emu_stream {
    unsigned magic;
    struct emu_ctx *ctx;
    int blocking;  /* synchronizes with the legacy default stream */
    int legacy;    /* is the legacy default stream */
    uint64_t enqueued, done;
    struct op *ops; /* ops[i] is operation done + i */
    size_t len, cap;
    struct emu_stream *next; /* every live stream */
};

static struct emu_stream *streams;
static __thread struct emu_stream *per_thread;
static __thread unsigned per_thread_generation;

static struct emu_stream *new_stream(struct emu_ctx *c, int blocking, int legacy) {
    struct emu_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->magic = STREAM_MAGIC;
    s->ctx = c;
    s->blocking = blocking;
    s->legacy = legacy;
    s->next = streams;
    streams = s;
    return s;
}

static void run(struct emu_stream *s, uint64_t until);

static void execute(struct op *op) {
    switch (op->kind) {
    case OP_MARK:
        break;
    case OP_WAIT:
        run(op->wait_on, op->wait_until);
        break;
    case OP_COPY:
        memmove(op->dst, op->staged ? op->staged : op->src, op->n);
        break;
    case OP_SET:
        for (size_t i = 0; i < op->n; i++) {
            if (op->width == 1)
                op->dst[i] = (char)op->value;
            else if (op->width == 2)
                ((uint16_t *)op->dst)[i] = (uint16_t)op->value;
            else
                ((uint32_t *)op->dst)[i] = op->value;
        }
        break;
    }
    free(op->staged);
}

/* Runs `s` until `until` operations are done. A wait only ever names work enqueued before it,
 * so the recursion ends. */
static void run(struct emu_stream *s, uint64_t until) {
    while (s->done < until && s->len) {
        struct op op = s->ops[0];
        memmove(s->ops, s->ops + 1, (s->len - 1) * sizeof *s->ops);
        s->len--;
        execute(&op);
        s->done++;
    }
}

static void run_all(struct emu_ctx *c) {
    for (struct emu_stream *s = streams; s; s = s->next)
        if (s->ctx == c)
            run(s, s->enqueued);
}

static int push(struct emu_stream *s, struct op op) {
    if (s->len == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct op *ops = realloc(s->ops, cap * sizeof *ops);
        if (!ops)
            return 0;
        s->ops = ops;
        s->cap = cap;
    }
    s->ops[s->len++] = op;
    s->enqueued++;
    return 1;
}

static int push_wait(struct emu_stream *s, struct emu_stream *on, uint64_t until) {
    if (on == s || on->done >= until)
        return 1;
    return push(s, (struct op){.kind = OP_WAIT, .wait_on = on, .wait_until = until});
}

/* Enqueues `op` after the implicit waits of the legacy default stream's rules. */
static CUresult enqueue(const char *fn, struct emu_stream *s, struct op op) {
    int ok = 1;
    if (s->legacy) {
        for (struct emu_stream *b = streams; b; b = b->next)
            if (b != s && b->ctx == s->ctx && b->blocking)
                ok = ok && push_wait(s, b, b->enqueued);
    } else if (s->blocking) {
        ok = push_wait(s, s->ctx->legacy, s->ctx->legacy->enqueued);
    }
    if (!ok || !push(s, op)) {
        free(op.staged);
        return fail(fn, OUT_OF_MEMORY, "no host memory for the queue");
    }
    return SUCCESS;
}

static int is_live_stream(struct emu_stream *h) {
    for (struct emu_stream *s = streams; s; s = s->next)
        if (s == h)
            return s->magic == STREAM_MAGIC;
    return 0;
}

/* The stream a handle names in the current context: NULL and 1 are the legacy default stream,
 * 2 this thread's per-thread default stream. */
static CUresult resolve(const char *fn, CUstream h, struct emu_stream **out) {
    struct emu_ctx *c;
    CUresult r = need_ctx(fn, &c);
    if (r)
        return r;
    if (h == NULL || h == (CUstream)1) {
        *out = c->legacy;
    } else if (h == (CUstream)2) {
        if (!per_thread || per_thread_generation != c->generation || per_thread->ctx != c) {
            per_thread = new_stream(c, 1, 0);
            per_thread_generation = c->generation;
            if (!per_thread)
                return fail(fn, OUT_OF_MEMORY, "no host memory");
        }
        *out = per_thread;
    } else if (!is_live_stream(h)) {
        return fail(fn, INVALID_HANDLE, "%p is not a live stream", (void *)h);
    } else {
        *out = h;
    }
    return SUCCESS;
}
#define RESOLVE(s, h)                                                                          \
    struct emu_stream *s;                                                                      \
    do {                                                                                       \
        NEED_INIT;                                                                             \
        CUresult r_ = resolve(__func__, h, &s);                                                \
        if (r_)                                                                                \
            return r_;                                                                         \
    } while (0)

/* ---- memory ---------------------------------------------------------------------------- */

enum mem_type { MEM_HOST = 1, MEM_DEVICE = 2, MEM_MANAGED = 3 };

struct alloc {
    CUdeviceptr base;
    size_t size;
    char *bytes; /* where the bytes are: a shadow for device memory, else `base` itself */
    enum mem_type type;
    struct emu_ctx *ctx;
    struct alloc *next;
};

static struct alloc *allocs;
static size_t used;
static char *device_va;
static unsigned long long device_va_size;
static CUdeviceptr device_va_next;

static struct alloc *find(CUdeviceptr p) {
    for (struct alloc *a = allocs; a; a = a->next)
        if (p >= a->base && p - a->base < a->size)
            return a;
    return NULL;
}

/* The host address holding `n` bytes at CUDA address `p`, which must lie inside one
 * allocation; NULL (with the reason printed) otherwise. */
static char *bytes_at(const char *fn, CUdeviceptr p, size_t n) {
    struct alloc *a = find(p);
    if (!a) {
        fail(fn, INVALID_VALUE, "0x%llx is not CUDA memory (never allocated, or freed)", p);
        return NULL;
    }
    if (n > a->size - (p - a->base)) {
        fail(fn, INVALID_VALUE, "0x%llx + %zu bytes leaves its allocation (0x%llx, %zu bytes)", p,
             n, a->base, a->size);
        return NULL;
    }
    return a->bytes + (p - a->base);
}

static void *map(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static CUresult allocate(const char *fn, struct emu_ctx *c, size_t n, enum mem_type type,
                         CUdeviceptr *out) {
    if (n == 0)
        return fail(fn, INVALID_VALUE, "0 bytes");
    if (n > TOTAL_MEMORY - used)
        return fail(fn, OUT_OF_MEMORY, "%zu bytes asked, %llu free", n, TOTAL_MEMORY - used);
    struct alloc *a = calloc(1, sizeof *a);
    char *bytes = map(n);
    if (!a || !bytes) {
        free(a);
        if (bytes)
            munmap(bytes, n);
        return fail(fn, OUT_OF_MEMORY, "the host has no %zu bytes to emulate them", n);
    }
    a->size = n;
    a->bytes = bytes;
    a->type = type;
    a->ctx = c;
    if (type == MEM_DEVICE) {
        size_t span = (n + ALLOC_GAP + 4095) & ~(size_t)4095;
        if (span > device_va_size - device_va_next) {
            munmap(bytes, n);
            free(a);
            return fail(fn, OUT_OF_MEMORY, "the emulated address range is used up");
        }
        a->base = (CUdeviceptr)(uintptr_t)device_va + device_va_next;
        device_va_next += span;
        if (n <= POISON_LIMIT)
            memset(bytes, 0xA5, n);
    } else {
        a->base = (CUdeviceptr)(uintptr_t)bytes;
    }
    a->next = allocs;
    allocs = a;
    used += n;
    *out = a->base;
    return SUCCESS;
}

static void release(struct alloc *a) {
    struct alloc **pp = &allocs;
    while (*pp != a)
        pp = &(*pp)->next;
    *pp = a->next;
    used -= a->size;
    munmap(a->bytes, a->size);
    free(a);
}

static CUresult free_kind(const char *fn, CUdeviceptr p, int host) {
    struct alloc *a = find(p);
    if (!a || a->base != p || (a->type == MEM_HOST) != host)
        return fail(fn, INVALID_VALUE, "0x%llx is not the start of a live %s allocation", p,
                    host ? "pinned host" : "device or managed");
    /* Freeing waits for the device, as cuMemFree does. */
    run_all(a->ctx);
    release(a);
    return SUCCESS;
}

/* ---- initialization, devices, contexts ------------------------------------------------- */

CUresult cuInit(unsigned flags) {
    LOCKED;
    if (flags != 0)
        return FAIL(INVALID_VALUE, "flags must be 0");
    /* The largest range the process may reserve (a `ulimit -v` may refuse 1 TiB). */
    for (unsigned long long size = DEVICE_VA_SIZE; !device_va && size >= (1ull << 32);
         size >>= 2) {
        void *va = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
        if (va != MAP_FAILED) {
            device_va = va;
            device_va_size = size;
            device_va_next = 1 << 20;
        }
    }
    if (!device_va)
        return FAIL(OUT_OF_MEMORY, "cannot reserve the emulated device address range");
    const char *n = getenv("CUDA_EMU_DEVICES");
    if (n && *n) {
        char *end;
        long count = strtol(n, &end, 10);
        if (*end || count < 1 || count > MAX_DEVICES)
            return FAIL(INVALID_VALUE, "CUDA_EMU_DEVICES=%s: a count from 1 to %d", n, MAX_DEVICES);
        device_count = (int)count;
    }
    for (int d = 0; d < MAX_DEVICES; d++)
        primaries[d].device = d;
    initialized = 1;
    return SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
    if (!version)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *version = 13000;
    return SUCCESS;
}

/* ---- entry points by name (cuda-bindings 12.x/13.x resolve every function this way) ------ */

/* cuGetProcAddress's symbolStatus values. */
enum { PROC_FOUND = 0, PROC_SYMBOL_NOT_FOUND = 1 };

/* This library's own handle, for looking its entry points up by name. */
static void *self_handle(void) {
    static void *self;
    if (!self) {
        Dl_info info;
        if (dladdr((void *)cuInit, &info) && info.dli_fname)
            self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    }
    return self;
}

/* Every versioned entry point this library has (emulated or stubbed) and the CUDA version that
 * introduced it (cuda.h's `#define cuX cuX_vN` history, as cuda-bindings 13.5 asks for each): a
 * caller asking for `cuX` at version V gets the newest `cuX_vN` introduced at V or before, else
 * `cuX` itself, as from the real driver. A `_vN` missing here is never returned (its arguments
 * may not be the bare name's); a caller asking at a version where the real driver would give
 * it gets the bare name, so every `_vN` this library has must be listed. */
static const struct {
    const char *name;
    int since;
} versioned[] = {
    /* Not asked for by cuda-bindings 13.5 (CUDA 12 maps cuGraphInstantiate elsewhere). */
    {"cuGraphInstantiate_v2", 11000},
    {"cuArray3DCreate_v2", 3020}, {"cuArray3DGetDescriptor_v2", 3020},
    {"cuArrayCreate_v2", 3020}, {"cuArrayGetDescriptor_v2", 3020},
    {"cuCtxCreate_v2", 3020}, {"cuDeviceTotalMem_v2", 3020},
    {"cuGraphicsResourceGetMappedPointer_v2", 3020}, {"cuMemAllocHost_v2", 3020},
    {"cuMemAllocPitch_v2", 3020}, {"cuMemAlloc_v2", 3020},
    {"cuMemFree_v2", 3020}, {"cuMemGetAddressRange_v2", 3020},
    {"cuMemGetInfo_v2", 3020}, {"cuMemHostGetDevicePointer_v2", 3020},
    {"cuMemcpy2DAsync_v2", 3020}, {"cuMemcpy2DUnaligned_v2", 3020},
    {"cuMemcpy2D_v2", 3020}, {"cuMemcpy3DAsync_v2", 3020},
    {"cuMemcpy3D_v2", 3020}, {"cuMemcpyAtoA_v2", 3020},
    {"cuMemcpyAtoD_v2", 3020}, {"cuMemcpyAtoHAsync_v2", 3020},
    {"cuMemcpyAtoH_v2", 3020}, {"cuMemcpyDtoA_v2", 3020},
    {"cuMemcpyDtoDAsync_v2", 3020}, {"cuMemcpyDtoD_v2", 3020},
    {"cuMemcpyDtoHAsync_v2", 3020}, {"cuMemcpyDtoH_v2", 3020},
    {"cuMemcpyHtoAAsync_v2", 3020}, {"cuMemcpyHtoA_v2", 3020},
    {"cuMemcpyHtoDAsync_v2", 3020}, {"cuMemcpyHtoD_v2", 3020},
    {"cuMemsetD16_v2", 3020}, {"cuMemsetD2D16_v2", 3020},
    {"cuMemsetD2D32_v2", 3020}, {"cuMemsetD2D8_v2", 3020},
    {"cuMemsetD32_v2", 3020}, {"cuMemsetD8_v2", 3020},
    {"cuModuleGetGlobal_v2", 3020}, {"cuTexRefGetAddress_v2", 3020},
    {"cuTexRefSetAddress_v2", 3020}, {"cuCtxDestroy_v2", 4000},
    {"cuCtxPopCurrent_v2", 4000}, {"cuCtxPushCurrent_v2", 4000},
    {"cuEventDestroy_v2", 4000}, {"cuStreamDestroy_v2", 4000},
    {"cuTexRefSetAddress2D_v3", 4010}, {"cuGraphicsResourceSetMapFlags_v2", 6050},
    {"cuLinkAddData_v2", 6050}, {"cuLinkAddFile_v2", 6050},
    {"cuLinkCreate_v2", 6050}, {"cuMemHostRegister_v2", 6050},
    {"cuStreamBeginCapture_v2", 10010}, {"cuDevicePrimaryCtxRelease_v2", 11000},
    {"cuDevicePrimaryCtxReset_v2", 11000}, {"cuDevicePrimaryCtxSetFlags_v2", 11000},
    {"cuIpcOpenMemHandle_v2", 11000}, {"cuStreamGetCaptureInfo_v2", 11030},
    {"cuCtxCreate_v3", 11040}, {"cuDeviceGetUuid_v2", 11040},
    {"cuStreamBatchMemOp_v2", 11070}, {"cuStreamWaitValue32_v2", 11070},
    {"cuStreamWaitValue64_v2", 11070}, {"cuStreamWriteValue32_v2", 11070},
    {"cuStreamWriteValue64_v2", 11070}, {"cuGetProcAddress_v2", 12000},
    {"cuGraphAddKernelNode_v2", 12000}, {"cuGraphExecKernelNodeSetParams_v2", 12000},
    {"cuGraphExecUpdate_v2", 12000}, {"cuGraphKernelNodeGetParams_v2", 12000},
    {"cuGraphKernelNodeSetParams_v2", 12000}, {"cuMemAdvise_v2", 12020},
    {"cuMemPrefetchAsync_v2", 12020}, {"cuGraphAddDependencies_v2", 12030},
    {"cuGraphAddNode_v2", 12030}, {"cuGraphGetEdges_v2", 12030},
    {"cuGraphNodeGetDependencies_v2", 12030}, {"cuGraphNodeGetDependentNodes_v2", 12030},
    {"cuGraphRemoveDependencies_v2", 12030}, {"cuStreamGetCaptureInfo_v3", 12030},
    {"cuStreamUpdateCaptureDependencies_v2", 12030}, {"cuCtxCreate_v4", 12050},
    {"cuStreamGetCtx_v2", 12050}, {"cuEventElapsedTime_v2", 12080},
    {"cuCtxGetDevice_v2", 13000}, {"cuCtxSynchronize_v2", 13000},
    {"cuMemcpy3DBatchAsync_v2", 13000}, {"cuMemcpyBatchAsync_v2", 13000},
    {"cuMulticastBindAddr_v2", 13010}, {"cuMulticastBindMem_v2", 13010},
    {"cuLaunchHostFunc_v2", 13020}, {"cuGraphAddNode_v3", 13041},
    {"cuGraphNodeSetParams_v2", 13041},
};

static int introduced(const char *name) {
    for (size_t i = 0; i < sizeof versioned / sizeof *versioned; i++)
        if (!strcmp(versioned[i].name, name))
            return versioned[i].since;
    return -1;
}

/* The entry point a caller asking for `symbol` (a base name, "cuMemAlloc") at `cuda_version`
 * gets (see `versioned`). Per-thread-stream variants (`_ptds`, `_ptsz`) are not emulated: the
 * default ones are returned whatever the flags. A name this library has only as a stub is
 * found, and fails with CUDA_ERROR_NOT_SUPPORTED when called, naming itself. */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                             unsigned long long flags, int *status) {
    if (!symbol || !pfn)
        return FAIL(INVALID_VALUE, "null symbol or out-pointer");
    *pfn = NULL;
    if (status)
        *status = PROC_SYMBOL_NOT_FOUND;
    /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM asks for the `_ptds`/`_ptsz` variants,
     * where stream 0 is the per-thread stream: not emulated (stream 2 is). */
    if (flags & 2)
        return FAIL(NOT_SUPPORTED, "%s: per-thread default stream lookups (flags 0x%llx) are not "
                    "emulated; stream 0 is the legacy stream here, stream 2 the per-thread one",
                    symbol, flags);
    /* Base names of driver entry points only ("cuMemAlloc", not "cuMemAlloc_v2", "malloc"). */
    size_t len = strnlen(symbol, 256);
    if (strncmp(symbol, "cu", 2) || !strncmp(symbol, "cuda_", 5) || len >= 200 ||
        strstr(symbol, "_v") || strstr(symbol, "_pt"))
        return NOT_FOUND;
    static const char *const suffixes[] = {"_v4", "_v3", "_v2", ""};
    void *self = self_handle();
    Dl_info own, found;
    if (!dladdr((void *)cuInit, &own))
        return FAIL(NOT_FOUND, "cannot find this library's own symbols");
    for (size_t i = 0; self && i < sizeof suffixes / sizeof *suffixes; i++) {
        char name[256];
        if (snprintf(name, sizeof name, "%s%s", symbol, suffixes[i]) >= (int)sizeof name)
            continue;
        if (*suffixes[i]) {
            int since = introduced(name);
            if (since < 0 || since > cuda_version)
                continue;
        }
        void *f = dlsym(self, name);
        /* dlsym on a library handle also searches its dependencies (libc): own symbols only. */
        if (f && dladdr(f, &found) && found.dli_fbase == own.dli_fbase) {
            *pfn = f;
            if (status)
                *status = PROC_FOUND;
            return SUCCESS;
        }
    }
    /* Callers probe for functions newer drivers have: not worth a line on stderr each. */
    return NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                          unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, NULL);
}

/* A device's UUID: 16 bytes, the same in every run, different per device. */
typedef struct {
    char bytes[16];
} CUuuid;

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    NEED_INIT;
    NEED_DEVICE(dev);
    if (!uuid)
        return FAIL(INVALID_VALUE, "null out-pointer");
    static const char prefix[15] = "cai-cuda-emu-01";
    memcpy(uuid->bytes, prefix, sizeof prefix);
    uuid->bytes[15] = (char)dev;
    return SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceGetCount(int *count) {
    NEED_INIT;
    if (!count)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *count = device_count;
    return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    NEED_INIT;
    if (!dev)
        return FAIL(INVALID_VALUE, "null out-pointer");
    if (ordinal < 0 || ordinal >= device_count)
        return FAIL(INVALID_DEVICE, "ordinal %d: there are %d devices", ordinal, device_count);
    *dev = ordinal;
    return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    NEED_INIT;
    NEED_DEVICE(dev);
    if (!name || len <= 0)
        return FAIL(INVALID_VALUE, "no room for the name");
    snprintf(name, (size_t)len, "cai CUDA emulator (host memory)");
    return SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    NEED_INIT;
    NEED_DEVICE(dev);
    if (!bytes)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *bytes = TOTAL_MEMORY;
    return SUCCESS;
}

/* Device attributes: an NVIDIA H100 SXM5 80GB's (compute capability 9.0, 132 SMs), as
 * deviceQuery reports them, except for what the emulator lacks, which it says it lacks: memory
 * pools (115), HMM (88), host memory registration and mapping (99, 19), virtual memory
 * management (102). Others (texture and surface limits, newer features) are not emulated: an
 * error. */
static const struct {
    int attribute, value;
} h100[] = {
    {1, 1024}, /* MAX_THREADS_PER_BLOCK */
    {2, 1024}, /* MAX_BLOCK_DIM_X */
    {3, 1024}, /* MAX_BLOCK_DIM_Y */
    {4, 64}, /* MAX_BLOCK_DIM_Z */
    {5, 2147483647}, /* MAX_GRID_DIM_X */
    {6, 65535}, /* MAX_GRID_DIM_Y */
    {7, 65535}, /* MAX_GRID_DIM_Z */
    {8, 49152}, /* MAX_SHARED_MEMORY_PER_BLOCK */
    {9, 65536}, /* TOTAL_CONSTANT_MEMORY */
    {10, 32}, /* WARP_SIZE */
    {11, 2147483647}, /* MAX_PITCH */
    {12, 65536}, /* MAX_REGISTERS_PER_BLOCK */
    {13, 1980000}, /* CLOCK_RATE (kHz) */
    {14, 512}, /* TEXTURE_ALIGNMENT */
    {15, 1}, /* GPU_OVERLAP */
    {16, 132}, /* MULTIPROCESSOR_COUNT */
    {17, 0}, /* KERNEL_EXEC_TIMEOUT */
    {18, 0}, /* INTEGRATED */
    {19, 0}, /* CAN_MAP_HOST_MEMORY: no cuMemHostGetDevicePointer here */
    {20, 0}, /* COMPUTE_MODE: default */
    {30, 512}, /* SURFACE_ALIGNMENT */
    {31, 1}, /* CONCURRENT_KERNELS */
    {32, 1}, /* ECC_ENABLED */
    {33, 0x18}, /* PCI_BUS_ID: 0x18 for device 0, then one bus per device */
    {34, 0}, /* PCI_DEVICE_ID */
    {35, 0}, /* TCC_DRIVER */
    {36, 2619000}, /* MEMORY_CLOCK_RATE (kHz) */
    {37, 5120}, /* GLOBAL_MEMORY_BUS_WIDTH (bits) */
    {38, 52428800}, /* L2_CACHE_SIZE (50 MiB) */
    {39, 2048}, /* MAX_THREADS_PER_MULTIPROCESSOR */
    {40, 3}, /* ASYNC_ENGINE_COUNT */
    {41, 1}, /* UNIFIED_ADDRESSING */
    {50, 0}, /* PCI_DOMAIN_ID */
    {75, 9}, /* COMPUTE_CAPABILITY_MAJOR */
    {76, 0}, /* COMPUTE_CAPABILITY_MINOR */
    {78, 1}, /* STREAM_PRIORITIES_SUPPORTED */
    {79, 1}, /* GLOBAL_L1_CACHE_SUPPORTED */
    {80, 1}, /* LOCAL_L1_CACHE_SUPPORTED */
    {81, 233472}, /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
    {82, 65536}, /* MAX_REGISTERS_PER_MULTIPROCESSOR */
    {83, 1}, /* MANAGED_MEMORY */
    {84, 0}, /* MULTI_GPU_BOARD */
    {85, 0}, /* MULTI_GPU_BOARD_GROUP_ID */
    {86, 0}, /* HOST_NATIVE_ATOMIC_SUPPORTED */
    {87, 2}, /* SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO */
    {88, 0}, /* PAGEABLE_MEMORY_ACCESS: no HMM here */
    {89, 1}, /* CONCURRENT_MANAGED_ACCESS */
    {90, 1}, /* COMPUTE_PREEMPTION_SUPPORTED */
    {91, 1}, /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */
    {95, 1}, /* COOPERATIVE_LAUNCH */
    {97, 232448}, /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    {98, 0}, /* CAN_FLUSH_REMOTE_WRITES */
    {99, 0}, /* HOST_REGISTER_SUPPORTED: no cuMemHostRegister here */
    {100, 0}, /* PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES */
    {101, 0}, /* DIRECT_MANAGED_MEM_ACCESS_FROM_HOST */
    {102, 0}, /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: no cuMemCreate here */
    {106, 32}, /* MAX_BLOCKS_PER_MULTIPROCESSOR */
    {111, 1024}, /* RESERVED_SHARED_MEMORY_PER_BLOCK */
    {115, 0}, /* MEMORY_POOLS_SUPPORTED: no cuMemAllocAsync here */
    {120, 1}, /* CLUSTER_LAUNCH */
};

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice dev) {
    NEED_INIT;
    NEED_DEVICE(dev);
    if (!value)
        return FAIL(INVALID_VALUE, "null out-pointer");
    for (size_t i = 0; i < sizeof h100 / sizeof *h100; i++) {
        if (h100[i].attribute == attribute) {
            /* Per device: its bus, and its own multi-GPU board group. */
            *value = h100[i].value + (attribute == 33 || attribute == 85 ? dev : 0);
            return SUCCESS;
        }
    }
    return FAIL(INVALID_VALUE, "device attribute %d is not emulated", attribute);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    LOCKED;
    NEED_INIT;
    NEED_DEVICE(dev);
    if (!ctx)
        return FAIL(INVALID_VALUE, "null out-pointer");
    struct emu_ctx *primary = &primaries[dev];
    if (primary->refcount++ == 0) {
        primary->active = 1;
        primary->legacy = new_stream(primary, 1, 1);
        if (!primary->legacy)
            return FAIL(OUT_OF_MEMORY, "no host memory");
    }
    *ctx = primary;
    return SUCCESS;
}

/* Destroys a context: its work is finished, its memory freed, its streams gone. */
static void destroy_ctx(struct emu_ctx *c) {
    run_all(c);
    for (struct alloc *a = allocs, *next; a; a = next) {
        next = a->next;
        if (a->ctx == c)
            release(a);
    }
    struct emu_stream **pp = &streams;
    while (*pp) {
        struct emu_stream *s = *pp;
        if (s->ctx == c) {
            *pp = s->next;
            s->magic = 0; /* not freed: a thread's per-thread stream may still point here */
            free(s->ops);
            s->ops = NULL;
            s->len = s->cap = 0;
        } else {
            pp = &s->next;
        }
    }
    c->legacy = NULL;
    c->active = 0;
    c->generation++;
}

/* The last release destroys the context. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    LOCKED;
    NEED_INIT;
    NEED_DEVICE(dev);
    struct emu_ctx *primary = &primaries[dev];
    if (primary->refcount == 0)
        return FAIL(INVALID_CONTEXT, "the primary context is not retained");
    if (--primary->refcount > 0)
        return SUCCESS;
    destroy_ctx(primary);
    return SUCCESS;
}

/* A context of the caller's own (not the device's primary one), made current on this thread
 * (pushed), as cust's legacy contexts are made. The flags are not emulated. */
CUresult cuCtxCreate_v2(CUcontext *out, unsigned flags, CUdevice dev) {
    (void)flags;
    LOCKED;
    NEED_INIT;
    NEED_DEVICE(dev);
    if (!out)
        return FAIL(INVALID_VALUE, "null out-pointer");
    if (ctx_depth == (int)(sizeof ctx_stack / sizeof *ctx_stack))
        return FAIL(OUT_OF_MEMORY, "context stack full");
    struct emu_ctx *c = NULL;
    for (int i = 0; i < MAX_CREATED && !c; i++)
        if (!created[i].active)
            c = &created[i];
    if (!c)
        return FAIL(OUT_OF_MEMORY, "more than %d contexts of the caller's own", MAX_CREATED);
    c->device = dev;
    c->refcount = 1;
    c->active = 1;
    c->legacy = new_stream(c, 1, 1);
    if (!c->legacy) {
        c->active = 0;
        return FAIL(OUT_OF_MEMORY, "no host memory");
    }
    ctx_stack[ctx_depth++] = c;
    *out = c;
    return SUCCESS;
}

/* CUDA 12.5's form (cudarc's `CudaContext::new_non_primary`): creation parameters (execution
 * affinity, CIG) are not emulated. */
CUresult cuCtxCreate_v4(CUcontext *out, void *params, unsigned flags, CUdevice dev) {
    if (params)
        return FAIL(NOT_SUPPORTED, "context creation parameters are not emulated");
    return cuCtxCreate_v2(out, flags, dev);
}

/* Destroys a context cuCtxCreate made (its memory and streams with it) and takes it off this
 * thread's context stack. Its handle is then stale: the real driver's behaviour for one is
 * undefined, the emulator's is CUDA_ERROR_CONTEXT_IS_DESTROYED until the slot is reused. */
CUresult cuCtxDestroy_v2(CUcontext ctx) {
    LOCKED;
    NEED_INIT;
    struct emu_ctx *c = ctx;
    if (c < created || c >= created + MAX_CREATED)
        return FAIL(INVALID_CONTEXT, "%p is not a context cuCtxCreate made", (void *)c);
    if (!c->active)
        return FAIL(CONTEXT_IS_DESTROYED, "the context was destroyed already");
    destroy_ctx(c);
    c->refcount = 0;
    int kept = 0;
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] != c)
            ctx_stack[kept++] = ctx_stack[i];
    ctx_depth = kept;
    return SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) {
    NEED_INIT;
    if (!ctx)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *ctx = current();
    return SUCCESS;
}

static int known_ctx(CUcontext c) {
    return (c >= primaries && c < primaries + device_count) ||
           (c >= created && c < created + MAX_CREATED);
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    NEED_INIT;
    if (ctx && !known_ctx(ctx))
        return FAIL(INVALID_CONTEXT, "%p is not a context", (void *)ctx);
    if (ctx && ctx >= created && ctx < created + MAX_CREATED && !ctx->active)
        return FAIL(CONTEXT_IS_DESTROYED, "%p was destroyed (a stale handle: undefined "
                    "behaviour on a real driver)", (void *)ctx);
    if (ctx_depth == 0) {
        if (ctx)
            ctx_stack[ctx_depth++] = ctx;
    } else if (ctx) {
        ctx_stack[ctx_depth - 1] = ctx;
    } else {
        ctx_depth--;
    }
    return SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    NEED_INIT;
    if (!known_ctx(ctx))
        return FAIL(INVALID_CONTEXT, "%p is not a context", (void *)ctx);
    if (ctx >= created && ctx < created + MAX_CREATED && !ctx->active)
        return FAIL(CONTEXT_IS_DESTROYED, "%p was destroyed", (void *)ctx);
    if (ctx_depth == (int)(sizeof ctx_stack / sizeof *ctx_stack))
        return FAIL(OUT_OF_MEMORY, "context stack full");
    ctx_stack[ctx_depth++] = ctx;
    return SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    NEED_INIT;
    if (ctx_depth == 0)
        return FAIL(INVALID_CONTEXT, "no context to pop");
    CUcontext c = ctx_stack[--ctx_depth];
    if (ctx)
        *ctx = c;
    return SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev) {
    LOCKED;
    NEED_CTX(c);
    if (!dev)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *dev = c->device;
    return SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    LOCKED;
    NEED_CTX(c);
    run_all(c);
    return SUCCESS;
}

/* CUDA 13's form: synchronizes context `ctx` (NULL: the current one), whichever is current. */
CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    LOCKED;
    NEED_INIT;
    struct emu_ctx *c = ctx;
    if (!c) {
        CUresult r = need_ctx(__func__, &c);
        if (r)
            return r;
    } else if (!known_ctx(c)) {
        return FAIL(INVALID_CONTEXT, "%p is not a context", (void *)c);
    } else if (!c->active) {
        return FAIL(CONTEXT_IS_DESTROYED, "the context was destroyed");
    }
    run_all(c);
    return SUCCESS;
}

/* ---- streams --------------------------------------------------------------------------- */

CUresult cuStreamCreateWithPriority(CUstream *out, unsigned flags, int priority) {
    LOCKED;
    NEED_CTX(c);
    (void)priority;
    if (!out)
        return FAIL(INVALID_VALUE, "null out-pointer");
    if (flags & ~1u)
        return FAIL(INVALID_VALUE, "stream flags 0x%x", flags);
    struct emu_stream *s = new_stream(c, !(flags & 1u), 0);
    if (!s)
        return FAIL(OUT_OF_MEMORY, "no host memory");
    *out = s;
    return SUCCESS;
}

/* Priorities are accepted and ignored; the range is an H100's. */
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    NEED_INIT;
    if (least)
        *least = 0;
    if (greatest)
        *greatest = -5;
    return SUCCESS;
}

CUresult cuStreamCreate(CUstream *out, unsigned flags) {
    return cuStreamCreateWithPriority(out, flags, 0);
}

CUresult cuStreamDestroy_v2(CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    if (s->legacy || s == per_thread)
        return FAIL(INVALID_HANDLE, "a default stream cannot be destroyed");
    /* Its work still completes (and may be waited on). */
    run(s, s->enqueued);
    struct emu_stream **pp = &streams;
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    s->magic = 0; /* not freed: waits enqueued on other streams may still name it */
    free(s->ops);
    s->ops = NULL;
    s->cap = 0;
    return SUCCESS;
}

CUresult cuStreamSynchronize(CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    CUresult r = enqueue(__func__, s, (struct op){.kind = OP_MARK});
    if (r)
        return r;
    run(s, s->enqueued);
    return SUCCESS;
}

/* Not done yet: says so, and lets the device make progress (so polling loops end). */
static CUresult query(struct emu_stream *s, uint64_t until) {
    if (s->done >= until)
        return SUCCESS;
    run(s, until);
    return NOT_READY;
}

CUresult cuStreamQuery(CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return query(s, s->enqueued);
}

/* A stream handle names its context: no context need be current (only the default streams
 * are the current context's). */
CUresult cuStreamGetCtx(CUstream h, CUcontext *ctx) {
    LOCKED;
    NEED_INIT;
    if (!ctx)
        return FAIL(INVALID_VALUE, "null out-pointer");
    if (h != NULL && h != (CUstream)1 && h != (CUstream)2) {
        if (!is_live_stream(h))
            return FAIL(INVALID_HANDLE, "%p is not a live stream", (void *)h);
        *ctx = ((struct emu_stream *)h)->ctx;
        return SUCCESS;
    }
    RESOLVE(s, h);
    *ctx = s->ctx;
    return SUCCESS;
}

CUresult cuStreamGetFlags(CUstream h, unsigned *flags) {
    LOCKED;
    RESOLVE(s, h);
    if (!flags)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *flags = s->blocking ? 0 : 1;
    return SUCCESS;
}

/* ---- events ---------------------------------------------------------------------------- */

#define EVENT_MAGIC 0x45564e54u

struct emu_event {
    unsigned magic;
    struct emu_stream *stream; /* NULL until recorded */
    uint64_t until;
};

static CUresult live_event(const char *fn, CUevent e) {
    if (!e || e->magic != EVENT_MAGIC)
        return fail(fn, INVALID_HANDLE, "%p is not a live event", (void *)e);
    return SUCCESS;
}
#define LIVE_EVENT(e)                                                                          \
    do {                                                                                       \
        CUresult r_ = live_event(__func__, e);                                                 \
        if (r_)                                                                                \
            return r_;                                                                         \
    } while (0)

CUresult cuEventCreate(CUevent *out, unsigned flags) {
    LOCKED;
    NEED_CTX(c);
    (void)c;
    if (!out)
        return FAIL(INVALID_VALUE, "null out-pointer");
    if (flags & ~0xfu)
        return FAIL(INVALID_VALUE, "event flags 0x%x", flags);
    struct emu_event *e = calloc(1, sizeof *e);
    if (!e)
        return FAIL(OUT_OF_MEMORY, "no host memory");
    e->magic = EVENT_MAGIC;
    *out = e;
    return SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e) {
    LOCKED;
    NEED_INIT;
    LIVE_EVENT(e);
    e->magic = 0;
    free(e);
    return SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream h) {
    LOCKED;
    LIVE_EVENT(e);
    RESOLVE(s, h);
    CUresult r = enqueue(__func__, s, (struct op){.kind = OP_MARK});
    if (r)
        return r;
    e->stream = s;
    e->until = s->enqueued;
    return SUCCESS;
}

CUresult cuEventSynchronize(CUevent e) {
    LOCKED;
    NEED_INIT;
    LIVE_EVENT(e);
    if (e->stream)
        run(e->stream, e->until);
    return SUCCESS;
}

CUresult cuEventQuery(CUevent e) {
    LOCKED;
    NEED_INIT;
    LIVE_EVENT(e);
    return e->stream ? query(e->stream, e->until) : SUCCESS;
}

/* The wait copies what it needs: the event may be destroyed or recorded again afterwards. */
CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned flags) {
    LOCKED;
    LIVE_EVENT(e);
    RESOLVE(s, h);
    if (flags != 0)
        return FAIL(INVALID_VALUE, "wait flags 0x%x", flags);
    if (!e->stream || e->stream->done >= e->until)
        return SUCCESS;
    return enqueue(__func__, s,
                   (struct op){.kind = OP_WAIT, .wait_on = e->stream, .wait_until = e->until});
}

/* ---- allocation ------------------------------------------------------------------------ */

CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t n) {
    LOCKED;
    NEED_CTX(c);
    if (!out)
        return FAIL(INVALID_VALUE, "null out-pointer");
    return allocate(__func__, c, n, MEM_DEVICE, out);
}

CUresult cuMemAllocManaged(CUdeviceptr *out, size_t n, unsigned flags) {
    LOCKED;
    NEED_CTX(c);
    if (!out)
        return FAIL(INVALID_VALUE, "null out-pointer");
    if (flags != 1 && flags != 2) /* CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST */
        return FAIL(INVALID_VALUE, "managed flags 0x%x", flags);
    return allocate(__func__, c, n, MEM_MANAGED, out);
}

CUresult cuMemAllocHost_v2(void **out, size_t n) {
    LOCKED;
    NEED_CTX(c);
    if (!out)
        return FAIL(INVALID_VALUE, "null out-pointer");
    CUdeviceptr p;
    CUresult r = allocate(__func__, c, n, MEM_HOST, &p);
    if (r == SUCCESS)
        *out = (void *)(uintptr_t)p;
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    LOCKED;
    NEED_CTX(c);
    (void)c;
    return free_kind(__func__, p, 0);
}

CUresult cuMemFreeHost(void *p) {
    LOCKED;
    NEED_CTX(c);
    (void)c;
    return free_kind(__func__, (CUdeviceptr)(uintptr_t)p, 1);
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    LOCKED;
    NEED_CTX(c);
    (void)c;
    if (!free_bytes || !total)
        return FAIL(INVALID_VALUE, "null out-pointer");
    *free_bytes = TOTAL_MEMORY - used;
    *total = TOTAL_MEMORY;
    return SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    LOCKED;
    NEED_CTX(c);
    (void)c;
    struct alloc *a = find(p);
    if (!a)
        return FAIL(NOT_FOUND, "0x%llx is not CUDA memory", p);
    if (base)
        *base = a->base;
    if (size)
        *size = a->size;
    return SUCCESS;
}

/* ---- pointer attributes ---------------------------------------------------------------- */

static CUresult attribute(const char *fn, int attr, void *data, CUdeviceptr p, struct alloc *a) {
    switch (attr) {
    case 1: /* CONTEXT */
        *(CUcontext *)data = a ? a->ctx : NULL;
        break;
    case 2: /* MEMORY_TYPE: managed memory reads as device memory; IS_MANAGED tells */
        *(unsigned *)data = !a ? 0 : a->type == MEM_HOST ? 1 : 2;
        break;
    case 3: /* DEVICE_POINTER */
        *(CUdeviceptr *)data = a ? p : 0;
        break;
    case 4: /* HOST_POINTER */
        *(void **)data = a && a->type != MEM_DEVICE ? (void *)(uintptr_t)p : NULL;
        break;
    case 8: /* IS_MANAGED */
        *(unsigned *)data = a && a->type == MEM_MANAGED;
        break;
    case 9: /* DEVICE_ORDINAL */
        *(int *)data = a && a->ctx ? a->ctx->device : 0;
        break;
    case 11: /* RANGE_START_ADDR */
        *(CUdeviceptr *)data = a ? a->base : 0;
        break;
    case 12: /* RANGE_SIZE */
        *(size_t *)data = a ? a->size : 0;
        break;
    default:
        return fail(fn, INVALID_VALUE, "pointer attribute %d is not emulated", attr);
    }
    return SUCCESS;
}

/* Any address may be asked about: unknown ones get null values. */
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    LOCKED;
    NEED_INIT;
    if (n == 0 || !attrs || !data)
        return FAIL(INVALID_VALUE, "no attributes asked");
    struct alloc *a = find(p);
    for (unsigned i = 0; i < n; i++) {
        if (!data[i])
            return FAIL(INVALID_VALUE, "null out-pointer for attribute %d", attrs[i]);
        CUresult r = attribute(__func__, attrs[i], data[i], p, a);
        if (r)
            return r;
    }
    return SUCCESS;
}

/* Unlike the plural form, an unknown address is an error. */
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    LOCKED;
    NEED_INIT;
    struct alloc *a = find(p);
    if (!a)
        return FAIL(INVALID_VALUE, "0x%llx is not CUDA memory", p);
    if (!data)
        return FAIL(INVALID_VALUE, "null out-pointer");
    return attribute(__func__, attr, data, p, a);
}

/* ---- copies and memsets ---------------------------------------------------------------- */

/* A copy from the host: pageable bytes are staged now (the caller may reuse them as soon as
 * the call returns); pinned bytes are read when the copy runs. */
static CUresult copy_from_host(const char *fn, struct emu_stream *s, CUdeviceptr dst,
                               const void *src, size_t n) {
    char *d = bytes_at(fn, dst, n);
    if (!d)
        return INVALID_VALUE;
    if (!src)
        return fail(fn, INVALID_VALUE, "null host pointer");
    struct op op = {.kind = OP_COPY, .dst = d, .src = src, .n = n};
    struct alloc *h = find((CUdeviceptr)(uintptr_t)src);
    if (h && h->type == MEM_DEVICE)
        return fail(fn, INVALID_VALUE, "the host pointer %p is device memory", src);
    if (!h) {
        op.staged = malloc(n);
        if (!op.staged)
            return fail(fn, OUT_OF_MEMORY, "no host memory to stage %zu bytes", n);
        memcpy(op.staged, src, n);
    }
    return enqueue(fn, s, op);
}

/* A copy to the host: to pageable memory it has completed when the call returns (the driver
 * stages it, "returns only once the copy has completed": cudarc's `clone_dtoh` relies on it);
 * to pinned memory it runs when its stream does. */
static CUresult copy_to_host(const char *fn, struct emu_stream *s, void *dst, CUdeviceptr src,
                             size_t n) {
    char *from = bytes_at(fn, src, n);
    if (!from)
        return INVALID_VALUE;
    if (!dst)
        return fail(fn, INVALID_VALUE, "null host pointer");
    struct alloc *h = find((CUdeviceptr)(uintptr_t)dst);
    if (h && h->type == MEM_DEVICE)
        return fail(fn, INVALID_VALUE, "the host pointer %p is device memory", dst);
    CUresult r = enqueue(fn, s, (struct op){.kind = OP_COPY, .dst = dst, .src = from, .n = n});
    if (r == SUCCESS && !h)
        run(s, s->enqueued);
    return r;
}

static CUresult copy_on_device(const char *fn, struct emu_stream *s, CUdeviceptr dst,
                               CUdeviceptr src, size_t n) {
    char *d = bytes_at(fn, dst, n);
    char *from = d ? bytes_at(fn, src, n) : NULL;
    if (!from)
        return INVALID_VALUE;
    return enqueue(fn, s, (struct op){.kind = OP_COPY, .dst = d, .src = from, .n = n});
}

static CUresult set(const char *fn, struct emu_stream *s, CUdeviceptr dst, unsigned value,
                    int width, size_t n) {
    if (n > SIZE_MAX / (size_t)width)
        return fail(fn, INVALID_VALUE, "%zu items overflow", n);
    if (dst % (CUdeviceptr)width)
        return fail(fn, INVALID_VALUE, "0x%llx is not aligned to %d bytes", dst, width);
    char *d = bytes_at(fn, dst, n * (size_t)width);
    if (!d)
        return INVALID_VALUE;
    return enqueue(fn, s,
                   (struct op){.kind = OP_SET, .dst = d, .n = n, .value = value, .width = width});
}

/* The synchronous forms run on the legacy default stream. */
#define LEGACY(s) RESOLVE(s, NULL)

/* Waits for the legacy stream first, then stages the host bytes and returns; the copy itself
 * may complete later. */
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    LOCKED;
    LEGACY(s);
    run(s, s->enqueued);
    return copy_from_host(__func__, s, dst, src, n);
}

/* Returns once the copy has completed. */
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    LOCKED;
    LEGACY(s);
    CUresult r = copy_to_host(__func__, s, dst, src, n);
    if (r == SUCCESS)
        run(s, s->enqueued);
    return r;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    LOCKED;
    LEGACY(s);
    return copy_on_device(__func__, s, dst, src, n);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return copy_from_host(__func__, s, dst, src, n);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return copy_to_host(__func__, s, dst, src, n);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return copy_on_device(__func__, s, dst, src, n);
}

/* What a unified-addressing copy finds at `p`: device-side memory (device or managed), host
 * memory (pinned or pageable), or an address in the device range no allocation holds (never
 * allocated, or freed): an error, as for every other copy. */
enum side { SIDE_DEVICE, SIDE_HOST, SIDE_BAD };

static enum side side_of(CUdeviceptr p) {
    struct alloc *a = find(p);
    if (a)
        return a->type == MEM_HOST ? SIDE_HOST : SIDE_DEVICE;
    if (device_va && p >= (CUdeviceptr)(uintptr_t)device_va &&
        p - (CUdeviceptr)(uintptr_t)device_va < device_va_size)
        return SIDE_BAD;
    return SIDE_HOST;
}

/* The unified-addressing copy (cuda.core's `Buffer.copy_to`): the kind of each side is the
 * driver's to find, as with cudaMemcpyDefault, and each kind behaves as its explicit copy
 * does (host to device stages pageable bytes; device to pageable host memory completes on
 * return). A copy between two host buffers is fully synchronous, as the driver documents:
 * done, after the stream's earlier work, when the call returns. */
static CUresult copy_any(const char *fn, struct emu_stream *s, CUdeviceptr dst, CUdeviceptr src,
                         size_t n) {
    enum side to = side_of(dst), from = side_of(src);
    if (to == SIDE_BAD || from == SIDE_BAD)
        return fail(fn, INVALID_VALUE, "0x%llx is not CUDA memory (never allocated, or freed)",
                    to == SIDE_BAD ? dst : src);
    if (to == SIDE_DEVICE && from == SIDE_DEVICE)
        return copy_on_device(fn, s, dst, src, n);
    if (to == SIDE_DEVICE)
        return copy_from_host(fn, s, dst, (const void *)(uintptr_t)src, n);
    if (from == SIDE_DEVICE)
        return copy_to_host(fn, s, (void *)(uintptr_t)dst, src, n);
    if (n && (!dst || !src))
        return fail(fn, INVALID_VALUE, "null pointer");
    run(s, s->enqueued);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return copy_any(__func__, s, dst, src, n);
}

/* The synchronous form behaves as the explicit synchronous copy of its kind: it waits for the
 * legacy stream only where that one does (a copy from the host), and returns before a device
 * to device copy has run. */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    LOCKED;
    LEGACY(s);
    enum side to = side_of(dst), from = side_of(src);
    if (to == SIDE_DEVICE && from == SIDE_HOST)
        run(s, s->enqueued);
    CUresult r = copy_any(__func__, s, dst, src, n);
    if (r == SUCCESS && to == SIDE_HOST && from == SIDE_DEVICE)
        run(s, s->enqueued);
    return r;
}

/* Synchronous memsets are asynchronous with respect to the host, except on pinned or managed
 * memory. */
static CUresult set_sync(const char *fn, CUdeviceptr dst, unsigned value, int width, size_t n) {
    struct emu_stream *s = NULL;
    CUresult r = resolve(fn, NULL, &s);
    if (r == SUCCESS)
        r = set(fn, s, dst, value, width, n);
    if (r)
        return r;
    struct alloc *a = find(dst);
    if (a->type != MEM_DEVICE)
        run(s, s->enqueued);
    return SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    LOCKED;
    NEED_INIT;
    return set_sync(__func__, dst, v, 1, n);
}

CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) {
    LOCKED;
    NEED_INIT;
    return set_sync(__func__, dst, v, 2, n);
}

CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned v, size_t n) {
    LOCKED;
    NEED_INIT;
    return set_sync(__func__, dst, v, 4, n);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return set(__func__, s, dst, v, 1, n);
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return set(__func__, s, dst, v, 2, n);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream h) {
    LOCKED;
    RESOLVE(s, h);
    return set(__func__, s, dst, v, 4, n);
}

/* What every entry point this file does not define returns (scripts/cuda-stub.sh generates
 * them): loudly, since a test reaching one needs the emulator extended. */
int cuda_emu_not_emulated(const char *fn) {
    fprintf(stderr,
            "cuda-emu: %s is not available: this is cai's emulated CUDA driver, a stand-in for "
            "tests that runs on the CPU and runs no GPU code; run this on a machine with an "
            "NVIDIA GPU and driver (to emulate the call, extend tests/cuda-emu/cuda_emu.c)\n",
            fn);
    return NOT_SUPPORTED;
}

/* ---- error names ----------------------------------------------------------------------- */

static const char *name_of(CUresult code) {
    switch (code) {
    case SUCCESS: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CONTEXT_IS_DESTROYED: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return NULL;
    }
}

CUresult cuGetErrorName(CUresult code, const char **out) {
    if (!out)
        return INVALID_VALUE;
    *out = name_of(code);
    return *out ? SUCCESS : INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult code, const char **out) {
    return cuGetErrorName(code, out);
}
