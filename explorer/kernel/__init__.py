"""The Inside the kernel page: the float64 trace of the Triton kernel for one (sequence, head), the page's view of it and its figures."""
