"""The paper's ablations (Devlin et al. 2019, Tables 5-8): run as suites of ordinary jobs, collected,
and read against the paper's numbers.

Modules, lowest first: paper (the paper's tables as printed), tables (`TableSpec`: what each table
runs), suites (a suite's jobs, launched and followed), results (tidy rows, the comparison with the
paper), view (the page's rows and figures, plotly), cli (`bertlab ablate`). Torch-free; never
streamlit.
"""
