"""Analysis without run directories: metrics as STaRK computes them, failure attribution from
trajectories, reachability and its bound from the question's words, paired comparisons of scores."""
