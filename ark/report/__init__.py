"""Reports from run directories: Table 1 beside the paper, the figures and Table 2, the comparison of
two runs, the HTML trajectory viewer."""
