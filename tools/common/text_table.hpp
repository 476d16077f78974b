// text_table.hpp: the plain-text tables the tools print (bp-devices, bp-run).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace bp::tools {

// Rows of cells, each column padded to its widest cell plus two spaces; the
// last cell of a row is not padded and no line ends in spaces. |indent|
// prefixes every line.
inline std::string text_table(const std::vector<std::vector<std::string>> &rows, const std::string &indent) {
  std::vector<size_t> width;
  for (const auto &r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::string out;
  for (const auto &r : rows) {
    std::string line = indent;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace bp::tools
