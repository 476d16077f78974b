/* main.c: an application in C99 against an installed Backplane.
 *
 *   app-c [DEVICES]      DEVICES: a spec list, default "cpu"; e.g. "cexample;cpu"
 *
 * Builds y = (W x + bias) * 0.5 * x for a 4x4 W, runs it through the
 * scheduler on the devices asked for (the first that supports a node runs it;
 * the last must be a CPU backend), checks every error, compares the result
 * with a plain C loop and prints which backend ran each node.
 *
 * Build: cc -std=c99 main.c -o app-c $(pkg-config --cflags --libs backplane)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <backplane/backplane.h>
#include <backplane/version.h>

#define N 4
#define MAX_BACKENDS 8

/* One check after a run of calls: graph builders return NULL on bad input
 * and pass NULL on, so the first failure's message is still there. */
#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "app-c: %s failed: %s\n", #cond, bp_last_error()); \
      goto done;                                                         \
    }                                                                    \
  } while (0)

int main(int argc, char **argv) {
  const char *devices = argc > 1 ? argv[1] : "cpu";
  bp_backend *be[MAX_BACKENDS];
  size_t n_be = 0, i;
  bp_context *wctx = NULL, *gctx = NULL;
  bp_graph *graph = NULL;
  bp_buffer *wbuf = NULL;
  bp_sched *sched = NULL;
  bp_tensor *w, *bias, *x, *y;
  float wv[N * N], bv[N], xv[N], out[N];
  int rc = 1, r, c;

  /* The header this was compiled with and the library it runs with. */
  printf("app-c: built with Backplane %s, running %s\n", BP_VERSION_STRING, bp_version_string());
  if (bp_version() / 10000 != BP_VERSION_MAJOR) {
    fprintf(stderr, "app-c: libbackplane %s is another major version\n", bp_version_string());
    return 1;
  }

  /* A bad spec is a status and a message, never an abort. */
  CHECK(bp_backend_new("nosuchplugin", &be[0]) != BP_OK);
  printf("app-c: a bad spec says: %s\n", bp_last_error());

  CHECK(bp_backend_new_list(devices, be, MAX_BACKENDS, &n_be) == BP_OK);

  for (r = 0; r < N; ++r) {
    for (c = 0; c < N; ++c) wv[r * N + c] = (float)(r + 1) * 0.25f - (float)c * 0.125f;
    bv[r] = (float)r - 1.5f;
    xv[r] = 1.0f + (float)r * 0.5f;
  }

  /* Weights in memory of the first backend, as a model puts them on its
   * preferred device; the scheduler runs a node where its weights are when
   * that backend supports it, and on the next one in the list otherwise. */
  wctx = bp_context_new(0);
  CHECK(wctx != NULL);
  w = bp_tensor_new_2d(wctx, BP_TYPE_F32, N, N);
  bias = bp_tensor_new_1d(wctx, BP_TYPE_F32, N);
  CHECK(w && bias);
  CHECK(bp_context_alloc_tensors(wctx, be[0], &wbuf) == BP_OK);
  bp_buffer_set_usage(wbuf, BP_BUFFER_USAGE_WEIGHTS);
  CHECK(bp_tensor_set(w, wv, 0, sizeof wv) == BP_OK);
  CHECK(bp_tensor_set(bias, bv, 0, sizeof bv) == BP_OK);

  /* The graph: the scheduler places each node and allocates the rest. */
  gctx = bp_context_new(0);
  CHECK(gctx != NULL);
  x = bp_tensor_set_flags(bp_tensor_new_1d(gctx, BP_TYPE_F32, N), BP_TENSOR_FLAG_INPUT);
  y = bp_mul(gctx, bp_scale(gctx, bp_add(gctx, bp_mul_mat(gctx, w, x), bias), 0.5f), x);
  CHECK(y != NULL);
  graph = bp_graph_new(gctx, 0);
  CHECK(graph != NULL);
  CHECK(bp_graph_build(graph, y) == BP_OK);
  sched = bp_sched_new(be, NULL, (int)n_be, 64, false);
  CHECK(sched != NULL);
  CHECK(bp_sched_alloc_graph(sched, graph) == BP_OK);
  CHECK(bp_tensor_set(x, xv, 0, sizeof xv) == BP_OK);
  CHECK(bp_sched_graph_compute(sched, graph) == BP_OK);
  CHECK(bp_sched_synchronize(sched) == BP_OK);
  CHECK(bp_tensor_get(y, out, 0, sizeof out) == BP_OK);

  for (i = 0; i < bp_graph_node_count(graph); ++i) {
    bp_tensor *node = bp_graph_node(graph, i);
    printf("app-c: node %zu %-8s on %s\n", i, bp_op_name(node->op),
           bp_backend_name(bp_sched_get_tensor_backend(sched, node)));
  }
  for (r = 0; r < N; ++r) {
    double want = bv[r];
    for (c = 0; c < N; ++c) want += (double)wv[r * N + c] * xv[c];
    want = want * 0.5 * xv[r];
    if (fabs(out[r] - want) > 1e-5 * (1.0 + fabs(want))) {
      fprintf(stderr, "app-c: y[%d] = %g, want %g\n", r, out[r], want);
      goto done;
    }
  }
  printf("app-c: y = [%g %g %g %g] on \"%s\": ok\n", out[0], out[1], out[2], out[3], devices);
  rc = 0;

done:
  bp_sched_free(sched);
  bp_graph_free(graph);
  bp_buffer_free(wbuf);
  bp_context_free(gctx);
  bp_context_free(wctx);
  for (i = 0; i < n_be; ++i) bp_backend_free(be[i]);
  return rc;
}
