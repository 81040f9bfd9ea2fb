"""Presentation: a task's results as frames (`frames`), what notebooks show (`views`), notebook → HTML
(`render`, `pages`, `chrome`, `overview`), the runs and scoreboard pages (`runspage`, `boardpage`), a run as
one file (`bundle`). Nothing here computes a score."""
