"""Accuracy with confidence intervals, dataset statistics, rank correlation and reports."""
