"""Prediction and export: the predictor, its engines and their CPU kernels, SavedModel export."""
