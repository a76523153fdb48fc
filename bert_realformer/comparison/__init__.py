"""Comparing variants over seeds, as `run_study.py` does: the plan of runs (`plan`), running them
with re-use (`execution`), the RealFormer paper's attention statistics (`attention`), baselines,
statistics over seeds and the report."""
