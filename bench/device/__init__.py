"""The ablation suites on a lent GPU machine: the bundle (bundle.py), what comes back (pack.py); README.md."""
