"""What a job will cost before it runs: parameters and memory (`memory`), seconds a step from earlier
runs, a FLOP table or a step timed here (`step_time`, `timed_step`), the tokens its steps really hold
(`task_tokens`), put together as an `Estimate` (`estimate`) for a queued job's spec (`spec`)."""
