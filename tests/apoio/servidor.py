"""Fixtures do Contextia local (preenchido pela issue 2)."""
