// safetensors checkpoints: round trip, atomic replacement, and errors that name the tensor or file.

#include <catch2/catch.hpp>

#include "tests/unit/common/temp_dir.hpp"
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "apps/ddp-train/train_state.hpp"
#include "ddp/checkpoint.hpp"
#include "ddp/error.hpp"

namespace fs = std::filesystem;

using ddp::test::TempDir;

namespace {

ddp::Checkpoint sample() {
  ddp::Checkpoint c;
  c.tensors.insert_or_assign("0.weight", ddp::CheckpointTensor{{2, 3}, {1, 2, 3, 4, 5, 6}});
  c.tensors.insert_or_assign("0.bias", ddp::CheckpointTensor{{2}, {-1.5f, 0.25f}});
  c.metadata.insert_or_assign("step", std::string{"12"});
  return c;
}

std::string load_error(const std::string& path) {
  try {
    ddp::load_checkpoint(path);
  } catch (const ddp::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a checkpoint reads back tensor for tensor with its metadata", "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("c.safetensors");
  ddp::save_checkpoint(path, sample());
  const auto c = ddp::load_checkpoint(path);
  CHECK(c.tensors.at("0.weight").shape == std::vector<std::int64_t>{2, 3});
  CHECK(c.tensors.at("0.weight").data == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(c.tensors.at("0.bias").data == std::vector<float>{-1.5f, 0.25f});
  CHECK(c.meta_int("step") == 12);
  CHECK_THROWS_WITH(c.meta("epoch"), Catch::Contains("no metadata 'epoch'"));
}

TEST_CASE("the file is safetensors: length, padded JSON header, then the data", "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("c.safetensors");
  ddp::save_checkpoint(path, sample());
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{len[i]} << (8 * i);
  CHECK(n % 8 == 0);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  CHECK_THAT(header, Catch::Contains("\"0.bias\":{\"data_offsets\":[0,8],\"dtype\":\"F32\""));
  CHECK_THAT(header, Catch::Contains("\"__metadata__\":{\"step\":\"12\"}"));
  CHECK(fs::file_size(path) == 8 + n + 8 * sizeof(float));
}

TEST_CASE("saving replaces the file atomically and leaves no temporary", "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("c.safetensors");
  ddp::save_checkpoint(path, sample());
  auto c = sample();
  c.metadata.insert_or_assign("step", std::string{"13"});
  ddp::save_checkpoint(path, c);
  CHECK(ddp::load_checkpoint(path).meta_int("step") == 13);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path())) ++files;
  CHECK(files == 1);
}

TEST_CASE("issue 21: stale temporaries of a killed writer are removed, a live writer's kept",
          "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("model.safetensors");
  long pid_max = 4194304;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  const std::string dead = path + ".tmp." + std::to_string(pid_max + 1);  // no process has it
  const std::string live = path + ".tmp." + std::to_string(::getpid());
  const std::string other = d.file("other.safetensors.tmp.1");
  for (const auto& file : {dead, live, other, path + ".tmp.x"}) std::ofstream(file) << "partial";
  CHECK(ddp::remove_stale_checkpoint_temporaries(path) == 1);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));
  CHECK(fs::exists(path + ".tmp.x"));
  CHECK(ddp::remove_stale_checkpoint_temporaries(path) == 0);
}

TEST_CASE("loading a missing, truncated or garbled file names it", "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("c.safetensors");
  CHECK_THAT(load_error(path), Catch::Contains(path) && Catch::Contains("cannot open"));
  ddp::save_checkpoint(path, sample());
  fs::resize_file(path, fs::file_size(path) - 4);
  CHECK_THAT(load_error(path), Catch::Contains("tensor 0.weight data_offsets") &&
                                   Catch::Contains("truncated file?"));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abc";
  CHECK_THAT(load_error(path), Catch::Contains("too short for a safetensors file"));
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << std::string("\x04\0\0\0\0\0\0\0{bad", 12);
  CHECK_THAT(load_error(path), Catch::Contains("header is not a JSON object"));
}

TEST_CASE("a checkpoint of another model shape names the widths", "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("c.safetensors");
  ddp::train::Mlp small({784, 32, 10});
  small.init(1);
  ddp::train::OptimizerOptions oo;
  auto opt = ddp::train::make_optimizer(oo, small.parameters());
  ddp::save_checkpoint(path, ddp::train::make_checkpoint(small, *opt, {1, 10, 5}, 2, 64, 1,
                                                         "sgd", 0));
  ddp::train::Mlp big({784, 64, 10});
  auto opt_big = ddp::train::make_optimizer(oo, big.parameters());
  CHECK_THROWS_WITH(ddp::train::restore_checkpoint(path, big, *opt_big, "sgd"),
                    Catch::Contains(path) && Catch::Contains("widths are 784-32-10") &&
                        Catch::Contains("784-64-10"));
}

TEST_CASE("a tensor of another shape is named with both shapes", "[checkpoint]") {
  const auto c = sample();
  float out[6];
  CHECK_THROWS_WITH(c.copy_to("0.weight", {3, 2}, out),
                    "tensor 0.weight has shape [2, 3], the model expects [3, 2]");
  CHECK_THROWS_WITH(c.copy_to("1.weight", {3, 2}, out), "no tensor 1.weight");
}

TEST_CASE("model and optimizer state survive a round trip exactly", "[checkpoint]") {
  const TempDir d("ddp_ckpt_test");
  const std::string path = d.file("c.safetensors");
  ddp::train::Mlp a({8, 6, 3});
  a.init(5);
  ddp::train::OptimizerOptions oo;
  oo.name = "adamw";
  auto opt_a = ddp::train::make_optimizer(oo, a.parameters());
  for (float& g : a.flat_grads()) g = 0.125f;
  opt_a->step(a.parameters(), 1);
  ddp::save_checkpoint(path,
                       ddp::train::make_checkpoint(a, *opt_a, {2, 7, 3}, 1, 16, 1, "adamw", 0));
  ddp::train::Mlp b({8, 6, 3});
  auto opt_b = ddp::train::make_optimizer(oo, b.parameters());
  const auto [pos, world_size] = ddp::train::restore_checkpoint(path, b, *opt_b, "adamw");
  CHECK(pos.epoch == 2);
  CHECK(pos.step == 7);
  CHECK(pos.micro_in_epoch == 3);
  CHECK(world_size == 1);
  CHECK(a.flat_values() == b.flat_values());
  const auto sa = opt_a->state();
  const auto sb = opt_b->state();
  REQUIRE(sa.size() == sb.size());
  for (std::size_t k = 0; k < sa.size(); ++k) {
    CHECK(std::vector<float>(sa[k].data, sa[k].data + sa[k].count) ==
          std::vector<float>(sb[k].data, sb[k].data + sb[k].count));
  }
  CHECK_THROWS_WITH(ddp::train::restore_checkpoint(path, b, *opt_b, "sgd"),
                    Catch::Contains("optimizer is adamw, this run's is sgd"));
}
