// Module: registration order, dotted names, state_dict, load_state_dict, structure_version,
// train/eval.
#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/nn/init.h"
#include "lathe/nn/layers.h"

using namespace lathe;
using namespace lathe::nn;

namespace {

// A module with its own parameters and buffers (persistent and not) and two children.
class Block : public Module {
 public:
  Block() {
    register_parameter("scale", ones({4}));
    register_buffer("count", zeros({}, DType::i64));
    register_buffer("scratch", zeros({3}), /*persistent=*/false);
    register_module("fc", make<Linear>(4, 3));
    register_module("norm", make<BatchNorm2d>(3));
  }
  std::string type_name() const override { return "Block"; }
  using Module::register_buffer;
  using Module::register_parameter;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> r;
  for (auto& [n, t] : v) r.push_back(n);
  return r;
}

std::shared_ptr<Sequential> two_blocks() {
  return make<Sequential>(std::vector<ModulePtr>{make<Block>(), make<ReLU>(), make<Block>()});
}

}  // namespace

TEST(Module, ParameterNamesAreDottedInRegistrationOrder) {
  auto m = two_blocks();
  std::vector<std::string> expected = {
      "0.scale", "0.fc.weight", "0.fc.bias", "0.norm.weight", "0.norm.bias",
      "2.scale", "2.fc.weight", "2.fc.bias", "2.norm.weight", "2.norm.bias"};
  EXPECT_EQ(names_of(m->named_parameters()), expected);
  EXPECT_EQ(m->parameters().size(), expected.size());
}

TEST(Module, BuffersIncludeNonPersistentButStateDictDoesNot) {
  auto m = make<Block>();
  std::vector<std::string> expected = {"count", "scratch", "norm.running_mean", "norm.running_var",
                                       "norm.num_batches_tracked"};
  EXPECT_EQ(names_of(m->named_buffers()), expected);
  auto sd = m->state_dict();
  EXPECT_EQ(sd.size(), 9u);  // 5 parameters + 4 persistent buffers
  EXPECT_TRUE(sd.count("count"));
  EXPECT_FALSE(sd.count("scratch"));
  EXPECT_TRUE(sd.count("norm.num_batches_tracked"));
  // state_dict entries are the module's tensors, not copies.
  EXPECT_TRUE(sd.at("fc.weight").is_same(m->child("fc")->param("weight")));
}

TEST(Module, NamedModulesArePreOrderWithPaths) {
  auto m = two_blocks();
  std::vector<std::string> paths;
  for (auto& [p, mod] : m->named_modules()) paths.push_back(p + ":" + mod->type_name());
  std::vector<std::string> expected = {
      ":Sequential", "0:Block", "0.fc:Linear", "0.norm:BatchNorm2d",
      "1:ReLU",      "2:Block", "2.fc:Linear", "2.norm:BatchNorm2d"};
  EXPECT_EQ(paths, expected);
}

TEST(Module, DuplicateOrDottedNamesAreRejected) {
  Block b;
  EXPECT_THROW(b.register_parameter("scale", ones({1})), Error);
  EXPECT_THROW(b.register_buffer("fc", ones({1})), Error);  // taken by a child
  EXPECT_THROW(b.register_parameter("a.b", ones({1})), Error);
  EXPECT_THROW(b.register_parameter("", ones({1})), Error);
  EXPECT_THROW(b.param("nope"), Error);
  EXPECT_THROW(b.buffer("nope"), Error);
  EXPECT_THROW(b.child("nope"), Error);
}

