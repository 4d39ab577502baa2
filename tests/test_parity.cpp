// parity tests: written by helper
