// The driver's JIT cost for PTX modules, measured with the driver API alone (no devspan), for
// the first-use figures in BENCHMARKS.md. Build and run on a GPU machine with `run` (beside this
// file), which writes the modules it loads.
//
//   jit_floor levels F...   after one load of an empty module, each file at the default
//                           optimisation level and at levels 0 to 4 (medians of 5)
//   jit_floor seq L F...    the process's first loads, each file once in order, at level L
//                           (-1: the default)
//   jit_floor par F1 F2     after one load of an empty module: F1 then F2 (three times), then
//                           F1 and F2 on two threads at once (three times), wall times
//   jit_floor dl F...       loads the driver's JIT library first (timed), then as `seq -1`
//   jit_floor warm F...     a thread loads an empty module as soon as the context exists,
//                           while the main thread goes on; then as `seq -1`
//
// Every time is of cuModuleLoadDataEx alone (and its cuModuleUnload outside the timing). The
// caller sets CUDA_CACHE_DISABLE=1 (or an empty CUDA_CACHE_PATH) so that the driver compiles.
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char EMPTY[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry e() { ret; }\n";

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc(n + 1);
  if (fread(b, 1, n, f) != (size_t)n) { perror(path); exit(1); }
  b[n] = 0;
  fclose(f);
  return b;
}

static void check(CUresult r, const char *what) {
  if (r != CUDA_SUCCESS) {
    const char *s = "?";
    cuGetErrorString(r, &s);
    fprintf(stderr, "%s: %s\n", what, s);
    exit(1);
  }
}

static CUcontext ctx;

static void make_context(void) {
  CUdevice d;
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&d, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&ctx, d), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

// Loads `text` at optimisation `level` (-1: the driver's default); milliseconds of the load.
static double load(const char *text, int level) {
  CUmodule m;
  CUjit_option o[1] = {CU_JIT_OPTIMIZATION_LEVEL};
  void *v[1] = {(void *)(size_t)(level < 0 ? 0 : level)};
  double t = now_ms();
  check(cuModuleLoadDataEx(&m, text, level < 0 ? 0 : 1, o, v), "cuModuleLoadDataEx");
  double ms = now_ms() - t;
  cuModuleUnload(m);
  return ms;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void seq(int level, int n, char **files) {
  double total = 0;
  for (int i = 0; i < n; i++) {
    double ms = load(slurp(files[i]), level);
    total += ms;
    printf("  %-32s L%d %7.2f ms\n", files[i], level, ms);
  }
  printf("  total %.2f ms\n", total);
}

struct job { const char *text; double ms; };

static void *load_job(void *p) {
  struct job *j = p;
  cuCtxSetCurrent(ctx);
  j->ms = load(j->text, -1);
  return NULL;
}

static void *warm_job(void *p) {
  (void)p;
  cuCtxSetCurrent(ctx);
  double t = now_ms();
  load(EMPTY, -1);
  printf("  background empty module: %.2f ms\n", now_ms() - t);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: see the head of jit_floor.c\n"); return 2; }
  const char *mode = argv[1];
  if (!strcmp(mode, "dl")) {
    double t = now_ms();
    void *h = dlopen("libnvidia-ptxjitcompiler.so.1", RTLD_NOW | RTLD_GLOBAL);
    printf("  dlopen %s %.2f ms\n", h ? "ok" : dlerror(), now_ms() - t);
  }
  double t = now_ms();
  make_context();
  printf("  context %.2f ms\n", now_ms() - t);
  if (!strcmp(mode, "seq")) { seq(atoi(argv[2]), argc - 3, argv + 3); return 0; }
  if (!strcmp(mode, "dl")) { seq(-1, argc - 2, argv + 2); return 0; }
  if (!strcmp(mode, "warm")) {
    pthread_t th;
    pthread_create(&th, NULL, warm_job, NULL);
    seq(-1, argc - 2, argv + 2);
    pthread_join(th, NULL);
    return 0;
  }
  printf("  first empty module %.2f ms\n", load(EMPTY, -1));
  if (!strcmp(mode, "levels")) {
    for (int i = 2; i < argc; i++) {
      char *s = slurp(argv[i]);
      printf("  %-32s", argv[i]);
      for (int level = -1; level <= 4; level++) {
        double v[5];
        for (int k = 0; k < 5; k++) v[k] = load(s, level);
        qsort(v, 5, sizeof v[0], cmp);
        printf(" L%d %6.2f", level, v[2]);
      }
      printf("\n");
    }
    return 0;
  }
  if (!strcmp(mode, "par") && argc >= 4) {
    char *a = slurp(argv[2]), *b = slurp(argv[3]);
    for (int r = 0; r < 3; r++) {
      double t0 = now_ms();
      double x = load(a, -1), y = load(b, -1);
      printf("  in sequence %.2f + %.2f, wall %.2f ms\n", x, y, now_ms() - t0);
    }
    for (int r = 0; r < 3; r++) {
      struct job ja = {a, 0}, jb = {b, 0};
      pthread_t p1, p2;
      double t0 = now_ms();
      pthread_create(&p1, NULL, load_job, &ja);
      pthread_create(&p2, NULL, load_job, &jb);
      pthread_join(p1, NULL);
      pthread_join(p2, NULL);
      printf("  two threads %.2f | %.2f, wall %.2f ms\n", ja.ms, jb.ms, now_ms() - t0);
    }
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
