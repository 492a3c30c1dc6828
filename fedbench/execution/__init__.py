"""Many runs: planning, claiming, training and recording a batch of runs, locally or on a cluster."""
