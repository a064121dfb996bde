"""Success labels: harness reports tied to their run, answer matching, and the verdict put on a Trajectory.

A run counts as successful only when a verdict says so; these modules decide which verdict applies.
"""
