// The one way the CLI prints a --json document. Names inside packages, cache entries and paths are
// outside bytes and need not be UTF-8; nlohmann's dump() throws (type_error 316) on invalid UTF-8,
// which would abort the tool. Every invalid byte is written as U+FFFD instead: the document stays
// valid JSON, and everything else in it is exact.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace fatpack::tool {

// Indented (2), invalid UTF-8 replaced, no trailing newline.
std::string json_text(const nlohmann::json& doc);
// json_text(doc) and a newline on stdout.
void print_json_document(const nlohmann::json& doc);

}  // namespace fatpack::tool
