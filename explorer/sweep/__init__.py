"""The Sweep page: the grid of a sweep, a running sweep and its CSV, the naive implementation's time budget, recorded GPU sweeps and the sweep figures."""
