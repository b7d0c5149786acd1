// overloaded.h — a visitor made of lambdas, one per alternative of a std::variant:
//   std::visit(Overloaded{[](const A&) {...}, [](const B&) {...}}, v);
// The deduction guide is for compilers without C++20's aggregate deduction (clang 14).
#pragma once

namespace sal {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace sal
