// A differential key fuzzer (bounded: a fixed seed and count, a few seconds).
// Random clang option lists are built from macro definitions in every
// spelling, undefines and codegen flags; a model that knows only what the
// compiler does (last definition wins, -U in sequence, other flags in order)
// says when two lists must compile alike. Then:
//   - model-equal lists must get one compile key (no needless miss),
//   - model-different lists must get two (no false hit),
//   - for a sample, both sides are compiled with the real clang backend, and
//     one compile key never maps to two different objects.
// KCACHE_KEY_FUZZ_SEED and KCACHE_KEY_FUZZ_ROUNDS change the run.

#include <kcache/compiler/backends.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/spec_check.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace kcache::compiler {
namespace {

using Options = std::vector<std::string>;
using Rng = std::mt19937_64;

// The source reads every macro the options may set, so each changes the code.
constexpr const char* kSource = R"(
#ifndef A
#define A 7
#endif
#ifndef B
#define B 5
#endif
#ifdef C
#define C_VALUE 3
#else
#define C_VALUE 0
#endif
extern "C" int kernel(int x) { return x * A + B - C_VALUE; }
)";

constexpr std::array<const char*, 3> kMacros = {"A", "B", "C"};
constexpr std::array<const char*, 6> kCodegen = {
    "-O0", "-O1", "-O2", "-ffast-math", "-fno-strict-aliasing", "-fwrapv"};

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// What the compiler sees: the final macro table and the other flags in order.
struct Model {
  std::map<std::string, std::optional<std::string>> macros;
  std::vector<std::string> flags;
  friend bool operator==(const Model&, const Model&) = default;
};

struct Generated {
  Options options;
  Model model;
};

// One -D or -U in a random spelling, applied to the model as a compiler would.
void add_macro(Rng& rng, Generated& g) {
  const std::string name = kMacros[rng() % kMacros.size()];
  if (rng() % 4 == 0) {
    g.options.push_back(rng() % 2 ? "-U" + name : "--undefine-macro=" + name);
    g.model.macros[name] = std::nullopt;
    return;
  }
  const int value = static_cast<int>(rng() % 3);
  const bool implicit_one = value == 1 && rng() % 2;
  const std::string def = implicit_one ? name : name + "=" + std::to_string(value);
  switch (rng() % 3) {
  case 0:
    g.options.push_back("-D" + def);
    break;
  case 1:
    g.options.push_back("-D");
    g.options.push_back(def);
    break;
  default:
    g.options.push_back("--define-macro=" + def);
    break;
  }
  g.model.macros[name] = name + "=" + std::to_string(value);
}

Generated generate(Rng& rng) {
  Generated g;
  const int n = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    if (rng() % 3 == 0) {
      const std::string flag = kCodegen[rng() % kCodegen.size()];
      g.options.push_back(flag);
      g.model.flags.push_back(flag);
    } else {
      add_macro(rng, g);
    }
  }
  return g;
}

// A second list for the same model: the macros re-spelled and shuffled with
// each name's own definitions kept in order, the other flags in place.
Generated respell(Rng& rng, const Generated& g) {
  Generated out;
  out.model = g.model;
  out.options = g.model.flags;
  std::vector<std::string> names;
  for (const auto& [name, def] : g.model.macros) {
    names.push_back(name);
  }
  std::shuffle(names.begin(), names.end(), rng);
  for (const std::string& name : names) {
    const auto& def = g.model.macros.at(name);
    if (!def) {
      out.options.push_back("-U" + name);
    } else if (rng() % 2) {
      out.options.push_back("-D");
      out.options.push_back(*def);
    } else {
      out.options.push_back("--define-macro=" + *def);
    }
  }
  return out;
}

CompileSpec spec_with(const Options& options) {
  CompileSpec s;
  s.backend = Backend::kCpp;
  s.source = {"kernel.cpp", kSource};
  s.options = options;
  s.target = "x86-64-v2";
  s.output = OutputKind::kObject;
  return s;
}

std::string show(const Options& o) {
  std::string out;
  for (const std::string& s : o) {
    out += (out.empty() ? "" : " ") + s;
  }
  return out;
}

TEST(KeyDifferential, SameKeyExactlyWhenTheCompilerSeesTheSame) {
  Rng rng(env_or("KCACHE_KEY_FUZZ_SEED", 20261122));
  const auto rounds = env_or("KCACHE_KEY_FUZZ_ROUNDS", 400);
  const auto toolchain = cachekey::ToolchainFingerprint().add("clang", "19");
  std::map<std::string, Model> model_of_key; // compile key -> the model it stands for
  std::vector<std::pair<CompileSpec, CompileSpec>> same_key_samples;
  std::size_t equal_pairs = 0, different_pairs = 0;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    const Generated a = generate(rng);
    const Generated b = rng() % 2 ? respell(rng, a) : generate(rng);
    auto pa = prepare_spec(spec_with(a.options));
    auto pb = prepare_spec(spec_with(b.options));
    ASSERT_TRUE(pa && pb) << show(a.options) << " / " << show(b.options);
    const std::string ka = cachekey::to_hex(compile_key(*pa, toolchain));
    const std::string kb = cachekey::to_hex(compile_key(*pb, toolchain));
    ASSERT_EQ(ka == kb, a.model == b.model)
        << "options [" << show(a.options) << "] and [" << show(b.options) << "]";
    for (const auto& [key, model] : {std::pair{&ka, &a.model}, std::pair{&kb, &b.model}}) {
      const auto [it, inserted] = model_of_key.emplace(*key, *model);
      ASSERT_TRUE(inserted || it->second == *model) << "one key for two models: " << *key;
    }
    if (ka == kb) {
      ++equal_pairs;
      if (a.options != b.options && same_key_samples.size() < 4) {
        same_key_samples.emplace_back(*pa, *pb);
      }
    } else {
      ++different_pairs;
    }
  }
  EXPECT_GT(equal_pairs, rounds / 4) << "the generator should make many equal pairs";
  EXPECT_GT(different_pairs, rounds / 4);

  // The real compiler: one compile key, one object.
  auto backend = make_backend(Backend::kCpp);
  ASSERT_TRUE(backend.has_value());
  ASSERT_FALSE(same_key_samples.empty());
  for (const auto& [a, b] : same_key_samples) {
    auto oa = (*backend)->compile(a);
    auto ob = (*backend)->compile(b);
    ASSERT_TRUE(oa && ob) << show(a.options) << " / " << show(b.options);
    EXPECT_EQ(oa->binary, ob->binary) << "one compile key, two objects: [" << show(a.options)
                                      << "] / [" << show(b.options) << "]";
  }
}

} // namespace
} // namespace kcache::compiler
