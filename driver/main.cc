// phaselab driver (first cut: `kernels`, `--version`, `--help`).
#include <cstdio>
#include <cstring>
#include <string>

#include "phaselab/kernels.hpp"

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

int cmd_kernels(bool json) {
  const std::string best = pl::best_target();
  if (json) {
    std::printf("{\n  \"best_target\": \"%s\",\n  \"kernels\": [\n", best.c_str());
    for (int k = 0; k < pl::kNumKernels; ++k) {
      const pl::Variant* sel = pl::selected_variant(k, "");
      std::printf("    {\"kernel\": \"%s\", \"selected\": \"%s\", \"variants\": [\n",
                  pl::kernel_name(k), sel ? json_escape(sel->name).c_str() : "");
      bool first = true;
      for (const auto& v : pl::variants()) {
        if (v.kernel != k) continue;
        std::printf("%s      {\"name\": \"%s\", \"backend\": \"%s\", \"isa\": \"%s\", "
                    "\"supported\": %s, \"selected\": %s}",
                    first ? "" : ",\n", json_escape(v.name).c_str(), v.backend, v.isa,
                    v.supported ? "true" : "false", (&v == sel) ? "true" : "false");
        first = false;
      }
      std::printf("\n    ]}%s\n", k + 1 < pl::kNumKernels ? "," : "");
    }
    std::printf("  ]\n}\n");
    return 0;
  }
  std::printf("best target: %s\n", best.c_str());
  for (int k = 0; k < pl::kNumKernels; ++k) {
    const pl::Variant* sel = pl::selected_variant(k, "");
    std::printf("%s\n", pl::kernel_name(k));
    for (const auto& v : pl::variants()) {
      if (v.kernel != k) continue;
      std::printf("  %s %-28s %s\n", &v == sel ? "*" : " ", v.name.c_str(),
                  v.supported ? "supported" : "not supported by this CPU");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::printf("usage: phaselab kernels [--json]\n");
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("phaselab %s\n", PHASELAB_VERSION);
    return 0;
  }
  if (!std::strcmp(argv[1], "kernels")) return cmd_kernels(argc > 2 && !std::strcmp(argv[2], "--json"));
  std::fprintf(stderr, "phaselab: unknown command '%s'\n", argv[1]);
  return 2;
}
