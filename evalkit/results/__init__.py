"""What a run leaves behind: the run folder, its files and their one reader and writer (`runfolder`),
per task × backend counts and means (`summary`), repeated samples (`samples`), the history of runs
(`history`), the committed scoreboard (`scoreboard`) and noise band (`band`)."""
