"""``agon study``: an ablation across arms and seeds as one resumable command.

A study is a YAML file (:class:`~agon_env.study.plan.StudyPlan`): a training base, arms (an
algorithm plugin and ``TrainConfig`` overrides each), seeds, an evaluation, an optional
calibration, and the comparisons with their decision rule, fixed before any result exists.

============================  ==============================================================
module                        concept
============================  ==============================================================
:mod:`.plan`                  the plan: dataclasses, YAML load, checks, content hash
:mod:`.registration`          freezing a plan before its results (hash, prompts, version)
:mod:`.units`                 one unit (calibration level, base, arm × seed): its commands,
                              its lock, the child process that trains and evaluates it
:mod:`.launchers`             running units side by side: local workers or Ray tasks
:mod:`.analysis`              the summary from the outcome lists alone; verdicts
:mod:`.results`               reading finished units into the results document
:mod:`.tables`                the Markdown tables, the figure, generated docs blocks
:mod:`.health`                the report's notes: arms that never updated, samples cut at the
                              token cap, a base that solves nothing
:mod:`.verify`                recomputing a results file's summary
:mod:`.commands.study`        ``agon study SUB``: the subcommand table (``agon study --help``)
============================  ==============================================================

Units train and evaluate in child processes; importing these modules loads neither torch nor
Ray (Ray only when ``--launcher ray`` runs).
"""
