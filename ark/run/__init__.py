"""Running a split: the resumable runner, its run directory and the one reader of it, a query's record,
shards, run settings, loggers, the summary files, and what runs cost as measured in their directories."""
