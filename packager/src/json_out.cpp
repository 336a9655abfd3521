#include "json_out.hpp"

#include <iostream>

namespace fatpack::tool {

std::string json_text(const nlohmann::json& doc) {
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_json_document(const nlohmann::json& doc) { std::cout << json_text(doc) << "\n"; }

}  // namespace fatpack::tool
