"""gad inside vLLM: a logits-processor plug-in with exact grammar masks (GCD) and ASAp reweighting.

* :mod:`gad.vllm.requests` — what a request asks for (``SamplingParams.extra_args["gad"]``), parsed and
  validated without vLLM installed;
* :mod:`gad.vllm.batch` — the engine-side state: compiled grammars shared across requests, one matcher
  per request, the batched mask / ``log Φ̂`` fill (torch, no vLLM import);
* :mod:`gad.vllm.plugin` — :class:`~gad.vllm.plugin.GadLogitsProcessor`, the subclass of vLLM's V1
  ``LogitsProcessor`` that vLLM loads through the ``vllm.logits_processors`` entry point ``gad``.

Only :mod:`gad.vllm.plugin` imports vLLM; importing this package does not.
"""

from __future__ import annotations
