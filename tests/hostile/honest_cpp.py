"""The honest neighbour of E11: a C++ build (load_inline) of problem.py,
judged from the build cache after every attack on it."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

torch::Tensor scale_shift(torch::Tensor x, double scale) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float *px = xc.data_ptr<float>();
    float *po = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; i++)
        po[i] = px[i] * (float)scale + 1.0f;
    return out;
}
"""

ext = load_inline(name="stark_hostile_honest", cpp_sources=source, functions=["scale_shift"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return ext.scale_shift(x.cpu(), self.scale).to(x.device)
