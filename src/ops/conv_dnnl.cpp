// conv2d's f32 forward through oneDNN (conv_dnnl.h): one primitive per geometry, created once and cached; the
// activations and weights stay in kiln's plain layouts (nchw, oihw / goihw) and are reordered to the layouts
// the primitive picks, around each call (1x1 convolutions run on the plain activations: prepare()).
#include "ops/conv_dnnl.h"

#if KILN_HAVE_DNNL
#include <dnnl.hpp>
#include <omp.h>

#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>
#endif

namespace kiln {

#if KILN_HAVE_DNNL
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct Prepared {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  memory::desc src_user, wei_user, dst_user;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A primitive is built for the thread count of its creation and runs an OpenMP team of that size: keyed by it,
// a forked child (one thread, repro/isolate.cpp; GNU OpenMP's pool does not survive fork) builds its own
// instead of starting a team of its parent's size, which hangs.
std::vector<int64_t> key_of(const DnnlConv2d& g, bool bias) {
  return {g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.OH, g.OW, g.groups, g.stride[0], g.stride[1], g.padding[0],
          g.padding[1], g.dilation[0], g.dilation[1], bias, omp_get_max_threads()};
}

Prepared prepare(const DnnlConv2d& g, bool bias) {
  const auto f32 = memory::data_type::f32;
  const memory::dims src{g.N, g.C, g.H, g.W}, dst{g.N, g.OC, g.OH, g.OW};
  const memory::dims wei = g.groups > 1 ? memory::dims{g.groups, g.OC / g.groups, g.C / g.groups, g.KH, g.KW}
                                        : memory::dims{g.OC, g.C, g.KH, g.KW};
  // oneDNN's right padding makes its output size formula give OH and OW exactly.
  auto right_pad = [&](int d, int64_t in, int64_t k, int64_t out) {
    return (out - 1) * g.stride[d] + g.dilation[d] * (k - 1) + 1 - in - g.padding[d];
  };
  const memory::dims strides{g.stride[0], g.stride[1]}, dilation{g.dilation[0] - 1, g.dilation[1] - 1};
  const memory::dims pad_l{g.padding[0], g.padding[1]}, pad_r{right_pad(0, g.H, g.KH, g.OH), right_pad(1, g.W, g.KW, g.OW)};
  // A 1x1 convolution (stride 1, no padding, one group) over nchw is a matrix product W[OC, C] x X[C, H*W]:
  // given kiln's plain layouts, oneDNN runs it as one GEMM with no reorder of the activations. Its blocked
  // layouts (Tag::any picks nChw16c on AVX-512) cost a reorder of the input and of the output around every
  // call, which for SqueezeNet's and MobileNet's 1x1 layers took longer than the product: plain was 1.5-2.6x
  // faster (47x47 and 23x23 maps, 16-128 channels; 56x56, 64 -> 256). Every other geometry keeps the blocked
  // layouts, which won for 3x3 (1.2x) and depthwise 7x7 (10x) convolutions (one thread, this 2-core VM).
  const bool pointwise = g.KH == 1 && g.KW == 1 && g.groups == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
                         g.padding[0] == 0 && g.padding[1] == 0;
  const Tag activations = pointwise ? Tag::nchw : Tag::any;
  const memory::desc src_any(src, f32, activations), wei_any(wei, f32, Tag::any), dst_any(dst, f32, activations);
  const memory::desc bias_md = bias ? memory::desc({g.OC}, f32, Tag::x) : memory::desc();
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                       src_any, wei_any, bias_md, dst_any, strides, dilation, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, cpu_engine());
  return {pd, dnnl::convolution_forward(pd), memory::desc(src, f32, Tag::nchw),
          memory::desc(wei, f32, g.groups > 1 ? Tag::goihw : Tag::oihw), memory::desc(dst, f32, Tag::nchw)};
}

const Prepared& prepared(const DnnlConv2d& g, bool bias) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = key_of(g, bias);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(std::move(key), prepare(g, bias)).first;
  return it->second;
}

// `user` as the primitive wants it: the user's memory itself, or a reordered copy.
memory as_wanted(const memory& user, const memory::desc& wanted, dnnl::stream& s) {
  if (user.get_desc() == wanted) return user;
  memory m(wanted, cpu_engine());
  dnnl::reorder(user, m).execute(s, const_cast<memory&>(user), m);
  return m;
}

}  // namespace

bool dnnl_conv2d_forward(const DnnlConv2d& g, const float* x, const float* w, const float* bias, float* out) {
  if (g.N <= 0 || g.C <= 0 || g.OC <= 0 || g.OH <= 0 || g.OW <= 0) return false;
  try {
    const Prepared& p = prepared(g, bias != nullptr);
    dnnl::stream s(cpu_engine());
    memory src_user(p.src_user, cpu_engine(), const_cast<float*>(x));
    memory wei_user(p.wei_user, cpu_engine(), const_cast<float*>(w));
    memory dst_user(p.dst_user, cpu_engine(), out);
    memory src = as_wanted(src_user, p.pd.src_desc(), s), wei = as_wanted(wei_user, p.pd.weights_desc(), s);
    const bool dst_direct = p.pd.dst_desc() == p.dst_user;
    memory dst = dst_direct ? dst_user : memory(p.pd.dst_desc(), cpu_engine());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(memory::desc({g.OC}, memory::data_type::f32, Tag::x), cpu_engine(),
                                                 const_cast<float*>(bias)));
    p.conv.execute(s, args);
    if (!dst_direct) dnnl::reorder(dst, dst_user).execute(s, dst, dst_user);
    s.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;  // a geometry oneDNN declines: conv2d's own kernel runs
  }
}

#else

bool dnnl_conv2d_forward(const DnnlConv2d&, const float*, const float*, const float*, float*) { return false; }

#endif

}  // namespace kiln
