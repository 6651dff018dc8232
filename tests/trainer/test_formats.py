"""BIF, XMLBIF and DOT: hand-made files, malformed files, round trips of random models,
and a network written by another tool (pgmpy) whose posteriors we must reproduce."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, FEATURE, NUMERIC, Model, Network, Node, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.formats import format_of, read_model, write_model
from tests.model_factory import random_model
from tests.tools import require_tool

FIXTURES = Path(__file__).parent.parent / "fixtures"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def all_codes(model: Model, rng: np.random.Generator, rows: int = 200) -> np.ndarray:
    """Random rows with about a third of the values missing."""
    cards = np.array([v.cardinality for v in model.features])
    codes = (rng.random((rows, len(cards))) * cards).astype(np.intp)
    codes[rng.random(codes.shape) < 0.33] = -1
    return codes


def assert_same_model(got: Model, expected: Model) -> None:
    assert got.variables == expected.variables
    assert len(got.networks) == len(expected.networks) == 1
    got_nodes, expected_nodes = got.networks[0].nodes, expected.networks[0].nodes
    assert [(n.name, n.parents) for n in got_nodes] == [(n.name, n.parents) for n in expected_nodes]
    for g, e in zip(got_nodes, expected_nodes):
        assert g.cpt.dtype == np.float64 and np.array_equal(g.cpt, e.cpt), g.name


# ---------------------------------------------------------------- hand-made BIF

SPRINKLER_BIF = """\
// a comment line
network "sprinkler net" {
  property "author = nobody" ;
}
variable Cloudy { type discrete [ 2 ] { "no", "yes" }; }
variable Sprinkler {
  type discrete [2] { off on };   /* blanks for separators */
  property position = (1, 2) ;
}
variable "Wet Grass" { type discrete [ 3 ] { dry, damp, "soaked, really" }; }
probability ( Cloudy ) { table 0.5, 0.5; }
probability ( Sprinkler | Cloudy ) {
  (no) 0.5, 0.5;
  default 0.9 0.1;
}
probability ( "Wet Grass" | Cloudy, Sprinkler ) {
  table 0.1, 0.2, 0.3, 0.4,
        0.3, 0.3, 0.3, 0.3,
        0.6, 0.5, 0.4, 0.3;
  ( yes, on ) 0.0, 0.0, 1.0;
}
"""


def test_bif_table_rows_default_quotes_and_comments(tmp_path):
    model = read_model(write(tmp_path, "sprinkler.bif", SPRINKLER_BIF), "bif", "Wet Grass")
    assert [(v.name, v.role, v.states) for v in model.variables] == [
        ("Cloudy", FEATURE, ("no", "yes")),
        ("Sprinkler", FEATURE, ("off", "on")),
        ("Wet Grass", CLASS, ("dry", "damp", "soaked, really")),
    ]
    assert model.algorithm == "imported-bif"
    assert model.metadata == {"source": "sprinkler.bif", "network": "sprinkler net", "format": "bif"}
    net = model.networks[0]
    assert net.node("Sprinkler").cpt.tolist() == [[0.5, 0.9], [0.5, 0.1]]  # row for no, default for yes
    wet = net.node("Wet Grass")
    assert wet.parents == ("Cloudy", "Sprinkler")
    # the table is row-major over (Wet Grass, Cloudy, Sprinkler): the child varies slowest
    assert wet.cpt[:, 0, 0].tolist() == [0.1, 0.3, 0.6]
    assert wet.cpt[:, 0, 1].tolist() == [0.2, 0.3, 0.5]
    assert wet.cpt[:, 1, 0].tolist() == [0.3, 0.3, 0.4]
    assert wet.cpt[:, 1, 1].tolist() == [0.0, 0.0, 1.0]  # the row overrides the table


SPRINKLER_XMLBIF = """\
<?xml version="1.0"?>
<!-- DTD for the XMLBIF 0.3 format, as Weka writes it -->
<!DOCTYPE BIF [
  <!ELEMENT BIF ( NETWORK )*>
  <!ATTLIST BIF VERSION CDATA #REQUIRED>
  <!ELEMENT NETWORK ( NAME, ( PROPERTY | VARIABLE | DEFINITION )* )>
]>
<BIF VERSION="0.3">
<NETWORK>
<NAME>sprinkler</NAME>
<VARIABLE TYPE="nature">
  <NAME>Cloudy</NAME><OUTCOME>no</OUTCOME><OUTCOME>yes</OUTCOME>
  <PROPERTY>position = (10,20)</PROPERTY>
