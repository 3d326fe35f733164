"""Evaluation: ``agon eval`` (methods, baselines, intervals, blind spots) and ``agon plot``.

==================  ==============================================================
module              concept
==================  ==============================================================
``selection``       the cascade direction, chosen on validation only
``splits``          disjoint test / validation problems from any registered task
``methods``         the method families (a table), :class:`Policies` and their expansion
``cache``           samples cached by (model, prompt, seed); an agent wrapper
``evaluate``        the methods and the :class:`~agon_env.evaluation.evaluate.Evaluator`
``runs``            run folders (or the untrained base) -> agents
``report``          ``eval.json`` and the Table-1-style ``eval.md``
``plots``           the training figures of ``agon plot`` (and ``plot_all``)
``tradeoff``        accuracy vs. trace length per method (Figure 7a)
``heldout``         ``agon train``'s end-of-run held-out check (``TrainedRunCheck``)
``probe``           ``agon probe``: solve vs. verify rates before training
``metrics/``        Hugging Face ``evaluate`` modules loadable from a local path
``cli``             ``agon eval`` / ``agon plot`` parsers
==================  ==============================================================

The statistics are :mod:`agon_env.stats`, on the floor both wings share, and every figure's
matplotlib set-up is :mod:`agon_env.figures`. See ``docs/evaluation.md``.
"""
