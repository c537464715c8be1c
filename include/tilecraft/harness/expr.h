#pragma once
// Arithmetic expressions over named symbols, for roofline formulas in the
// manifest: numbers, identifiers, + - * / and parentheses, min(a,b), max(a,b).
#include <map>
#include <memory>
#include <set>
#include <string>

namespace tilecraft::harness {

class Expr {
 public:
  // Throws std::invalid_argument with the position and reason on bad syntax.
  static Expr parse(const std::string& text);
  double eval(const std::map<std::string, double>& symbols) const;  // throws on unknown symbol
  const std::set<std::string>& identifiers() const { return ids_; }
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::set<std::string> ids_;
  std::string text_;
};

}  // namespace tilecraft::harness