</VARIABLE>
<VARIABLE TYPE="nature">
  <NAME>Sprinkler</NAME><OUTCOME>off</OUTCOME><OUTCOME>on</OUTCOME>
</VARIABLE>
<VARIABLE TYPE="nature">
  <NAME>Wet &amp; Grass</NAME><OUTCOME>dry</OUTCOME><OUTCOME>damp</OUTCOME><OUTCOME>soaked</OUTCOME>
</VARIABLE>
<DEFINITION><FOR>Cloudy</FOR><TABLE>0.5 0.5</TABLE></DEFINITION>
<DEFINITION><FOR>Sprinkler</FOR><GIVEN>Cloudy</GIVEN><TABLE>0.5 0.5 0.9 0.1 </TABLE></DEFINITION>
<DEFINITION>
  <FOR>Wet &amp; Grass</FOR><GIVEN>Cloudy</GIVEN><GIVEN>Sprinkler</GIVEN>
  <TABLE>
    0.1 0.3 0.6
    0.2 0.3 0.5
    0.3 0.3 0.4
    0.0 0.0 1.0
  </TABLE>
</DEFINITION>
</NETWORK>
</BIF>
"""


def test_xmlbif_table_order_and_a_weka_doctype(tmp_path):
    model = read_model(write(tmp_path, "sprinkler.xml", SPRINKLER_XMLBIF), "xmlbif", "Wet & Grass")
    assert model.class_variable.name == "Wet & Grass" and model.algorithm == "imported-xmlbif"
    assert model.metadata == {"source": "sprinkler.xml", "network": "sprinkler", "format": "xmlbif"}
    assert model.networks[0].node("Sprinkler").cpt.tolist() == [[0.5, 0.9], [0.5, 0.1]]
    from_bif = read_model(write(tmp_path, "sprinkler.bif", SPRINKLER_BIF), "bif", "Wet Grass")
    # the same numbers as the BIF file above: the TABLE is row-major over (GIVEN…, FOR)
    assert np.array_equal(model.networks[0].node("Wet & Grass").cpt, from_bif.networks[0].node("Wet Grass").cpt)


# ---------------------------------------------------------------- malformed files

BIF_HEAD = (
    "network n { }\nvariable A { type discrete [ 2 ] { a0, a1 }; }\nvariable C { type discrete [ 2 ] { c0, c1 }; }\n"
)
BIF_A = "probability ( A ) { table 0.4, 0.6; }\n"


@pytest.mark.parametrize(
    "body, message",
    [
        (BIF_A + "probability ( C | B ) { table 0.5, 0.5; }\n", r"line 5: variable 'C': unknown parent 'B'"),
        (
            BIF_A + "probability ( C | A ) { table 0.1, 0.9, 0.5; }\n",
            r"line 5: variable 'C': the table has 3 probabilities, expected 4 \(2 states × 2 parent configurations\)",
        ),
        (
            BIF_A + "probability ( C | A ) {\n (a0) 0.1, 0.8, 0.1;\n (a1) 0.5, 0.5; }\n",
            r"line 6: variable 'C': 3 probabilities where 'C' has 2 states",
        ),
        (
            BIF_A + "probability ( C | A ) { table 0.1, 0.9, 0.x, 0.5; }\n",
            r"line 5: variable 'C': '0.x' is not a probability",
        ),
        (
            BIF_A + "probability ( C | A ) { table 0.1, 0.9, nan, 0.5; }\n",
            r"line 5: variable 'C': 'nan' is not a probability",
        ),
        (
            BIF_A + "probability ( C | A ) { table 0.1, 0.9,\n -0.5, 1.5; }\n",
            r"line 6: variable 'C': negative probability -0.5",
        ),
        (
            "variable A { type discrete [ 2 ] { x, y }; }\n" + BIF_A + "probability ( C ) { table 0.5, 0.5; }\n",
            r"line 4: variable 'A': is declared twice \(first on line 2\)",
        ),
        (BIF_A, r"line 3: variable 'C': has no probability block"),
        (
            BIF_A + "probability ( C | A ) { table 0.1, 0.9, 0.5, 0.5;\n",
            r"line 6: .*the probability block opened on line 5 is not closed",
        ),
        (
            "probability ( A | C ) { table 0.5, 0.5, 0.5, 0.5; }\nprobability ( C | A ) { table 0.5, 0.5, 0.5, 0.5; }\n",
            r"the arcs do not form a DAG: the network has a cycle",
        ),
        (
            BIF_A + "probability ( C | A ) { (a0) 0.5, 0.5; (a2) 0.5, 0.5; }\n",
            r"line 5: variable 'C': parent 'A' has no state 'a2'; its states are a0, a1",
        ),
        (
            BIF_A + "probability ( C | A ) { (a0) 0.5, 0.5; }\n",
            r"line 5: variable 'C': no probabilities for the configuration \(A=a1\)",
        ),
        (
            BIF_A + "probability ( C | A ) { (a0) 0.5, 0.5; (a1) 0.2, 0.2; }\n",
            r"line 5: variable 'C': the probabilities for \(A=a1\) sum to 0.4, not 1",
        ),
        (
            BIF_A + "probability ( C | A ) { (a0) 0.5, 0.5; (a0) 0.5, 0.5; }\n",
            r"line 5: variable 'C': the configuration \(A=a0\) is given twice \(first on line 5\)",
        ),
        (
            BIF_A + "probability ( C ) { table 0.5, 0.5; }\nprobability ( C ) { table 0.5, 0.5; }\n",
            r"line 6: variable 'C': has a second probability block",
        ),
        (
            BIF_A + "probability ( D ) { table 0.5, 0.5; }\n",
            r"line 5: variable 'D': has a probability block but is not declared",
        ),
        (
            "variable D { type discrete [ 3 ] { a, b }; }\n" + BIF_A,
            r"line 4: variable 'D': declares 3 states but lists 2",
        ),
        ("variable D { type continuous; }\n", r"line 4: variable 'D': only discrete variables can be read"),
        ("/* never closed\n" + BIF_A, r"line 4: a /\* comment is never closed"),
        (BIF_A + "probabilty ( C ) { table 0.5, 0.5; }\n", r"line 5: expected 'network', 'variable' or 'probability'"),
    ],
)
def test_malformed_bif(tmp_path, body, message):
    path = write(tmp_path, "bad.bif", BIF_HEAD + body)
    with pytest.raises(InvalidInput, match="^" + re.escape(f"{path}: ") + message):
        read_model(path, "bif", "C")


XML_A = '<VARIABLE TYPE="nature"><NAME>A</NAME><OUTCOME>a0</OUTCOME><OUTCOME>a1</OUTCOME></VARIABLE>\n'
XML_C = '<VARIABLE TYPE="nature"><NAME>C</NAME><OUTCOME>c0</OUTCOME><OUTCOME>c1</OUTCOME></VARIABLE>\n'
XML_DEF_A = "<DEFINITION><FOR>A</FOR><TABLE>0.4 0.6</TABLE></DEFINITION>\n"


def xmlbif(body: str, head: str = "") -> str:
    return f'<?xml version="1.0"?>\n{head}<BIF VERSION="0.3"><NETWORK><NAME>n</NAME>\n{body}</NETWORK></BIF>\n'


@pytest.mark.parametrize(
    "text, message",
    [
        (
            xmlbif(
                XML_A + XML_C + XML_DEF_A + "<DEFINITION><FOR>C</FOR><GIVEN>B</GIVEN><TABLE>1 0</TABLE></DEFINITION>\n"
            ),
            r"line 6: variable 'C': unknown parent 'B'",
        ),
        (
            xmlbif(
                XML_A
                + XML_C
                + XML_DEF_A
                + "<DEFINITION><FOR>C</FOR><GIVEN>A</GIVEN>\n<TABLE>1 0 1</TABLE></DEFINITION>\n"
            ),
            r"line 7: variable 'C': the table has 3 probabilities, expected 4",
        ),
        (
            xmlbif(XML_A + XML_C + XML_DEF_A + "<DEFINITION><FOR>C</FOR><TABLE>0.5 NaN</TABLE></DEFINITION>\n"),
            r"line 6: variable 'C': 'NaN' is not a probability",
        ),
        (
            xmlbif(XML_A + XML_C + XML_DEF_A + "<DEFINITION><FOR>C</FOR><TABLE>1.5 -0.5</TABLE></DEFINITION>\n"),
            r"line 6: variable 'C': negative probability -0.5",
        ),
        (xmlbif(XML_A + XML_C + XML_A + XML_DEF_A), r"line 5: variable 'A': is declared twice \(first on line 3\)"),
        (xmlbif(XML_A + XML_C + XML_DEF_A), r"line 4: variable 'C': has no probability block"),
        (
            xmlbif(
                XML_A + XML_C + "<DEFINITION><FOR>A</FOR><GIVEN>C</GIVEN><TABLE>1 0 1 0</TABLE></DEFINITION>\n"
                "<DEFINITION><FOR>C</FOR><GIVEN>A</GIVEN><TABLE>1 0 1 0</TABLE></DEFINITION>\n"
            ),
            r"the arcs do not form a DAG",
        ),
        (
            xmlbif(XML_A + XML_C + XML_DEF_A + "<DEFINITION><FOR>C</FOR><TABLE>0.2 0.2</TABLE></DEFINITION>\n"),
            r"line 6: variable 'C': the probabilities for \(\) sum to 0.4, not 1",
        ),
        (
            xmlbif(XML_A + XML_C + XML_DEF_A + "<DEFINITION><FOR>C</FOR><TABLE>0.5 0.5</TABLE>\n"),
            r"line 7: not well-formed XML: mismatched tag",
        ),
        (
            xmlbif(XML_A, head='<!DOCTYPE BIF [ <!ENTITY boom "boom"> ]>\n'),
            r"line 2: the DOCTYPE declares the entity 'boom'",
        ),
        (
            xmlbif(XML_A, head='<!DOCTYPE BIF [ <!ENTITY ext SYSTEM "file:///etc/passwd"> ]>\n'),
            r"line 2: the DOCTYPE declares the entity 'ext'; files that declare entities are refused",
        ),
        (xmlbif(XML_A.replace("nature", "decision") + XML_DEF_A), r"line 3: variable 'A': only chance variables"),
        (
            xmlbif(XML_A + XML_C + XML_DEF_A + "<DEFINITION><FOR>C</FOR></DEFINITION>\n"),
            r"line 6: variable 'C': needs one <TABLE>",
        ),
    ],
)
def test_malformed_xmlbif(tmp_path, text, message):
    path = write(tmp_path, "bad.xml", text)
    with pytest.raises(InvalidInput, match="^" + re.escape(f"{path}: ") + message):
        read_model(path, "xmlbif", "C")


def test_the_class_must_be_a_variable(tmp_path):
    path = write(tmp_path, "n.bif", BIF_HEAD + BIF_A + "probability ( C ) { table 0.5, 0.5; }\n")
    prefix = "^" + re.escape(f"{path}: ")
    with pytest.raises(
        InvalidInput, match=prefix + r"there is no variable 'X' to be the class; the variables are: A, C$"
    ):
        read_model(path, "bif", "X")
    with pytest.raises(InvalidInput, match=prefix + r"name the class variable with --class; the variables are: A, C$"):
        read_model(path, "bif", None)


@pytest.mark.parametrize("off, renormalised", [(4e-7, False), (4e-4, True)])
def test_rounded_columns_are_renormalised_and_noted(tmp_path, off, renormalised):
    path = write(
        tmp_path, "r.bif", BIF_HEAD + BIF_A + f"probability ( C | A ) {{ (a0) 0.3, {0.7 + off!r}; (a1) 0.5, 0.5; }}\n"
    )
    model = read_model(path, "bif", "C")
    cpt = model.networks[0].node("C").cpt
    assert np.allclose(cpt.sum(axis=0), 1.0, atol=1e-15, rtol=0)
    assert cpt[:, 1].tolist() == [0.5, 0.5]  # a column that sums to 1 is left as written
    assert ("renormalised" in model.metadata) == renormalised
    if renormalised:
        assert model.metadata["renormalised"] == {"C": pytest.approx(off)}


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("fmt", ["bif", "xmlbif"])
@pytest.mark.parametrize("seed", range(12))
def test_round_trip_of_random_models_is_exact(tmp_path, fmt, seed):
    rng = np.random.default_rng(seed)
    model = random_model(rng, n_features=int(rng.integers(1, 6)), cardinalities=(2, 4), numeric=0.5)
    path = tmp_path / f"m.{fmt}"
    path.write_text(write_model(model, fmt, "random"))
    back = read_model(path, fmt, None)  # the class comes from our bnserve.role property
    assert_same_model(back, model)
    assert back.algorithm == f"imported-{fmt}" and back.metadata["network"] == "random"
    codes = all_codes(model, rng)
    assert np.array_equal(compile_model(back).predict_proba(codes), compile_model(model).predict_proba(codes))


def test_round_trips_cover_what_they_claim():
    """The seeds above include a class with parents and numeric features."""
    models = [
        random_model(
            np.random.default_rng(s),
            n_features=int(np.random.default_rng(s).integers(1, 6)),
            cardinalities=(2, 4),
            numeric=0.5,
        )
        for s in range(12)
    ]
    assert sum(bool(m.networks[0].node("class").parents) for m in models) >= 3
    assert sum(any(v.kind == NUMERIC for v in m.variables) for m in models) >= 6


AWKWARD = ["a b", 'say "hi"', "back\\slash", "naïve", "x|y", "semi;colon", "(-inf-2.45]", "{curly}", "comma, too"]


@pytest.mark.parametrize("fmt", ["bif", "xmlbif"])
def test_round_trip_of_awkward_names(tmp_path, fmt):
    rng = np.random.default_rng(7)
    variables = [Variable(AWKWARD[0], ("yes", "no"), CLASS)] + [
        Variable(name, tuple(AWKWARD[(i + j) % len(AWKWARD)] for j in range(3)), FEATURE)
        for i, name in enumerate(AWKWARD[1:], start=1)
    ]
    nodes = [Node(AWKWARD[0], (), np.array([0.25, 0.75]))]
    for i, v in enumerate(variables[1:], start=1):
        parents = (AWKWARD[0], AWKWARD[i - 1]) if i > 1 else (AWKWARD[0],)
        shape = (3, *(2 if p == AWKWARD[0] else 3 for p in parents))
        draws = rng.dirichlet(np.ones(3), size=int(np.prod(shape[1:])))
        nodes.append(Node(v.name, parents, draws.T.reshape(shape).copy()))
    model = Model(tuple(variables), (Network(tuple(nodes)),), "hand").validate()
    path = tmp_path / f"m.{fmt}"
    path.write_text(write_model(model, fmt, 'net "q"'))
    back = read_model(path, fmt, None)
    assert_same_model(back, model)
    assert back.metadata["network"] == 'net "q"'


def test_ensembles_export_one_member_at_a_time():
    model = random_model(np.random.default_rng(3), n_features=4, n_networks=3, all_features=False)
    for fmt in ("bif", "xmlbif"):
        with pytest.raises(
            InvalidInput, match=r"has 3 networks .*--network I \(0..2\), or draw them all with --format dot"
        ):
            write_model(model, fmt, "e")
        with pytest.raises(InvalidInput, match=r"--network 3: the model has 3 networks \(0..2\)"):
            write_model(model, fmt, "e", network=3)
    member = model.networks[1]
    text = write_model(model, "bif", "e", network=1)
    declared = set(re.findall(r"^variable (\S+) \{", text, re.M))
    assert declared == {n.name for n in member.nodes}  # a feature the member does not use is left out


# ---------------------------------------------------------------- DOT

_DOT_STATEMENT = re.compile(r'^\s*("(?:[^"\\]|\\.)*")(?:\s*->\s*("(?:[^"\\]|\\.)*"))?\s*(?:\[(.*)\])?;$')


def parse_dot(text: str) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """({node id: attributes}, {(tail, head): attributes}) of our writer's one-statement lines;
    checks the braces balance and every line is a statement we know."""
    assert text.startswith("digraph ") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    nodes, edges = {}, {}
    for line in text.splitlines()[1:-1]:
        stripped = line.strip()
        if stripped == "}" or stripped.startswith(("subgraph ", "label=", "node [", "edge [")):
            continue
        m = _DOT_STATEMENT.match(line)
        assert m, f"not a DOT statement: {line!r}"
        a, b, attributes = m.group(1), m.group(2), m.group(3) or ""
        unquote = lambda q: re.sub(r"\\(.)", r"\1", q[1:-1])  # noqa: E731
        if b is None:
            nodes[unquote(a)] = attributes
        else:
            edges[(unquote(a), unquote(b))] = attributes
    return nodes, edges


def test_dot_of_a_single_network_with_cmi_labels():
    model = random_model(np.random.default_rng(5), n_features=5)
    arcs = model.networks[0].arcs
    labelled = arcs[: len(arcs) // 2]
    model = Model(
        model.variables,
        model.networks,
        model.algorithm,
        metadata={"arc_cmi": [[p, c, 0.01234 * (i + 1)] for i, (p, c) in enumerate(labelled)]},
    )
    nodes, edges = parse_dot(write_model(model, "dot", "m"))
    assert set(nodes) == {v.name for v in model.variables}
    assert "peripheries=2" in nodes["class"] and "filled" in nodes["class"]
    assert all("filled" not in a for n, a in nodes.items() if n != "class")
    assert set(edges) == set(arcs)
    for i, arc in enumerate(labelled):
        assert edges[arc] == f'label="{0.01234 * (i + 1):.3f}"'
    assert all(edges[arc] == "" for arc in arcs[len(labelled) :])


def test_dot_of_an_ensemble_has_one_cluster_per_network_and_quotes_names():
    model = random_model(np.random.default_rng(11), n_features=4, n_networks=3, all_features=False)
    text = write_model(model, "dot", 'aode "x"')
    assert text.startswith('digraph "aode \\"x\\"" {')
    assert [f'subgraph "cluster_{i}"' in text for i in range(3)] == [True] * 3
    nodes, edges = parse_dot(text)
    for i, net in enumerate(model.networks):
        assert {f"{i}:{n.name}" for n in net.nodes} <= set(nodes)
        assert {(f"{i}:{p}", f"{i}:{c}") for p, c in net.arcs} <= set(edges)
        assert "peripheries=2" in nodes[f"{i}:class"]
    assert len(nodes) == sum(len(n.nodes) for n in model.networks)
    one = write_model(model, "dot", "m", network=2)
    assert set(parse_dot(one)[0]) == {n.name for n in model.networks[2].nodes}


def test_graphviz_renders_what_we_write():
    require_tool("dot")  # Graphviz; CI installs it
    model = random_model(np.random.default_rng(2), n_features=4, n_networks=2, all_features=False)
    weird = Model(
        tuple(
            Variable(AWKWARD[i] if v.role == FEATURE else v.name, v.states, v.role)
            for i, v in enumerate(model.variables)
        ),
        tuple(
            Network(
                tuple(
                    Node(
                        AWKWARD[int(n.name[1:]) + 1] if n.name != "class" else n.name,
                        tuple(AWKWARD[int(p[1:]) + 1] if p != "class" else p for p in n.parents),
                        n.cpt,
                    )
                    for n in net.nodes
                )
            )
            for net in model.networks
        ),
        model.algorithm,
        model.combination,
    )
    for text in (write_model(weird, "dot", "x"), write_model(weird, "dot", "x", network=0)):
        result = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stderr == "" and "<svg" in result.stdout


# ---------------------------------------------------------------- a network written by pgmpy


@pytest.mark.parametrize("name, fmt", [("pgmpy-car.xml", "xmlbif"), ("pgmpy-car.bif", "bif")])
def test_posteriors_match_the_tool_that_wrote_the_file(name, fmt):
    expected = json.loads((FIXTURES / "pgmpy-car.json").read_text())
    assert format_of(name) == fmt
    model = read_model(FIXTURES / name, fmt, "class")
    assert model.class_variable.states == tuple(expected["classes"])
    assert sorted(map(list, (arc for net in model.networks for arc in net.arcs))) == expected["arcs"]
    assert model.networks[0].node("class").parents  # the class has parents in this network
    rows = np.array(
        [
            [
                model.variable(f.name).code_of(case["evidence"][f.name]) if f.name in case["evidence"] else -1
                for f in model.features
            ]
            for case in expected["cases"]
        ]
    )
    got = compile_model(model).predict_proba(rows)
    np.testing.assert_allclose(got, np.array([case["posterior"] for case in expected["cases"]]), rtol=0, atol=1e-6)
