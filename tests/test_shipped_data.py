"""The data shipped in tests/data are the shared data sets byte for byte (the sha256 that
../shared/datasets/MANIFEST.md lists), each credited in tests/data/README.md, and the
generated led7 is the shared led7.csv."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from tests.data_helpers import SHIPPED, write_led7

MANIFEST_SHA256 = {  # from ../shared/datasets/MANIFEST.md
    "car": "0023b86e0dd3502aaa0e4a610ef4d8aebbba7ff40f53fa7c2f0543c68bee5114",
    "dermatology": "3b37d9a198b94aa7855642901e47b17fc04bb3f4e1f858c69d455e404f1dd9bf",
    "ecoli": "701127655b2236fa804d193340807bc74b34faa2159f91bcc82254641b3629c3",
    "hepatitis": "d6b5750cde3c5b1c29016e0d85323cae43b34ddf91dbc1dbe815df3913e158c5",
    "wine": "c1ae21580e9cdf3f43ae422f283517fb7763d96a45803e5291e2a87c008d8207",
}
LED7_SHA256 = "66d3312ec39e39270854301c522d6eef3cfc30f2a536ff458a8d78c7db83b848"


def test_every_shipped_file_is_listed_and_credited():
    readme = (SHIPPED / "README.md").read_text()
    shipped = sorted(p.name for p in SHIPPED.iterdir() if p.name != "README.md")
    assert shipped == sorted([f"{name}.csv.gz" for name in MANIFEST_SHA256] + ["schema.json"])
    for name in shipped:
        assert f"`{name}`" in readme, name
    assert "CC BY 4.0" in readme
    assert sum((SHIPPED / name).stat().st_size for name in shipped) < 100_000


@pytest.mark.parametrize("name", sorted(MANIFEST_SHA256))
def test_a_shipped_data_set_is_the_shared_file(name):
    raw = gzip.decompress((SHIPPED / f"{name}.csv.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == MANIFEST_SHA256[name]
    assert MANIFEST_SHA256[name] in (SHIPPED / "README.md").read_text()


def test_the_generated_led7_is_the_shared_one(tmp_path):
    assert hashlib.sha256(open(write_led7(tmp_path), "rb").read()).hexdigest() == LED7_SHA256
