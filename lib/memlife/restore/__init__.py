"""Restore audit: reader, restore counterfactual, decomposition and its statistics."""
