import torch
import torch.nn as nn

# R7 with the library's matmul, issue 18's fourth cheat: the product runs
# on a side stream of the candidate's own and forward returns without
# making the caller's stream wait.  KernelBench's harness, timing events on
# the current stream, reported it 38x faster; the evaluator's device-wide
# synchronize and guard event count the side stream's work, so it must not
# come out faster than the reference's own cuBLAS call (the same kernel).
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, A, B):
        if self.side is None:
            self.side = torch.cuda.Stream(device=A.device)
        self.side.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(self.side):
            C = torch.matmul(A, B)
        return C                # the caller's stream does not wait