TEST(Module, StructureVersionCountsStructuralChangesOnly) {
  Block b;
  const uint64_t v0 = b.structure_version();
  EXPECT_EQ(v0, 5u);  // scale, count, scratch, fc, norm
  b.register_parameter("extra", ones({2}));
  EXPECT_EQ(b.structure_version(), v0 + 1);
  b.set_parameter("scale", ones({4}));
  EXPECT_EQ(b.structure_version(), v0 + 2);
  b.set_buffer("count", zeros({}, DType::i64));
  EXPECT_EQ(b.structure_version(), v0 + 3);
  b.set_child("fc", make<Linear>(4, 3));
  EXPECT_EQ(b.structure_version(), v0 + 4);
  b.set_child("new_child", make<ReLU>());  // adding counts too
  EXPECT_EQ(b.structure_version(), v0 + 5);
  EXPECT_EQ(b.child("new_child")->type_name(), "ReLU");
  // In-place value changes do not.
  init::constant_(b.param("scale"), 3.0);
  EXPECT_EQ(b.structure_version(), v0 + 5);
  // A descendant's change is not this module's.
  uint64_t child_v = b.child("fc")->structure_version();
  b.child("fc")->set_parameter("bias", zeros({3}));
  EXPECT_EQ(b.child("fc")->structure_version(), child_v + 1);
  EXPECT_EQ(b.structure_version(), v0 + 5);
  EXPECT_THROW(b.set_parameter("missing", ones({1})), Error);
}

TEST(Module, TrainAndEvalAreRecursive) {
  auto m = two_blocks();
  EXPECT_TRUE(m->is_training());
  m->eval();
  for (auto& [p, mod] : m->named_modules()) EXPECT_FALSE(mod->is_training()) << p;
  m->child("2")->train();
  EXPECT_FALSE(m->is_training());
  EXPECT_TRUE(m->child("2")->child("norm")->is_training());
  EXPECT_FALSE(m->child("0")->child("norm")->is_training());
}

TEST(Module, StateDictRoundTripCopiesIntoExistingTensors) {
  manual_seed(1);
  auto a = two_blocks();
  manual_seed(2);
  auto b = two_blocks();
  init::constant_(a->child("0")->buffer("count"), 7);
  init::normal_(a->child("2")->child("norm")->buffer("running_mean"));
  Tensor target = b->child("0")->child("fc")->param("weight");
  ASSERT_NE(target.to_vector<float>(),
            a->child("0")->child("fc")->param("weight").to_vector<float>());

  b->load_state_dict(a->state_dict());
  auto sa = a->state_dict(), sb = b->state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (auto& [k, t] : sa) {
    EXPECT_EQ(sb.at(k).dtype(), t.dtype()) << k;
    if (t.dtype() == DType::i64)
      EXPECT_EQ(sb.at(k).to_vector<int64_t>(), t.to_vector<int64_t>()) << k;
    else
      EXPECT_EQ(sb.at(k).to_vector<float>(), t.to_vector<float>()) << k;
    EXPECT_FALSE(sb.at(k).is_same(t)) << k;  // values copied, storage not shared
  }
  // The same tensor objects now hold the new values (no structure change).
  EXPECT_TRUE(b->child("0")->child("fc")->param("weight").is_same(target));
  EXPECT_EQ(b->child("0")->buffer("count").item(), 7.0);
}

TEST(Module, LoadStateDictConvertsDtype) {
  Linear l(3, 2);
  std::map<std::string, Tensor> sd = {{"weight", from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3})},
                                      {"bias", from_vector<double>({-1, -2}, {2})}};
  l.load_state_dict(sd);
  EXPECT_EQ(l.param("weight").dtype(), DType::f32);
  EXPECT_EQ(l.param("weight").to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(l.param("bias").to_vector<float>(), (std::vector<float>{-1, -2}));
}

TEST(Module, StrictLoadListsMissingUnexpectedAndMismatchedTogether) {
  Block b;
  auto sd = Block().state_dict();
  sd.erase("fc.bias");
  sd.erase("norm.running_var");
  sd["fc.extra"] = zeros({1});
  sd["norm.weight"] = ones({5});
  const std::vector<float> before = b.child("fc")->param("weight").to_vector<float>();
  try {
    b.load_state_dict(sd);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[load_state_dict]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing keys (2): fc.bias, norm.running_var"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected keys (1): fc.extra"), std::string::npos) << msg;
    EXPECT_NE(msg.find("norm.weight (checkpoint f32[5], model f32[3])"), std::string::npos) << msg;
  }
  // Nothing was copied.
  EXPECT_EQ(b.child("fc")->param("weight").to_vector<float>(), before);
}

