// The dist section of the config (src/config/config.h): dist.rendezvous
// (auto | mpi | file:DIR) read, dumped and read back, and bad values named
// with their line or --set.
#include "config/config.h"
#include "core/error.h"
#include "support/test_util.h"

namespace rotor {
namespace {

std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_from_string(yaml, "configs/x.yaml", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(ConfigDist, RendezvousDefaultsToAuto) {
  const Config c = load_config_from_string("");
  EXPECT_EQ(c.dist.rendezvous, "auto");
  EXPECT_DOUBLE_EQ(c.dist.timeout_s, 300.0);
}

TEST(ConfigDist, RendezvousValuesRoundTrip) {
  for (const std::string v : {"auto", "mpi", "file:/shared/rdzv", "file:runs/x/.rendezvous"}) {
    const Config c = load_config_from_string("dist:\n  rendezvous: " + v + "\n");
    EXPECT_EQ(c.dist.rendezvous, v);
    EXPECT_EQ(load_config_from_string(dump_config(c)), c) << v;
  }
  const Config s = load_config_from_string("", "x", {"dist.rendezvous=file:/scratch/r"});
  EXPECT_EQ(s.dist.rendezvous, "file:/scratch/r");
}

TEST(ConfigDist, BadRendezvousNamesLineAndChoices) {
  EXPECT_EQ(load_error("seed: 2\ndist:\n  rendezvous: tcp://node1:29500\n"),
            "configs/x.yaml:3: dist.rendezvous: expected auto, mpi or file:DIR (a directory every "
            "rank reaches), got \"tcp://node1:29500\"");
  EXPECT_EQ(load_error("", {"dist.rendezvous='file:'"}),
            "--set dist.rendezvous='file:': dist.rendezvous: expected auto, mpi or file:DIR (a "
            "directory every rank reaches), got \"file:\"");
  // Unquoted, YAML reads `file:` as a mapping.
  EXPECT_NE(load_error("", {"dist.rendezvous=file:"}).find("expected a string"), std::string::npos);
  EXPECT_NE(load_error("dist:\n  rendezvous: [a]\n").find("dist.rendezvous: expected a string"),
            std::string::npos);
  EXPECT_NE(load_error("dist:\n  rendevous: mpi\n").find("did you mean dist.rendezvous?"),
            std::string::npos);
}

}  // namespace
}  // namespace rotor
