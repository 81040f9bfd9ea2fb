"""The committed board and the commands that keep it: sweeps (`sweep`), the regression gate (`regress`),
rescoring (`rescore`), publishing (`publish`), a new project or member (`scaffold`)."""
