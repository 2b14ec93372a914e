"""The Sweep page: the grid of a sweep, a running sweep and its CSV, the naive implementation's time budget, a recorded GPU sweep beside this session's and the sweep figures."""
