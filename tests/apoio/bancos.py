"""Fixtures dos bancos de origem (preenchido pela issue 3)."""
