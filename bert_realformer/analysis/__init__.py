"""Analyses of trained models (the RealFormer paper's attention statistics)."""
