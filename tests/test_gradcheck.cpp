// gradcheck tests: written by helper
