"""The alias-fallback rules: what a model serves when some of its versions are refused or deleted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.server.aliases import Outcome, choose

LOADED, REFUSED, GONE = Outcome.LOADED, Outcome.REFUSED, Outcome.GONE


EXAMPLES = 50  # a small domain (a few names, versions and aliases): this many cover it, within the default set


class Store:
    """Outcomes by version, and the versions asked about, in order."""

    def __init__(self, outcomes: dict[int, Outcome]):
        self.outcomes = outcomes
        self.asked: list[int] = []

    def __call__(self, version: int) -> Outcome:
        self.asked.append(version)
        return self.outcomes[version]


def test_an_alias_moved_to_a_refused_version_stays_where_it_was_served():
    store = Store({1: LOADED, 2: REFUSED, 3: LOADED})
    choice = choose((1, 2, 3), {"production": 2}, {"production": 1}, store)
    assert choice.aliases == {"production": 1} and choice.held == {"production": 2}
    assert choice.loaded == (1, 3)  # the fallback and the newest


def test_with_nothing_served_before_an_alias_names_its_refused_version():
    choice = choose((1, 2), {"production": 2}, {}, Store({1: LOADED, 2: REFUSED}))
    assert choice.aliases == {"production": 2} and choice.held == {} and choice.loaded == (1,)


def test_the_newest_version_that_loads_is_held_and_older_ones_are_never_read():
    store = Store({1: LOADED, 2: LOADED, 3: REFUSED, 4: REFUSED})
    choice = choose((1, 2, 3, 4), {}, {}, store)
    assert choice.loaded == (2,) and store.asked == [4, 3, 2]


def test_a_version_deleted_before_its_load_is_left_out_with_its_aliases():
    choice = choose((1, 2), {"production": 2, "staging": 1}, {"production": 1}, Store({1: LOADED, 2: GONE}))
    assert choice.versions == (1,) and choice.aliases == {"staging": 1} and choice.loaded == (1,)


@st.composite
def models(draw: st.DrawFn):
    versions = sorted(draw(st.sets(st.integers(1, 6), min_size=1)))
    outcomes = {v: draw(st.sampled_from(list(Outcome))) for v in versions}
    names = st.sampled_from(["production", "staging", "canary"])
    aliases = draw(st.dictionaries(names, st.sampled_from(versions)))
    before = draw(st.dictionaries(names, st.integers(1, 7)))
    return tuple(versions), aliases, before, outcomes


@settings(max_examples=EXAMPLES)
@given(models())
def test_every_alias_answers_from_a_version_that_loads_or_names_why_it_cannot(model):
    versions, aliases, before, outcomes = model
    store = Store(outcomes)
    choice = choose(versions, aliases, before, store)
    assert len(store.asked) == len(set(store.asked))  # each version read at most once
    gone = {v for v in store.asked if outcomes[v] is GONE}  # found deleted when read; the rest are listed
    assert set(choice.versions) == set(versions) - gone
    assert set(choice.loaded) == {v for v in store.asked if outcomes[v] is LOADED}
    for alias, version in choice.aliases.items():
        if alias in choice.held:
            assert (version, choice.held[alias]) == (before[alias], aliases[alias])
            assert outcomes[version] is LOADED and outcomes[aliases[alias]] is REFUSED
        else:
            assert version == aliases[alias] and outcomes[version] is not GONE
            assert version in choice.loaded or outcomes[version] is REFUSED
    assert {a for a, v in aliases.items() if outcomes[v] is not GONE} == set(choice.aliases)
    for alias, version in aliases.items():  # held back exactly when the version served before can answer
        previous = before.get(alias)
        can_fall_back = previous in versions and previous != version and outcomes[previous] is LOADED
        assert (alias in choice.held) == (outcomes[version] is REFUSED and can_fall_back)
    loads = [v for v in versions if outcomes[v] is LOADED]
    if loads:
        assert max(loads) in choice.loaded
        newest_asked = [v for v in store.asked if v not in aliases.values() and v not in before.values()]
        assert all(v >= max(loads) for v in newest_asked)  # nothing older than the newest that loads
