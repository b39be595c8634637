"""Fitted weights as named records: a TOML file beside the stage that uses them, one table per model,
each weight under the name of the feature it multiplies, with where and how it was fitted.

The code that builds a feature vector names its features (a tuple of names in vector order); `load`
returns the weights in that order and refuses a file whose names differ, so a feature added, removed
or reordered in code cannot silently meet a weight fitted for another.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


class WeightsMismatch(ValueError):
    """A weights table does not name exactly the features the code builds."""


@dataclass(frozen=True)
class FittedWeights:
    """One model's weights in the code's feature order, its scalar parameters (bias, anchors) and
    the record of how it was fitted."""

    name: str
    features: tuple[str, ...]
    weights: tuple[float, ...]
    params: dict[str, float] = field(default_factory=dict)
    fitted: str = ""

    def __getitem__(self, feature: str) -> float:
        return self.weights[self.features.index(feature)]


def load(path: Path, name: str, features: tuple[str, ...]) -> FittedWeights:
    """The table `name` of the TOML file `path`: its [name.weights] must name exactly `features`."""
    table = tomllib.loads(path.read_text("utf-8")).get(name)
    if not isinstance(table, dict) or not isinstance(table.get("weights"), dict):
        raise WeightsMismatch(f"{path.name}: no [{name}.weights] table")
    weights: dict[str, float] = table["weights"]
    missing = [f for f in features if f not in weights]
    unknown = [f for f in weights if f not in features]
    if missing or unknown:
        raise WeightsMismatch(f"{path.name} [{name}]: missing weights {missing}, unknown features {unknown}")
    params = {k: float(v) for k, v in table.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return FittedWeights(
        name=name,
        features=features,
        weights=tuple(float(weights[f]) for f in features),
        params=params,
        fitted=str(table.get("fitted", "")).strip(),
    )
