"""Quality: per-item gates, model-free baselines, gold-position balance and the audit of benchmark rows.

Each gate and baseline is a pure function over schema objects; the flows count and report them.
"""
