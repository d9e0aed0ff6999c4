"""Training jobs: queued, supervised runs of `bertlab pretrain|finetune`, as the Train and Jobs pages,
the `bertlab jobs` CLI and the ablation suites use them.

- spec: what a job runs (`JobSpec`), checked the way its recipe will check it; commands, form
  fields, the paths a shared app may read. Torch-free.
- runs: jobs as read from their run folders (`Job`, `read_job`, who waits for whom).
- registry: `JobRegistry` (submit, queue, cancel, resume, delete) and the supervisor process
  (`python -m bertlab.jobs supervise RUN_DIR`).
- view: what the pages draw about jobs (tables, live numbers, curves, what a state means).
- cli: `bertlab jobs ...`.

bertlab.storage.runfolder owns the files; bertlab.jobs.estimates.estimate the cost before running. Nothing here
imports streamlit, and importing the package imports none of its modules.
"""
