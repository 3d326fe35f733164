"""The trained pair at work: a cascade you can call, serve and export.

==================  ==========================================================================
module              what it holds
==================  ==========================================================================
``cascade``         :class:`Cascade`: a run's pair as draft -> challenge, through the run's env
``commands``        ``agon answer`` (a question or a JSONL file), ``agon serve``, ``agon export``
``server``          ``agon serve``: an OpenAI-compatible ASGI app, requests micro-batched
``export``          ``agon export``: the adapters for plain peft / vLLM, with a model card
==================  ==========================================================================

Torch is imported only when a cascade is built.
"""

from agon_env.serving.cascade import Cascade, CascadeAnswer, CascadeError, QuestionError, Stage

__all__ = ["Cascade", "CascadeAnswer", "CascadeError", "QuestionError", "Stage"]
