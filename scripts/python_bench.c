/* python_bench.c: the C side of scripts/python_bench.py. Times the call
 * sequence Graph.compute makes on a reused graph (bp_sched_graph_compute of
 * an allocated graph: ADD of two 64-float inputs on a "cpu" backend), and
 * prints the median of |reps| batches of |iters| calls, in ns per call. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backplane/backplane.h"

#define CHECK(cond)                                               \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "%s failed: %s\n", #cond, bp_last_error()); \
      return 1;                                                   \
    }                                                             \
  } while (0)

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 21, iters = argc > 2 ? atoi(argv[2]) : 2000;
  float av[64], bv[64];
  double *t = malloc(sizeof(double) * (size_t)reps);
  bp_backend *be = NULL;
  bp_context *ctx;
  bp_tensor *a, *b, *y;
  bp_graph *g;
  bp_sched *s;
  int i, r;
  for (i = 0; i < 64; ++i) av[i] = (float)i, bv[i] = 1.0f;
  CHECK(bp_backend_new("cpu", &be) == BP_OK);
  ctx = bp_context_new(0);
  a = bp_tensor_set_flags(bp_tensor_new_1d(ctx, BP_TYPE_F32, 64), BP_TENSOR_FLAG_INPUT);
  b = bp_tensor_set_flags(bp_tensor_new_1d(ctx, BP_TYPE_F32, 64), BP_TENSOR_FLAG_INPUT);
  y = bp_add(ctx, a, b);
  CHECK(y != NULL);
  g = bp_graph_new(ctx, 4096);
  CHECK(bp_graph_build(g, y) == BP_OK);
  s = bp_sched_new(&be, NULL, 1, 8192, false); /* as the module makes it */
  CHECK(s != NULL);
  CHECK(bp_sched_alloc_graph(s, g) == BP_OK);
  CHECK(bp_tensor_set(a, av, 0, sizeof av) == BP_OK);
  CHECK(bp_tensor_set(b, bv, 0, sizeof bv) == BP_OK);
  for (i = 0; i < 100; ++i) CHECK(bp_sched_graph_compute(s, g) == BP_OK);
  for (r = 0; r < reps; ++r) {
    double t0 = now_ns();
    for (i = 0; i < iters; ++i) CHECK(bp_sched_graph_compute(s, g) == BP_OK);
    t[r] = (now_ns() - t0) / iters;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp);
  printf("%.1f\n", t[reps / 2]);
  bp_sched_free(s);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(be);
  free(t);
  return 0;
}
