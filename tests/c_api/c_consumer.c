/* c_consumer.c: an application written in C99 against backplane.h alone, as
 * the header's usage comment shows: the cpu plugin arrives through the
 * registry, a small graph runs, the result is checked against a reference in
 * double precision, a bad spec gives a status and a message, and every handle
 * is freed. Exit 0 on success; the failing check is printed otherwise. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backplane/backplane.h"
/* Not used here: included so the plugin ABI header, too, is compiled as
 * strict C99 (plugins may be written in C). */
#include "backplane/plugin.h"

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: %s failed (%s)\n", __FILE__, __LINE__, #cond, \
              bp_last_error());                                              \
      return 1;                                                              \
    }                                                                        \
  } while (0)

enum { K = 7, M = 5, N = 3 };

int main(int argc, char **argv) {
  float a_data[M * K], b_data[N * K], out[M * N];
  bp_context *ctx;
  bp_tensor *a, *b, *c;
  bp_graph *g;
  bp_backend *be = NULL, *bad = NULL;
  bp_buffer *buf = NULL;
  int i, j, p;

  if (argc > 1) CHECK(bp_registry_add_path(argv[1]) == BP_OK);

  /* Bad input: a status and a message naming the cause, no abort. */
  CHECK(bp_backend_new("cpu:nosuchkey=1", &bad) != BP_OK);
  CHECK(bad == NULL);
  CHECK(strstr(bp_last_error(), "nosuchkey") != NULL);

  for (i = 0; i < M * K; ++i) a_data[i] = (float)((i * 37) % 11) / 7.0f - 0.5f;
  for (i = 0; i < N * K; ++i) b_data[i] = (float)((i * 13) % 17) / 9.0f - 1.0f;

  ctx = bp_context_new(0);
  CHECK(ctx != NULL);
  a = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M);
  b = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N);
  c = bp_relu(ctx, bp_mul_mat(ctx, a, b)); /* NULL propagates: one check */
  CHECK(c != NULL);
  g = bp_graph_new(ctx, 0);
  CHECK(g != NULL);
  CHECK(bp_graph_build(g, c) == BP_OK);
  CHECK(bp_backend_new("cpu:threads=2", &be) == BP_OK);
  CHECK(bp_context_alloc_tensors(ctx, be, &buf) == BP_OK);
  CHECK(bp_tensor_set(a, a_data, 0, sizeof a_data) == BP_OK);
  CHECK(bp_tensor_set(b, b_data, 0, sizeof b_data) == BP_OK);
  CHECK(bp_backend_graph_compute(be, g) == BP_OK);
  CHECK(bp_tensor_nbytes(c) == sizeof out);
  CHECK(bp_tensor_get(c, out, 0, sizeof out) == BP_OK);

  for (j = 0; j < N; ++j)
    for (i = 0; i < M; ++i) {
      double want = 0;
      for (p = 0; p < K; ++p) want += (double)a_data[i * K + p] * (double)b_data[j * K + p];
      if (want < 0) want = 0;
      if (fabs(out[j * M + i] - want) > 1e-5) {
        fprintf(stderr, "c[%d,%d] = %g, want %g\n", i, j, out[j * M + i], want);
        return 1;
      }
    }

  bp_buffer_free(buf);
  bp_backend_free(be);
  bp_graph_free(g);
  bp_context_free(ctx);
  printf("c_consumer: ok\n");
  return 0;
}
