// hello_ddp: the smallest libddp program. Joins the job its launcher (ddprun or torchrun)
// started, sums every rank's number with all_reduce, overlapping a broadcast, and checks both.
#include <ddp/error.hpp>
#include <ddp/init.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    ddp::Context ctx = ddp::init();
    std::vector<double> value{static_cast<double>(ctx.rank + 1)};
    std::vector<float> from_root(4, ctx.rank == 0 ? 42.0f : 0.0f);

    // Both operations run on the group's worker thread while this thread could compute.
    auto sum = ctx.group->all_reduce({value.data(), value.size(), ddp::DType::kFloat64},
                                     ddp::ReduceOp::kSum);
    auto bcast = ctx.group->broadcast({from_root.data(), from_root.size(), ddp::DType::kFloat32},
                                      /*root=*/0);
    sum->wait();
    bcast->wait();

    const double expected = ctx.world_size * (ctx.world_size + 1) / 2.0;
    const bool ok = value[0] == expected && from_root[3] == 42.0f;
    std::printf("hello_ddp rank %d of %d (%s): sum=%g %s\n", ctx.rank, ctx.world_size,
                ctx.group->backend().c_str(), value[0], ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
  } catch (const ddp::ConfigError& e) {
    std::fprintf(stderr, "hello_ddp: %s\n", e.what());
    return 2;
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "hello_ddp: %s\n", e.what());
    return 1;
  }
}
