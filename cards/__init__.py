"""Adaptive Cards (v1.5, what Teams renders) and the user-facing strings in Japanese and English."""
