"""Tests that drive a real IPython kernel through jupyter_client."""
