#pragma once
// Writers for the results layout: JSONL is the record; CSV and Markdown are
// derived from the same records.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/env.h"
#include "tilecraft/harness/manifest.h"

namespace tilecraft::harness {

using Records = std::vector<nlohmann::json>;

void write_jsonl(const std::string& path, const Records& records);
void write_csv(const std::string& path, const Records& records);  // nested objects flattened as a.b

std::string correctness_report(const EnvInfo& env, const Records& correctness, const std::string& note);
// ", N refused (...)" after a pass/fail count, or "" for none: the one
// wording of the console's summary line and the correctness report.
std::string refused_note(int refused);
// A bench record's scope judged against another (its "vs" names one of the
// record's scopes, or "main": the record's own line): its median over
// that one's, or 0 when it names none or either median is missing (an error,
// not timed).
double scope_vs_ratio(const nlohmann::json& record, const nlohmann::json& scope);
// The lines bench --vs-config / --vs-kernels add are named NAME + a suffix:
// kVsConfigSuffix with one other side, kVsConfigSuffix + "1", "2", ... with
// several (side i of n: vs_suffix(i, n)).
constexpr const char* kVsConfigSuffix = "@vs";
std::string vs_suffix(size_t i, size_t n);
bool is_vs_config_scope(const nlohmann::json& scope);
// Whether every other A/B side of a bench record (its "vs_sides") verified
// (true without any).
bool vs_sides_verified(const nlohmann::json& record);
// scope_vs_ratio as text, "1.07x cublas_per_expert" (three decimals for a
// --vs-config / --vs-kernels line, an A/B in one process), or "" without one.
std::string scope_vs_text(const nlohmann::json& record, const nlohmann::json& scope);

std::string performance_report(const EnvInfo& env, const Ceilings* ceilings, const Records& bench,
                               const std::string& note);
std::string design_report(const Manifest& m, const Records& bench, const Records& compile);
std::string env_markdown(const EnvInfo& env);

}  // namespace tilecraft::harness
