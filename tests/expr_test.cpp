#include <gtest/gtest.h>

#include "tilecraft/harness/expr.h"

using tilecraft::harness::Expr;

TEST(Expr, EvaluatesFormulas) {
  Expr e = Expr::parse("(T*K*H + T*H)*elem_bytes + 8*T*K");
  EXPECT_DOUBLE_EQ(e.eval({{"T", 512}, {"K", 8}, {"H", 7168}, {"elem_bytes", 2}}),
                   (512.0 * 8 * 7168 + 512.0 * 7168) * 2 + 8 * 512 * 8);
  EXPECT_EQ(e.identifiers(), (std::set<std::string>{"T", "K", "H", "elem_bytes"}));
  EXPECT_DOUBLE_EQ(Expr::parse("-2 + 3 * (4 - 1) / 2").eval({}), 2.5);
  EXPECT_DOUBLE_EQ(Expr::parse("max(a, 2) + min(a, 2)").eval({{"a", 5}}), 7);
}

TEST(Expr, RejectsBadSyntax) {
  for (const char* bad : {"", "T*", "(T", "T K", "2 $ 3", "foo(1, 2)", "max(1)"})
    EXPECT_THROW(Expr::parse(bad), std::invalid_argument) << bad;
}

TEST(Expr, UnknownSymbolAtEval) {
  EXPECT_THROW(Expr::parse("T*Q").eval({{"T", 1}}), std::invalid_argument);
}
