"""Small stdlib programs gpuhost ships to targets and runs there (read as text, never imported)."""
