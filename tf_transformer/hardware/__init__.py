"""What the machine offers that decides how a run runs: the CPU's instruction sets (`cpu`)."""
