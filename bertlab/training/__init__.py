"""Training: the trainer and its runtime, optimisation, the pretraining recipe and its config, estimates of a run's cost, and the history of snapshots."""
