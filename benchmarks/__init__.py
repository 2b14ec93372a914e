"""GPU benchmarks of the decode kernels; run each from the repository root as
``python -m benchmarks.<name>`` (see benchmarks/README.md)."""
