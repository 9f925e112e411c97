"""The restart/recovery drill (``stream-sink drill``), one module a job: the run that
kills and restarts drivers (:mod:`.run`), the driver process it starts (:mod:`.child`),
the drilled jobs and their catalogs (:mod:`.jobs`), the scenarios (:mod:`.scenarios`),
the mistakes an operator makes on purpose (:mod:`.mistakes`), the agreement of a
job's several tables (:mod:`.agreement`) and the verdicts (:mod:`.report`).
Importing the package loads none of them."""
