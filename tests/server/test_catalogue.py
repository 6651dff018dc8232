"""The catalogue diff says every change between two catalogues, and nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.server.catalogue import (
    AliasMoved,
    AliasRemoved,
    AliasSet,
    Listing,
    VersionAdded,
    VersionDropped,
    apply,
    changed,
    diff,
    updated,
)

EXAMPLES = 30  # a small domain (a few names, versions and aliases): this many cover it, within the default set


@st.composite
def listings(draw: st.DrawFn) -> Listing:
    versions = draw(st.sets(st.integers(1, 8), min_size=1))
    aliases = draw(
        st.dictionaries(st.sampled_from(["production", "staging", "canary"]), st.sampled_from(sorted(versions)))
    )
    return Listing(tuple(sorted(versions)), aliases)


catalogues = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), listings())


@settings(max_examples=EXAMPLES)
@given(catalogues, catalogues)
def test_the_diff_of_two_catalogues_applied_to_the_first_gives_the_second(before, after):
    assert apply(before, diff(before, after)) == after


@settings(max_examples=EXAMPLES)
@given(catalogues)
def test_a_catalogue_has_no_change_from_itself(catalogue):
    assert diff(catalogue, catalogue) == [] and changed(catalogue, catalogue) == set()


@settings(max_examples=EXAMPLES)
@given(catalogues, catalogues)
def test_the_models_changed_are_those_the_diff_names(before, after):
    assert changed(before, after) == {c.name for c in diff(before, after)}


def test_each_kind_of_change_is_named_in_order_and_said_as_the_log_says_it():
    before = {"m": Listing((1, 2), {"production": 1, "staging": 2, "canary": 2}), "gone": Listing((4,), {})}
    after = {"m": Listing((2, 3), {"production": 3, "staging": 2, "shadow": 2}), "new": Listing((1,), {})}
    changes = diff(before, after)
    assert changes == [
        VersionDropped("gone", 4),
        VersionDropped("m", 1),
        VersionAdded("m", 3),
        AliasRemoved("m", "canary", 2),
        AliasMoved("m", "production", 1, 3),
        AliasSet("m", "shadow", 2),
        VersionAdded("new", 1),
    ]
    assert [str(c) for c in changes[:6]] == [
        "dropped gone version 4: deleted from the store",
        "dropped m version 1: deleted from the store",
        "added m version 3",
        "alias canary of m removed (it named version 2)",
        "alias production of m moved from version 1 to version 3",
        "alias shadow of m set to version 2",
    ]


@settings(max_examples=EXAMPLES)
@given(catalogues, st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.none() | listings()))
def test_an_incremental_read_replaces_the_models_it_names_and_removes_the_deleted(catalogue, read):
    result = updated(catalogue, read)
    for name in catalogue.keys() | read.keys():
        if name in read:
            assert result.get(name) == read[name]
        else:
            assert result[name] == catalogue[name]
