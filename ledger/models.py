"""Ledger tables arrive with the live service (occupancy intervals, hourly rollups)."""
