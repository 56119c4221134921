#pragma once
// kiln: a lazy tensor engine. Tensors look eager; ops record a graph that is fused and run
// when a value is needed.
#include <kiln/autograd.h>
#include <kiln/compile.h>
#include <kiln/device.h>
#include <kiln/dlpack.h>
#include <kiln/dtype.h>
#include <kiln/engine.h>
#include <kiln/error.h>
#include <kiln/ops.h>
#include <kiln/shape.h>
#include <kiln/tensor.h>
#include <kiln/version.h>
