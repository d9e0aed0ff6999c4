"""Sparse attention patterns: which keys each query reads (plan) and attention computed over only those (kernel)."""
