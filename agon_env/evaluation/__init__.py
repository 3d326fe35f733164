"""Evaluation: ``agon eval`` (methods, baselines, intervals, blind spots) and ``agon plot``.

==================  ==============================================================
module              concept
==================  ==============================================================
``stats``           pure statistics: Clopper–Pearson, pass@k, spreads, overlap
``selection``       the cascade direction, chosen on validation only
``splits``          disjoint test / validation problems from any registered task
``methods``         the method families (a table) and their expansion per policies
``cache``           samples cached by (model, prompt, seed); an agent wrapper
``evaluate``        the methods and the :class:`~agon_env.evaluation.evaluate.Evaluator`
``runs``            run folders (or the untrained base) -> agents
``report``          ``eval.json`` and the Table-1-style ``eval.md``
``plots``           the training figures of ``agon plot`` (and ``plot_all``)
``tradeoff``        accuracy vs. trace length per method (Figure 7a)
``metrics/``        Hugging Face ``evaluate`` modules loadable from a local path
``cli``             ``agon eval`` / ``agon plot`` parsers
==================  ==============================================================

See ``docs/evaluation.md``.
"""
