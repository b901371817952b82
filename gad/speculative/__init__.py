"""Grammar-faithful speculative decoding (BRIEF §4; Future Validity, arXiv 2605.07698).

Drafters propose tokens under the grammar mask; the target verifies them against the Φ-reweighted
law ``p̃ ∝ p · mask · Φ̂`` with the lossless rule (Leviathan et al. 2022, arXiv 2211.17192; Chen et al.
2023, arXiv 2302.01318) or a relaxed deterministic rule (arXiv 2606.30265); greedy tree decoding scores
a whole draft tree in one pass (SpecInfer tree attention).

Entry point: :func:`speculative_sample`; ``gad.sample(..., speculative=NAME)`` delegates to it.
"""

from gad.sampling.rng import NumpyRng, Rng
from gad.speculative.config import Speculation
from gad.speculative.decode import ChainDecoder, speculative_sample
from gad.speculative.drafters import (
    Drafter,
    ForcedDrafter,
    ForcedStringDrafter,
    LMDrafter,
    NgramDrafter,
    make_drafter,
    self_drafter,
)
from gad.speculative.verify import tilted, verify_chain

__all__ = [
    "Speculation",
    "ChainDecoder",
    "Drafter",
    "ForcedDrafter",
    "ForcedStringDrafter",
    "LMDrafter",
    "NgramDrafter",
    "NumpyRng",
    "Rng",
    "make_drafter",
    "self_drafter",
    "speculative_sample",
    "tilted",
    "verify_chain",
]
