// Flattening of a compiled function's arguments and results: tensors, numbers and bools, nested in
// std::vector, std::tuple and std::pair, become a flat list of leaves plus the vector lengths (pre-order), and
// back. Guards compare leaves and lengths; the trace tree rebuilds results from leaves.
#pragma once
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "eager/tensor.h"

namespace kiln::capture {

struct Leaf {
  bool is_tensor = false;
  Tensor tensor;
  Scalar number;
};

struct Flat {
  std::vector<Leaf> leaves;
  std::vector<int64_t> lengths;  // the length of every std::vector met, in pre-order
  // Names for messages ("x", "xs[1]", "pair.0"), filled only when asked for (tracing, not cached calls).
  std::vector<std::string>* leaf_names = nullptr;
  std::vector<std::string>* length_names = nullptr;
};

template <class T, class = void>
struct PyTree {
  static_assert(sizeof(T) == 0,
                "kiln::compile: arguments and results must be Tensor, a number, bool, or std::vector / std::tuple "
                "/ std::pair of them");
};

template <>
struct PyTree<Tensor> {
  static void flatten(const Tensor& t, Flat& f, const std::string& name) {
    f.leaves.push_back(Leaf{true, t, {}});
    if (f.leaf_names) f.leaf_names->push_back(name);
  }
  static Tensor unflatten(const Flat& f, size_t& leaf, size_t&) { return f.leaves.at(leaf++).tensor; }
};

template <class T>
struct PyTree<T, std::enable_if_t<std::is_arithmetic_v<T>>> {
  static void flatten(T v, Flat& f, const std::string& name) {
    Scalar s;
    if constexpr (std::is_same_v<T, bool>) s = Scalar(v);
    else if constexpr (std::is_floating_point_v<T>) s = Scalar(double(v));
    else s = Scalar(int64_t(v));
    f.leaves.push_back(Leaf{false, {}, s});
    if (f.leaf_names) f.leaf_names->push_back(name);
  }
  static T unflatten(const Flat& f, size_t& leaf, size_t&) {
    const Scalar& s = f.leaves.at(leaf++).number;
    if constexpr (std::is_same_v<T, bool>) return s.to_bool();
    else if constexpr (std::is_floating_point_v<T>) return T(s.to_double());
    else return T(s.to_int());
  }
};

template <class T>
struct PyTree<std::vector<T>> {
  static void flatten(const std::vector<T>& v, Flat& f, const std::string& name) {
    f.lengths.push_back(int64_t(v.size()));
    if (f.length_names) f.length_names->push_back(name);
    for (size_t i = 0; i < v.size(); ++i)
      PyTree<T>::flatten(v[i], f, f.leaf_names ? name + "[" + std::to_string(i) + "]" : std::string());
  }
  static std::vector<T> unflatten(const Flat& f, size_t& leaf, size_t& length) {
    std::vector<T> out(size_t(f.lengths.at(length++)));
    for (T& x : out) x = PyTree<T>::unflatten(f, leaf, length);
    return out;
  }
};

template <class... T>
struct PyTree<std::tuple<T...>> {
  static void flatten(const std::tuple<T...>& t, Flat& f, const std::string& name) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      (PyTree<std::decay_t<T>>::flatten(std::get<I>(t), f, f.leaf_names ? name + "." + std::to_string(I) : ""), ...);
    }(std::index_sequence_for<T...>{});
  }
  static std::tuple<T...> unflatten(const Flat& f, size_t& leaf, size_t& length) {
    return std::tuple<T...>{PyTree<std::decay_t<T>>::unflatten(f, leaf, length)...};  // braces: left to right
  }
};

template <class A, class B>
struct PyTree<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& p, Flat& f, const std::string& name) {
    PyTree<A>::flatten(p.first, f, f.leaf_names ? name + ".first" : "");
    PyTree<B>::flatten(p.second, f, f.leaf_names ? name + ".second" : "");
  }
  static std::pair<A, B> unflatten(const Flat& f, size_t& leaf, size_t& length) {
    A a = PyTree<A>::unflatten(f, leaf, length);
    return {std::move(a), PyTree<B>::unflatten(f, leaf, length)};
  }
};

template <class T>
void flatten_into(Flat& f, const T& value, const std::string& name) {
  PyTree<std::decay_t<T>>::flatten(value, f, name);
}

template <class T>
T unflatten_as(const Flat& f) {
  size_t leaf = 0, length = 0;
  return PyTree<T>::unflatten(f, leaf, length);
}

}  // namespace kiln::capture
