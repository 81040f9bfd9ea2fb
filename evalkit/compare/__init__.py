"""Runs against runs: backends side by side (`sides`), two runs paired (`diff`), how many members a
difference needs (`power`), a judge against people (`judgeaudit`)."""
