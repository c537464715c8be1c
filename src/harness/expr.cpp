#include "tilecraft/harness/expr.h"

#include <cctype>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace tilecraft::harness {

struct Expr::Node {
  char op = 0;  // 'n' number, 'v' variable, 'f' function, or + - * / and 'u' (unary minus)
  double value = 0;
  std::string name;
  std::vector<std::shared_ptr<const Node>> kids;
};

namespace {
using NodeP = std::shared_ptr<const Expr::Node>;

class Parser {
 public:
  Parser(const std::string& s, std::set<std::string>& ids) : s_(s), ids_(ids) {}
  NodeP parse() {
    NodeP n = sum();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::invalid_argument(fmt::format("bad expression '{}' at column {}: {}", s_, i_ + 1, why));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) { ++i_; return true; }
    return false;
  }
  NodeP bin(char op, NodeP a, NodeP b) {
    auto n = std::make_shared<Expr::Node>();
    n->op = op;
    n->kids = {a, b};
    return n;
  }
  NodeP sum() {
    NodeP n = product();
    for (;;) {
      if (eat('+')) n = bin('+', n, product());
      else if (eat('-')) n = bin('-', n, product());
      else return n;
    }
  }
  NodeP product() {
    NodeP n = unary();
    for (;;) {
      if (eat('*')) n = bin('*', n, unary());
      else if (eat('/')) n = bin('/', n, unary());
      else return n;
    }
  }
  NodeP unary() {
    if (eat('-')) {
      auto n = std::make_shared<Expr::Node>();
      n->op = 'u';
      n->kids = {unary()};
      return n;
    }
    return atom();
  }
  NodeP atom() {
    skip();
    if (i_ >= s_.size()) fail("expression ends early");
    if (eat('(')) {
      NodeP n = sum();
      if (!eat(')')) fail("missing ')'");
      return n;
    }
    auto n = std::make_shared<Expr::Node>();
    char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      n->op = 'n';
      try {
        n->value = std::stod(s_.substr(i_), &used);
      } catch (...) {
        fail("bad number");
      }
      i_ += used;
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      n->name = s_.substr(b, i_ - b);
      if (eat('(')) {
        if (n->name != "min" && n->name != "max") fail("unknown function '" + n->name + "'");
        n->op = 'f';
        n->kids.push_back(sum());
        if (!eat(',')) fail("expected ',' in " + n->name + "()");
        n->kids.push_back(sum());
        if (!eat(')')) fail("missing ')'");
        return n;
      }
      n->op = 'v';
      ids_.insert(n->name);
      return n;
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& s_;
  std::set<std::string>& ids_;
  size_t i_ = 0;
};

double eval_node(const Expr::Node& n, const std::map<std::string, double>& sym) {
  switch (n.op) {
    case 'n': return n.value;
    case 'v': {
      auto it = sym.find(n.name);
      if (it == sym.end()) throw std::invalid_argument("expression uses unknown symbol '" + n.name + "'");
      return it->second;
    }
    case 'u': return -eval_node(*n.kids[0], sym);
    case 'f': {
      double a = eval_node(*n.kids[0], sym), b = eval_node(*n.kids[1], sym);
      return n.name == "min" ? std::min(a, b) : std::max(a, b);
    }
  }
  double a = eval_node(*n.kids[0], sym), b = eval_node(*n.kids[1], sym);
  switch (n.op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default: return a / b;
  }
}
}  // namespace

Expr Expr::parse(const std::string& text) {
  Expr e;
  e.text_ = text;
  e.root_ = Parser(text, e.ids_).parse();
  return e;
}

double Expr::eval(const std::map<std::string, double>& symbols) const { return eval_node(*root_, symbols); }

}  // namespace tilecraft::harness