// Some writers save num_batches_tracked as [1]; PyTorch loads a 1-element tensor into a 0-d one.
TEST(Module, LoadStateDictAcceptsOneElementTensorForZeroDimBuffer) {
  Block b;
  auto sd = Block().state_dict();
  sd["count"] = from_vector<int64_t>({5}, {1});
  sd["norm.num_batches_tracked"] = from_vector<int64_t>({11}, {1});
  Tensor count = b.buffer("count");
  b.load_state_dict(sd);
  EXPECT_EQ(b.buffer("count").dim(), 0);  // the module's tensor keeps its 0-d shape
  EXPECT_TRUE(b.buffer("count").is_same(count));
  EXPECT_EQ(b.buffer("count").item(), 5.0);
  EXPECT_EQ(b.child("norm")->buffer("num_batches_tracked").dim(), 0);
  EXPECT_EQ(b.child("norm")->buffer("num_batches_tracked").item(), 11.0);
  // Only a single element qualifies: [2] (or [1,1]) for a 0-d buffer is still a mismatch.
  sd["count"] = from_vector<int64_t>({1, 2}, {2});
  sd["norm.num_batches_tracked"] = from_vector<int64_t>({3}, {1, 1});
  try {
    b.load_state_dict(sd);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("shape mismatches (2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count (checkpoint i64[2], model i64[])"), std::string::npos) << msg;
    EXPECT_NE(msg.find("norm.num_batches_tracked (checkpoint i64[1,1], model i64[])"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(b.buffer("count").item(), 5.0);  // nothing copied
  // The reverse (a 0-d value for a [1] parameter) is not accepted, as in PyTorch.
  Linear l(1, 1);
  std::map<std::string, Tensor> lsd = l.state_dict();
  lsd["bias"] = full({}, 2.0);
  EXPECT_THROW(l.load_state_dict(lsd), Error);
}

// Missing, unexpected and mismatched keys all in one error, also with a [1] value accepted.
TEST(Module, LoadStateDictReportsEveryProblemInOneError) {
  Block b;
  auto sd = Block().state_dict();
  sd["count"] = from_vector<int64_t>({2}, {1});  // accepted, not reported
  sd.erase("norm.running_mean");
  sd["norm.extra"] = zeros({2});
  sd["fc.weight"] = zeros({3, 3});
  sd["norm.bias"] = zeros({1});
  try {
    b.load_state_dict(sd);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("missing keys (1): norm.running_mean"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected keys (1): norm.extra"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shape mismatches (2): fc.weight (checkpoint f32[3,3]"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("norm.bias (checkpoint f32[1], model f32[3])"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("count"), std::string::npos) << msg;
  }
  // Non-strict: the key problems are ignored, the shape mismatches still reported.
  try {
    b.load_state_dict(sd, /*strict=*/false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find("missing keys"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shape mismatches (2)"), std::string::npos) << msg;
  }
}

TEST(Module, NonStrictLoadSkipsKeysButNotShapeMismatches) {
  Linear l(2, 2);
  std::map<std::string, Tensor> sd = {{"weight", from_vector<float>({1, 2, 3, 4}, {2, 2})},
                                      {"other", zeros({1})}};
  const std::vector<float> bias = l.param("bias").to_vector<float>();
  l.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(l.param("weight").to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(l.param("bias").to_vector<float>(), bias);
  sd["weight"] = zeros({3, 2});
  EXPECT_THROW(l.load_state_dict(sd, false), Error);
}

TEST(Module, ForwardWithoutOverrideIsAnError) {
  Block b;
  EXPECT_THROW(b.forward(ones({1})), Error);
  EXPECT_THROW(b.forward_all({ones({1}), ones({1})}), Error);
}

TEST(Sequential, NamesChildrenByIndexOrExplicitName) {
  Sequential s;
  s.push_back(make<ReLU>());
  s.append("head", make<Linear>(2, 2));
  s.push_back(make<Tanh>());
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.named_children()[0].first, "0");
  EXPECT_EQ(s.named_children()[1].first, "head");
  EXPECT_EQ(s.named_children()[2].first, "2");
  EXPECT_EQ(s[1]->type_name(), "Linear");
  EXPECT_TRUE(s.state_dict().count("head.weight"));
}

TEST(Sequential, RunsChildrenInOrder) {
  auto s = make<Sequential>(std::vector<ModulePtr>{make<Hardtanh>(-0.5, 0.5), make<ReLU>()});
  Tensor x = from_vector<float>({-2.0f, -0.25f, 0.25f, 2.0f}, {4});
  EXPECT_EQ(s->forward(x).to_vector<float>(), (std::vector<float>{0, 0, 0.25f, 0.5f}));
}

TEST(Module, ApplyVisitsEveryModuleAndNamedModulesNeedsSharedOwnership) {
  auto m = two_blocks();
  std::vector<std::string> paths;
  m->apply([&](const std::string& p, Module& mod) { paths.push_back(p + ":" + mod.type_name()); });
  EXPECT_EQ(paths.size(), 8u);
  EXPECT_EQ(paths[2], "0.fc:Linear");
  Block stack_block;
  EXPECT_THROW(stack_block.named_modules(), Error);
}

TEST(Module, ToDtypeConvertsFloatingTensorsInPlace) {
  auto b = make<Block>();
  Tensor held = b->param("scale");  // a handle held elsewhere sees the conversion
  auto fc = std::dynamic_pointer_cast<Module>(b->child("fc"));
  const uint64_t before = fc->structure_version();
  std::vector<float> w = fc->param("weight").to_vector<float>();
  b->to(DType::f64);
  EXPECT_EQ(held.dtype(), DType::f64);
  for (const auto& [name, t] : b->named_parameters()) EXPECT_EQ(t.dtype(), DType::f64) << name;
  EXPECT_EQ(b->buffer("count").dtype(), DType::i64);  // integer buffers keep their dtype
  EXPECT_EQ(b->buffer("scratch").dtype(), DType::f64);
  EXPECT_GT(fc->structure_version(), before);
  std::vector<double> w64 = fc->param("weight").to_vector<double>();
  ASSERT_EQ(w64.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w64[i], static_cast<double>(w[i]));
  Tensor y = fc->forward(ones({2, 4}, DType::f64));
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_THROW(b->to(DType::i32), Error);
}

namespace {

// Two linear layers whose weights are one tensor (weight tying, as an embedding and its output
// projection): 4 parameter slots, 3 tensors.
class Tied : public Module {
 public:
  Tied() {
    enc = register_module("enc", make<Linear>(5, 5));
    dec = register_module("dec", make<Linear>(5, 5));
    dec->set_parameter("weight", enc->param("weight"));
  }
  std::shared_ptr<Linear> enc, dec;
};

}  // namespace

// As PyTorch: parameters() and named_parameters() list a tied tensor once, under its first name;
// named_parameters(false) and state_dict() keep every name.
TEST(Module, TiedWeightIsListedOnce) {
  auto m = make<Tied>();
  std::vector<std::string> names;
  for (auto& [n, t] : m->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"enc.weight", "enc.bias", "dec.bias"}));
  auto ps = m->parameters();
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_TRUE(ps[0].is_same(m->enc->param("weight")));
  EXPECT_TRUE(ps[0].is_same(m->dec->param("weight")));
  EXPECT_EQ(m->named_parameters(/*remove_duplicate=*/false).size(), 4u);
  auto sd = m->state_dict();
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_TRUE(sd.at("dec.weight").is_same(sd.at("enc.weight")));
  // A checkpoint of the tied module loads (both names present, one tensor written twice).
  auto other = make<Tied>();
  other->load_state_dict(sd);
  EXPECT_EQ(other->enc->param("weight").to_vector<float>(),
            m->enc->param("weight").to_vector<float>());
  EXPECT_TRUE(other->dec->param("weight").is_same(other->enc->param("weight")));
}

// A module registered under two names (shared layers) lists its tensors once too, buffers
// included.
TEST(Module, SharedChildIsListedOnce) {
  auto bn = make<BatchNorm2d>(3);
  Sequential seq;
  seq.push_back(bn);
  seq.push_back(bn);
  EXPECT_EQ(seq.parameters().size(), 2u);
  EXPECT_EQ(seq.named_parameters(false).size(), 4u);
  std::vector<std::string> bufs;
  for (auto& [n, t] : seq.named_buffers()) bufs.push_back(n);
  EXPECT_EQ(bufs,
            (std::vector<std::string>{"0.running_mean", "0.running_var", "0.num_batches_tracked"}));
  EXPECT_EQ(seq.state_dict().size(), 10u);
}
