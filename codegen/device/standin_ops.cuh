#pragma once
// The stand-in interpreter's values and instructions (codegen/device/standin.cu includes this
// after the device helpers): each instruction is the expression codegen/cuda_codegen_ops.cpp
// renders for it, so that it rounds alike; loads and stores are load_cvt and store_cvt.
namespace kiln::detail::standin {

union Value {
  float f;
  double d;
  int i;
  long long l;
};

enum Class { c_float, c_double, c_int, c_long };

KD Class class_of(uint8_t t) {
  switch (t) {
  case t_f64:
    return c_double;
  case t_i64:
    return c_long;
  case t_i32:
  case t_bool:
    return c_int;
  default:
    return c_float;
  }
}

KD bool is_half(uint8_t t) {
  return t == t_f16 || t == t_bf16;
}

// A stored element -> its compute type (load_cvt).
KD Value load(const void* p, long long at, uint8_t t) {
  Value v;
  switch (t) {
  case t_f32:
    v.f = static_cast<const float*>(p)[at];
    break;
  case t_f64:
    v.d = static_cast<const double*>(p)[at];
    break;
  case t_f16:
    v.f = __half2float(static_cast<const __half*>(p)[at]);
    break;
  case t_bf16:
    v.f = __bfloat162float(static_cast<const __nv_bfloat16*>(p)[at]);
    break;
  case t_i32:
    v.i = static_cast<const int*>(p)[at];
    break;
  case t_i64:
    v.l = static_cast<const long long*>(p)[at];
    break;
  default:
    v.i = (int)(static_cast<const unsigned char*>(p)[at] != 0);
    break;
  }
  return v;
}

// A compute-type value x -> a stored element of type `to` (store_cvt: f16/bf16 through float,
// bool as x != 0, the others a C conversion).
template <class T> KD void put(void* p, long long at, uint8_t to, T x) {
  switch (to) {
  case t_f16:
    static_cast<__half*>(p)[at] = k_to_f16((float)x);
    return;
  case t_bf16:
    static_cast<__nv_bfloat16*>(p)[at] = k_to_bf16((float)x);
    return;
  case t_bool:
    static_cast<unsigned char*>(p)[at] = (unsigned char)(x != 0);
    return;
  case t_f32:
    static_cast<float*>(p)[at] = (float)x;
    return;
  case t_f64:
    static_cast<double*>(p)[at] = (double)x;
    return;
  case t_i32:
    static_cast<int*>(p)[at] = (int)x;
    return;
  default:
    static_cast<long long*>(p)[at] = (long long)x;
    return;
  }
}

// A value of type `from` -> a stored element of type `to`.
KD void store(void* p, long long at, uint8_t to, uint8_t from, Value v) {
  switch (class_of(from)) {
  case c_float:
    return put(p, at, to, v.f);
  case c_double:
    return put(p, at, to, v.d);
  case c_int:
    return put(p, at, to, v.i);
  default:
    return put(p, at, to, v.l);
  }
}

// ---- the instructions, as codegen/cuda_codegen_ops.cpp renders them --------------------------

KD float unary_f(uint8_t op, bool half, float a) {
  switch (op) {
  case op_copy:
    return a;
  case op_neg:
    return -a;
  case op_abs:
    return fabsf(a);
  case op_relu:
    return a < 0 ? (float)0 : a;
  case op_exp:
    return half ? k_exp_h(a) : expf(a);
  case op_log:
    return logf(a);
  case op_log1p:
    return log1pf(a);
  case op_sqrt:
    return sqrtf(a);
  case op_rsqrt:
    return 1.0f / sqrtf(a);
  case op_sin:
    return sinf(a);
  case op_cos:
    return cosf(a);
  case op_tanh:
    return tanhf(a);
  case op_sigmoid:
    return half ? k_div_h(1.0f, 1.0f + k_exp_h(-a)) : 1.0f / (1.0f + expf(-a));
  default: // gelu
    return 0.5f * a * (1.0f + erff(a * 0.70710678118654752440f));
  }
}

KD double unary_d(uint8_t op, double a) {
  switch (op) {
  case op_copy:
    return a;
  case op_neg:
    return -a;
  case op_abs:
    return fabs(a);
  case op_relu:
    return a < 0 ? (double)0 : a;
  case op_exp:
    return exp(a);
  case op_log:
    return log(a);
  case op_log1p:
    return log1p(a);
  case op_sqrt:
    return sqrt(a);
  case op_rsqrt:
    return 1.0 / sqrt(a);
  case op_sin:
    return sin(a);
  case op_cos:
    return cos(a);
  case op_tanh:
    return tanh(a);
  case op_sigmoid:
    return 1.0 / (1.0 + exp(-a));
  default: // gelu
    return 0.5 * a * (1.0 + erf(a * 0.70710678118654752440));
  }
}

template <class I> KD I unary_i(uint8_t op, I a) {
  switch (op) {
  case op_neg:
    return k_sub((I)0, a);
  case op_abs:
    return a < 0 ? k_sub((I)0, a) : a;
  case op_relu:
    return a < 0 ? (I)0 : a;
  default: // copy
    return a;
  }
}

KD float binary_f(uint8_t op, bool half, float a, float b) {
  switch (op) {
  case op_add:
    return a + b;
  case op_sub:
    return a - b;
  case op_mul:
    return a * b;
  case op_div:
    return half ? k_div_h(a, b) : a / b;
  case op_pow:
    return powf(a, b);
  case op_maximum:
    return k_max(a, b);
  case op_minimum:
    return k_min(a, b);
  case op_sigmoid_grad:
    return a * b * (1.0f - b);
  default: // tanh_grad
    return a * (1.0f - b * b);
  }
}

KD double binary_d(uint8_t op, double a, double b) {
  switch (op) {
  case op_add:
    return a + b;
  case op_sub:
    return a - b;
  case op_mul:
    return a * b;
  case op_div:
    return a / b;
  case op_pow:
    return pow(a, b);
  case op_maximum:
    return k_max(a, b);
  case op_minimum:
    return k_min(a, b);
  case op_sigmoid_grad:
    return a * b * (1.0 - b);
  default: // tanh_grad
    return a * (1.0 - b * b);
  }
}

template <class I> KD I binary_i(uint8_t op, I a, I b) {
  switch (op) {
  case op_add:
    return k_add(a, b);
  case op_sub:
    return k_sub(a, b);
  case op_mul:
    return k_mul(a, b);
  case op_div:
    return b == 0 ? 0 : a / b;
  case op_pow:
    return k_ipow(a, b);
  case op_maximum:
    return k_max(a, b);
  default: // minimum
    return k_min(a, b);
  }
}

template <class T> KD int compare(uint8_t op, T a, T b) {
  switch (op) {
  case op_eq:
    return (int)(a == b);
  case op_ne:
    return (int)(a != b);
  case op_lt:
    return (int)(a < b);
  case op_le:
    return (int)(a <= b);
  case op_gt:
    return (int)(a > b);
  default:
    return (int)(a >= b);
  }
}

KD int compare_values(uint8_t op, uint8_t from, Value a, Value b) {
  switch (class_of(from)) {
  case c_float:
    return compare(op, a.f, b.f);
  case c_double:
    return compare(op, a.d, b.d);
  case c_int:
    return compare(op, a.i, b.i);
  default:
    return compare(op, a.l, b.l);
  }
}

// A value of class `from` as a double, and whether it is nonzero (casts, logical ops).
KD double as_double(uint8_t from, Value a) {
  switch (class_of(from)) {
  case c_float:
    return (double)a.f;
  case c_double:
    return a.d;
  case c_int:
    return (double)a.i;
  default:
    return (double)a.l;
  }
}
KD bool nonzero(uint8_t from, Value a) {
  switch (class_of(from)) {
  case c_float:
    return a.f != 0;
  case c_double:
    return a.d != 0;
  case c_int:
    return a.i != 0;
  default:
    return a.l != 0;
  }
}

// cast: to bool (int)(a != 0); floating -> integer saturating through double; otherwise the
// C conversion to the compute type.
KD Value cast(uint8_t to, uint8_t from, Value a) {
  Value r;
  const Class ct = class_of(to), cf = class_of(from);
  if (to == t_bool) {
    r.i = (int)nonzero(from, a);
  } else if ((cf == c_float || cf == c_double) && (ct == c_int || ct == c_long)) {
    const double d = cf == c_float ? (double)a.f : a.d;
    if (ct == c_long)
      r.l = k_sat_i64(d);
    else
      r.i = k_sat_i32(d);
  } else if (ct == c_float) {
    r.f = cf == c_double ? (float)a.d : cf == c_int ? (float)a.i : cf == c_long ? (float)a.l : a.f;
  } else if (ct == c_double) {
    r.d = as_double(from, a);
  } else if (ct == c_int) {
    r.i = cf == c_long ? (int)a.l : a.i;
  } else {
    r.l = cf == c_long ? a.l : (long long)a.i;
  }
  return r;
}

// A double (iota's a + i * b) in the compute type of t (double_to).
KD Value from_double(uint8_t t, double d) {
  Value r;
  switch (class_of(t)) {
  case c_float:
    r.f = (float)d;
    break;
  case c_double:
    r.d = d;
    break;
  case c_int:
    r.i = t == t_bool ? (int)(d != 0) : k_sat_i32(d);
    break;
  default:
    r.l = k_sat_i64(d);
    break;
  }
  return r;
}

// A reduction's double total as its row value (Emitter::row_value): stored in dtype t
// (from_double) and read back (load_cvt).
KD Value row_value_of_double(uint8_t t, double x) {
  Value v;
  switch (t) {
  case t_f32:
    v.f = (float)x;
    break;
  case t_f64:
    v.d = x;
    break;
  case t_f16:
    v.f = __half2float(k_to_f16((float)x));
    break;
  case t_bf16:
    v.f = __bfloat162float(k_to_bf16((float)x));
    break;
  case t_i32:
    v.i = k_sat_i32(x);
    break;
  case t_i64:
    v.l = k_sat_i64(x);
    break;
  default:
    v.i = (int)(x != 0);
    break;
  }
  return v;
}

KD int uniform_bits(uint8_t t) {
  return t == t_f64 ? 53 : t == t_f16 ? 11 : t == t_bf16 ? 8 : 24;
}

} // namespace kiln::detail::standin
