"""The paper's ablations (Devlin et al. 2019, Tables 5-8): run as suites of ordinary jobs, collected,
and read against the paper's numbers.

Modules, lowest first: paper (the paper's tables as printed), tables (`TableSpec`: what each table
runs), planning (`SuiteSpec` and each job's arguments), estimate (a suite's time), reuse (a pretraining
job serving another suite), suites (a suite's jobs, launched and followed), results (tidy rows, the
comparison with the paper), merge (a re-run column folded into a committed set), adopt
(plain runs made a suite, checked against its plan), view (the page's rows and figures, plotly), cli (`bertlab ablate`).
Torch-free but for view (plotly figures reach bertlab.inference); never streamlit.
"""
