// main.cpp: an application in C++ against an installed Backplane, through the
// header-only RAII layer (backplane.hpp): every failed call throws bp::error
// with the status and the library's message.
//
//   app-cpp [DEVICE]     DEVICE: one spec, default "auto"; e.g. "cpu:threads=2"
//
// Runs softmax(A B^T) * 2 + 1 on one backend, checks it against plain C++ and
// shows that a bad request comes back as an error, not an abort.
#include <backplane/version.h>
#include <backplane/backplane.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  const char *spec = argc > 1 ? argv[1] : "auto";
  try {
    std::printf("app-cpp: Backplane %s (built with %s)\n", bp_version_string(), BP_VERSION_STRING);
    try {
      bp::backend bad("cpu:threads=-1");
      std::fprintf(stderr, "app-cpp: a bad parameter was accepted\n");
      return 1;
    } catch (const bp::error &e) {
      std::printf("app-cpp: a bad spec says: %s\n", e.what());
    }

    constexpr int K = 8, M = 3, N = 2;
    bp::context ctx;
    bp_tensor *a = ctx.tensor_2d(BP_TYPE_F32, K, M);
    bp_tensor *b = ctx.tensor_2d(BP_TYPE_F32, K, N);
    bp_tensor *s = bp::check(bp_soft_max(ctx.get(), bp_mul_mat(ctx.get(), a, b), nullptr, 1.0f));
    bp_tensor *one = ctx.tensor_1d(BP_TYPE_F32, 1);
    bp_tensor *y = bp::check(bp_add(ctx.get(), bp_scale(ctx.get(), s, 2.0f), one));
    bp::graph g(ctx, y);

    bp::backend be(spec);
    bp::buffer buf = bp::alloc_ctx_tensors(ctx, be);
    std::vector<float> av(K * M), bv(K * N);
    for (int i = 0; i < K * M; ++i) av[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    for (int i = 0; i < K * N; ++i) bv[i] = 0.2f * static_cast<float>(i % 5) - 0.4f;
    bp::set(a, av);
    bp::set(b, bv);
    bp::set(one, std::vector<float>{1.0f});
    be.compute(g);
    be.synchronize();
    std::vector<float> out = bp::get<float>(y);

    for (int j = 0; j < N; ++j) {  // softmax over each row of M products
      std::vector<double> p(M);
      double max = -1e300, sum = 0;
      for (int i = 0; i < M; ++i) {
        p[i] = 0;
        for (int k = 0; k < K; ++k) p[i] += double(av[i * K + k]) * bv[j * K + k];
        max = std::max(max, p[i]);
      }
      for (double &v : p) sum += (v = std::exp(v - max));
      for (int i = 0; i < M; ++i) {
        double want = p[i] / sum * 2 + 1;
        if (std::fabs(out[j * M + i] - want) > 1e-5) {
          std::fprintf(stderr, "app-cpp: y[%d,%d] = %g, want %g\n", i, j, out[j * M + i], want);
          return 1;
        }
      }
    }
    std::printf("app-cpp: softmax(A B^T) * 2 + 1 on %s: ok\n", be.name());
    return 0;
  } catch (const bp::error &e) {
    std::fprintf(stderr, "app-cpp: %s\n", e.what());
    return 1;
  }
}
